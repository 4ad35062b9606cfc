"""Criteo-format click logs, and a seeded synthetic generator with the same schema.

A line: ``label \\t I1..I13 \\t C1..C26`` — a 0/1 label, 13 integer counts (may be empty),
26 hashed categorical values (hex, may be empty).

    dense       log(1 + max(x, 0)), empty -> 0                     [R, 13]
    categorical vocabulary of the training rows' values seen at least min_count times,
                in sorted order; anything else (and empty) -> 0    [R, 26]
Split: the file is chronological, so the first ceil(0.8 R) rows train, up to ceil(0.9 R)
validate, the rest test.

The reader parses in Python: fine for samples and the synthetic set; the full 45M-row Kaggle
file wants a streaming reader, which is not built yet.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nas.core.errors import DataError, shown
from nas.data.prepared import assign_splits
from nas.data.raw import RawForm
from nas.data.schema import Field, Schema
from nas.data.sources import open_file

NUM_DENSE, NUM_CATEGORICAL = 13, 26
WIDTH = 1 + NUM_DENSE + NUM_CATEGORICAL


def read_criteo(path: Path) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    """Labels [R] int8, raw dense [R, 13] float64 (NaN = empty), categorical columns [26][R]."""
    labels: list[int] = []
    dense: list[list[float]] = []
    categorical: list[list[str]] = [[] for _ in range(NUM_CATEGORICAL)]
    with open_file(path) as f:
        for number, line in enumerate(f, start=1):
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != WIDTH:
                raise DataError(
                    path,
                    f"expected {WIDTH} tab-separated columns (label, "
                    f"{NUM_DENSE} dense, {NUM_CATEGORICAL} categorical), found {len(parts)}",
                    number,
                )
            if parts[0] not in ("0", "1"):
                raise DataError(path, f"label must be 0 or 1, got {shown(parts[0])}", number)
            labels.append(int(parts[0]))
            try:
                dense.append([float(x) if x else np.nan for x in parts[1 : 1 + NUM_DENSE]])
            except ValueError:
                bad = next(x for x in parts[1 : 1 + NUM_DENSE] if x and not _is_number(x))
                raise DataError(
                    path, f"dense values must be numbers, got {shown(bad)}", number
                ) from None
            for column, value in zip(categorical, parts[1 + NUM_DENSE :], strict=True):
                column.append(value)
    if not labels:
        raise DataError(path, "has no rows")
    return np.array(labels, dtype=np.int8), np.array(dense, dtype=np.float64), categorical


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def from_tsv(
    name: str, path: Path, min_count: int = 1, source: dict | None = None
) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and manifest of a Criteo-format file."""
    labels, raw_dense, raw_categorical = read_criteo(path)
    rows = len(labels)
    position = np.arange(rows)
    split = assign_splits(position, rows)
    train_rows = int((split == 0).sum())

    categorical = np.zeros((rows, NUM_CATEGORICAL), dtype=np.int32)
    cardinalities, vocabs = [], []
    for j, column in enumerate(raw_categorical):
        values, counts = np.unique(np.array(column[:train_rows], dtype=object), return_counts=True)
        kept = sorted(v for v, c in zip(values, counts, strict=True) if v and c >= min_count)
        vocab = {v: i + 1 for i, v in enumerate(kept)}
        categorical[:, j] = [vocab.get(v, 0) for v in column]
        cardinalities.append(len(vocab) + 1)
        vocabs.append(vocab)
    dense = np.log1p(np.clip(np.nan_to_num(raw_dense, nan=0.0), 0, None)).astype(np.float32)

    schema = Schema(
        tuple(Field(f"C{j + 1}", "categorical", max(2, c)) for j, c in enumerate(cardinalities))
        + tuple(Field(f"I{j + 1}", "dense") for j in range(NUM_DENSE))
    )
    arrays = {
        "categorical": categorical,
        "multi_hot": np.zeros((rows, 0, 0), dtype=np.int32),
        "dense": dense,
        "label": labels,
        "split": split,
        "source_row": position.astype(np.int64),
    }
    manifest = {
        "name": name,
        "source": source or {"kind": "criteo-tsv", "path": str(path.resolve())},
        "schema": schema.to_list(),
        "min_count": min_count,
        "split_rule": "file order: first ceil(0.8n) train, up to ceil(0.9n) valid, rest test",
        "label_rule": "column 1",
        "raw_form": raw_form(vocabs).to_dict(),
    }
    return arrays, manifest


def raw_form(vocabs: list[dict[str, int]]) -> RawForm:
    """A serving row: I1..I13 (numbers, may be empty) and C1..C26 (strings, may be empty)."""
    dense = [f"I{j + 1}" for j in range(NUM_DENSE)]
    sparse = [f"C{j + 1}" for j in range(NUM_CATEGORICAL)]
    columns = {c: {"type": "number", "optional": True} for c in dense}
    columns |= {c: {"type": "string", "optional": True} for c in sparse}
    return RawForm(
        columns=columns,
        categorical=[
            {"field": c, "column": c, "vocab": v} for c, v in zip(sparse, vocabs, strict=True)
        ],
        multi_hot=[],
        dense=[{"field": c, "column": c} for c in dense],
    )


def write_synthetic_criteo(path: Path, rows: int, seed: int) -> None:
    """A learnable Criteo-format file: labels follow a hidden logistic model of the features."""
    rng = np.random.default_rng(seed)
    cardinalities = rng.integers(4, 2000, size=NUM_CATEGORICAL)
    # Zipf-like popularity, as in real click logs.
    cat = np.stack([np.minimum(rng.zipf(1.3, size=rows), c) - 1 for c in cardinalities], axis=1)
    dense = np.floor(rng.lognormal(1.0, 1.5, size=(rows, NUM_DENSE))).astype(np.int64)
    weights = [rng.normal(0, 1.0, size=c) for c in cardinalities]
    dense_w = rng.normal(0, 0.3, size=NUM_DENSE)
    logit = -1.2 + sum(w[cat[:, j]] for j, w in enumerate(weights)) / 3
    logit += np.log1p(dense) @ dense_w
    labels = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
    dense_missing = rng.random((rows, NUM_DENSE)) < 0.1
    cat_missing = rng.random((rows, NUM_CATEGORICAL)) < 0.05
    salts = rng.integers(0, 2**31, size=NUM_CATEGORICAL)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        for r in range(rows):
            ints = ["" if dense_missing[r, j] else str(dense[r, j]) for j in range(NUM_DENSE)]
            cats = [
                "" if cat_missing[r, j] else f"{(cat[r, j] * 2654435761 + salts[j]) % 2**32:08x}"
                for j in range(NUM_CATEGORICAL)
            ]
            f.write("\t".join([str(labels[r]), *ints, *cats]) + "\n")
    tmp.rename(path)
