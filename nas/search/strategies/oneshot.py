"""One-shot search (Rankitect, NASRec): one supernet trained once, its members ranked with
the supernet's weights, the best of them trained stand-alone.

    job "supernet"   train the space's supernet (single path, or the sandwich rule), and
                     with ``few_shot`` one sub-supernet per family of members, then
                     search its members with evolution or NSGA-II on the search's own
                     objectives, scored with inherited weights (``workers/oneshot.py``)
    ask()            the picks, best first: the front of those scores spread along its
                     first objective, then the next fronts; each is trained stand-alone as
                     an ordinary trial, its supernet estimate logged beside its real figures

One supernet serves every candidate, so the search's cost is one long training plus
``top_k`` ordinary trials, whatever the size of the space. The estimates are only as good
as the weight sharing: ``benchmarks/search_efficiency.py`` reports how well they rank.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from nas.arch.spec import ArchSpec
from nas.search.strategies.base import Job, SpaceExhausted, Strategy, StrategyOptions
from nas.search.strategies.registry import register_strategy


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
    checkpoint_every: int = Field(default=200, ge=1)


@register_strategy
class OneShot(Strategy):
    name = "oneshot"
    Options = OneShotOptions

    def __init__(self, options: OneShotOptions, context):
        super().__init__(options, context)
        self.picks: list[ArchSpec] | None = None  # None until the supernet job is done
        self.estimates: dict[str, dict[str, float]] = {}

    @classmethod
    def check(cls, options, space, schema) -> None:
        from nas.search.supernet import check_supernet

        check_supernet(space, schema)
        if options.few_shot:
            from nas.search.supernet.few_shot import FewShotSplit

            FewShotSplit(space, options.few_shot)

    def job_count(self) -> int:
        return 1

    def jobs(self) -> list[Job]:
        if self.picks is not None:
            return []
        o = self.options
        settings = self.job_settings() | {
            "objectives": [objective.name for objective in self.context.objectives],
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
        }
        return [Job("supernet", "supernet", settings)]

    def job_done(self, job: Job, result: dict[str, Any]) -> None:
        self.picks = [ArchSpec.from_dict(p["spec"]) for p in result["picks"]]
        self.estimates = {
            spec.arch_id: p["estimate"] for spec, p in zip(self.picks, result["picks"], strict=True)
        }

    def ask(self) -> ArchSpec:
        if self.picks is None:
            raise RuntimeError("oneshot was asked before its supernet job finished")
        for spec in self.picks:
            if spec.arch_id not in self.seen:
                self.seen.add(spec.arch_id)
                return spec
        raise SpaceExhausted(
            f"oneshot: every one of the {len(self.picks)} architectures picked from the "
            "supernet's front was trained"
        )

    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        pass  # the ranking was fixed by the supernet

    def offers(self) -> int | None:
        return None if self.picks is None else len(self.picks)

    def estimate(self, spec: ArchSpec) -> dict[str, float]:
        found = self.estimates.get(spec.arch_id, {})
        return {f"supernet_{k}": v for k, v in found.items() if k in ("ne", "auc", "logloss")}

    def summary(self) -> dict[str, Any]:
        if self.picks is None:
            return {}
        return {
            "picks": [
                {"arch_id": s.arch_id, **self.estimates.get(s.arch_id, {})} for s in self.picks
            ]
        }

    def state_dict(self) -> dict[str, Any]:
        picks = None if self.picks is None else [spec.to_dict() for spec in self.picks]
        return {**super().state_dict(), "picks": picks, "estimates": self.estimates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        picks = state["picks"]
        self.picks = None if picks is None else [ArchSpec.from_dict(p) for p in picks]
        self.estimates = state["estimates"]
