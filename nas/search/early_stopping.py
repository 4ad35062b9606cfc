"""Early stopping in searches: Ray Tune's schedulers (ASHA, the median stopping rule),
chosen and configured in the search YAML.

    scheduler: {name: asha, options: {grace_steps: 250, reduction_factor: 3}}
    scheduler: {name: median, options: {grace_steps: 500, every_steps: 500}}

A searched candidate under a scheduler stops at its rungs (``rung_steps``), measures NE on a
fixed validation subsample (the same rows for every trial of the search) and reports it to
Tune; the scheduler says whether it trains on. The rungs are ASHA's own milestones
(grace_steps x reduction_factor^k), or every ``every_steps`` from ``grace_steps`` for the
median rule. A candidate that survives trains to ``budget.steps``, so the cheap rungs only
filter and the front is measured at the full budget (multi-fidelity, as ASHA intends).

Baselines report their rungs too, as yardsticks: the scheduler files their figures with the
candidates' (so the first candidates at a rung are judged against hand-designed models, not
waved through an empty rung) but never stops them; they always train to the end.

ASHA ranks a rung in Pareto order over the search's objectives (``rank: pareto``, the
default): NE (and AUC, log loss) as measured at the rung, the cost objectives (FLOPs,
latency...) as they are. A cheap candidate with a fair NE goes on, as it may be on the
front; ranking by NE alone (``rank: ne``) stops it whenever costlier ones learn faster.
This is MO-ASHA (Schmucker et al. 2021) with NSGA-II's selection order (nas/search/pareto.py).

The decisions are Tune's (``nas/service/tune_glue.py`` wraps its schedulers); this module holds
what the user chooses and where the rungs fall.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field

from nas.core.catalog import Catalog, Options
from nas.core.errors import ConfigError

RUNG_METRIC = "rung_ne"  # what a rung report carries for the scheduler; lower is better
RUNG_TIME = "step"  # the scheduler's clock: optimizer steps done
RUNG_LOSSES = "rung_losses"  # the search's objectives at a rung, each a loss (lower is better)
DEFAULT_EVAL_ROWS = 50_000  # validation rows NE is measured on at a rung or check


class SchedulerOptions(Options):
    # Steps every candidate trains before it can be stopped; default: 1/8 of budget.steps.
    grace_steps: int | None = Field(default=None, ge=1)
    # Validation rows NE is measured on at each rung (at most the split's size).
    eval_rows: int = Field(default=DEFAULT_EVAL_ROWS, ge=1000, le=10_000_000)


class Scheduler:
    name: ClassVar[str]
    Options: ClassVar[type[SchedulerOptions]]

    def __init__(self, options: SchedulerOptions, steps: int):
        self.options, self.steps = options, steps
        self.grace = options.grace_steps or max(1, steps // 8)
        if self.grace >= steps:
            raise ConfigError(
                "scheduler.options.grace_steps",
                f"{self.grace} is not below budget.steps ({steps}): no candidate could ever "
                f"be stopped; use fewer grace steps (e.g. {max(1, steps // 8)}), or drop the "
                "scheduler",
            )

    def rung_steps(self) -> list[int]:
        """The steps (below the budget) at which a candidate measures and reports NE."""
        raise NotImplementedError

    def tune_kwargs(self) -> dict:
        """Keyword arguments of the Ray Tune scheduler (besides time_attr, metric, mode)."""
        raise NotImplementedError

    def judged_by(self) -> str:
        """How a candidate is judged at a rung, in words (``nas status``)."""
        raise NotImplementedError


SCHEDULERS: Catalog[Scheduler] = Catalog("scheduler", "scheduler")


class AshaOptions(SchedulerOptions):
    reduction_factor: float = Field(default=3.0, gt=1, le=100)  # keep the best 1/rf per rung
    # How a rung is ranked: in Pareto order over all the objectives, or by NE alone.
    rank: Literal["pareto", "ne"] = "pareto"


@SCHEDULERS.register
class Asha(Scheduler):
    """Asynchronous successive halving (Li et al. 2020): at each rung, a candidate goes on
    only if it is in the best 1/reduction_factor of those that reached the rung, ranked in
    Pareto order over the objectives (MO-ASHA) or by NE alone (``rank: ne``)."""

    name = "asha"
    Options = AshaOptions

    def rung_steps(self) -> list[int]:
        rf, steps = self.options.reduction_factor, []
        k = 0
        while (milestone := math.ceil(self.grace * rf**k - 1e-9)) < self.steps:
            steps.append(milestone)
            k += 1
        return steps

    def judged_by(self) -> str:
        if self.options.rank == "ne":
            return "ranked by NE"
        return "ranked in Pareto order over the objectives"

    def tune_kwargs(self) -> dict:
        return {
            "max_t": self.steps,
            "grace_period": self.grace,
            "reduction_factor": self.options.reduction_factor,
        }


class MedianOptions(SchedulerOptions):
    every_steps: int | None = Field(default=None, ge=1)  # default: 1/4 of budget.steps
    min_samples: int = Field(default=3, ge=1, le=1000)  # candidates to take a median over


@SCHEDULERS.register
class Median(Scheduler):
    """The median stopping rule (Golovin et al. 2017, Vizier): a candidate stops when its
    best NE so far is worse than the median of the others' running means at that step."""

    name = "median"
    Options = MedianOptions

    def rung_steps(self) -> list[int]:
        every = self.options.every_steps or max(1, self.steps // 4)
        return list(range(self.grace, self.steps, every))

    def judged_by(self) -> str:
        return "against the median NE"

    def tune_kwargs(self) -> dict:
        return {
            "grace_period": self.grace,
            "min_samples_required": self.options.min_samples,
        }


def create_scheduler(name: str, options: dict | None, steps: int) -> Scheduler:
    """The scheduler a search config names, its options and grace checked against the
    budget (``ConfigError`` naming the field)."""
    return SCHEDULERS.get(name)(SCHEDULERS.options(name, options), steps)
