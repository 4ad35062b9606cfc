"""Does a search's front hold when it is trained properly? Its searched front points and the
hand-designed baselines, retrained at full budget on several seeds, scored on the test split.

    python benchmarks/front_at_full_budget.py SEARCH_ID [--runs DIR] [--steps N] [--seeds 3]

Reads the search from the registry under ``--runs`` (default: $RECNAS_RUNS_DIR or
./nas-runs), takes its front's searched points, adds the baselines of examples/specs/, and
trains each on the train split for ``--steps`` (default: the search's ``budget.steps``) with
seeds 0..S-1, two at a time on one thread each, then measures NE, AUC and FLOPs on the test
split, which the search never saw.

It prints mean and standard deviation over seeds, and each point's NE difference from the
DCNv2 baseline paired by seed, with a 95% t-interval. It then says whether the front meets
the bar of issue 15: a searched point that beats DCNv2's test NE at no more FLOPs, or one
within DCNv2's seed standard deviation at no more than 40% of its FLOPs.

Results are kept in ``<runs>/full_budget.jsonl``, one line per training; a second run trains
only what is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

REFERENCE_BASELINE = "dcnv2"
CHEAP = 0.40  # of DCNv2's FLOPs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("search_id")
    parser.add_argument("--runs", type=Path, default=None, help="the search's runs folder")
    parser.add_argument("--steps", type=int, default=None, help="default: budget.steps")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.runs is not None:
        os.environ["RECNAS_RUNS_DIR"] = str(args.runs)
    from nas.config import default_registry_url, runs_dir, validate_config
    from nas.registry import Registry
    from nas.spec import ArchSpec
    from nas.summary import summarize

    if args.seeds < 2:
        parser.error("--seeds must be at least 2 (a spread needs two)")
    registry = Registry(default_registry_url())
    search = registry.get_search(args.search_id)
    config = validate_config(search.config)
    summary = summarize(config, registry.trials(search.id))
    specs = {
        c.label: ArchSpec.from_dict(t.spec)
        for c in summary.front
        if not c.is_baseline
        for t in registry.trials(search.id)
        if t.number == c.number
    }
    for path in sorted((REPO / "examples" / "specs").glob("*.json")):
        specs[path.stem] = ArchSpec.load(path)
    steps = args.steps or config.budget.steps
    out = runs_dir() / "full_budget.jsonl"
    kept = {}
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            kept[(row["label"], row["steps"], row["seed"])] = row
    jobs = [
        (label, spec.to_dict(), seed)
        for label, spec in specs.items()
        for seed in range(args.seeds)
        if (label, steps, seed) not in kept
    ]
    print(
        f"{search.id}: {len(summary.front)} front points ({len(specs) - 4} searched) and 4 "
        f"baselines, {steps} steps x {config.train.batch_size} rows, seeds 0-{args.seeds - 1}, "
        f"test split of {config.dataset}; {len(jobs)} trainings to run",
        flush=True,
    )
    train_all(jobs, steps, config, args.workers, out, kept)
    report({label: [kept[(label, steps, s)] for s in range(args.seeds)] for label in specs})
    return 0


def train_all(jobs, steps, config, workers, out: Path, kept: dict) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    init = (config.dataset, steps, config.train.model_dump())
    with (
        Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()) as bar,
        ProcessPoolExecutor(workers, initializer=_worker_init, initargs=init) as pool,
        out.open("a") as sink,
    ):
        task = bar.add_task("trainings", total=len(jobs))
        futures = [pool.submit(_train, *job) for job in jobs]
        for future in as_completed(futures):
            row = future.result()
            kept[(row["label"], row["steps"], row["seed"])] = row
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            bar.advance(task)


_SETUP: dict = {}


def _worker_init(dataset: str, steps: int, train: dict) -> None:
    import torch

    from nas.data import load_dataset
    from workers.trial import TrialData

    torch.set_num_threads(1)
    _SETUP.update(data=TrialData.from_prepared(load_dataset(dataset), "test"), steps=steps)
    _SETUP["train"] = train


def _train(label: str, spec: dict, seed: int) -> dict:
    from nas.spec import ArchSpec
    from workers.train import TrainConfig
    from workers.trial import evaluate

    config = TrainConfig(steps=_SETUP["steps"], seed=seed, **_SETUP["train"])
    result = evaluate(ArchSpec.from_dict(spec), _SETUP["data"], config)
    return {
        "label": label,
        "arch_id": result.arch_id,
        "steps": result.steps,
        "seed": seed,
        "ne": result.ne,
        "auc": result.auc,
        "flops": result.flops,
        "params": result.params,
    }


def report(rows: dict[str, list[dict]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from scipy import stats

    base = rows[REFERENCE_BASELINE]
    base_ne = [r["ne"] for r in base]
    base_mean, base_std, base_flops = statistics.mean(base_ne), statistics.stdev(base_ne), None
    base_flops = base[0]["flops"]
    console = Console()
    table = Table(title=f"test split, {len(base)} seeds, {base[0]['steps']} steps")
    for column in ("candidate", "FLOPs", "vs DCNv2", "NE", "AUC", "NE - DCNv2 (95% CI)"):
        table.add_column(column, justify="left" if column == "candidate" else "right")
    verdicts = []
    for label, runs in sorted(rows.items(), key=lambda kv: statistics.mean(r["ne"] for r in kv[1])):
        ne = [r["ne"] for r in runs]
        auc = [r["auc"] for r in runs]
        diff = [a - b for a, b in zip(ne, base_ne, strict=True)]
        mean_diff = statistics.mean(diff)
        half = stats.t.ppf(0.975, len(diff) - 1) * statistics.stdev(diff) / len(diff) ** 0.5
        flops = runs[0]["flops"]
        searched = label not in BASELINES
        table.add_row(
            label + ("" if searched else " (baseline)"),
            f"{flops / 1e3:.1f}K",
            f"{flops / base_flops:.0%}",
            f"{statistics.mean(ne):.4f} ± {statistics.stdev(ne):.4f}",
            f"{statistics.mean(auc):.4f}",
            "-" if label == REFERENCE_BASELINE else f"{mean_diff:+.4f} ± {half:.4f}",
        )
        if not searched:
            continue
        if statistics.mean(ne) < base_mean and flops <= base_flops:
            verdicts.append(
                f"{label} beats DCNv2's test NE at {flops / base_flops:.0%} of its FLOPs"
            )
        elif statistics.mean(ne) - base_mean <= base_std and flops <= CHEAP * base_flops:
            verdicts.append(
                f"{label} is within DCNv2's seed std ({base_std:.4f}) at "
                f"{flops / base_flops:.0%} of its FLOPs"
            )
    console.print(table)
    if verdicts:
        console.print("The front holds at full budget: " + "; ".join(verdicts) + ".")
    else:
        console.print(
            "The front does not hold at full budget: no searched point beats DCNv2 at no more "
            f"FLOPs, nor comes within its seed std ({base_std:.4f}) at <= {CHEAP:.0%} of them."
        )


BASELINES = {p.stem for p in (REPO / "examples" / "specs").glob("*.json")}


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
