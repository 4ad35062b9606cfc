"""What a prepared dataset holds, in figures: rows and label rates per split, and per field
its cardinality, missing and out-of-vocabulary rates and (lists) lengths. ``nas data
inspect`` prints them; every search logs them to MLflow.

Ids: 0 is a missing value in every dataset; schema-file datasets also keep 1 for values out
of the vocabulary (``manifest["ids"]["oov"]``), where the built-in ones map those to 0 too.
Arrays are read memory-mapped, a chunk of rows at a time.
"""

from __future__ import annotations

import numpy as np

from nas.data.prepared import SPLITS, PreparedDataset

CHUNK_ROWS = 1 << 20


def _chunks(rows: int):
    for start in range(0, rows, CHUNK_ROWS):
        yield slice(start, min(start + CHUNK_ROWS, rows))


def _rates(ids: np.memmap, rows: int, oov: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per column of a [rows, F] id array: the share of missing ids, and of out of vocabulary."""
    missing = np.zeros(ids.shape[1])
    unknown = np.zeros(ids.shape[1])
    for part in _chunks(rows):
        block = np.asarray(ids[part])
        missing += (block == 0).sum(axis=0)
        if oov is not None:
            unknown += (block == oov).sum(axis=0)
    return missing / max(rows, 1), unknown / max(rows, 1)


def _percentiles(lengths: np.ndarray) -> dict[str, float]:
    if len(lengths) == 0:
        return {}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": int(lengths.max())}


def profile(dataset: PreparedDataset) -> dict:
    """The figures, as plain JSON-ready values."""
    m = dataset.manifest
    rows = m["rows"]
    oov = m.get("ids", {}).get("oov")
    split = dataset.array("split")
    labels = m.get("labels") or ["label"]
    label_rates: dict[str, dict[str, float]] = {}
    stacked = dataset.array("labels") if dataset.has("labels") else None
    for j, name in enumerate(labels):
        column = stacked[:, j] if stacked is not None else dataset.array("label")
        label_rates[name] = {
            s: float(column[split == i].mean()) if (split == i).any() else 0.0
            for i, s in enumerate(SPLITS)
        }
    fields = []
    schema = dataset.schema
    for kind, array in (("categorical", "categorical"), ("multi_hot", "multi_hot")):
        declared = schema.of_kind(kind)
        if not declared:
            continue
        ids = dataset.array(array)
        if kind == "multi_hot":  # a row is missing a field when its list is empty
            first = ids[:, :, 0] if ids.shape[2] else np.zeros((rows, len(declared)), np.int32)
            missing, unknown = _rates(first, rows, None)
            _, unknown = _rates(ids.reshape(rows, -1), rows, oov)
            unknown = unknown.reshape(len(declared), -1).sum(axis=1) if ids.shape[2] else unknown
        else:
            missing, unknown = _rates(ids, rows, oov)
        for j, f in enumerate(declared):
            entry = {
                "name": f.name,
                "kind": kind,
                "cardinality": f.cardinality,
                "missing": float(missing[j]),
                "side": f.side,
            }
            if oov is not None:
                entry["out_of_vocabulary"] = float(unknown[j])
            if kind == "multi_hot":
                lengths = (np.asarray(ids[:, j, :]) > 0).sum(axis=1)
                entry["length"] = _percentiles(lengths)
            fields.append(entry)
    for f in schema.of_kind("dense"):
        fields.append({"name": f.name, "kind": "dense"})
    if schema.history is not None:
        h = schema.history
        lengths = np.minimum(
            np.asarray(dataset.array("history_end")) - np.asarray(dataset.array("history_start")),
            h.max_len,
        )
        fields.append(
            {
                "name": h.name,
                "kind": "sequence",
                "cardinality": h.cardinality,
                "side": h.side,
                "length": _percentiles(lengths),
                "missing": float((lengths == 0).mean()) if rows else 0.0,
            }
        )
    return {
        "name": dataset.name,
        "rows": rows,
        "split_sizes": m["split_sizes"],
        "labels": label_rates,
        "split_rule": m["split_rule"],
        "split_checksum": m["split_checksum"],
        "fields": fields,
    }
