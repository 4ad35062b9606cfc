"""What a search has found so far, computed from its registry rows: the front, hypervolume,
knee, best values. The CLI, the controller and the MLflow parent run all show this one view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nas.search.pareto import front_indices, hypervolume, knee
from nas.service.config import SearchConfig
from nas.service.registry.models import Trial


@dataclass(frozen=True)
class Candidate:
    number: int
    arch_id: str
    label: str  # the baseline's name, else the arch_id
    is_baseline: bool
    values: list[float]
    metrics: dict[str, Any]
    mlflow_run_id: str | None

    def row(self, objectives: list[str]) -> dict[str, Any]:
        return {
            "trial": self.number,
            "label": self.label,
            "arch_id": self.arch_id,
            "baseline": self.is_baseline,
            **dict(zip(objectives, self.values, strict=True)),
            "auc": self.metrics.get("auc"),
            "params": self.metrics.get("params"),
            "mlflow_run_id": self.mlflow_run_id,
        }


@dataclass(frozen=True)
class SearchSummary:
    objectives: list[str]
    directions: list[str]
    counts: dict[str, int]  # trials by status, plus searched/baselines/budget
    candidates: list[Candidate]  # every completed trial (not those stopped early)
    front: list[Candidate]  # non-dominated, sorted by the first objective
    reference: list[float]  # the hypervolume's reference point
    hypervolume: float
    knee: Candidate | None
    best: dict[str, float] = field(default_factory=dict)  # per objective

    @property
    def searched_on_front(self) -> int:
        return sum(not c.is_baseline for c in self.front)

    def front_rows(self) -> list[dict[str, Any]]:
        return [c.row(self.objectives) for c in self.front]

    def to_dict(self) -> dict[str, Any]:
        return {
            "objectives": dict(zip(self.objectives, self.directions, strict=True)),
            "counts": self.counts,
            "front": self.front_rows(),
            "reference": dict(zip(self.objectives, self.reference, strict=False)),
            "hypervolume": self.hypervolume,
            "knee": self.knee.row(self.objectives) if self.knee else None,
            "best": self.best,
            "searched_on_front": self.searched_on_front,
        }


def summarize(
    config: SearchConfig, trials: list[Trial], objectives: list[str] | None = None
) -> SearchSummary:
    """The front over ``objectives`` (default: the search's own) of the completed trials."""
    from nas.search.objectives import get_objective, is_objective

    trials = [t for t in trials if t.is_candidate]  # setup jobs are not on the front
    names = objectives or [o.name for o in config.objectives]
    specs = [get_objective(n) for n in names]
    directions = [o.direction for o in specs]
    done = [t for t in trials if t.status == "completed" and t.metrics]
    for name in names if objectives else ():  # asked for: each measured on every trial
        if any(t.metrics.get(name) is None for t in done):
            from nas.core.errors import ConfigError

            measured = [k for k, v in done[0].metrics.items() if v is not None and is_objective(k)]
            raise ConfigError(
                "--objectives",
                f"{name} was not measured by this search's trials; they have "
                + ", ".join(sorted(measured)),
            )
    candidates = [
        Candidate(
            t.number,
            t.arch_id,
            t.label or t.arch_id,
            t.is_baseline,
            [float(t.metrics[n]) for n in names],
            t.metrics,
            t.mlflow_run_id,
        )
        for t in done
    ]
    statuses = ("completed", "failed", "running", "cancelled", "stopped")
    counts = {s: sum(t.status == s for t in trials) for s in statuses}
    counts["searched"] = sum(not t.is_baseline for t in trials)
    counts["baselines"] = sum(t.is_baseline for t in trials)
    counts["budget"] = config.budget.candidates
    if not candidates:
        return SearchSummary(names, directions, counts, [], [], [], 0.0, None)
    values = np.array([c.values for c in candidates])
    front = [candidates[i] for i in front_indices(values, directions)]
    front.sort(key=lambda c: c.values[0] * (1 if directions[0] == "min" else -1))
    # The config's reference (its own, or the objective's natural one); for an objective
    # outside the config, the natural one; failing both, just worse than every value seen.
    stated = dict(zip([o.name for o in config.objectives], config.references(), strict=True))
    reference = []
    for k, (name, objective) in enumerate(zip(names, specs, strict=True)):
        bound = stated.get(name, objective.reference)
        reference.append(bound if bound is not None else objective.worst_reference(values[:, k]))
    knee_index = knee(values, directions)
    best = {
        n: float(values[:, k].min() if d == "min" else values[:, k].max())
        for k, (n, d) in enumerate(zip(names, directions, strict=True))
    }
    return SearchSummary(
        names,
        directions,
        counts,
        candidates,
        front,
        reference,
        hypervolume(values, directions, reference),
        candidates[knee_index] if knee_index is not None else None,
        best,
    )
