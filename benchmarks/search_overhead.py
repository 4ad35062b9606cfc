"""Orchestration overhead of a search: wall time spent outside training, per candidate.

Method: run a real search (`nas submit --json`, default examples/searches/ctr_quick.yaml,
the demo's settings) in a fresh runs folder, then read each trial's timestamps from the
registry. A candidate's *work* is training plus evaluation, the validation checks at its
rungs and for select_best included (what any NAS tool must spend).
Everything else is overhead, split by where it goes:

    ray       suggested -> started in a worker, plus reported -> seen by the controller
    setup     in the worker, outside train/eval/FLOPs: data from the object store, model build
    flops     counting FLOPs with fvcore
    record    the registry transaction, the MLflow child run, the parent run's front

The fixed cost of a search (imports, ray.init, the MLflow store) is paid once and reported
apart: start -> first suggestion, and last record -> exit.

Reference, in the same run: the first --reference candidates are trained again in this
process, without Ray, MLflow or the registry, with the same data, seed and thread count.
Their work time next to the in-search work time shows whether running in a Ray worker
slows training itself (the object store's zero-copy arrays, thread settings).

    .venv/bin/python benchmarks/search_overhead.py [--config FILE] [--candidates N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
console = Console()


def run_search(config: Path, runs: Path, candidates: int | None) -> tuple[dict, float, float]:
    command = [sys.executable, "-m", "nas.cli", "submit", str(config), "--json"]
    if candidates:
        command += ["--budget", str(candidates)]
    env = {**os.environ, "RECNAS_RUNS_DIR": str(runs)}
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    end = time.time()
    if done.returncode != 0:
        sys.exit(f"the search failed:\n{done.stderr}")
    return json.loads(done.stdout), start, end


def trial_breakdown(trial) -> dict:
    t, m = trial.timings, trial.metrics
    worker = t["finished_at"] - t["started_at"]
    # training, the final evaluation, and the validation checks at rungs / for select_best
    work = m["train_seconds"] + m["eval_seconds"] + m.get("check_seconds", 0.0)
    return {
        "trial": trial.number,
        "label": trial.label or trial.arch_id[:12],
        "work": work,
        "ray": (t["started_at"] - t["suggested_at"]) + (t["recorded_at"] - t["finished_at"]),
        "setup": worker - work - m["flops_seconds"],
        "flops": m["flops_seconds"],
        "record": t["bookkeeping_s"],
    }


def reference_work(trials, config, count: int) -> list[tuple[int, float, float]]:
    """(trial, in-search work, in-process work) for the first ``count`` candidates."""
    import torch

    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from workers.train import TrainConfig
    from workers.trial import evaluate
    from workers.trial_data import TrialData

    torch.set_num_threads(config.resources.cpus_per_trial)
    data = TrialData.from_prepared(load_dataset(config.dataset), "valid")
    train = TrainConfig(
        steps=config.budget.steps,
        batch_size=config.train.batch_size,
        lr=config.train.lr,
        embedding_lr=config.train.embedding_lr,
        seed=config.seed,
    )
    rows = []
    for trial in trials[:count]:
        result = evaluate(ArchSpec.from_dict(trial.spec), data, train)
        m = trial.metrics
        rows.append(
            (
                trial.number,
                m["train_seconds"] + m["eval_seconds"],
                result.train_seconds + result.eval_seconds,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "examples/searches/ctr_quick.yaml")
    parser.add_argument("--candidates", type=int, help="override budget.candidates")
    parser.add_argument("--reference", type=int, default=3, help="candidates to re-train")
    args = parser.parse_args()

    from nas.service.config import validate_config
    from nas.service.registry import Registry

    with tempfile.TemporaryDirectory(prefix="recnas-bench-") as tmp:
        runs = Path(tmp)
        console.print(f"running {args.config} in {runs} ...")
        printed, start, end = run_search(args.config, runs, args.candidates)
        registry = Registry(f"sqlite:///{runs / 'registry.db'}")
        search = registry.get_search(printed["id"])
        config = validate_config(search.config)
        trials = [t for t in registry.trials(search.id) if t.status == "completed"]
        rows = [trial_breakdown(t) for t in trials]
        first = min(t.timings["suggested_at"] for t in trials)
        last = max(t.timings["recorded_at"] + t.timings["bookkeeping_s"] for t in trials)
        console.print(f"re-training {args.reference} candidates in this process (reference) ...")
        reference = reference_work(trials, config, args.reference)

    table = Table(title="per candidate (seconds)", title_justify="left")
    for column in ("trial", "candidate", "work", "ray", "setup", "flops", "record", "overhead"):
        table.add_column(column, justify="left" if column == "candidate" else "right")
    for r in rows:
        overhead = r["ray"] + r["setup"] + r["flops"] + r["record"]
        table.add_row(
            str(r["trial"]),
            r["label"],
            *(f"{r[k]:.2f}" for k in ("work", "ray", "setup", "flops", "record")),
            f"{overhead:.2f}",
        )
    console.print(table)

    work = sum(r["work"] for r in rows)
    parts = {k: sum(r[k] for r in rows) for k in ("ray", "setup", "flops", "record")}
    overhead = sum(parts.values())
    n = len(rows)
    summary = Table(title="totals", show_header=False, title_justify="left")
    summary.add_column(style="bold")
    summary.add_column(justify="right")
    summary.add_row("candidates (incl. baselines)", str(n))
    summary.add_row("candidate work (train + eval), mean", f"{work / n:.2f} s")
    for key, value in parts.items():
        summary.add_row(f"  {key}, mean per candidate", f"{value / n:.3f} s")
    summary.add_row("overhead per candidate, mean", f"{overhead / n:.3f} s")
    summary.add_row("overhead / work (bar: <= 10%)", f"{100 * overhead / work:.1f}%")
    ratios = [(r["ray"] + r["setup"] + r["flops"] + r["record"]) / r["work"] for r in rows]
    summary.add_row("median overhead / work", f"{100 * statistics.median(ratios):.1f}%")
    fixed = (first - start) + (end - last)
    summary.add_row("fixed: start -> first candidate", f"{first - start:.1f} s")
    summary.add_row("fixed: last record -> exit", f"{end - last:.1f} s")
    summary.add_row("(overhead + fixed) / work", f"{100 * (overhead + fixed) / work:.1f}%")
    summary.add_row("whole search, wall", f"{end - start:.1f} s")
    console.print(summary)

    ref = Table(
        title="reference: the same candidates trained in-process, no Ray", title_justify="left"
    )
    for column in ("trial", "work in the search (s)", "work in-process (s)", "ratio"):
        ref.add_column(column, justify="right")
    for number, in_search, in_process in reference:
        ref.add_row(
            str(number), f"{in_search:.2f}", f"{in_process:.2f}", f"{in_search / in_process:.2f}"
        )
    console.print(ref)


if __name__ == "__main__":
    main()
