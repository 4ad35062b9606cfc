"""Does weight sharing pay at the full budget? Today's best sampling search against oneshot,
dnas and distdnas, each for the same wall time, every candidate trained as a retrain would
train it (issue 36, item 5).

    python benchmarks/full_budget_search.py [--minutes 20] [--arms sampling oneshot dnas
        distdnas] [--dnas-steps 400] [--dnas-relaxation gumbel] [--dnas-mixed-choices 2]
        [--dnas-members-per-penalty 3] [--oneshot-calibration 16]
        [--oneshot-supernet-steps 750] [--oneshot-few-shot-steps 250]
        [--oneshot-eval-rows 8192]
        [--ceiling nas-runs/fidelity/ceiling-schema.jsonl]
        [--reuse] [--json]

Each arm is ``nas submit`` in a subprocess (``search_efficiency.run_search``) on
``ctr_stack`` over MovieLens-1M, 2000 steps per candidate keeping its best check
(``select_best`` every 250 steps), no baselines, 2 trials at a time:

- ``sampling``: ``examples/searches/ctr_asha.yaml`` (evolution, ASHA);
- ``oneshot``: ``examples/searches/oneshot_full_budget.yaml``'s strategy: few-shot
  supernets by the last block (``--oneshot-supernet-steps`` for the shared one,
  ``--oneshot-few-shot-steps`` for each sub-supernet; each member scored on
  ``--oneshot-eval-rows`` rows), and a calibrated ranker fitted on the first
  ``--oneshot-calibration`` trainings;
- ``dnas`` and ``distdnas`` (4 shards): ``examples/searches/dnas_quick.yaml``'s strategy:
  its penalty sweep, ``--dnas-steps`` steps of architecture search per penalty relaxed as
  ``--dnas-relaxation`` says (mixing ``--dnas-mixed-choices`` choices a decision, 0: all),
  each penalty's ``--dnas-members-per-penalty`` likeliest members trained.

It prints per arm the hypervolume of its validation front (NE x FLOPs, the reference point
of ``search_efficiency.py``) at its end and as a share of the sampling arm's, the minutes to
95% of the sampling arm's final hypervolume, the full trainings (candidates not stopped
early) and the setup jobs' minutes; the same times with the hypervolume of NE x
log10(FLOPs) (``log_flops`` in the JSON); and the Kendall tau at the full budget of the oneshot
arm's ranking (its ranker's, where it calibrated) of the architectures
``benchmarks/fidelity.py --also-seed 1`` trained, beside the seed-to-seed ceiling over the
same ones. A PNG of hypervolume against minutes goes to MLflow (``--runs``). ``--json``
prints ``{tau, tau_ceiling, arms: {NAME: {minutes_to_95, final_hypervolume,
full_trainings}}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from search_efficiency import (  # noqa: E402  (benchmarks/ on the path first)
    TARGET,
    _positive_number,
    first_time,
    log_to_mlflow,
    render,
    run_search,
    slug,
)

STEPS = 2000
SELECT_BEST = {"every_steps": 250, "patience": 2}
EXAMPLES = REPO / "examples/searches"


def example_options(file: str) -> dict:
    return yaml.safe_load((EXAMPLES / file).read_text())["strategy"]["options"]


# The weight-sharing arms run the examples' strategies, what won here, so that the two
# cannot drift apart; the --oneshot-* and --dnas-* flags change them for one run.
ONESHOT = example_options("oneshot_full_budget.yaml")
DNAS = example_options("dnas_quick.yaml")
ARMS = {
    "sampling": None,  # examples/searches/ctr_asha.yaml as it is
    "oneshot": {"name": "oneshot", "options": ONESHOT},
    "dnas": {"name": "dnas", "options": DNAS},
    "distdnas": {"name": "distdnas", "options": DNAS | {"shards": 4}},  # steps: --dnas-steps
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=_positive_number, default=20.0, help="per arm")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument(
        "--ceiling", type=Path, default=REPO / "nas-runs/fidelity/ceiling-schema.jsonl"
    )
    parser.add_argument("--runs", type=Path, default=REPO / "nas-runs" / "full_budget_search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dnas-steps", type=int, default=DNAS["steps"], help="DNAS steps per penalty"
    )
    parser.add_argument(
        "--dnas-relaxation",
        choices=["gumbel", "softmax", "straight_through"],
        default=DNAS["relaxation"],
        help="how the DNAS arms relax the logits' step (workers/dnas.py)",
    )
    parser.add_argument(
        "--dnas-mixed-choices",
        type=mixed_choices,
        default=DNAS["mixed_choices"],
        metavar="K",
        help="gumbel: choices each decision mixes in the logits' step (0: all of them)",
    )
    parser.add_argument(
        "--dnas-members-per-penalty",
        type=int,
        default=DNAS["members_per_penalty"],
        help="each penalty's likeliest members the DNAS arms train (members_per_penalty)",
    )
    parser.add_argument(
        "--oneshot-calibration",
        type=int,
        default=ONESHOT["calibration"],
        metavar="K",
        help="the oneshot arm's calibration trainings (0: no ranker, its supernet's picks)",
    )
    for option in ("supernet_steps", "few_shot_steps", "eval_rows"):
        parser.add_argument(
            f"--oneshot-{option.replace('_', '-')}",
            type=int,
            default=ONESHOT[option],
            metavar="N",
            help=f"the oneshot arm's {option}",
        )
    parser.add_argument("--reuse", action="store_true", help="measure the arms already run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if "sampling" not in args.arms:
        parser.error("--arms must include sampling: the others are measured against it")
    if "distdnas" in args.arms and args.dnas_steps < 4:
        parser.error(
            f"--dnas-steps must be at least 4 (distdnas's 4 shards), got {args.dnas_steps}"
        )
    check_arm_options(parser, args)
    budget = config("oneshot", args)["budget"]["candidates"]
    if args.oneshot_calibration != 0 and not 4 <= args.oneshot_calibration < budget:
        parser.error(
            f"--oneshot-calibration must be 0 or 4 to {budget - 1} (the arm's budget is "
            f"{budget} candidates), got {args.oneshot_calibration}"
        )
    args.dataset, args.steps = "movielens-1m", STEPS  # what search_efficiency's report reads
    say = (lambda *_, **__: None) if args.json else print
    say(
        f"full-budget search: ctr_stack on {args.dataset}, {STEPS} steps per candidate with "
        f"select_best, {args.minutes:g} min per arm, 2 trials at a time on {os.cpu_count()} CPUs"
    )
    rows = {}
    for name in args.arms:
        say(f"- running {name} ...", flush=True)
        rows[name] = run_search(args.runs / slug(name), config(name, args), args.reuse)
    final = rows["sampling"]["curve"][-1][1] if rows["sampling"]["curve"] else 0.0
    for row in rows.values():
        row["to_target"] = first_time(row["curve"], TARGET * final)
        row["to_final"] = first_time(row["curve"], final)
    read_log_flops(rows)
    tau = oneshot_tau(rows["oneshot"], args) if "oneshot" in rows else {}
    table = render(rows, final, args, reference="sampling")
    log_to_mlflow(rows, table, final, args, reference="sampling")
    if args.json:
        print(json.dumps(summary(rows, tau), indent=2))
        return 0
    print(table)
    for line in against_sampling(rows):
        print(line)
    print("read with log10(FLOPs), the fronts' FLOPs spanning orders of magnitude:")
    for line in against_sampling({name: row["log_flops"] for name, row in rows.items()}):
        print("  " + line)
    if tau.get("tau") is not None:
        print(
            f"oneshot's ranking at the full budget ({tau['by']}): Kendall tau {tau['tau']:.3f} "
            f"over {tau['archs']} architectures; the seed-to-seed ceiling on them: "
            f"{tau['tau_ceiling']:.3f} (issue 36's target: 0.6, or 90% of a ceiling below it)"
        )
    elif tau:
        print(tau["why"])
    low, high = front_flops(rows["sampling"])
    for name in ("dnas", "distdnas"):
        if name in rows:
            found = "; ".join(
                f"{p} -> "
                + ", ".join(
                    f"{m['flops']:,.0f}" + (" (front)" if m["on_front"] else "")
                    for m in members
                    if m["flops"] is not None
                )
                for p, members in penalties(rows[name]).items()
            )
            print(f"{name}'s penalties, the FLOPs of the members each decoded: {found or 'none'}")
    print(f"sampling's front spans {low:,.0f} to {high:,.0f} FLOPs")
    return 0


def mixed_choices(text: str) -> int | None:
    """--dnas-mixed-choices: 0 for every choice (the option's None)."""
    return int(text) or None


def check_arm_options(parser, args) -> None:
    """The weight-sharing arms' options as the search will check them, before any arm
    runs."""
    from nas.core.errors import ConfigError
    from nas.search.strategies import check_options

    for name in {"oneshot", "dnas", "distdnas"} & set(args.arms):
        try:
            check_options(name, config(name, args)["strategy"]["options"])
        except ConfigError as err:
            prefix = "--oneshot-" if name == "oneshot" else "--dnas-"
            flag = prefix + err.field.rsplit(".", 1)[-1].replace("_", "-")
            parser.error(f"{flag}: {err.message}")


def config(name: str, args) -> dict:
    """The arm's search: ctr_asha.yaml's, with its strategy (and no scheduler) for the
    weight-sharing arms; no baselines; ``--minutes`` long."""
    base = yaml.safe_load((REPO / "examples/searches/ctr_asha.yaml").read_text())
    base |= {"name": f"full-budget-{slug(name)}", "seed": args.seed, "include_baselines": False}
    base["budget"] |= {"steps": STEPS, "max_minutes": args.minutes, "select_best": SELECT_BEST}
    if ARMS[name] is not None:
        base["strategy"] = ARMS[name]
        if name in ("dnas", "distdnas"):
            options = ARMS[name]["options"] | {
                "steps": args.dnas_steps,
                "relaxation": args.dnas_relaxation,
                "mixed_choices": args.dnas_mixed_choices,
                "members_per_penalty": args.dnas_members_per_penalty,
            }
            base["strategy"] = ARMS[name] | {"options": options}
        if name == "oneshot":
            options = ARMS[name]["options"] | {
                "calibration": args.oneshot_calibration,
                "supernet_steps": args.oneshot_supernet_steps,
                "few_shot_steps": args.oneshot_few_shot_steps,
                "eval_rows": args.oneshot_eval_rows,
            }
            base["strategy"] = ARMS[name] | {"options": options}
        base.pop("scheduler")
    return base


def strategy_jobs(search: dict, schema) -> list:
    """The setup jobs a search (its config, as a dict) starts with, their settings as its
    strategy writes them: what the benchmarks that run an arm's job in-process start from."""
    from nas.search.strategies import StrategyContext, create_strategy
    from nas.service.config import validate_config
    from search_spaces import SpaceInputs, create_space

    checked = validate_config(search)
    context = StrategyContext(
        space=create_space(checked.space.name, checked.space.options, SpaceInputs.of(schema)),
        objectives=checked.objective_list(),
        seed=checked.seed,
        train={**checked.train.model_dump(), "threads": checked.resources.cpus_per_trial},
        budget=checked.budget.candidates,
        concurrency=checked.resources.concurrency,
    )
    return create_strategy(checked.strategy.name, checked.strategy.options, context).jobs()


def oneshot_tau(row: dict, args) -> dict:
    """The Kendall tau, against stand-alone training at the full budget (seed 0 of
    ``--ceiling``), of how the oneshot arm ranks those architectures: its ranker's
    estimates where it fitted one, else its supernet's; beside the ceiling (seed 0 against
    seed 1) over the same ones."""
    from fidelity import draw
    from scipy.stats import kendalltau

    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from nas.search.supernet.ranker import CalibratedRanker
    from workers.oneshot import load_supernets
    from workers.trial_data import TrialData

    if not args.ceiling.exists():
        return {"why": f"no {args.ceiling}: run benchmarks/fidelity.py --also-seed 1 for the tau"}
    results = [json.loads(line) for line in args.ceiling.read_text().splitlines()]
    longest = max(r["steps"] for r in results)
    alone = {(r["arch_id"], r["seed"]): r["ne"] for r in results if r["steps"] == longest}
    seeds = sorted({seed for _, seed in alone})
    (job,) = [t for t in row["jobs"] if t.kind == "supernet"]
    if job.status != "completed":
        return {"why": f"oneshot's supernet job did not finish in {args.minutes:g} min: no tau"}
    settings = job.job["settings"]
    state = row["search"].strategy_state
    data = TrialData.from_prepared(load_dataset(args.dataset), "valid")
    supernets = load_supernets(settings, data, job.checkpoint)
    score = supernets.scorer(data, settings["eval_rows"], settings["seed"])
    told = state.get("told", {})
    specs = [
        s
        for s in draw(len({a for a, _ in alone}), args.dataset, seeds[0])
        if all((s.arch_id, seed) in alone for seed in seeds[:2]) and s.arch_id not in told
    ]
    estimated = [score(spec)["ne"] for spec in specs]
    by = "its supernet"
    if state.get("ranker", {}).get("used"):
        fitted = [ArchSpec.from_dict(d) for d in settings["calibration"]]
        fitted = [s for s in fitted if told.get(s.arch_id)]
        ranker = CalibratedRanker.fit(
            supernets.shared.space,
            fitted,
            [state["estimates"][s.arch_id]["ne"] for s in fitted],
            [told[s.arch_id][0] for s in fitted],
        )
        estimated = list(ranker.predict(specs, estimated))
        by = f"its ranker, fitted on {len(fitted)} trainings"
    first = [alone[(s.arch_id, seeds[0])] for s in specs]
    second = [alone[(s.arch_id, seeds[1])] for s in specs]
    return {
        "tau": float(kendalltau(estimated, first).statistic),
        "tau_ceiling": float(kendalltau(first, second).statistic),
        "archs": len(specs),
        "by": by,
    }


def read_log_flops(rows: dict) -> None:
    """Each arm's ``log_flops`` reading: its hypervolume of NE x log10(FLOPs), and its times to
    95% and 100% of sampling's final one. On linear FLOPs the smallest members' points span
    almost the whole FLOPs axis, so the first cheap candidates give most of the hypervolume
    (sampling's first minute, 95%); in log10 each order of magnitude of FLOPs counts the
    same, so the front's larger members count too."""
    from search_efficiency import hypervolume_curve

    curves = {
        name: hypervolume_curve(row["trials"], row["started"], log_flops=True)
        for name, row in rows.items()
    }
    final = curves["sampling"][-1][1] if curves["sampling"] else 0.0
    for name, row in rows.items():
        row["log_flops"] = {
            "curve": curves[name],
            "to_target": first_time(curves[name], TARGET * final),
            "to_final": first_time(curves[name], final),
        }


def against_sampling(rows: dict) -> list[str]:
    """Each weight-sharing arm's times as shares of sampling's (issue 36's target: a third),
    read two ways: to 95% of sampling's final hypervolume, against sampling's own time to
    it; and to all of it (sampling's final front), against the time sampling took to find
    its final front."""
    base = rows["sampling"]
    lines = []
    for name, row in rows.items():
        if name == "sampling":
            continue
        parts = []
        for key, what in (("to_target", f"{TARGET:.0%}"), ("to_final", "100%")):
            if row[key] is None or not base[key]:
                parts.append(f"{what} never")
            else:
                share = row[key] / base[key]
                parts.append(
                    f"{what} at {row[key] / 60:.1f} min, {share:.2f} of sampling's "
                    f"{base[key] / 60:.1f}"
                )
        lines.append(f"{name} against sampling's final hypervolume: " + "; ".join(parts))
    return lines


def front(row: dict) -> list:
    """The arm's completed trials on its NE x FLOPs front."""
    import numpy as np

    from nas.search.pareto import front_indices

    done = [t for t in row["trials"] if t.status == "completed"]
    if not done:
        return []
    values = np.array([[t.metrics["ne"], t.metrics["flops"]] for t in done])
    return [done[i] for i in front_indices(values, ["min", "min"])]


def front_flops(row: dict) -> tuple[float, float]:
    flops = [t.metrics["flops"] for t in front(row)] or [0.0]
    return min(flops), max(flops)


def penalties(row: dict) -> dict[str, list[dict]]:
    """A DNAS arm's penalties: the members each decoded (most likely first), their FLOPs
    and NE once trained, and whether each is on the arm's front (which penalties the front
    needed)."""
    from nas.arch.spec import ArchSpec

    trained = {t.arch_id: t for t in row["trials"] if t.status == "completed"}
    on_front = {t.arch_id for t in front(row)}
    out = {}
    for penalty, members in (row["search"].strategy_state or {}).get("decoded", {}).items():
        out[penalty] = []
        for spec in members:
            arch_id = ArchSpec.from_dict(spec).arch_id
            t = trained.get(arch_id)
            out[penalty].append(
                {
                    "arch_id": arch_id,
                    "flops": None if t is None else t.metrics["flops"],
                    "ne": None if t is None else t.metrics["ne"],
                    "on_front": arch_id in on_front,
                }
            )
    return out


def minutes_or_none(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 60


def share(curve: list, rows: dict) -> float | None:
    """An arm's final log10(FLOPs) hypervolume as a share of sampling's."""
    base = rows["sampling"]["log_flops"]["curve"]
    return curve[-1][1] / base[-1][1] if curve and base else None


def summary(rows: dict, tau: dict) -> dict:
    return {
        "tau": tau.get("tau"),
        "tau_ceiling": tau.get("tau_ceiling"),
        "arms": {
            name: {
                "minutes_to_95": minutes_or_none(row["to_target"]),
                "minutes_to_100": minutes_or_none(row["to_final"]),
                "final_hypervolume": row["curve"][-1][1] if row["curve"] else 0.0,
                "full_trainings": sum(t.status == "completed" for t in row["trials"]),
                "stopped_early": sum(t.status == "stopped" for t in row["trials"]),
                "setup_minutes": minutes_or_none(row["setup"]),
                "status": row["status"],
                "log_flops": {
                    "share_of_sampling": share(row["log_flops"]["curve"], rows),
                    "minutes_to_95": minutes_or_none(row["log_flops"]["to_target"]),
                    "minutes_to_100": minutes_or_none(row["log_flops"]["to_final"]),
                },
            }
            | ({"penalties": penalties(row)} if name in ("dnas", "distdnas") else {})
            for name, row in rows.items()
        },
        "sampling_front_flops": front_flops(rows["sampling"]),
    }


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    sys.exit(main())
