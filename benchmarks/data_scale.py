"""Own data at scale: prepare's speed and memory, and training from memory-mapped files.

For each size it writes synthetic click logs as Parquet (``examples/datasets/make_logs.py``:
the columns ``examples/datasets/my_ctr.yaml`` declares, with lists and a 32-event history),
then, each in a fresh process (its peak RSS is that process's ``ru_maxrss``):

- ``nas data prepare`` of the schema file: rows/s and peak RSS (target: under 2 GB at 50M
  rows); then ``nas data export`` of every split to Parquet: rows/s and peak RSS (written
  262,144 rows at a time, the pages it read released: flat with the size);
- on the smallest size, a ``--steps`` training of ``--spec``, from the memory-mapped files
  against the rows copied into memory (today's path for the built-in datasets), in
  alternating rounds: examples/s and peak RSS (target: mapped at least 0.9x in memory);
- with ``--search``, a 2-candidate search on the largest size (``nas submit``).

    .venv/bin/python benchmarks/data_scale.py [--sizes 1000000,10000000,50000000]
        [--folder /tmp/recnas-scale] [--steps 500] [--rounds 2] [--search]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "examples" / "datasets" / "my_ctr.yaml"

TRAIN = """
import json, resource, sys, time
from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from workers.train import TrainConfig
from workers.trial import evaluate
from workers.trial_data import TrialData
dataset = load_dataset(sys.argv[1], None)
mapped = sys.argv[2] == "mapped"
start = time.perf_counter()
data = TrialData.from_prepared(dataset, "valid", mapped=mapped)
setup = time.perf_counter() - start
config = TrainConfig(steps=int(sys.argv[4]), batch_size=1024, eval_batch_size=16384)
result = evaluate(ArchSpec.load(sys.argv[3]), data, config)
print(json.dumps({"examples_per_s": result.train_examples_per_s, "ne": result.ne,
                  "setup_s": setup, "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                  / 2**20}))
"""


def run(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done, time.perf_counter() - start


def peak_rss_gb(command: list[str], env: dict[str, str]) -> tuple[str, float, float]:
    """stdout, seconds and the peak RSS (GB) of a command, read from GNU time's ``%M``."""
    done, seconds = run(["/usr/bin/time", "-f", "RSS_KB %M", *command], env)
    kb = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("RSS"))
    return done.stdout, seconds, kb / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,50000000")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-scale"))
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--spec", default=str(REPO / "examples" / "specs" / "dcnv2.json"))
    parser.add_argument("--search", action="store_true", help="a 2-candidate search, largest size")
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    console = Console()
    python = sys.executable
    prepared = Table(title="nas data prepare of a schema file (Parquet)", title_justify="left")
    for column in ("rows", "write Parquet s", "prepare s", "rows/s", "peak RSS GB", "cache GB"):
        prepared.add_column(column, justify="right")
    exports = Table(title="nas data export of every split (Parquet)", title_justify="left")
    for column in ("rows", "export s", "rows/s", "peak RSS GB", "file GB"):
        exports.add_column(column, justify="right")
    names: dict[int, str] = {}
    for rows in sizes:
        folder = args.folder / f"rows-{rows}"
        data = folder / "data"
        if not data.exists():
            tmp = folder / "data.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            _, write_s = run(
                [python, "examples/datasets/make_logs.py", "--rows", str(rows), "--out", str(tmp)],
                dict(os.environ),
            )
            tmp.rename(data)
        else:
            write_s = float("nan")
        schema = folder / "my_ctr.yaml"
        name = f"my_ctr_{rows}"
        schema.write_text(SCHEMA.read_text().replace("name: my_ctr", f"name: {name}"))
        names[rows] = name
        env = dict(os.environ, RECNAS_CACHE_DIR=str(args.folder / "cache"))
        _, seconds, rss = peak_rss_gb(
            [python, "-m", "nas.cli", "data", "prepare", str(schema), "--force", "--json"], env
        )
        cache = args.folder / "cache" / name
        size = sum(p.stat().st_size for p in cache.iterdir()) / 2**30
        exported = folder / "export.parquet"
        exported.unlink(missing_ok=True)
        _, export_s, export_rss = peak_rss_gb(
            [python, "-m", "nas.cli", "data", "export", name, "--out", str(exported), "--json"],
            env,
        )
        export_gb = exported.stat().st_size / 2**30
        exported.unlink()
        prepared.add_row(
            f"{rows:,}",
            f"{write_s:.0f}",
            f"{seconds:.0f}",
            f"{rows / seconds:,.0f}",
            f"{rss:.2f}",
            f"{size:.2f}",
        )
        exports.add_row(
            f"{rows:,}",
            f"{export_s:.0f}",
            f"{rows / export_s:,.0f}",
            f"{export_rss:.2f}",
            f"{export_gb:.2f}",
        )
    console.print(prepared)
    console.print(exports)
    env = dict(os.environ, RECNAS_CACHE_DIR=str(args.folder / "cache"), OMP_NUM_THREADS="1")
    smallest = names[min(sizes)]
    figures: dict[str, list[dict]] = {"mapped": [], "memory": []}
    for i in range(args.rounds):
        for how in ("mapped", "memory") if i % 2 == 0 else ("memory", "mapped"):
            out, _ = run([python, "-c", TRAIN, smallest, how, args.spec, str(args.steps)], env)
            figures[how].append(json.loads(out.stdout))
    trained = Table(
        title=f"{args.steps} steps of {Path(args.spec).stem} on {min(sizes):,} rows, one thread, "
        f"{args.rounds} rounds (medians)",
        title_justify="left",
    )
    for column in ("rows from", "examples/s", "NE", "data set-up s", "peak RSS GB"):
        trained.add_column(column, justify="right")
    for how, runs in figures.items():
        trained.add_row(
            how,
            f"{statistics.median(r['examples_per_s'] for r in runs):,.0f}",
            f"{runs[0]['ne']:.6f}",
            f"{statistics.median(r['setup_s'] for r in runs):.2f}",
            f"{statistics.median(r['rss_gb'] for r in runs):.2f}",
        )
    console.print(trained)
    ratio = statistics.median(r["examples_per_s"] for r in figures["mapped"]) / statistics.median(
        r["examples_per_s"] for r in figures["memory"]
    )
    console.print(f"mapped / in memory: {ratio:.2f}x (target at least 0.9x)")
    if args.search:
        largest = names[max(sizes)]
        search = args.folder / "search.yaml"
        search.write_text(
            f"name: scale\ndataset: {largest}\n"
            "space: {name: ctr_stack, options: {max_depth: 2, embedding_dims: [8, 16]}}\n"
            "budget: {candidates: 2, steps: 300}\ninclude_baselines: false\n"
        )
        env = dict(
            os.environ,
            RECNAS_CACHE_DIR=str(args.folder / "cache"),
            RECNAS_RUNS_DIR=str(args.folder / "runs"),
        )
        out, seconds, rss = peak_rss_gb(
            [python, "-m", "nas.cli", "submit", str(search), "--json"], env
        )
        front = json.loads(out)
        console.print(
            f"2-candidate search on {max(sizes):,} rows: {front['status']} in {seconds:.0f} s, "
            f"controller peak RSS {rss:.2f} GB"
        )


if __name__ == "__main__":
    main()
