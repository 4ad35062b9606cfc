"""What a prepared dataset holds, in figures: rows, label rates and the first and last
time (``keys.timestamp``, in UTC) per split, and per field
its cardinality, missing and out-of-vocabulary rates and (lists) lengths. ``nas data
inspect`` prints them; every search logs them to MLflow.

Ids: 0 is a missing value in every dataset; schema-file datasets also keep 1 for values out
of the vocabulary (``manifest["ids"]["oov"]``; its rate is the share of the field's values),
where the built-in ones map those to 0 too. Arrays are read memory-mapped, a chunk of rows
at a time.
"""

from __future__ import annotations

import json
import os

import numpy as np

from nas.data.prepared import SPLITS, PreparedDataset, row_chunks, split_figures
from nas.data.schema_file import utc_text

PROFILE = "profile.json"  # derived, not checksummed; a new `prepare` replaces the folder with it


def _id_figures(ids: np.memmap, rows: int, oov: int | None) -> tuple[np.ndarray, ...]:
    """Per field of a [rows, F] or [rows, F, L] id array, a chunk at a time: the share of
    rows missing it (an empty list), the share of its values out of vocabulary, and each
    row's length (lists; else None)."""
    fields = ids.shape[1]
    missing, unknown, present = np.zeros(fields), np.zeros(fields), np.zeros(fields)
    lengths = [] if ids.ndim == 3 else None
    for part in row_chunks(rows):
        block = np.asarray(ids[part])
        if block.ndim == 3:
            counts = (block > 0).sum(axis=2)  # [chunk, F]
            lengths.append(counts)
            block_missing = counts == 0
        else:
            block_missing = block == 0
        missing += block_missing.sum(axis=0)
        present += (block > 0).reshape(len(block), fields, -1).sum(axis=(0, 2))
        if oov is not None:
            unknown += (block == oov).reshape(len(block), fields, -1).sum(axis=(0, 2))
    lengths = np.concatenate(lengths) if lengths else None
    return missing / max(rows, 1), unknown / np.maximum(present, 1), lengths


def time_bounds(dataset: PreparedDataset) -> dict[str, tuple[int, int]]:
    """Each split's first and last time in unix seconds, a chunk of rows at a time (none:
    the dataset has no times)."""
    if not dataset.has("timestamp"):
        return {}
    times, split = dataset.array("timestamp"), dataset.array("split")
    first = np.full(len(SPLITS), np.iinfo(np.int64).max)
    last = np.full(len(SPLITS), np.iinfo(np.int64).min)
    for part in row_chunks(len(times)):
        t, s = np.asarray(times[part], dtype=np.int64), np.asarray(split[part])
        for code in range(len(SPLITS)):
            found = t[s == code]
            if len(found):
                first[code] = min(first[code], found.min())
                last[code] = max(last[code], found.max())
    return {
        name: (int(first[code]), int(last[code]))
        for code, name in enumerate(SPLITS)
        if first[code] <= last[code]
    }


def _times(dataset: PreparedDataset) -> dict[str, dict[str, str]] | None:
    """Each split's first and last time as UTC text (None: the dataset has no times). Where
    a source's unit or zone was misread, it shows here."""
    bounds = time_bounds(dataset)
    if not bounds:
        return None
    return {
        name: {"first": utc_text(first), "last": utc_text(last)}
        for name, (first, last) in bounds.items()
    }


def _percentiles(lengths: np.ndarray) -> dict[str, float]:
    if len(lengths) == 0:
        return {}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": int(lengths.max())}


def profile(dataset: PreparedDataset) -> dict:
    """The figures, as plain JSON-ready values: computed once (a pass over the id arrays,
    seconds on tens of millions of rows), then kept beside the dataset in ``profile.json``."""
    kept = dataset.root / PROFILE
    try:
        found = json.loads(kept.read_text())
        if found.get("split_checksum") == dataset.manifest["split_checksum"] and "times" in found:
            return found  # (one written before the times were: computed again)
    except (OSError, ValueError):
        pass
    figures = _figures(dataset)
    tmp = kept.with_name(f"{PROFILE}.{os.getpid()}.tmp")
    try:  # a read-only cache still answers, computing each time
        tmp.write_text(json.dumps(figures, indent=1))
        tmp.replace(kept)
    except OSError:
        tmp.unlink(missing_ok=True)
    return figures


def _figures(dataset: PreparedDataset) -> dict:
    m = dataset.manifest
    rows = m["rows"]
    oov = m.get("ids", {}).get("oov")
    split = dataset.array("split")
    labels = dataset.label_names
    stacked = dataset.array("labels") if dataset.has("labels") else None
    label_rates = {
        name: split_figures(
            split, stacked[:, j] if stacked is not None else dataset.array("label")
        )[1]
        for j, name in enumerate(labels)
    }
    fields = []
    schema = dataset.schema
    for kind in ("categorical", "multi_hot"):
        declared = schema.of_kind(kind)
        if not declared:
            continue
        missing, unknown, lengths = _id_figures(dataset.array(kind), rows, oov)
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
            if lengths is not None:
                entry["length"] = _percentiles(lengths[:, j])
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
        "times": _times(dataset),
        "split_rule": m["split_rule"],
        "split_checksum": m["split_checksum"],
        "fields": fields,
    }
