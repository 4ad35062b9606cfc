"""One-shot search (Rankitect, NASRec): one supernet trained once, its members ranked with
the supernet's weights, the best of them trained stand-alone.

    job "supernet"   train the space's supernet (single path, or the sandwich rule), and
                     with ``few_shot`` one sub-supernet per family of members, then
                     search its members with evolution or NSGA-II on the search's own
                     objectives, scored with inherited weights (``workers/oneshot.py``)
    ask()            the picks, best first: the front of those scores spread along its
                     first objective, then the next fronts; each is trained stand-alone as
                     an ordinary trial, its supernet estimate logged beside its real figures

With ``calibration: K`` it first asks K members spread evenly over the space's families
(they need no supernet, so they train first, and the supernet job, which scores them too,
takes the workers they leave), waits for their stand-alone results, fits a calibrated
ranker on them (``nas/search/supernet/ranker.py``: the supernet's score and the member's
family), and picks from every member the subnet search scored by the ranker's estimates
instead.

One supernet serves every candidate, so the search's cost is one long training plus
``top_k`` ordinary trials (and K), whatever the size of the space. The estimates are only as
good as the weight sharing: ``benchmarks/supernet_ranking.py`` reports how well they rank.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np
from pydantic import Field

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.objectives import PER_LABEL, get_objective, split_label
from nas.search.pareto import nondominated_ranks
from nas.search.strategies.base import Job, SpaceExhausted, Strategy, StrategyOptions, Waiting
from nas.search.strategies.registry import register_strategy

CANDIDATES_PER_MEMBER = 20  # random draws the calibration members are chosen from, per member


class OneShotOptions(StrategyOptions):
    supernet_steps: int = Field(default=2000, ge=1)
    sampling: Literal["uniform", "sandwich"] = "uniform"
    sandwich_paths: int = Field(default=2, ge=1)  # random members per step besides the extremes
    few_shot: list[str] = []  # decisions whose values split the space into sub-supernets
    few_shot_steps: int = Field(default=1000, ge=1)  # each sub-supernet's training
    subnet_search: Literal["evolution", "nsga2"] = "nsga2"
    subnet_budget: int = Field(default=1000, ge=1)  # members scored on the supernet
    eval_rows: int = Field(default=8192, ge=256)  # held-out rows each member is scored on
    top_k: int | None = Field(default=None, ge=1)  # trained stand-alone; default: the budget
    calibration: int = Field(default=0, ge=0)  # random members trained to fit the ranker
    checkpoint_every: int = Field(default=200, ge=1)


@register_strategy
class OneShot(Strategy):
    name = "oneshot"
    Options = OneShotOptions

    def __init__(self, options: OneShotOptions, context):
        super().__init__(options, context)
        self.picks: list[ArchSpec] | None = None  # None until the supernet job is done
        self.estimates: dict[str, dict[str, float]] = {}  # arch_id -> the supernet's scores
        self.calibration = self._calibration_members()
        self.told: dict[str, list[float] | None] = {}  # a calibration member's results
        self.pool: list[dict[str, Any]] = []  # what the ranker re-ranks, until it has
        self.ranker: dict[str, Any] = {}  # what the ranker was fitted on, once it was

    @classmethod
    def check(cls, options, space, schema, budget: int) -> None:
        from nas.search.supernet import check_supernet
        from nas.search.supernet.ranker import MIN_RESULTS

        check_supernet(space, schema)
        if options.few_shot:
            from nas.search.supernet.few_shot import FewShotSplit

            FewShotSplit(space, options.few_shot)
        k = options.calibration
        if k and not MIN_RESULTS <= k < budget:
            raise ConfigError(
                "strategy.options.calibration",
                f"is {k}: the ranker needs at least {MIN_RESULTS} results, and the calibration "
                f"trainings count in budget.candidates ({budget}), which must leave room for "
                f"the ranked picks: use 0 (no ranker) or {MIN_RESULTS} to {budget - 1}",
            )

    def job_count(self) -> int:
        return 1

    def jobs(self) -> list[Job]:
        if self.picks is not None:
            return []
        o = self.options
        settings = self.job_settings() | {
            "objectives": [objective.name for objective in self.context.objectives],
            "costs": [dataclasses.asdict(cost) for cost in self.context.costs],
            "cost_threads": self.context.train.get("threads", 1),  # a trial's, as it is priced
            "steps": o.supernet_steps,
            "sampling": o.sampling,
            "sandwich_paths": o.sandwich_paths,
            "few_shot": list(o.few_shot),
            "few_shot_steps": o.few_shot_steps if o.few_shot else 0,
            "checkpoint_every": o.checkpoint_every,
            "subnet_search": o.subnet_search,
            "subnet_budget": o.subnet_budget,
            "eval_rows": o.eval_rows,
            "picks": o.top_k or self.context.budget,
            "calibration": [spec.to_dict() for spec in self.calibration],
        }
        return [Job("supernet", "supernet", settings)]

    def job_done(self, job: Job, result: dict[str, Any]) -> None:
        self.picks = [ArchSpec.from_dict(p["spec"]) for p in result["picks"]]
        self.estimates = {
            spec.arch_id: p["estimate"] for spec, p in zip(self.picks, result["picks"], strict=True)
        }
        if self.calibration:
            for spec, estimate in zip(self.calibration, result["calibration"], strict=True):
                self.estimates[spec.arch_id] = estimate
            self.pool = result["pool"]

    def ask(self) -> ArchSpec:
        for spec in self.calibration:
            if spec.arch_id not in self.seen:
                self.seen.add(spec.arch_id)
                return spec
        if self.picks is None:
            raise Waiting("oneshot: its supernet job is still to finish")
        if self.pool and not self.ranker:
            if len(self.told) < len(self.calibration):
                raise Waiting(
                    f"oneshot: {len(self.calibration) - len(self.told)} of its "
                    f"{len(self.calibration)} calibration trainings still running"
                )
            self._rank()
        for spec in self.picks:
            if spec.arch_id not in self.seen:
                self.seen.add(spec.arch_id)
                return spec
        by = "the calibrated ranker's" if self.ranker.get("used") else "the supernet's"
        raise SpaceExhausted(
            f"oneshot: every one of the {len(self.picks)} architectures picked from {by} "
            "front was trained"
        )

    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        if any(spec.arch_id == c.arch_id for c in self.calibration):
            self.told[spec.arch_id] = values  # what the ranker fits on; picks teach nothing

    def offers(self) -> int | None:
        if self.picks is None:
            return None
        if self.calibration:
            return len(self.calibration) + self._ranked_picks()
        return len(self.picks)

    def estimate(self, spec: ArchSpec) -> dict[str, float]:
        found = self.estimates.get(spec.arch_id, {})
        return {
            k if k.startswith("ranker_") else f"supernet_{k}": v
            for k, v in found.items()
            if _calibrated(k.removeprefix("ranker_"))
        }

    def summary(self) -> dict[str, Any]:
        if self.picks is None:
            return {}
        picks = [{"arch_id": s.arch_id, **self.estimates.get(s.arch_id, {})} for s in self.picks]
        if not self.calibration:
            return {"picks": picks}
        calibration = [
            {"arch_id": s.arch_id, **self.estimates[s.arch_id], "told": self.told.get(s.arch_id)}
            for s in self.calibration
        ]
        return {"calibration": calibration, "ranker": self.ranker, "picks": picks}

    def state_dict(self) -> dict[str, Any]:
        picks = None if self.picks is None else [spec.to_dict() for spec in self.picks]
        return {
            **super().state_dict(),
            "picks": picks,
            "calibration": [spec.to_dict() for spec in self.calibration],
            "estimates": self.estimates,
            "told": self.told,
            "pool": self.pool,
            "ranker": self.ranker,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        picks = state["picks"]
        self.picks = None if picks is None else [ArchSpec.from_dict(p) for p in picks]
        if "calibration" in state:  # as drawn when it started, whatever draws them today
            self.calibration = [ArchSpec.from_dict(d) for d in state["calibration"]]
        self.estimates = state["estimates"]
        self.told = state.get("told", {})
        self.pool = state.get("pool", [])
        self.ranker = state.get("ranker", {})

    # --- the calibrated ranker -----------------------------------------------------------

    def _calibration_members(self) -> list[ArchSpec]:
        """``calibration`` distinct members spread evenly over the space's families, chosen
        from random draws (seeded by the search's seed on a stream of their own, so the same
        search draws the same ones however it resumes)."""
        from nas.search.supernet.ranker import spread_over_families

        k = self.options.calibration
        rng = np.random.default_rng([self.context.seed, 36])
        drawn: dict[str, ArchSpec] = {}
        for _ in range(100 * k):
            if len(drawn) == CANDIDATES_PER_MEMBER * k:
                break
            spec = self.space.sample(rng)
            drawn.setdefault(spec.arch_id, spec)
        return spread_over_families(self.space, list(drawn.values()), k)

    def _ranked_picks(self) -> int:
        """How many the ranker picks: ``top_k``, or what the budget leaves after calibrating."""
        return self.options.top_k or max(1, self.context.budget - len(self.calibration))

    def _rank(self) -> None:
        """Fit a ranker per trained objective on the calibration results, estimate every
        member of the pool with it, and pick from the pool by those estimates. With fewer
        than ``MIN_RESULTS`` results (trainings failed) the supernet's picks stand."""
        from nas.search.supernet.ranker import MIN_RESULTS, CalibratedRanker

        names = [o.name for o in self.context.objectives]
        results = [(s, v) for s in self.calibration if (v := self.told.get(s.arch_id))]
        pool = [ArchSpec.from_dict(m["spec"]) for m in self.pool]
        scores = [m["estimate"] for m in self.pool]
        self.pool = []
        if len(results) < MIN_RESULTS:
            self.ranker = {"results": len(results), "used": False}
            return
        ranked = [dict(m) for m in scores]
        penalties = {}
        for i, name in enumerate(names):
            if not _calibrated(name):
                continue
            ranker = CalibratedRanker.fit(
                self.space,
                [s for s, _ in results],
                [self.estimates[s.arch_id][name] for s, _ in results],
                [v[i] for _, v in results],
            )
            predicted = ranker.predict(pool, [m[name] for m in scores])
            for m, p in zip(ranked, predicted, strict=True):
                m[name] = float(p)
            penalties[name] = ranker.penalty
        trained = {s.arch_id for s in self.calibration}
        members = {  # arch_id -> (spec, the supernet's scores, the ranker's), untrained ones
            spec.arch_id: (spec, score, m)
            for spec, score, m in zip(pool, scores, ranked, strict=True)
            if spec.arch_id not in trained
        }
        picked = pick_front(
            [(spec, m) for spec, _, m in members.values()], names, self._ranked_picks()
        )
        self.picks = [spec for spec, _ in picked]
        for spec, m in picked:
            ranker_figures = {f"ranker_{n}": m[n] for n in penalties}
            self.estimates[spec.arch_id] = members[spec.arch_id][1] | ranker_figures
        self.ranker = {"results": len(results), "used": True, "penalties": penalties}


def _calibrated(name: str) -> bool:
    """Whether objective ``name`` is measured by training (NE, AUC...), so the ranker
    estimates it; costs are computed, the same with or without a supernet."""
    return split_label(name)[0] in PER_LABEL


def pick_front(
    scored: list[tuple[ArchSpec, dict[str, float]]], objectives: list[str], k: int
) -> list[tuple[ArchSpec, dict[str, float]]]:
    """Up to ``k`` members: the non-dominated ones spread evenly along the first objective,
    then the next fronts the same way."""
    directions = [get_objective(name).direction for name in objectives]
    values = np.array([[m[name] for name in objectives] for _, m in scored])
    ranks = nondominated_ranks(values, directions)
    sign = 1.0 if directions[0] == "min" else -1.0
    picked: list[int] = []
    for rank in range(int(ranks.max()) + 1):
        front = sorted(np.flatnonzero(ranks == rank), key=lambda i: sign * values[i][0])
        room = k - len(picked)
        if len(front) > room:
            spots = np.unique(np.linspace(0, len(front) - 1, room).round().astype(int))
            front = [front[j] for j in spots]
        picked += [int(i) for i in front]
        if len(picked) >= k:
            break
    return [scored[i] for i in picked]
