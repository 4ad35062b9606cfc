"""Which NAS family reaches a good front soonest: every strategy on one space, one dataset,
the same steps per stand-alone candidate and the same wall-clock budget.

    python benchmarks/search_efficiency.py [--minutes 8] [--steps 800] [--candidates 40]

Runs random, evolution, optuna (NSGA-II), oneshot, dnas and distdnas one after another,
each as a user runs it (``nas submit`` in a subprocess: a local Ray, the registry, MLflow),
on ``ctr_stack`` over MovieLens-1M, without baselines (the front is the strategy's own).
For each it reads from the registry:

- the hypervolume of its validation front (NE vs FLOPs per example, both minimised, against
  the fixed reference point REFERENCE below) after each candidate, against wall-clock from
  the moment ``nas submit`` started (setup jobs, Ray and MLflow included);
- the time at which that hypervolume first reaches 95% of random search's final one;
- the stand-alone trainings it used, and the minutes from its first setup job's start to
  its last one's end (candidates train beside the jobs: not all of it is the jobs');
- for oneshot, ranking fidelity: Kendall tau between the NE its supernet gives and the NE
  stand-alone training gives, over random search's candidates (uniform samples of the space,
  at least 20 when the budget allows);
- for distdnas, its setup jobs' wall-clock against dnas's (one DNAS over the whole split,
  the same total steps).

It prints a table and logs it, with a PNG of hypervolume against time, to MLflow
(experiment ``search_efficiency`` under ``--runs``).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from nas.cli.flags import number, whole_number

REPO = Path(__file__).resolve().parent.parent
# NE, FLOPs per example: just worse than any member of this space at this budget (the
# worst NE seen is 0.81, nearly every member is under 1M FLOPs). A looser point such as the
# natural (1.0, 2.0e6) makes any cheap model with NE 0.80 worth 94% of every front.
REFERENCE = (0.85, 1.0e6)
TARGET = 0.95  # of random search's final hypervolume
LAMBDAS = [0.0, 0.02, 0.1, 0.5]
DNAS_STEPS = 400

STRATEGIES = {
    "random": {"name": "random"},
    "evolution": {"name": "evolution", "options": {"population_size": 8, "sample_size": 3}},
    "optuna": {"name": "optuna", "options": {"sampler": "nsga2", "population_size": 8}},
    "oneshot": {
        "name": "oneshot",
        "options": {"supernet_steps": 1500, "subnet_budget": 500, "top_k": 6},
    },
    "dnas": {"name": "dnas", "options": {"lambdas": LAMBDAS, "steps": DNAS_STEPS}},
    "distdnas": {
        "name": "distdnas",
        "options": {"lambdas": LAMBDAS, "steps": DNAS_STEPS, "shards": 4},
    },
}
# DistDNAS against one DNAS over the whole split, the same total steps, one penalty: on 2
# cores a 4-penalty sweep already keeps both busy, so the sweep above cannot show it. A lone
# DNAS job takes both cores (2 threads); DistDNAS's comparison is per worker, so it is also
# run on one core (concurrency 1), as one node of a cluster would run it.
ONE_PENALTY = {
    "dnas (1 penalty)": ({"name": "dnas", "options": {"lambdas": [0.02], "steps": 800}}, 2),
    "dnas (1 penalty, 1 core)": (
        {"name": "dnas", "options": {"lambdas": [0.02], "steps": 800}},
        1,
    ),
    "distdnas (1 penalty)": (
        {"name": "distdnas", "options": {"lambdas": [0.02], "steps": 800, "shards": 4}},
        2,
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=_positive_number, default=8.0, help="per strategy")
    parser.add_argument("--steps", type=whole_number(1), default=800, help="per candidate")
    parser.add_argument("--candidates", type=whole_number(1), default=40, help="at most")
    parser.add_argument(
        "--dataset", default="movielens-1m", choices=["movielens-1m", "movielens-100k"]
    )
    parser.add_argument(
        "--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES)
    )
    parser.add_argument("--runs", type=Path, default=REPO / "nas-runs" / "search_efficiency")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure the searches already under --runs instead of running them again",
    )
    args = parser.parse_args()
    if "random" not in args.strategies:
        parser.error("--strategies must include random: the others are measured against it")

    print(
        f"search efficiency: ctr_stack on {args.dataset}, {args.steps} steps per candidate, "
        f"{args.minutes:g} min per strategy, at most {args.candidates} candidates, "
        f"2 trials at a time on {os.cpu_count()} CPUs; hypervolume of NE x FLOPs "
        f"against reference {REFERENCE}"
    )
    rows = {}
    for name in args.strategies:
        print(f"- running {name} ...", flush=True)
        rows[name] = run_strategy(name, args)
    random_final = rows["random"]["curve"][-1][1] if rows["random"]["curve"] else 0.0
    for row in rows.values():
        row["to_target"] = first_time(row["curve"], TARGET * random_final)
    if "oneshot" in rows:
        rows["oneshot"]["tau"] = ranking_fidelity(rows["oneshot"], rows["random"], args)
    if {"dnas", "distdnas"} <= set(args.strategies):
        for name, (strategy, concurrency) in ONE_PENALTY.items():
            print(f"- running {name} ...", flush=True)
            rows[name] = run_strategy(name, args, strategy, 1, concurrency)
            rows[name]["to_target"] = None
    table = render(rows, random_final, args)
    print(table)
    log_to_mlflow(rows, table, random_final, args)
    return 0


# --- one strategy ----------------------------------------------------------------------------


def run_strategy(
    name: str,
    args,
    strategy: dict | None = None,
    candidates: int | None = None,
    concurrency: int = 2,
) -> dict:
    config = {
        "name": f"efficiency-{slug(name)}",
        "dataset": args.dataset,
        "space": {"name": "ctr_stack", "options": {"embedding_dims": [8, 16, 32], "max_depth": 2}},
        "strategy": strategy or STRATEGIES[name],
        "objectives": ["ne", "flops"],
        "budget": {
            "candidates": candidates or args.candidates,
            "steps": args.steps,
            "max_minutes": args.minutes,
        },
        "train": {"batch_size": 1024},
        "resources": {"concurrency": concurrency, "cpus_per_trial": 1},
        "seed": args.seed,
        "include_baselines": False,
    }
    return run_search(args.runs / slug(name), config, args.reuse)


def run_search(runs: Path, config: dict, reuse: bool = False, first: dict | None = None) -> dict:
    """Run ``config`` as a user does (``nas submit`` in a subprocess) with its stores under
    ``runs``, and measure it (``measure``); with ``reuse``, measure the run already there.
    ``first``: a search run before it in the same stores, unmeasured (its baselines are then
    reused by ``config``'s, ``nas/service/trained_before.py``). Every search reads the one
    prepared cache of this shell (``$RECNAS_CACHE_DIR``, else ./nas-runs/data), prepared
    before the clock starts: the searches are timed, not the dataset's preparation (22 s of
    MovieLens-1M's, paid again by each search when its stores were fresh)."""
    from nas.data import load_dataset

    timing = runs / "timing.json"
    if reuse and timing.exists():
        return measure(runs, config["name"], json.loads(timing.read_text()))
    if runs.exists():
        import shutil

        shutil.rmtree(runs)
    runs.mkdir(parents=True)
    if first is not None:
        submit(runs, first)
    load_dataset(config["dataset"])
    started = time.time()
    submit(runs, config)
    timing.write_text(json.dumps({"started": started, "wall": time.time() - started}))
    return measure(runs, config["name"], json.loads(timing.read_text()))


def submit(runs: Path, config: dict) -> None:
    """``nas submit`` ``config`` with its stores under ``runs``, to its end."""
    path = runs / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config))
    from nas.core.paths import data_cache_dir

    env = {**os.environ, "RECNAS_RUNS_DIR": str(runs), "RECNAS_CACHE_DIR": str(data_cache_dir())}
    done = subprocess.run(
        [sys.executable, "-m", "nas.cli", "submit", str(path), "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"{config['name']} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )


def measure(runs: Path, name: str, timing: dict) -> dict:
    """What the search named ``name`` did, from its registry and when ``nas submit``
    started (not a retrain of it that ``front_at_full_budget.py`` ran in the same stores,
    which keeps its name)."""
    from nas.service.registry import Registry

    registry = Registry(f"sqlite:///{runs / 'registry.db'}")
    (search,) = [
        s for s in registry.list_searches() if s.name == name and not s.config.get("retrain")
    ]
    trials = registry.trials(search.id)
    searched = [t for t in trials if t.kind == "searched"]
    jobs = [t for t in trials if not t.is_candidate]
    return {
        "search": search,
        "status": search.status,
        "trials": searched,
        "curve": hypervolume_curve(searched, timing["started"]),
        "started": timing["started"],
        "wall": timing["wall"],
        "setup": setup_seconds(jobs),
        "jobs": jobs,
    }


def hypervolume_curve(trials, started: float, log_flops: bool = False) -> list[tuple[float, float]]:
    """(seconds since submit, hypervolume of the front so far) after each recorded trial;
    with ``log_flops``, of NE x log10(FLOPs) against the same reference point."""
    from nas.search.pareto import hypervolume

    done = sorted(
        (t for t in trials if t.status == "completed"), key=lambda t: t.timings["recorded_at"]
    )
    scale = np.log10 if log_flops else (lambda x: x)
    reference = [REFERENCE[0], float(scale(REFERENCE[1]))]
    points, curve = [], []
    for t in done:
        points.append([t.metrics["ne"], float(scale(t.metrics["flops"]))])
        volume = hypervolume(np.array(points), ["min", "min"], reference)
        curve.append((t.timings["recorded_at"] - started, volume))
    return curve


def first_time(curve, target: float) -> float | None:
    return next((t for t, volume in curve if volume >= target), None)


def minutes(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds / 60:.1f}"


def setup_seconds(jobs) -> float | None:
    spans = [t.timings for t in jobs if t.timings and "finished_at" in t.timings]
    if not spans:
        return None
    return max(s["finished_at"] for s in spans) - min(s["started_at"] for s in spans)


def ranking_fidelity(oneshot: dict, random: dict, args) -> dict:
    """Kendall tau between oneshot's supernet NE and stand-alone NE, over random search's
    candidates (uniform draws of the same space, trained stand-alone by random search)."""
    from scipy.stats import kendalltau

    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from workers.oneshot import load_supernets
    from workers.trial_data import TrialData

    (job,) = [t for t in oneshot["jobs"] if t.kind == "supernet"]
    settings = job.job["settings"]
    data = TrialData.from_prepared(load_dataset(args.dataset), "valid")
    trained = load_supernets(settings, data, job.checkpoint)
    score = trained.scorer(data, settings["eval_rows"], settings["seed"])
    pairs = [
        (score(ArchSpec.from_dict(t.spec))["ne"], t.metrics["ne"])
        for t in random["trials"]
        if t.status == "completed"
    ]
    if len(pairs) < 2:
        return {"tau": None, "archs": len(pairs)}
    estimated, alone = zip(*pairs, strict=True)
    result = kendalltau(estimated, alone)
    return {"tau": float(result.statistic), "p": float(result.pvalue), "archs": len(pairs)}


# --- reporting -------------------------------------------------------------------------------


def render(rows: dict, random_final: float, args, reference: str = "random") -> str:
    """The table of every row, measured against ``reference``'s final hypervolume."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"search efficiency ({args.dataset}, {args.minutes:g} min each)")
    to_final = any("to_final" in row for row in rows.values())
    for column in (
        "strategy",
        "final hypervolume",
        f"min to {TARGET:.0%} of {reference}'s",
        *([f"min to 100% of {reference}'s"] if to_final else []),
        "stand-alone trainings",
        "first to last job (min)",
        "wall (min)",
        "status",
    ):
        table.add_column(column, justify="left" if column in ("strategy", "status") else "right")
    for name, row in rows.items():
        final = row["curve"][-1][1] if row["curve"] else 0.0
        table.add_row(
            name,
            f"{final:.4g} ({final / random_final:.1%})" if random_final else f"{final:.4g}",
            minutes(row["to_target"]),
            *([minutes(row.get("to_final"))] if to_final else []),
            str(len(row["trials"])),
            "-" if row["setup"] is None else f"{row['setup'] / 60:.1f}",
            f"{row['wall'] / 60:.1f}",
            row["status"],
        )
    console = Console(record=True, width=140, file=io.StringIO())  # printed once, by main
    console.print(table)
    notes = []
    if "oneshot" in rows and rows["oneshot"].get("tau"):
        tau = rows["oneshot"]["tau"]
        if tau["tau"] is not None:
            notes.append(
                f"oneshot ranking fidelity: Kendall tau {tau['tau']:.3f} (p = {tau['p']:.2g}) "
                f"over {tau['archs']} architectures random search trained stand-alone"
            )
    pairs = [
        ("dnas", "distdnas"),
        *((one, "distdnas (1 penalty)") for one in list(ONE_PENALTY)[:2]),
    ]
    for dnas, dist in pairs:
        if dnas in rows and dist in rows and rows[dnas]["setup"] and rows[dist]["setup"]:
            ratio = rows[dist]["setup"] / rows[dnas]["setup"]
            notes.append(
                f"{dist} finds its architectures in {rows[dist]['setup'] / 60:.2f} min, "
                f"{dnas} in {rows[dnas]['setup'] / 60:.2f} min (same total steps): {ratio:.2f}x"
            )
    for note in notes:
        console.print(note)
    return console.export_text()


def log_to_mlflow(
    rows: dict, table: str, random_final: float, args, reference: str = "random"
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlflow import MlflowClient

    figure, axis = plt.subplots(figsize=(8, 5))
    for name, row in rows.items():
        if row["curve"]:
            minutes = [0.0] + [t / 60 for t, _ in row["curve"]]
            volumes = [0.0] + [v for _, v in row["curve"]]
            axis.step(minutes, volumes, where="post", label=name)
    if random_final:
        target = TARGET * random_final
        axis.axhline(target, color="grey", linestyle="--", label=f"95% of {reference}")
    axis.set_xlabel("minutes since nas submit")
    axis.set_ylabel("hypervolume (NE x FLOPs)")
    axis.set_title(f"ctr_stack on {args.dataset}: {args.steps} steps per candidate")
    axis.legend()
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    client = MlflowClient(f"sqlite:///{args.runs / 'mlflow.db'}")
    found = client.get_experiment_by_name("search_efficiency")
    experiment = (
        found.experiment_id
        if found
        else client.create_experiment(
            "search_efficiency", artifact_location=(args.runs / "artifacts").resolve().as_uri()
        )
    )
    run = client.create_run(experiment, run_name=time.strftime("%Y-%m-%d %H:%M", time.gmtime()))
    run_id = run.info.run_id
    for name, row in rows.items():
        final = row["curve"][-1][1] if row["curve"] else 0.0
        name = slug(name)
        client.log_metric(run_id, f"{name}.hypervolume", final)
        client.log_metric(run_id, f"{name}.trainings", len(row["trials"]))
        if row["to_target"] is not None:
            client.log_metric(run_id, f"{name}.minutes_to_target", row["to_target"] / 60)
        if row["setup"] is not None:
            client.log_metric(run_id, f"{name}.setup_minutes", row["setup"] / 60)
    tau = rows.get("oneshot", {}).get("tau")
    if tau and tau["tau"] is not None:
        client.log_metric(run_id, "oneshot.kendall_tau", tau["tau"])
    client.log_figure(run_id, figure, "hypervolume.png")
    client.log_text(run_id, table, "table.txt")
    client.set_terminated(run_id)
    print(f"logged to MLflow: {args.runs / 'mlflow.db'}, run {run_id}", file=sys.stderr)


def slug(name: str) -> str:
    """A strategy row's name as a folder, search and metric name: "dnas-1-penalty-1-core"."""
    return "-".join("".join(c if c.isalnum() else " " for c in name).split())


def _positive_number(text: str) -> float:
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


if __name__ == "__main__":
    sys.exit(main())
