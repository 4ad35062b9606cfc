"""Named objectives a search can optimise, each with a direction.

An objective reads one number from a trial's result (``workers.trial.TrialResult``). Its
default reference point bounds the hypervolume: a value no candidate should be worse than.
NE 1.0 is "no better than predicting the training positive rate"; AUC 0.5 is chance. FLOPs
and parameter counts have no natural bound, so their reference is 1.1x the worst value seen
unless the search config states one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nas.errors import UnknownNameError

SERVING_CANDIDATES = 100  # candidates per request that ``serving_flops`` assumes


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "min" | "max"
    description: str
    reference: float | None = None  # the natural bound, when there is one

    def worst_reference(self, seen: Iterable[float]) -> float:
        """A reference slightly worse than every value seen (for objectives without one)."""
        if self.direction == "min":
            worst = float(max(seen))
            return worst * 1.1 if worst > 0 else worst + 1.0
        worst = float(min(seen))
        return worst * 0.9 if worst > 0 else worst - 1.0


OBJECTIVES: dict[str, Objective] = {
    o.name: o
    for o in (
        Objective("ne", "min", "normalized entropy on the held-out split", 1.0),
        Objective("auc", "max", "ROC AUC on the held-out split", 0.5),
        Objective("logloss", "min", "log loss on the held-out split"),
        Objective("flops", "min", "FLOPs per example (2 per multiply-add, fvcore)"),
        Objective(
            "serving_flops",
            "min",
            f"FLOPs per candidate when each request scores {SERVING_CANDIDATES} candidates and "
            "its request side runs once (request-oriented inference; analytic)",
        ),
        Objective("params", "min", "trainable parameters"),
    )
}


def get_objective(name: str, field: str = "objectives") -> Objective:
    if name not in OBJECTIVES:
        raise UnknownNameError(field, "objective", name, OBJECTIVES)
    return OBJECTIVES[name]
