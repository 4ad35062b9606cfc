"""Differentiable search: Rankitect's DNAS with DistDNAS's cost-aware loss, and DistDNAS's
search on data shards.

``dnas``: one job per penalty lambda in ``lambdas`` (``workers/dnas.py``: architecture
logits trained with the supernet's weights on logloss + lambda * E[cost] / cost_reference),
run in parallel as Ray tasks up to the search's concurrency. Each decodes one architecture
(each decision's most likely choice), and with ``members_per_penalty: k`` also the next
k - 1 most likely members of its distribution: neighbours of the decoded one that the
penalty's run found nearly as good, a cheap way to put more points on the front than there
are penalties. ``ask`` gives every penalty's first member in the order of ``lambdas``, then
every penalty's second, and so on (an architecture two penalties agree on is trained
once), each trained stand-alone as an ordinary trial. A penalty's first member is given as
soon as its job has ended, while the other jobs run. The second members wait for every
penalty's first, so that a budget smaller than the members still covers every penalty, and
so that the workers go to the jobs still to start; once every job has started, they fill
the workers the last jobs leave free, as far as the budget keeps a place for the first
member of every penalty still running.

``distdnas``: the training split cut into ``shards`` chronological slices, standing in for
days of logs; one DNAS job per (lambda, shard), each on its slice for ``steps / shards``
steps, so the search does the same total steps as ``dnas`` in about 1/shards of the time
when the shards run side by side (one per core locally, one per node on a cluster). A
lambda's shards are aggregated into one architecture: by default their probabilities are
averaged per decision (DistDNAS's choice: a decision that one shard is sure of and others
are not still leans its way), or (``aggregate: vote``) each shard's most likely choice is
counted, ties broken by the average. Other ways, not offered: keeping the shard with the
lowest held-out loss (throws away the other days), or a cost-weighted vote.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from nas.arch.spec import ArchSpec
from nas.search.strategies.base import Job, SpaceExhausted, Strategy, StrategyOptions, Waiting
from nas.search.strategies.registry import register_strategy
from nas.search.supernet.distributions import aggregate, check_relaxation, decode, most_likely


class DnasOptions(StrategyOptions):
    lambdas: list[float] = Field(default=[0.0, 0.01, 0.05, 0.2], min_length=1)
    steps: int = Field(default=600, ge=1)
    members_per_penalty: int = Field(default=1, ge=1, le=64)
    relaxation: Literal["gumbel", "softmax", "straight_through"] = "gumbel"
    # gumbel: how many choices each decision mixes in the logits' step (workers/dnas.py);
    # None: all of them.
    mixed_choices: int | None = Field(default=None, ge=2)
    bilevel: bool = True
    tau_start: float = Field(default=2.0, gt=0)
    tau_end: float = Field(default=0.2, gt=0)
    alpha_lr: float = Field(default=0.02, gt=0)
    arch_batch_size: int = Field(default=128, ge=1)
    warmup: float = Field(default=0.2, ge=0, lt=1)
    cost_reference: float | None = Field(default=None, gt=0)
    # The cost in the loss: FLOPs, or the cost model's latency (nas/arch/cost) on a target.
    cost: Literal["flops", "latency"] = "flops"
    cost_target: str = "h100-sxm"
    cost_precision: str | None = None  # default: bf16 on a GPU, fp32 on cpu
    cost_batch: int = Field(default=4096, ge=1, le=1 << 20)
    checkpoint_every: int = Field(default=100, ge=1)
    log_every: int = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _cost_target(self) -> DnasOptions:
        from types import SimpleNamespace

        from nas.search.objectives import FP8_DISPATCH, check_cost_options

        if self.cost == "latency":
            if self.cost_precision == FP8_DISPATCH:
                raise ValueError("cost_precision fp8-dispatch needs a probe per candidate")
            check_cost_options(
                SimpleNamespace(
                    name="latency",
                    target=self.cost_target,
                    precision=self.cost_precision,
                    batch=self.cost_batch,
                    candidates=None,
                ),
                "cost",
            )
        return self

    @field_validator("mixed_choices")
    @classmethod
    def _mixed_choices(cls, value: int | None, info: ValidationInfo) -> int | None:
        relaxation = info.data.get("relaxation")  # None: its own error says why
        if value is not None and relaxation not in (None, "gumbel"):
            raise ValueError(
                f"applies to relaxation gumbel only, not {relaxation} (softmax has no noise "
                "to draw the choices by; straight_through runs one path)"
            )
        return value

    @field_validator("lambdas")
    @classmethod
    def _lambdas(cls, values: list[float]) -> list[float]:
        if any(not math.isfinite(v) or v < 0 for v in values) or len(set(values)) != len(values):
            raise ValueError(f"must be distinct penalties >= 0, got {values}")
        return values


class DistDnasOptions(DnasOptions):
    shards: int = Field(default=4, ge=2)
    aggregate: Literal["mean", "vote"] = "mean"

    @model_validator(mode="after")
    def _steps_per_shard(self) -> DistDnasOptions:
        if self.steps < self.shards:
            raise ValueError(f"steps ({self.steps}) are split over the shards ({self.shards})")
        return self


@register_strategy
class Dnas(Strategy):
    name = "dnas"
    Options = DnasOptions

    def __init__(self, options: DnasOptions, context):
        super().__init__(options, context)
        self.results: dict[str, dict[str, Any]] = {}  # job name -> its probabilities etc.
        # lambda (as text) -> its members: the decoded architecture, then the next likeliest
        self.decoded: dict[str, list[ArchSpec]] = {}
        self.started: set[str] = set()  # jobs running (this session's word: not saved)

    @property
    def shards(self) -> int:
        return 1

    @classmethod
    def check(cls, options, space, schema, budget: int) -> None:
        from nas.search.supernet import check_supernet

        check_relaxation(check_supernet(space, schema), options.relaxation, options.mixed_choices)

    # --- jobs --------------------------------------------------------------------------------

    def job_name(self, penalty: float, shard: int | None) -> str:
        name = f"dnas-l{penalty:g}"
        return name if shard is None else f"{name}-s{shard}"

    def job_count(self) -> int:
        return len(self.options.lambdas) * self.shards

    def jobs(self) -> list[Job]:
        o = self.options
        common = self.job_settings() | {
            "steps": math.ceil(o.steps / self.shards),
            **{
                k: getattr(o, k)
                for k in (
                    "relaxation",
                    "mixed_choices",
                    "bilevel",
                    "tau_start",
                    "tau_end",
                    "alpha_lr",
                    "arch_batch_size",
                    "warmup",
                    "cost_reference",
                    "cost",
                    "cost_target",
                    "cost_precision",
                    "cost_batch",
                    "checkpoint_every",
                    "log_every",
                )
            },
        }
        out = []
        for penalty in o.lambdas:
            for shard in self._shard_ids():
                name = self.job_name(penalty, shard)
                if name not in self.results:
                    where = None if shard is None else [shard, self.shards]
                    settings = common | {"penalty": penalty, "shard": where}
                    # Once its logits are recorded, a DNAS run's checkpoint serves nothing.
                    out.append(Job(name, "dnas", settings, keep_checkpoint=False))
        return out

    def _shard_ids(self) -> list[int | None]:
        return [None] if self.shards == 1 else list(range(self.shards))

    def job_started(self, job: Job) -> None:
        self.started.add(job.name)

    def job_done(self, job: Job, result: dict[str, Any]) -> None:
        self.results[job.name] = {
            k: result[k] for k in ("penalty", "probabilities", "expected_cost", "arch_id")
        }
        penalty = result["penalty"]
        done = [self.results.get(self.job_name(penalty, s)) for s in self._shard_ids()]
        if all(done):
            self.decoded[f"{penalty:g}"] = self._decode(done)

    def _decode(self, results: list[dict[str, Any]]) -> list[ArchSpec]:
        return self._members(results[0]["probabilities"])

    def _members(self, probabilities: dict[str, list[float]]) -> list[ArchSpec]:
        """The decoded member, then the likeliest others, ``members_per_penalty`` in all."""
        k = self.options.members_per_penalty
        out = {}
        for spec in [decode(self.space, probabilities), *most_likely(self.space, probabilities, k)]:
            out.setdefault(spec.arch_id, spec)
        return list(out.values())[:k]

    # --- candidates --------------------------------------------------------------------------

    def ask(self) -> ArchSpec:
        undecoded = [p for p in self.options.lambdas if f"{p:g}" not in self.decoded]
        ranks = self.options.members_per_penalty if self._ahead(undecoded) else 1
        for rank in range(ranks):
            for penalty in self.options.lambdas:
                members = self.decoded.get(f"{penalty:g}", [])
                if rank < len(members) and members[rank].arch_id not in self.seen:
                    self.seen.add(members[rank].arch_id)
                    return members[rank]
        if undecoded:
            raise Waiting(
                f"{self.name}: its jobs for lambda {', '.join(f'{p:g}' for p in undecoded)} "
                "are still to finish"
            )
        raise SpaceExhausted(
            f"{self.name}: every architecture its {len(self.options.lambdas)} penalties decoded "
            f"was trained ({self.offers()} distinct)"
        )

    def _ahead(self, undecoded: list[float]) -> bool:
        """Whether later members may go before the first of the ``undecoded`` penalties:
        when every job has started and the budget still has a place for each of those."""
        if not undecoded:
            return True
        names = {self.job_name(p, s) for p in undecoded for s in self._shard_ids()}
        unstarted = names - self.started - set(self.results)
        return not unstarted and self.context.budget - len(self.seen) > len(undecoded)

    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        pass  # the sweep was decided by the jobs

    def offers(self) -> int | None:
        if len(self.decoded) < len(self.options.lambdas):
            return None  # not known before every penalty's job has ended
        return len({s.arch_id for members in self.decoded.values() for s in members})

    def estimate(self, spec: ArchSpec) -> dict[str, float]:
        found = [
            (rank, float(p))
            for p, members in self.decoded.items()
            for rank, s in enumerate(members)
            if s.arch_id == spec.arch_id
        ]
        if not found:
            return {}
        rank, penalty = min(found)
        return {"dnas_penalty": penalty, "dnas_rank": float(rank + 1)}

    def summary(self) -> dict[str, Any]:
        return {
            "decoded": {p: [s.arch_id for s in members] for p, members in self.decoded.items()},
            "jobs": {
                name: {"expected_cost": r["expected_cost"], "arch_id": r["arch_id"]}
                for name, r in self.results.items()
            },
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "results": self.results,
            "decoded": {p: [s.to_dict() for s in members] for p, members in self.decoded.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.results = state["results"]
        self.decoded = {
            # A search saved before members_per_penalty kept one member (a dict) per penalty.
            p: [
                ArchSpec.from_dict(d) for d in ([members] if isinstance(members, dict) else members)
            ]
            for p, members in state["decoded"].items()
        }


@register_strategy
class DistDnas(Dnas):
    name = "distdnas"
    Options = DistDnasOptions

    @property
    def shards(self) -> int:
        return self.options.shards

    def _decode(self, results: list[dict[str, Any]]) -> list[ArchSpec]:
        return self._members(aggregate(results, self.space.decisions, self.options.aggregate))

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["aggregated"] = {}
        for penalty in self.options.lambdas:
            results = [self.results.get(self.job_name(penalty, s)) for s in self._shard_ids()]
            if all(results):
                out["aggregated"][f"{penalty:g}"] = aggregate(
                    results, self.space.decisions, self.options.aggregate
                )
        return out
