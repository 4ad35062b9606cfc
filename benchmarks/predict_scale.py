"""`nas predict` at scale: a day of a team's logs scored, by rows and by columns.

Writes synthetic click logs as Parquet (``examples/datasets/make_logs.py``: the columns
``examples/datasets/my_ctr.yaml`` declares, a list column and a 32-item history, both
labels), prepares the schema file, builds ``--spec`` on it (untrained: the speed is the
point) and scores the whole file, each way in a fresh process (peak RSS: its
``ru_maxrss``), checking that every way gives the same probabilities:

- ``whole, by rows``: the path before 2026-12-06, the reference: every row read into memory
  as Python objects, then encoded row by row (``RawForm.features``);
- ``batches, by rows``: 65,536 rows at a time (``RowFiles``), each row by row;
- ``batches, by columns``: 65,536 rows at a time, each by its columns (``table_features``,
  labels by ``table_labels``): what ``nas predict`` does with Parquet now.

    .venv/bin/python benchmarks/predict_scale.py [--rows 1000000] [--folder /tmp/recnas-predict]
        [--spec examples/specs/dcnv2.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "examples" / "datasets" / "my_ctr.yaml"
WAYS = ("whole, by rows", "batches, by rows", "batches, by columns")

SCORE = """
import json, resource, sys, time
import numpy as np
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from nas.data.labels import LabelRule, raw_labels, table_labels
from nas.data.row_files import RowBatch, RowFiles
from nas.service.serving import LoadedModel
import torch
torch.manual_seed(0)
dataset = load_dataset(sys.argv[1], None)
model = build_model(ArchSpec.load(sys.argv[2]), dataset.schema).eval()
loaded = LoadedModel(model, dataset.schema, dataset.raw_form(), {})
recipes = [LabelRule.of(r) for r in dataset.manifest["label_columns"]]
way, rows = sys.argv[4], RowFiles(sys.argv[3])
start = time.perf_counter()
if way == "whole, by rows":
    whole = [row for batch in rows.batches() for row in batch.rows]
    batches = [RowBatch(1, _rows=whole)]
else:
    batches = rows.batches()
scores, labels, count = [], [], 0
for batch in batches:
    if way == "batches, by columns":
        labels.append(table_labels(batch.table, recipes, batch.first))
        features = loaded.features_of(batch)
    else:
        labels.append(raw_labels(batch.rows, recipes, batch.first))
        features = loaded.features(batch.rows, batch.first)
    scores.append(loaded.scored(features)[loaded.outputs[0]])
    count += len(batch)
seconds = time.perf_counter() - start
np.save(sys.argv[5], np.concatenate(scores))
rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"rows": count, "seconds": seconds, "rss_gb": rss_gb}))
"""


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-predict"))
    parser.add_argument("--spec", default=str(REPO / "examples" / "specs" / "dcnv2.json"))
    args = parser.parse_args()
    folder, python = args.folder / f"rows-{args.rows}", sys.executable
    data = folder / "data"
    if not data.exists():
        shutil.rmtree(folder / "data.tmp", ignore_errors=True)
        run([python, "examples/datasets/make_logs.py", "--rows", str(args.rows),
             "--out", str(folder / "data.tmp")], dict(os.environ))  # fmt: skip
        (folder / "data.tmp").rename(data)
    name = f"my_ctr_predict_{args.rows}"
    schema = folder / "my_ctr.yaml"
    schema.write_text(SCHEMA.read_text().replace("name: my_ctr", f"name: {name}"))
    env = dict(os.environ, RECNAS_CACHE_DIR=str(args.folder / "cache"), OMP_NUM_THREADS="1")
    run([python, "-m", "nas.cli", "data", "prepare", str(schema), "--json"], env)
    (source,) = sorted(data.glob("*.parquet"))
    table = Table(
        title=f"scoring {args.rows:,} rows of logs ({source.name}) with {Path(args.spec).name}, "
        "one thread",
        title_justify="left",
    )
    table.add_column("way", no_wrap=True)
    for column in ("seconds", "rows/s", "vs whole, by rows", "peak RSS GB", "same scores"):
        table.add_column(column, justify="right")
    reference = None
    for way in WAYS:
        scores_file = folder / f"scores-{WAYS.index(way)}.npy"
        done = run([python, "-c", SCORE, name, args.spec, str(source), way, str(scores_file)], env)
        figures = json.loads(done.stdout.splitlines()[-1])
        scores = np.load(scores_file)
        reference = reference or (figures, scores)
        same = float(np.abs(scores - reference[1]).max())
        table.add_row(
            way,
            f"{figures['seconds']:.1f}",
            f"{figures['rows'] / figures['seconds']:,.0f}",
            f"{reference[0]['seconds'] / figures['seconds']:.1f}x",
            f"{figures['rss_gb']:.2f}",
            "yes" if same == 0 else f"max diff {same:.1e}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
