"""The report of a retrain (``nas retrain``, ``nas status`` of a retrain, registering its
best): per architecture, test NE, AUC and logloss (each label's too, on a dataset of
several) as mean and standard deviation over seeds, its costs, and its NE difference from
the best baseline (lowest mean test NE) paired by seed, with a 95% t-interval.

The NE it ranks by (``ranked_by``) is the search's first NE objective: ``ne``, or one
label's, ``ne:click``.

Its own module, read from the registry's rows alone, so that showing a retrain does not load
the controller, Ray or torch (``nas/service/retrain.py`` runs one).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from nas.search.objectives import PER_LABEL, split_label
from nas.service.config import SearchConfig
from nas.service.registry import Trial
from nas.service.registry.models import RETRAIN_KIND

COSTS = ("flops", "serving_flops", "params", "latency", "serving_latency")  # those measured


@dataclass(frozen=True)
class RetrainRow:
    label: str
    arch_id: str
    picked_as: list[str]
    baseline: bool
    seeds: list[int]  # those that completed
    metrics: dict[str, tuple[float, float]]  # ne, auc, ne:click...: (mean, std over seeds)
    costs: dict[str, float]
    vs_best: tuple[float, float] | None  # NE minus the best baseline's, paired: (mean, 95% half)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "arch_id": self.arch_id,
            "picked_as": self.picked_as,
            "baseline": self.baseline,
            "seeds": self.seeds,
            **{f"{k}_mean": m for k, (m, _) in self.metrics.items()},
            **{f"{k}_std": s for k, (_, s) in self.metrics.items()},
            **self.costs,
            "ne_minus_best_baseline": None if self.vs_best is None else self.vs_best[0],
            "ne_minus_best_baseline_ci95": None if self.vs_best is None else self.vs_best[1],
        }

    @property
    def labels(self) -> list[str]:
        """The labels measured one by one (a dataset of several), else empty."""
        found = [split_label(k) for k in self.metrics]
        return [label for base, label in found if base == "ne" and label is not None]


@dataclass(frozen=True)
class RetrainReport:
    of: str
    steps: int
    seeds: int
    train_on: str
    rows: list[RetrainRow]  # by mean test NE (``ranked_by``)
    best_baseline: str | None
    counts: dict[str, int]
    ranked_by: str = "ne"

    def to_dict(self) -> dict[str, Any]:
        return {
            "retrain_of": self.of,
            "steps": self.steps,
            "seeds": self.seeds,
            "train_on": self.train_on,
            "split": "test",
            "best_baseline": self.best_baseline,
            "ranked_by": self.ranked_by,
            "counts": self.counts,
            "rows": [r.to_dict() for r in self.rows],
        }


def retrain_report(config: SearchConfig, trials: list[Trial]) -> RetrainReport:
    retrain = config.retrain
    key = config.ne_objective
    done: dict[int, dict[int, dict]] = {}  # pick -> seed -> metrics
    for t in trials:
        if t.kind == RETRAIN_KIND and t.status == "completed":
            done.setdefault(t.job["pick"], {})[t.job["seed"]] = t.metrics
    counts = {s: sum(t.status == s for t in trials) for s in ("completed", "failed", "running")}
    rows = []
    for i, pick in enumerate(retrain.picks):
        runs = done.get(i, {})
        if not runs:
            continue
        first = next(iter(runs.values()))
        measured = [k for k in first if split_label(k)[0] in PER_LABEL]  # ne, ne:click...
        metrics = {
            k: _mean_std([m[k] for m in runs.values()])
            for k in measured
            if all(m.get(k) is not None for m in runs.values())
        }
        costs = {k: first[k] for k in COSTS if k in first}
        rows.append(
            RetrainRow(
                pick.label,
                first["arch_id"],  # what the trials trained: the pick's spec
                pick.picked_as,
                "baseline" in pick.picked_as,
                sorted(runs),
                metrics,
                costs,
                None,
            )
        )
    baselines = [r for r in rows if r.baseline]
    best = min(baselines, key=lambda r: r.metrics[key][0]) if baselines else None
    if best is not None:
        index = {p.label: i for i, p in enumerate(retrain.picks)}
        best_runs = done[index[best.label]]
        rows = [
            r if r is best else replace(r, vs_best=_paired(done[index[r.label]], best_runs, key))
            for r in rows
        ]
    rows.sort(key=lambda r: r.metrics[key][0])
    return RetrainReport(
        retrain.of,
        config.budget.steps,
        retrain.seeds,
        retrain.train_on,
        rows,
        best.label if best else None,
        counts,
        key,
    )


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _paired(runs: dict[int, dict], base: dict[int, dict], key: str) -> tuple[float, float] | None:
    """Mean difference of figure ``key`` over the seeds both completed, with a 95%
    t-interval's half-width (NaN with one seed: no spread to go on)."""
    from scipy import stats

    seeds = sorted(set(runs) & set(base))
    if not seeds:
        return None
    diffs = [runs[s][key] - base[s][key] for s in seeds]
    if len(diffs) < 2:
        return diffs[0], math.nan
    half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return statistics.mean(diffs), half
