"""A peer on the same rows: LightGBM trained on `nas data export`'s file of MovieLens-1M,
against recnas's DCNv2 baseline, both measured on the test split with recnas's metrics.

Method: the prepared dataset is exported (`nas.data.export`, the rows as the models read
them). LightGBM reads the categorical ids as categories, the genres as one indicator column
each, and two figures of each row's history (its length and mean rating); it trains on the
train split with early stopping on the validation split's logloss (at most --trees trees).
DCNv2 (examples/specs/dcnv2.json) trains as `nas train --split test` does (2000 steps x
1024, seed 0), on the train split only. Both are measured on the test split by
`workers.metrics.binary_metrics` (NE against the training rate, AUC, AUC per user).

    .venv/bin/uv pip install --python .venv/bin/python lightgbm==4.7.0   # not a dependency
    .venv/bin/python benchmarks/peer_gbdt.py [--trees 2000] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from nas.data.export import export_splits
from workers.metrics import binary_metrics
from workers.train import TrainConfig
from workers.trial import evaluate
from workers.trial_data import TrialData

SPECS = Path(__file__).resolve().parent.parent / "examples" / "specs"
INSTALL = ".venv/bin/uv pip install --python .venv/bin/python lightgbm==4.7.0"


def gbdt_features(frame, categorical: list[str], genres: int):
    """The exported columns as LightGBM reads them."""
    import pandas as pd

    features = pd.DataFrame({name: frame[name].astype("category") for name in categorical})
    bags = np.zeros((len(frame), genres), np.int8)
    for i, ids in enumerate(frame["genres"]):
        bags[i, ids] = 1
    for j in range(2, genres):  # 0 missing, 1 unknown
        features[f"genre_{j}"] = bags[:, j]
    features["history_length"] = frame["history"].map(len)
    features["history_mean_rating"] = frame["history.action"].map(
        lambda a: a.mean() if len(a) else np.nan
    )
    return features


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    try:
        import lightgbm
    except ImportError:
        sys.exit(f"LightGBM is not installed: {INSTALL}")
    import pyarrow.parquet as pq

    torch.set_num_threads(args.threads)
    console = Console()
    dataset = load_dataset("movielens-1m")
    rate = dataset.positive_rate("train")
    with tempfile.TemporaryDirectory() as folder, console.status("exporting ..."):
        start = time.perf_counter()
        exported = export_splits(dataset, Path(folder) / "ml1m.parquet")
        export_seconds = time.perf_counter() - start
        frame = pq.read_table(exported.path).to_pandas()
    schema = {f.name: f for f in dataset.schema.fields}
    categorical = [name for name, f in schema.items() if f.kind == "categorical"]
    features = gbdt_features(frame, categorical, schema["genres"].cardinality)
    label = frame["like"].to_numpy()
    split = frame["split"].astype(str).to_numpy()
    train, valid, test = (split == name for name in ("train", "valid", "test"))

    with console.status(f"LightGBM {lightgbm.__version__}: up to {args.trees} trees ..."):
        start = time.perf_counter()
        model = lightgbm.LGBMClassifier(
            n_estimators=args.trees,
            learning_rate=0.05,
            num_leaves=255,
            min_child_samples=100,
            cat_smooth=50,
            subsample=0.8,
            subsample_freq=1,
            colsample_bytree=0.8,
            n_jobs=args.threads,
            verbose=-1,
        )
        model.fit(
            features[train],
            label[train],
            eval_X=(features[valid],),
            eval_y=(label[valid],),
            callbacks=[lightgbm.early_stopping(50, verbose=False)],
        )
        gbdt_seconds = time.perf_counter() - start
    probability = np.clip(model.predict_proba(features[test])[:, 1], 1e-7, 1 - 1e-7)
    logits = torch.from_numpy(np.log(probability / (1 - probability)))
    labels = torch.from_numpy(label[test].astype(np.float64))
    gbdt = binary_metrics(labels, logits, rate, {"gauc": frame["user_key"].to_numpy()[test]})

    spec = ArchSpec.load(SPECS / "dcnv2.json")
    with console.status("DCNv2: 2000 steps x 1024 ..."):
        dcn = evaluate(spec, TrialData.from_prepared(dataset, "test"), TrainConfig(steps=2000))

    table = Table(
        title=f"MovieLens-1M, test split ({int(test.sum()):,} rows); export "
        f"{export_seconds:.1f} s, {exported.bytes / 2**20:.0f} MiB",
        title_justify="left",
    )
    for column in ("model", "test NE", "vs DCNv2", "AUC", "AUC per user", "seconds"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, ne, auc, gauc, seconds in (
        ("DCNv2 (recnas)", dcn.ne, dcn.auc, dcn.gauc, dcn.seconds),
        (
            f"LightGBM, {model.best_iteration_} trees",
            gbdt["ne"],
            gbdt["auc"],
            gbdt["gauc"],
            gbdt_seconds,
        ),
    ):
        table.add_row(
            name, f"{ne:.4f}", f"{ne - dcn.ne:+.4f}", f"{auc:.4f}", f"{gauc:.4f}", f"{seconds:.0f}"
        )
    console.print(table)


if __name__ == "__main__":
    main()
