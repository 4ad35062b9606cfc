"""What early stopping buys a search: the same search with and without ASHA, for the same
wall-clock.

    python benchmarks/search_throughput.py [--minutes 15] [--steps 2000] [--warm] [--reuse]

Both arms are ``examples/searches/ctr_asha.yaml`` (regularized evolution over ``ctr_stack`` on
MovieLens-1M, every surviving candidate trained to ``--steps``), run as a user runs it
(``nas submit``, a local Ray, the registry, MLflow), one after the other, each stopped by
``budget.max_minutes``; one keeps the file's ASHA scheduler, the other drops it. Both
train the four baselines (never stopped) beside their candidates; the hypervolume is of the
searched candidates only. With ``--warm`` each arm's stores first hold an earlier, one-candidate
search of the same settings, as a team's registry does after its first search: the measured
search then reuses its baselines (``nas/service/trained_before.py``) instead of training them.

It prints, for each arm: candidates evaluated (trained to the end, or stopped at a rung),
the final hypervolume of NE x FLOPs against the fixed reference point of
``benchmarks/search_efficiency.py``, and the minutes to reach 95% of the no-scheduler
search's final hypervolume, and for ASHA that time as a share of the no-scheduler search's
own (target: at most 60%). Runs are kept under ``--runs``; ``--reuse`` measures them again
without running.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from search_efficiency import REFERENCE, first_time, run_search  # noqa: E402

EXAMPLE = REPO / "examples" / "searches" / "ctr_asha.yaml"
TARGET, SHARE = 0.95, 0.60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="per arm")
    parser.add_argument("--steps", type=int, default=None, help="default: the example's")
    parser.add_argument("--runs", type=Path, default=REPO / "nas-runs" / "search_throughput")
    parser.add_argument("--reuse", action="store_true", help="measure the kept runs again")
    parser.add_argument(
        "--warm", action="store_true", help="an earlier search first: its baselines are reused"
    )
    args = parser.parse_args()
    if args.minutes <= 0 or (args.steps is not None and args.steps < 8):
        parser.error("--minutes must be > 0 and --steps at least 8")
    base = yaml.safe_load(EXAMPLE.read_text())
    base["budget"] = {**base["budget"], "candidates": 1000, "max_minutes": args.minutes}
    if args.steps:
        base["budget"]["steps"] = args.steps
        base["scheduler"]["options"]["grace_steps"] = max(1, args.steps // 8)
    plain = {k: v for k, v in base.items() if k != "scheduler"}
    arms = {"no scheduler": plain, "asha": base}
    print(
        f"search throughput: {base['strategy']['name']} over ctr_stack on {base['dataset']}, "
        f"{base['budget']['steps']} steps per candidate, {args.minutes:g} min per arm, "
        f"scheduler {base['scheduler']}; hypervolume of NE x FLOPs against {REFERENCE}"
        + ("; baselines reused from an earlier search" if args.warm else ""),
        flush=True,
    )
    rows = {}
    for name, config in arms.items():
        print(f"- running {name} ...", flush=True)
        slug = name.replace(" ", "-")
        first = None
        if args.warm:
            budget = {**config["budget"], "candidates": 1, "max_minutes": None}
            first = {**config, "name": f"first-{slug}", "budget": budget}
        rows[name] = run_search(
            args.runs / slug, {**config, "name": f"throughput-{slug}"}, args.reuse, first
        )
    plain_final = rows["no scheduler"]["curve"][-1][1] if rows["no scheduler"]["curve"] else 0
    for row in rows.values():
        row["to_target"] = first_time(row["curve"], TARGET * plain_final)
    render(rows, args)
    return 0


def render(rows: dict, args) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"with and without ASHA, {args.minutes:g} min each")
    for column in (
        "arm",
        "evaluated",
        "trained to the end",
        "stopped early",
        "final hypervolume",
        f"min to {TARGET:.0%} of no-scheduler's",
        "status",
    ):
        table.add_column(column, justify="left" if column in ("arm", "status") else "right")
    for name, row in rows.items():
        trials = row["trials"]
        final = row["curve"][-1][1] if row["curve"] else 0.0
        reached = row["to_target"]
        table.add_row(
            name,
            str(sum(t.status in ("completed", "stopped") for t in trials)),
            str(sum(t.status == "completed" for t in trials)),
            str(sum(t.status == "stopped" for t in trials)),
            f"{final:.4g}",
            "never" if reached is None else f"{reached / 60:.1f}",
            row["status"],
        )
    console = Console()
    console.print(table)
    plain, asha = rows["no scheduler"]["to_target"], rows["asha"]["to_target"]
    if plain and asha:
        share = asha / plain
        verdict = "met" if share <= SHARE else "missed"
        console.print(
            f"ASHA reaches {TARGET:.0%} of the no-scheduler search's final hypervolume in "
            f"{share:.0%} of the time the no-scheduler search takes (target <= {SHARE:.0%}: "
            f"{verdict})"
        )
    else:
        console.print("ASHA never reached the no-scheduler search's 95% mark")


if __name__ == "__main__":
    sys.exit(main())
