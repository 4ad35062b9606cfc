"""Each modern block's default spec against the DCNv2 baseline on MovieLens-1M.

Method: every spec in examples/specs/modern/ and examples/specs/dcnv2.json is trained with
the same settings as the baselines' table in benchmarks/README.md (2000 steps x 1024, seed 0, the
default optimizers), on 2 threads, and measured on the validation split: NE, AUC, FLOPs
per example (fvcore), serving FLOPs (per candidate at 100 candidates per request, request
side computed once), parameters and wall seconds. DCNv2 is the reference in the same run.

    .venv/bin/python benchmarks/block_quality.py [--steps 2000] [--specs a.json b.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from workers.train import TrainConfig
from workers.trial import evaluate
from workers.trial_data import TrialData

SPECS = Path(__file__).resolve().parent.parent / "examples" / "specs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--specs",
        nargs="*",
        type=Path,
        default=[SPECS / "dcnv2.json", *sorted((SPECS / "modern").glob("*.json"))],
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    console = Console()
    data = TrialData.from_prepared(load_dataset("movielens-1m"), "valid")
    rows = []
    for path in args.specs:
        spec = ArchSpec.load(path)
        with console.status(f"training {spec.name} ({args.steps} steps) ..."):
            rows.append(evaluate(spec, data, TrainConfig(steps=args.steps)))
    reference = rows[0]
    table = Table(
        title=f"MovieLens-1M, validation split, {args.steps} steps x 1024, seed 0",
        title_justify="left",
    )
    columns = (
        "spec",
        "NE",
        "vs " + reference.name,
        "AUC",
        "FLOPs/ex",
        "serving",
        "params",
        "seconds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "spec" else "right")
    for r in rows:
        table.add_row(
            r.name,
            f"{r.ne:.4f}",
            f"{r.ne - reference.ne:+.4f}",
            f"{r.auc:.4f}",
            f"{r.flops / 1e3:.0f}K",
            f"{r.serving_flops / 1e3:.0f}K",
            f"{r.params / 1e3:.0f}K",
            f"{r.seconds:.0f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
