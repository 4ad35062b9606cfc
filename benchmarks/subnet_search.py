"""How long a one-shot job's subnet search takes per member: the optuna strategy's NSGA-II,
whose asks share one search-space cache, against Optuna's own sampler in the same run.

    python benchmarks/subnet_search.py [--members 500 1000] [--eval-rows 8192] [--json]

Trains a short few-shot supernet as the job of ``examples/searches/oneshot_full_budget.yaml``
does (its settings as the strategy writes them, with fewer steps and one thread), then runs
the job's subnet search (NSGA-II on NE and FLOPs) for each ``--members`` budget twice: as
recnas runs it, and with a plain ``optuna.samplers.NSGAIISampler`` per ask (a search-space
cache of its own each time). Prints the seconds per member, split into scoring (the
supernet's forward, the metrics and the analytic cost) and asking (the sampler), and checks
that both ways score the same members in the same order.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--eval-rows", type=int, default=8192)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if min(args.members) < 1 or args.eval_rows < 256:
        parser.error("--members must be >= 1 and --eval-rows >= 256")

    import optuna
    import torch
    import yaml
    from full_budget_search import EXAMPLES, strategy_jobs
    from rich.console import Console
    from rich.table import Table

    from nas.data import load_dataset
    from nas.search.strategies import optuna as optuna_strategy
    from workers import oneshot
    from workers.supernet_job import job_supernet
    from workers.trial_data import TrialData

    torch.set_num_threads(1)
    search = yaml.safe_load((EXAMPLES / "oneshot_full_budget.yaml").read_text())
    prepared = load_dataset(search["dataset"])
    (job,) = strategy_jobs(search, prepared.schema)
    settings = job.settings | {
        "threads": 1,
        "steps": 200,  # the weights' quality does not change the cost of scoring
        "few_shot_steps": 50,
        "checkpoint_every": 10**9,
        "subnet_budget": 1,
        "eval_rows": args.eval_rows,
        "calibration": [],
    }
    data = TrialData.from_prepared(prepared, "valid")
    net = job_supernet(settings, data)
    supernets, _ = oneshot.train_supernet(
        net, data, oneshot.OneShotSettings(**settings), None, lambda *_: None
    )
    score = supernets.scorer(data, args.eval_rows, settings["seed"])
    shared_cache = optuna_strategy._nsga2

    def own_cache(optuna_module):
        return lambda intersection, **options: optuna_module.samplers.NSGAIISampler(**options)

    rows = []
    for members in args.members:
        s = oneshot.OneShotSettings(**(settings | {"subnet_budget": members}))
        orders = {}
        for way, factory in (("recnas", shared_cache), ("optuna's own", own_cache)):
            optuna_strategy._nsga2 = factory
            scoring = 0.0

            def timed(spec):
                nonlocal scoring
                began = time.perf_counter()
                metrics = score(spec)
                scoring += time.perf_counter() - began
                return metrics

            began = time.perf_counter()
            scored = oneshot.search_subnets(net.space, timed, s, lambda *_: None)
            seconds = time.perf_counter() - began
            orders[way] = [spec.arch_id for spec, _ in scored]
            rows.append(
                {
                    "members": len(scored),
                    "sampler": way,
                    "seconds": seconds,
                    "ms_per_member": 1000 * seconds / len(scored),
                    "scoring_ms": 1000 * scoring / len(scored),
                    "asking_ms": 1000 * (seconds - scoring) / len(scored),
                }
            )
        optuna_strategy._nsga2 = shared_cache
        if orders["recnas"] != orders["optuna's own"]:
            print(f"the two samplers scored different members at {members}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps({"eval_rows": args.eval_rows, "optuna": optuna.__version__, "runs": rows}))
        return 0
    table = Table(title=f"one-shot subnet search, {args.eval_rows} rows a member, 1 thread")
    for column in ("members", "sampler", "seconds", "ms a member", "scoring (ms)", "asking (ms)"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["members"]),
            r["sampler"],
            f"{r['seconds']:.1f}",
            f"{r['ms_per_member']:.0f}",
            f"{r['scoring_ms']:.0f}",
            f"{r['asking_ms']:.1f}",
        )
    Console().print(table)
    print("both samplers scored the same members in the same order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
