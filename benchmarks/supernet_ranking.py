"""How well a supernet ranks architectures the way full stand-alone training does, beside
the seed-to-seed ceiling (issue 36).

    python benchmarks/supernet_ranking.py [--results nas-runs/fidelity/ceiling-schema.jsonl]
        [--steps 2000] [--sampling uniform|sandwich] [--few-shot DECISION ...]
        [--few-shot-steps 1000] [--refit-steps 0] [--calibration K [K ...] [--splits 200]]
        [--eval-rows 50000] [--seed 0] [--scores EARLIER.json] [--json]

Reads the stand-alone results ``benchmarks/fidelity.py --also-seed S`` kept (the same
architectures of ``ctr_stack`` trained at the longest budget from two training seeds), trains
one supernet of that space on MovieLens-1M as a one-shot search's setup job does
(``workers/oneshot.py``), scores every architecture with the supernet's weights on
``--eval-rows`` validation rows, and prints the Kendall tau between the supernet's NE ranking
and stand-alone training's (seed 0), beside the tau between the two training seeds: the
ceiling no estimate can beat. With ``--calibration K [K ...]`` it also fits, for each K, the
one-shot strategy's calibrated ranker (``nas/search/supernet/ranker.py``) on K
architectures' stand-alone NE and ranks the others with it, over ``--splits`` choices of the
K (spread over the families from a random order, as the strategy chooses its calibration
members): the mean tau on the held-out architectures, beside the supernet's own and the
ceiling on the same ones, and the ranker's tau fitted on K drawn at random. Issue 36's
target: tau >= 0.6, or >= 90% of the ceiling when the ceiling is lower.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUPERNET = (  # what a report says of its supernet; --scores takes them from the earlier one
    "supernet_steps",
    "sampling",
    "few_shot",
    "few_shot_steps",
    "eval_rows",
    "refit_steps",
    "seed",
    "supernet_seconds",
)
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--results", type=Path, default=REPO / "nas-runs/fidelity/ceiling-schema.jsonl"
    )
    parser.add_argument("--dataset", default="movielens-1m")
    parser.add_argument("--steps", type=int, default=2000, help="supernet training steps")
    parser.add_argument("--sampling", choices=("uniform", "sandwich"), default="uniform")
    parser.add_argument(
        "--few-shot",
        nargs="+",
        default=[],
        metavar="DECISION",
        help="split the space by these decisions' values, one sub-supernet per family",
    )
    parser.add_argument("--few-shot-steps", type=int, default=1000)
    parser.add_argument("--eval-rows", type=int, default=50_000)
    parser.add_argument(
        "--refit-steps",
        type=int,
        default=0,
        help="re-fit each member's last layer this many steps before scoring (NASRec)",
    )
    parser.add_argument(
        "--calibration",
        type=int,
        nargs="+",
        default=[],
        metavar="K",
        help="fit the calibrated ranker on K architectures' stand-alone NE, rank the rest",
    )
    parser.add_argument("--splits", type=int, default=200, help="random draws of the K")
    parser.add_argument(
        "--scores",
        type=Path,
        help="the --json output of an earlier run: rank with its supernet's scores, train none",
    )
    parser.add_argument("--seed", type=int, default=0, help="the supernet's seed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.scores and not args.scores.is_file():
        parser.error(f"--scores {args.scores}: no such file")
    if not args.results.exists():
        parser.error(f"no {args.results}: run benchmarks/fidelity.py --also-seed 1 first")
    rows = [json.loads(line) for line in args.results.read_text().splitlines()]
    longest = max(r["steps"] for r in rows)
    seeds = sorted({r["seed"] for r in rows if r["steps"] == longest})
    if len(seeds) < 2:
        parser.error(f"{args.results} has one training seed at {longest} steps; use --also-seed")
    alone = {(r["arch_id"], r["seed"]): r["ne"] for r in rows if r["steps"] == longest}

    from fidelity import SPACE_OPTIONS, draw
    from rich.console import Console
    from scipy.stats import kendalltau

    from nas.data import load_dataset
    from search_spaces import SpaceInputs, create_space

    archs = len({a for a, _ in alone})
    specs = [s for s in draw(archs, args.dataset, seeds[0]) if (s.arch_id, seeds[0]) in alone]
    most = len(specs) - len(specs) // 3  # a third held out to rank
    if any(not 4 <= k <= most for k in args.calibration):
        parser.error(f"--calibration must be 4 to {most} with {len(specs)} architectures")
    schema = load_dataset(args.dataset).schema
    space = create_space("ctr_stack", SPACE_OPTIONS, SpaceInputs.of(schema))
    if args.scores:
        try:
            earlier = json.loads(args.scores.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            parser.error(f"--scores {args.scores} is not this benchmark's --json output: {err}")
        if not isinstance(earlier, dict) or not {"estimated", *SUPERNET} <= set(earlier):
            parser.error(f"--scores {args.scores} is not this benchmark's --json output")
        missing = [s.arch_id for s in specs if s.arch_id not in earlier["estimated"]]
        if missing:
            parser.error(
                f"{args.scores} scores {len(specs) - len(missing)} of the {len(specs)} "
                f"architectures (not {missing[0]}): give it the --json output of a run on "
                f"{args.results}"
            )
        estimated = [earlier["estimated"][s.arch_id] for s in specs]
        supernet = {name: earlier[name] for name in SUPERNET}
    else:
        estimated, supernet = train_and_score(args, specs)
    first = [alone[(s.arch_id, seeds[0])] for s in specs]
    second = [alone[(s.arch_id, seeds[1])] for s in specs]
    tau = float(kendalltau(estimated, first).statistic)
    ceiling = float(kendalltau(first, second).statistic)
    report = {
        "architectures": len(specs),
        "stand_alone_steps": longest,
        **supernet,
        "tau": tau,
        "tau_ceiling": ceiling,
        "target": 0.6 if ceiling >= 0.6 else 0.9 * ceiling,
        "estimated": {spec.arch_id: ne for spec, ne in zip(specs, estimated, strict=True)},
        "calibrated": [
            calibrated(space, specs, estimated, first, second, k, args.splits)
            for k in args.calibration
        ],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    Console().print(
        f"{len(specs)} architectures, stand-alone at {longest} steps; a supernet of "
        f"{supernet['supernet_steps']} steps ({supernet['sampling']}"
        + (
            f", then {supernet['few_shot_steps']} per family of {', '.join(supernet['few_shot'])}"
            if supernet["few_shot"]
            else ""
        )
        + f", {supernet['supernet_seconds'] / 60:.1f} min), each member's last "
        f"layer re-fit {supernet['refit_steps']} steps, scored on "
        f"{supernet['eval_rows']:,} validation rows:\n"
        f"  Kendall tau, supernet against stand-alone: {tau:.2f}\n"
        f"  the ceiling, training seed {seeds[0]} against {seeds[1]}: {ceiling:.2f}\n"
        f"  target (issue 36): {report['target']:.2f}"
    )
    for c in report["calibrated"]:
        Console().print(
            f"Calibrated ranker fitted on {c['k']} of them (spread over the families, as a "
            f"search's calibration is), {c['held_out']} others ranked, mean over "
            f"{args.splits} draws:\n"
            f"  Kendall tau, ranker against stand-alone: {c['tau']:.2f} (sd {c['sd']:.2f})\n"
            f"  the same, fitted on {c['k']} drawn at random instead of spread over the "
            f"families: {c['random_draws_tau']:.2f} (sd {c['random_draws_sd']:.2f})\n"
            f"  the supernet alone on the same ones: {c['supernet_tau']:.2f}\n"
            f"  the ceiling on the same ones: {c['tau_ceiling']:.2f}"
        )
    return 0


def train_and_score(args, specs) -> tuple[list[float], dict]:
    """Train the supernet ``args`` describe as a one-shot search's job does and score
    ``specs`` with its weights: their NE, and the supernet's settings and training time."""
    import torch
    from fidelity import SPACE_OPTIONS
    from rich.console import Console
    from rich.progress import Progress

    from nas.data import load_dataset
    from workers import oneshot
    from workers.supernet_job import job_supernet
    from workers.trial_data import TrialData

    torch.set_num_threads(args.threads)
    settings = {
        "space": {"name": "ctr_stack", "options": SPACE_OPTIONS},
        "objectives": ["ne"],
        "seed": args.seed,
        "threads": args.threads,
        "batch_size": 1024,
        "lr": 2e-3,
        "embedding_lr": 1e-2,
        "steps": args.steps,
        "sampling": args.sampling,
        "sandwich_paths": 2,
        "few_shot": args.few_shot,
        "few_shot_steps": args.few_shot_steps if args.few_shot else 0,
        "checkpoint_every": 10**9,
        "subnet_search": "evolution",
        "subnet_budget": 1,
        "eval_rows": args.eval_rows,
        "picks": 1,
    }
    data = TrialData.from_prepared(load_dataset(args.dataset), "valid")
    began = time.perf_counter()
    with Progress(console=Console(stderr=True)) as bar:  # stdout: the table or the JSON
        tasks: dict[str, int] = {}

        def show(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done)

        net = job_supernet(settings, data)
        supernets, _ = oneshot.train_supernet(
            net, data, oneshot.OneShotSettings(**settings), None, show
        )
    trained = time.perf_counter() - began
    if args.refit_steps:
        estimated = [
            refit_ne(supernets, spec, data, args.refit_steps, args.eval_rows) for spec in specs
        ]
    else:
        score = supernets.scorer(data, args.eval_rows, 0)
        estimated = [score(spec)["ne"] for spec in specs]
    return estimated, {
        "supernet_steps": args.steps,
        "sampling": args.sampling,
        "few_shot": args.few_shot,
        "few_shot_steps": settings["few_shot_steps"],
        "eval_rows": args.eval_rows,
        "refit_steps": args.refit_steps,
        "seed": args.seed,
        "supernet_seconds": trained,
    }


def calibrated(space, specs, estimated, first, second, k: int, splits: int) -> dict:
    """The calibrated ranker's tau on held-out architectures, ``splits`` times: a third of
    them drawn to rank, and the ranker fitted on ``k`` of the others chosen as the one-shot
    strategy chooses its calibration members (spread over the families, from a random
    order). The mean and spread, beside the supernet's own tau and the ceiling on the same
    held-out ones, and the ranker's tau fitted on ``k`` drawn at random instead, ranking the
    same ones: the design's worth. (Choosing the ``k`` by design from the same 40 would
    otherwise choose which are held out, and the families it leaves rank more easily.)"""
    import numpy as np
    from scipy.stats import kendalltau

    from nas.search.supernet.ranker import CalibratedRanker, spread_over_families

    def tau(fit: list[int], held: list[int]) -> float:
        ranker = CalibratedRanker.fit(
            space, [specs[i] for i in fit], [estimated[i] for i in fit], [first[i] for i in fit]
        )
        predicted = ranker.predict([specs[i] for i in held], [estimated[i] for i in held])
        return kendalltau(predicted, [first[i] for i in held]).statistic

    rng = np.random.default_rng(0)
    index = {spec.arch_id: i for i, spec in enumerate(specs)}
    spread, drawn, own, ceilings = [], [], [], []
    for _ in range(splits):
        order = [int(i) for i in rng.permutation(len(specs))]
        held, rest = order[: len(specs) // 3], order[len(specs) // 3 :]
        chosen = spread_over_families(space, [specs[i] for i in rest], k)
        spread.append(tau([index[s.arch_id] for s in chosen], held))
        drawn.append(tau(rest[:k], held))
        alone = [first[i] for i in held]
        own.append(kendalltau([estimated[i] for i in held], alone).statistic)
        ceilings.append(kendalltau(alone, [second[i] for i in held]).statistic)
    return {
        "k": k,
        "held_out": len(specs) // 3,
        "splits": splits,
        "tau": float(np.mean(spread)),
        "sd": float(np.std(spread)),
        "random_draws_tau": float(np.mean(drawn)),
        "random_draws_sd": float(np.std(drawn)),
        "supernet_tau": float(np.mean(own)),
        "tau_ceiling": float(np.mean(ceilings)),
    }


def refit_ne(supernets, spec, data, steps: int, rows: int) -> float:
    """A member's NE after re-fitting its top MLP's last layer (all else frozen, as
    inherited) for ``steps`` steps on training rows: NASRec's post-training fine-tuning.
    Scored on the rows ``SubnetScorer`` uses (the same sample of the held-out split)."""
    import torch

    from workers.train import TrainConfig, evaluate, train

    family = None if supernets.split is None else supernets.split.index(spec)
    model = supernets.net(family).extract(spec)
    model.requires_grad_(False)
    model.top.layers[-1].requires_grad_(True)
    train_rows = data.features("train", model.reads_history)
    config = TrainConfig(steps=steps, batch_size=1024, warmup_steps=0, seed=1)
    train(model, train_rows, config)
    held = data.features(data.split, model.reads_history)
    order = torch.randperm(len(held), generator=torch.Generator().manual_seed(0))
    return evaluate(model, held[order[:rows]], data.train_rates, 16384)["ne"]


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    sys.exit(main())
