"""Does a DNAS penalty decode as good an architecture from any seed, and does a longer job
decode a better one? (issue 36)

    python benchmarks/dnas_decodes.py [--penalties 0 0.02] [--seeds 0 1 2 3]
        [--steps 400 1200] [--json]

For every penalty x seed x job length it runs the DNAS job that the dnas arm of
``benchmarks/full_budget_search.py`` runs (that arm's search with this seed, its job settings
as the strategy writes them: ``mixed_choices: 2``, bilevel, ...), in this process on
MovieLens-1M, then trains the architecture each job decodes stand-alone, as that arm trains
its candidates (2000 steps keeping the best check every 250, patience 2, training seed 0).
Beside them, one random member of the space per seed, trained the same way: what a draw
with no search at all gives.

It prints every decode (its decisions, FLOPs, stand-alone NE), then for each penalty and job
length the mean, best and worst NE over the seeds, beside the random members'. Jobs and
trainings run two at a time, one thread each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from argparse import Namespace
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

DATASET = "movielens-1m"
WORKERS = 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--penalties", type=float, nargs="+", default=[0.0, 0.02], help="the jobs' lambdas"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="the jobs' search seeds"
    )
    parser.add_argument(
        "--steps", type=int, nargs="+", default=[400, 1200], help="DNAS steps a job"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if any(p < 0 for p in args.penalties) or len(set(args.penalties)) != len(args.penalties):
        parser.error(f"--penalties must be distinct and >= 0, got {args.penalties}")
    if any(s < 10 for s in args.steps):
        parser.error(f"--steps must be at least 10 each, got {args.steps}")
    if any(s < 0 for s in args.seeds):
        parser.error(f"--seeds must be >= 0, got {args.seeds}")

    from nas.data import load_dataset

    schema = load_dataset(DATASET).schema  # prepared once, before the workers read it
    jobs = [
        job_settings(seed, steps, penalty, schema)
        for steps in args.steps
        for seed in args.seeds
        for penalty in args.penalties
    ]
    randoms = [random_member(seed) for seed in args.seeds]
    with ProcessPoolExecutor(WORKERS, initializer=_worker_init) as pool:
        decodes = in_pool(pool, _decode, jobs, "DNAS jobs", args.json)
        specs = {d["arch_id"]: d["spec"] for d in decodes} | {
            r.arch_id: r.to_dict() for r in randoms
        }
        results = in_pool(pool, _train, list(specs.values()), "stand-alone trainings", args.json)
        trained = dict(zip(specs, results, strict=True))
    for d in decodes:
        d |= trained[d["arch_id"]]
    random_rows = [
        {"seed": seed, "arch_id": r.arch_id, "spec": r.to_dict()} | trained[r.arch_id]
        for seed, r in zip(args.seeds, randoms, strict=True)
    ]
    if args.json:
        print(json.dumps({"decodes": decodes, "random": random_rows}, indent=2))
    else:
        render(decodes, random_rows)
    return 0


def in_pool(pool, fn, items: list, what: str, quiet: bool) -> list:
    """``fn`` of every item in ``pool``, in order, with a progress bar of ``what``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    futures = [pool.submit(fn, item) for item in items]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), disable=quiet) as bar:
        task = bar.add_task(what, total=len(futures))
        for _ in as_completed(futures):
            bar.advance(task)
    return [f.result() for f in futures]


def job_settings(seed: int, steps: int, penalty: float, schema) -> dict:
    """The settings of the dnas arm's job for ``penalty``, in its search with ``seed``."""
    from full_budget_search import DNAS, config, strategy_jobs

    arm = Namespace(
        seed=seed,
        minutes=20.0,
        dnas_steps=DNAS["steps"],
        dnas_relaxation=DNAS["relaxation"],
        dnas_mixed_choices=DNAS["mixed_choices"],
        dnas_members_per_penalty=DNAS["members_per_penalty"],
    )
    search = config("dnas", arm)
    search["strategy"]["options"] |= {"steps": steps, "lambdas": [penalty]}
    (job,) = strategy_jobs(search, schema)
    return job.settings | {"threads": 1}  # two jobs side by side, one core each


def random_member(seed: int):
    from fidelity import draw

    (spec,) = draw(1, DATASET, seed)
    return spec


_DATA = None


def _worker_init() -> None:
    global _DATA
    import torch

    from nas.data import load_dataset
    from workers.trial_data import TrialData

    torch.set_num_threads(1)
    _DATA = TrialData.from_prepared(load_dataset(DATASET), "valid")


def _decode(settings: dict) -> dict:
    from workers import dnas

    result = dnas.run(settings, _DATA, None, lambda *_: None)
    return {
        "penalty": settings["penalty"],
        "seed": settings["seed"],
        "steps": settings["steps"],
        "arch_id": result["arch_id"],
        "spec": result["decoded"],
        "settled_from_step": result["settled_from_step"],
        "job_seconds": result["seconds"],
    }


def _train(spec: dict) -> dict:
    from full_budget_search import SELECT_BEST, STEPS

    from nas.arch.spec import ArchSpec
    from nas.search.early_stopping import DEFAULT_EVAL_ROWS
    from workers.train import TrainConfig
    from workers.trial import SelectBest, evaluate

    select = SelectBest(SELECT_BEST["every_steps"], DEFAULT_EVAL_ROWS, SELECT_BEST["patience"])
    result = evaluate(
        ArchSpec.from_dict(spec), _DATA, TrainConfig(steps=STEPS, seed=0), select=select
    )
    return {"ne": result.ne, "flops": result.flops}


def describe(spec: dict) -> str:
    """An architecture of ``ctr_stack`` in one short line."""
    blocks = " -> ".join(
        b["block"] + (f"({_layers(b['num_layers'])}, rank {b['rank']})" if "rank" in b else "")
        for b in spec["interaction"]
    )
    top = "x".join(str(w) for w in spec["top_mlp"]) or "none"
    return f"{blocks}; embedding {spec['embedding_dim']}; top MLP {top} on {spec['top_input']}"


def _layers(count: int) -> str:
    return f"{count} layer" + ("s" if count > 1 else "")


def render(decodes: list[dict], random_rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="each job's decode, trained stand-alone", title_justify="left")
    for column in ("penalty", "steps", "seed", "decoded", "FLOPs", "NE"):
        table.add_column(column, justify="right" if column != "decoded" else "left")
    for d in decodes:
        table.add_row(
            f"{d['penalty']:g}",
            str(d["steps"]),
            str(d["seed"]),
            describe(d["spec"]),
            f"{d['flops']:,.0f}",
            f"{d['ne']:.4f}",
        )
    for r in random_rows:
        table.add_row(
            "random",
            "-",
            str(r["seed"]),
            describe(r["spec"]),
            f"{r['flops']:,.0f}",
            f"{r['ne']:.4f}",
        )
    console.print(table)

    summary = Table(title="NE over the seeds", title_justify="left")
    for column in ("penalty", "steps", "distinct decodes", "mean", "best", "worst"):
        summary.add_column(column, justify="right")
    groups: dict[tuple[str, str], list[dict]] = {}
    for d in decodes:
        groups.setdefault((f"{d['penalty']:g}", str(d["steps"])), []).append(d)
    groups[("random", "-")] = random_rows
    for (penalty, steps), rows in groups.items():
        ne = [r["ne"] for r in rows]
        summary.add_row(
            penalty,
            steps,
            f"{len({r['arch_id'] for r in rows})} of {len(rows)}",
            f"{statistics.mean(ne):.4f}",
            f"{min(ne):.4f}",
            f"{max(ne):.4f}",
        )
    console.print(summary)


if __name__ == "__main__":
    raise SystemExit(main())
