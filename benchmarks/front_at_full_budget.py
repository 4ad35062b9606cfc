"""Does a search's front hold when it is trained properly? Its searched front points and its
baselines, retrained at full budget on several seeds and scored on the test split, through
``nas retrain`` as a user runs it.

    python benchmarks/front_at_full_budget.py SEARCH_ID [--runs DIR] [--steps N] [--seeds 3]
        [--baseline examples/specs/dcnv2.json]

Runs ``nas retrain SEARCH_ID --pick front --seeds S [--steps N] --json`` with the search's
stores under ``--runs`` (default: $RECNAS_RUNS_DIR or ./nas-runs), then says whether the
front meets the bar of issue 15 against the DCNv2 baseline: a searched point that beats
DCNv2's mean test NE at no more FLOPs, or one within DCNv2's seed standard deviation at no
more than 40% of its FLOPs. The search must have trained DCNv2 as a baseline, or be given
it with ``--baseline`` (``nas retrain --baseline``: trained beside the front, same seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REFERENCE = "dcnv2"
CHEAP = 0.40  # of DCNv2's FLOPs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("search_id")
    parser.add_argument("--runs", type=Path, default=None, help="the search's runs folder")
    parser.add_argument("--steps", type=int, default=None, help="default: budget.steps")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="a spec file (repeatable)"
    )
    args = parser.parse_args()
    env = dict(os.environ)
    if args.runs is not None:
        env["RECNAS_RUNS_DIR"] = str(args.runs.resolve())
    command = [sys.executable, "-m", "nas.cli", "retrain", args.search_id, "--pick", "front"]
    command += ["--seeds", str(args.seeds), "--json"]
    if args.steps:
        command += ["--steps", str(args.steps)]
    for spec in args.baseline:
        command += ["--baseline", str(spec.resolve())]
    print("$ nas " + " ".join(command[3:]), flush=True)
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return done.returncode
    report = json.loads(done.stdout)
    verdict(report)
    return 0


def verdict(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = {r["label"]: r for r in report["rows"]}
    if REFERENCE not in rows:
        print(f"the search has no {REFERENCE} baseline to hold its front against")
        return
    base = rows[REFERENCE]
    table = Table(
        title=f"{report['retrain_of']}: test split, {report['steps']} steps, "
        f"{report['seeds']} seeds (retrain {report['id']})"
    )
    for column in ("candidate", "FLOPs", "vs DCNv2", "NE", f"NE - {report['best_baseline']}"):
        table.add_column(column, justify="left" if column == "candidate" else "right")
    held = []
    for r in report["rows"]:
        share = r["flops"] / base["flops"]
        diff = r["ne_minus_best_baseline"]
        table.add_row(
            r["label"] + (" (baseline)" if r["baseline"] else ""),
            f"{r['flops'] / 1e3:.1f}K",
            f"{share:.0%}",
            f"{r['ne_mean']:.4f} ± {r['ne_std']:.4f}",
            "-" if diff is None else f"{diff:+.4f} ± {r['ne_minus_best_baseline_ci95']:.4f}",
        )
        if r["baseline"]:
            continue
        if r["ne_mean"] < base["ne_mean"] and share <= 1:
            held.append(f"{r['label']} beats DCNv2's test NE at {share:.0%} of its FLOPs")
        elif r["ne_mean"] - base["ne_mean"] <= base["ne_std"] and share <= CHEAP:
            held.append(
                f"{r['label']} is within DCNv2's seed std ({base['ne_std']:.4f}) at "
                f"{share:.0%} of its FLOPs"
            )
    console = Console(record=True, width=110)
    console.print(table)
    if held:
        console.print("The front holds at full budget: " + "; ".join(held) + ".")
    else:
        console.print(
            "The front does not hold at full budget: no searched point beats DCNv2 at no "
            f"more FLOPs, nor comes within its seed std ({base['ne_std']:.4f}) at <= "
            f"{CHEAP:.0%} of them."
        )


if __name__ == "__main__":
    sys.exit(main())
