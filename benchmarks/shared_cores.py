"""Two trainings on the same cores at once: how much slower each runs than alone, at
libgomp's default spin count and at a short one (``GOMP_SPINCOUNT``: how long torch's
OpenMP threads spin at a barrier before they sleep; read when torch loads libgomp).

    .venv/bin/python benchmarks/shared_cores.py [--spec examples/specs/dcnv2.json]
        [--steps 600] [--repeats 2]

Each case runs ``nas train SPEC --dataset movielens-1m --steps N --json`` on every core
(torch's default thread count), alone and as two processes started together, and prints the
training seconds each reports (imports and data loading left out), for both spin counts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SPIN_COUNTS = {"libgomp's default": "300000", "short": "10000"}


def train(spec: str, steps: int, spin: str, together: int) -> list[float]:
    """The training seconds of ``together`` runs started at once."""
    env = {**os.environ, "GOMP_SPINCOUNT": spin}
    env.pop("OMP_NUM_THREADS", None)  # every core, as a user's command runs
    command = [sys.executable, "-m", "nas.cli", "train", spec, "--dataset", "movielens-1m"]
    command += ["--steps", str(steps), "--json"]
    started = [
        subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(together)
    ]
    seconds = []
    for process in started:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"nas train exited {process.returncode}")
        seconds.append(json.loads(out)["seconds"])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="examples/specs/dcnv2.json")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    train(args.spec, 10, "10000", 1)  # the dataset prepared, the kernel compiled
    table = Table(
        title=f"{args.spec}, {args.steps} steps on {os.cpu_count()} cores: training seconds "
        f"(median of {args.repeats})"
    )
    for column in ("GOMP_SPINCOUNT", "alone", "two at once (each)", "slowdown"):
        table.add_column(column)
    for name, spin in SPIN_COUNTS.items():
        alone = statistics.median(
            s for _ in range(args.repeats) for s in train(args.spec, args.steps, spin, 1)
        )
        shared = statistics.median(
            s for _ in range(args.repeats) for s in train(args.spec, args.steps, spin, 2)
        )
        table.add_row(f"{spin} ({name})", f"{alone:.2f}", f"{shared:.2f}", f"{shared / alone:.1f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
