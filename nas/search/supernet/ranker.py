"""A calibrated ranker (Neural Predictor, Wen et al. 2020; AceNAS, Zhang et al. 2021): a
small model, fitted on a few members trained stand-alone, that maps what the supernet scored
a member and the member's family to what stand-alone training gives it.

    ranker = CalibratedRanker.fit(space, specs, scores, alone)  # K members trained alone
    ranker.predict(others, their_scores)                        # stand-alone estimates
    spread_over_families(space, candidates, k)  # which K to train: the families evenly

A supernet's errors are mostly by family: on ``ctr_stack`` it underrates two-layer members
and some blocks against others (benchmarks/README.md). So the inputs are the supernet's
score and the family, one-hot: the values of the space's structural decisions, those another
decision depends on (``depth``, each layer's ``block``). The model is ridge regression on
standardised inputs, its penalty chosen by leave-one-out error (scikit-learn's ``RidgeCV``):
with a dozen or two results it needs a strong, data-chosen penalty. FLOPs and parameters are
left out: on ``ctr_stack`` they do not rank NE (Kendall tau 0.02), and each input more
costs a few results' worth of fit at this size.

Which K members to train matters as much as the model: the ranker fits one offset per value
of a structural decision, and K drawn at random leave rare values with one result or none,
which it then cannot correct. So the K are spread evenly over those values (a balanced
design, as in design of experiments); on ``ctr_stack`` that ranks with a Kendall tau up to
0.05 higher than K random draws at K = 8-16 (0.02-0.03 on average over two supernets), the
same at K = 24 (``benchmarks/supernet_ranking.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nas.arch.spec import ArchSpec
from search_spaces import decisions as space_decisions
from search_spaces.base import SearchSpace

ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)  # ridge penalties, chosen by leave-one-out
MIN_RESULTS = 4  # fewer stand-alone results fit nothing: the supernet's scores stand


def structural_decisions(space: SearchSpace) -> list[str]:
    """The decisions another decision requires: what sets a member's family."""
    required = {name for d in space.decisions for name, _ in d.requires}
    return [d.name for d in space.decisions if d.name in required]


def spread_over_families(
    space: SearchSpace, candidates: Sequence[ArchSpec], k: int
) -> list[ArchSpec]:
    """``k`` of ``candidates`` (distinct members, in random order) with each value of the
    space's structural decisions as evenly represented as ``k`` allows: in turn, the first
    candidate whose values have been chosen least so far (their mean count). Without
    structural decisions, the first ``k``."""
    families = [_family(space, spec) for spec in candidates]
    counts: dict[tuple[str, object], int] = {}

    def chosen_before(i: int) -> float:
        values = families[i].items()
        return sum(counts.get(v, 0) for v in values) / len(values) if values else 0.0

    left, picked = list(range(len(candidates))), []
    for _ in range(min(k, len(candidates))):
        best = min(left, key=chosen_before)  # min keeps the first of equals: the random order
        left.remove(best)
        picked.append(candidates[best])
        for value in families[best].items():
            counts[value] = counts.get(value, 0) + 1
    return picked


class CalibratedRanker:
    def __init__(self, space: SearchSpace, model, levels: list[tuple[str, object]]):
        self.space, self.model, self.levels = space, model, levels

    @classmethod
    def fit(
        cls,
        space: SearchSpace,
        specs: Sequence[ArchSpec],
        scores: Sequence[float],
        alone: Sequence[float],
    ) -> CalibratedRanker:
        """Fitted on ``specs``, scored ``scores`` by the supernet and ``alone`` by
        stand-alone training (the same objective). Needs ``MIN_RESULTS`` of them."""
        from sklearn.linear_model import RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if len(specs) < MIN_RESULTS:
            raise ValueError(f"a ranker needs {MIN_RESULTS} results, got {len(specs)}")
        seen = {(n, v) for spec in specs for n, v in _family(space, spec).items()}
        levels = sorted(seen, key=repr)  # only values some result has: others inform nothing
        ranker = cls(space, make_pipeline(StandardScaler(), RidgeCV(alphas=ALPHAS)), levels)
        ranker.model.fit(ranker._inputs(specs, scores), np.asarray(alone, dtype=float))
        return ranker

    def predict(self, specs: Sequence[ArchSpec], scores: Sequence[float]) -> np.ndarray:
        return self.model.predict(self._inputs(specs, scores))

    @property
    def penalty(self) -> float:
        """The ridge penalty leave-one-out chose."""
        return float(self.model[-1].alpha_)

    def _inputs(self, specs: Sequence[ArchSpec], scores: Sequence[float]) -> np.ndarray:
        rows = []
        for spec, score in zip(specs, scores, strict=True):
            family = _family(self.space, spec)
            rows.append([float(score)] + [float(family.get(n) == v) for n, v in self.levels])
        return np.asarray(rows)


def _family(space: SearchSpace, spec: ArchSpec) -> dict[str, object]:
    """``spec``'s structural decisions and their values (labels), the active ones."""
    values = space.encode(spec)
    return {
        name: space_decisions.label(values[name])
        for name in structural_decisions(space)
        if name in values
    }
