"""When does each DNAS penalty's decoded architecture settle? Read from a finished DNAS
search's logged logits (each job logs every decision's logits every ``log_every`` steps), the
architecture each penalty would have decoded at each logged step, and the step from which it
decodes its final one.

    .venv/bin/python benchmarks/dnas_settling.py nas-runs/full_budget_search-n/dnas

It says what a stop on a settled decode (DARTS+: end a job once its architecture has not
changed for N steps) could save, and what it could cost: a penalty that holds one
architecture for N steps and then moves on would be stopped on the first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlflow import MlflowClient
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nas.data import load_dataset  # noqa: E402
from nas.search.supernet.distributions import decoded_by_step, settled_from  # noqa: E402
from nas.service.config import load_config  # noqa: E402
from search_spaces.base import SpaceInputs  # noqa: E402
from search_spaces.decisions import label  # noqa: E402
from search_spaces.registry import create_space  # noqa: E402


def trajectory(client: MlflowClient, run_id: str, space) -> dict:
    """A DNAS job's logged logits, read back from its MLflow run in the form the job keeps
    them (``{"step": [...], "alpha": {decision: {choice: [logit per step]}}}``)."""
    history = {
        (d.name, i): {m.step: m.value for m in client.get_metric_history(run_id, name)}
        for d in space.decisions
        for i, name in enumerate(f"alpha.{d.name}.{label(c)}" for c in d.choices)
    }
    steps = sorted({step for logged in history.values() for step in logged})
    return {
        "step": steps,
        "alpha": {
            d.name: {
                i: [history[d.name, i].get(s, 0.0) for s in steps] for i in range(len(d.choices))
            }
            for d in space.decisions
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="the DNAS search's runs folder")
    parser.add_argument("--config", type=Path, help="its search YAML (default: the folder's)")
    parser.add_argument("--hold", type=int, default=100, help="N of the stop rule (steps)")
    args = parser.parse_args()
    config_path = args.config or next(args.runs.glob("*.yaml"))
    config = load_config(config_path)
    schema = load_dataset(config.dataset).schema
    space = create_space(config.space.name, config.space.options, SpaceInputs.of(schema))
    client = MlflowClient(f"sqlite:///{(args.runs / 'mlflow.db').resolve()}")
    jobs = [
        run
        for experiment in client.search_experiments()
        for run in client.search_runs([experiment.experiment_id], "tags.kind = 'dnas'")
    ]
    table = Table(title=f"{config.name}: when each penalty's decode settles", title_justify="left")
    for column in ("job", "decoded", "settled from step", "of", "held >= N steps, then left"):
        table.add_column(column)
    for run in sorted(jobs, key=lambda r: r.info.run_name):
        seen = [
            (step, arch[:12])
            for step, arch in decoded_by_step(space, trajectory(client, run.info.run_id, space))
        ]
        final, settled = seen[-1][1], settled_from(seen)
        held = []  # an architecture kept for ``hold`` steps or more, then dropped
        start = seen[0]
        for step, arch in seen[1:] + [(seen[-1][0] + 1, None)]:
            if arch != start[1]:
                if start[1] != final and step - start[0] >= args.hold:
                    held.append(f"{start[1]} ({start[0]}-{step})")
                start = (step, arch)
        table.add_row(
            run.info.run_name, final, str(settled), str(seen[-1][0]), ", ".join(held) or "-"
        )
    Console().print(table)


if __name__ == "__main__":
    main()
