"""Criteo-format click logs, and a seeded synthetic generator with the same schema.

A line: ``label \\t I1..I13 \\t C1..C26``: a 0/1 label, 13 integer counts (may be empty),
26 hashed categorical values (hex, may be empty). The built-in ``criteo`` and
``synthetic-criteo`` datasets are declared by a schema file, ``builtin/criteo.yaml``, and read
as any user's data is (``nas/data/ingest.py``: pyarrow in record batches, so the full 45M-row
Kaggle file prepares in bounded memory):

    dense       log(1 + max(x, 0)), empty -> 0                          [R, 13]
    categorical ids by frequency on the training rows (values seen at least ``--min-count``
                times), from 2; 1 out of vocabulary, 0 empty            [R, 26]
    split       the file is chronological: the first 80% of rows train, the next 10%
                validate, the rest test
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np

from nas.core.errors import ConfigError
from nas.data.ingest import prepare_schema_file
from nas.data.schema_file import SchemaFile, load_schema_file

NUM_DENSE, NUM_CATEGORICAL = 13, 26
SCHEMA_FILE = Path(__file__).with_name("builtin") / "criteo.yaml"


def criteo_schema(name: str, path: Path, min_count: int) -> SchemaFile:
    """``builtin/criteo.yaml`` reading the file at ``path``, as dataset ``name``, keeping
    values seen ``min_count`` times in train."""
    schema = load_schema_file(SCHEMA_FILE)
    features = [
        f.model_copy(update={"min_freq": min_count}) if f.type == "categorical" else f
        for f in schema.features
    ]
    source = schema.source.model_copy(update={"path": glob.escape(str(path.resolve()))})
    return schema.model_copy(update={"name": name, "source": source, "features": features})


def prepare_criteo_file(
    name: str, path: Path, root: Path, min_count: int, source: dict, extra: dict, progress=None
) -> None:
    """Prepare the Criteo-format file at ``path`` as dataset ``name`` at ``root``."""
    if not path.is_file():
        raise ConfigError("source", f"no Criteo-format file at {path}")
    schema = criteo_schema(name, path, min_count)
    prepare_schema_file(schema, [path], root, source, progress, extra)


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
