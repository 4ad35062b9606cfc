"""The early-stopping scheduler's bookkeeping for one search: where trials report (the rung
plan), which trials it stopped, and each rung report as the vector of losses it ranks.

The scheduler itself is Ray Tune's (``nas/service/tune_glue.py``); this is what the
controller keeps for it: a candidate's objectives at a rung are the quality figures the rung
measured and the costs as they are (the costs do not change as a model trains).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nas.search.early_stopping import RUNG_LOSSES, RUNG_METRIC, RUNG_TIME, Scheduler
from nas.search.objectives import get_objective
from nas.search.pareto import as_losses
from workers.messages import RungPlan

Costs = Callable[[dict[str, Any], dict[str, Any]], dict[str, float]]  # (spec, metrics) -> costs


class RungBook:
    def __init__(self, scheduler: Scheduler | None, objectives: list[str], costs: Costs):
        self.scheduler = scheduler  # None: every candidate trains in full
        self.objectives = objectives
        self.costs = costs
        self.stopped: set[str] = set()  # Tune trial ids the scheduler stopped at a rung

    def plan(self) -> RungPlan | None:
        """Where a candidate reports to the scheduler (None: no scheduler)."""
        if self.scheduler is None:
            return None
        return RungPlan(tuple(self.scheduler.rung_steps()), self.scheduler.options.eval_rows)

    def stop(self, tune_id: str) -> None:
        """The scheduler ended this trial at a rung (its record follows from Tune)."""
        self.stopped.add(tune_id)

    def losses_at(self, spec: dict[str, Any], metrics: dict[str, Any]) -> list[float]:
        """The search's objectives at a running trial's latest rung (``metrics``: its
        report's ``TrialResult``)."""
        return self.losses(spec, metrics, metrics["rungs"][-1])

    def replay(self, spec: dict[str, Any], metrics: dict[str, Any]) -> list[dict[str, Any]]:
        """A finished trial's reports at its rungs, as the scheduler heard them (replayed
        into a resumed search's scheduler)."""
        return [
            {
                RUNG_TIME: rung["step"],
                RUNG_METRIC: rung["ne"],
                RUNG_LOSSES: self.losses(spec, metrics, rung),
            }
            for rung in metrics["rungs"]
        ]

    def losses(self, spec: dict[str, Any], metrics: dict, rung: dict) -> list[float]:
        """Each objective as a loss (lower is better): the quality figures the rung
        measured, the costs as they are."""
        figures = metrics | self.costs(spec, metrics) | rung
        values = [[float(figures[name]) for name in self.objectives]]
        directions = [get_objective(name).direction for name in self.objectives]
        return as_losses(values, directions)[0].tolist()
