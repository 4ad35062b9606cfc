"""Training throughput of each baseline spec on MovieLens-1M, against the data loader alone.

Method: the train split of the prepared cache is loaded into memory once. For each spec a
model is built (seed 0) and trained for --warmup untimed steps, then --steps timed steps of
--batch-size examples (forward, backward, both optimizers), --repeats times; the median
examples/s is reported. The reference, in the same run, is the loader alone: gathering the
same batches with no model, the ceiling any model can reach here. Evaluation throughput is
the validation split scored in batches of 16384 (no grad).

    .venv/bin/python benchmarks/train_throughput.py [--steps 200] [--dataset movielens-1m]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from nas.data import load_dataset
from nas.flops import measure_flops_per_example
from nas.model import build_model
from nas.spec import ArchSpec
from workers.train import TrainConfig, predict, train

SPECS = Path(__file__).resolve().parent.parent / "examples" / "specs"


def loader_examples_per_s(data, batch_size: int, steps: int) -> float:
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(len(data), generator=generator)
    start = time.perf_counter()
    for step in range(steps):
        lo = (step * batch_size) % (len(data) - batch_size)
        data[order[lo : lo + batch_size]]
    return steps * batch_size / (time.perf_counter() - start)


def measure(spec: ArchSpec, dataset, train_data, valid_data, args) -> dict:
    torch.manual_seed(0)
    model = build_model(spec, dataset.schema)
    config = TrainConfig(steps=args.steps, batch_size=args.batch_size)
    train(model, train_data, TrainConfig(steps=args.warmup, batch_size=args.batch_size))
    rates = [train(model, train_data, config).examples_per_s for _ in range(args.repeats)]
    start = time.perf_counter()
    predict(model, valid_data, 16384)
    eval_rate = len(valid_data) / (time.perf_counter() - start)
    flops = measure_flops_per_example(model, valid_data[:8].inputs())
    train_rate = statistics.median(rates)
    return {
        "spec": spec.name,
        "train_examples_per_s": train_rate,
        "eval_examples_per_s": eval_rate,
        "flops_per_example": flops,
        # forward + backward ~ 3x the forward FLOPs
        "train_gflop_per_s": 3 * flops * train_rate / 1e9,
        "params": sum(p.numel() for p in model.parameters()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="movielens-1m")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    console = Console()
    dataset = load_dataset(args.dataset)
    train_data, valid_data = dataset.features("train"), dataset.features("valid")
    loader = statistics.median(
        loader_examples_per_s(train_data, args.batch_size, args.steps) for _ in range(args.repeats)
    )
    rows = []
    for path in sorted(SPECS.glob("*.json")):
        with console.status(f"measuring {path.stem} ..."):
            rows.append(measure(ArchSpec.load(path), dataset, train_data, valid_data, args))
    if args.json:
        print(json.dumps({"loader_examples_per_s": loader, "specs": rows}, indent=2))
        return

    console.print(
        f"[bold]Training throughput on {args.dataset}[/] "
        f"(batch {args.batch_size}, {args.steps} timed steps after {args.warmup} warm-up, "
        f"median of {args.repeats}; torch {torch.__version__}, {torch.get_num_threads()} threads)"
    )
    table = Table()
    for column in (
        "spec",
        "train ex/s",
        "vs loader",
        "eval ex/s",
        "FLOPs/ex",
        "train GFLOP/s",
        "params",
    ):
        table.add_column(column, justify="right" if column != "spec" else "left")
    table.add_row("(loader alone)", f"{loader:,.0f}", "1.00", "", "", "", "")
    for r in rows:
        table.add_row(
            r["spec"],
            f"{r['train_examples_per_s']:,.0f}",
            f"{r['train_examples_per_s'] / loader:.2f}",
            f"{r['eval_examples_per_s']:,.0f}",
            f"{r['flops_per_example'] / 1e3:,.1f}K",
            f"{r['train_gflop_per_s']:.2f}",
            f"{r['params']:,}",
        )
    console.print(table)
    console.print(
        "vs loader: the share of the loader's ceiling each model reaches. "
        "2000 steps at the train rate take 2,048,000 / (train ex/s) seconds."
    )


if __name__ == "__main__":
    sys.exit(main())
