"""The ``Strategy`` interface: ask for a candidate, tell its result, save and restore state.

    strategy = create_strategy("evolution", options, context)
    spec = strategy.ask()                  # a candidate not asked before (dedup by arch_id)
    strategy.tell(spec, [0.78, 2.9e5])     # objective values in context.objectives order
    strategy.tell(spec, None)              # ... or: the candidate failed
    strategy.tell_stopped(spec, values, rungs)  # ... or: early stopping ended it at a rung
    state = strategy.state_dict()          # JSON-ready; load_state_dict(state) continues
                                           # with exactly the asks an unbroken run would make

A strategy holds a seeded RNG and what it was told; nothing else. The controller persists
``state_dict()`` in the registry after every ask and tell, so a search resumes anywhere.

One-shot and differentiable strategies need setup work: ``jobs()`` lists what is still to
run (supernet training, one DNAS run per penalty and shard), the controller runs each as a
Ray task in ``workers/`` (recorded as a trial of the job's kind) and hands the result to
``job_done``. Until the jobs are done ``ask`` gives what needs no more of them (a DNAS
penalty's first member once its job ended, one-shot's calibration members) and otherwise
raises ``Waiting``: the controller then runs the next job in the free workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from nas.arch.spec import ArchSpec
from nas.core.catalog import Options
from nas.core.errors import NasError
from nas.search.objectives import CostSettings, Objective
from search_spaces.base import SearchSpace

MAX_DRAWS = 2000  # draws in a row that only give known architectures: the space is spent


class SpaceExhausted(NasError):
    """The strategy cannot find an architecture it has not asked before."""


class Waiting(NasError):
    """The strategy has nothing to ask until candidates it asked are told (a one-shot
    search's ranker waits on its calibration trainings) or its setup jobs end; ask again
    after the next result or job."""


class StrategyOptions(Options):
    """Base of every strategy's options."""


@dataclass(frozen=True)
class StrategyContext:
    space: SearchSpace
    objectives: tuple[Objective, ...]
    seed: int
    storage_url: str | None = None  # where strategies that keep a study (Optuna) store it
    study_name: str | None = None
    train: dict[str, Any] = field(default_factory=dict)  # batch_size, lr, embedding_lr, threads
    budget: int = 20  # searched candidates the search trains stand-alone
    concurrency: int = 1  # trials (and setup jobs) the search runs at once
    costs: tuple[CostSettings, ...] = ()  # the latency objectives, for jobs that price members


@dataclass(frozen=True)
class Job:
    """Setup work of a strategy, run as a Ray task by the worker of its ``kind`` (a trial
    kind: ``supernet`` or ``dnas``) with ``settings`` and the search's data."""

    name: str  # unique in the search: the job trial's id (at most 32 characters)
    kind: str
    settings: dict[str, Any]
    keep_checkpoint: bool = True  # after the result is recorded (a trained supernet: yes)


class Strategy(ABC):
    name: ClassVar[str]
    Options: ClassVar[type[StrategyOptions]]

    def __init__(self, options: StrategyOptions, context: StrategyContext):
        self.options = options
        self.context = context
        self.space = context.space
        self.rng = np.random.default_rng(context.seed)
        self.seen: set[str] = set()  # arch_ids asked so far

    @abstractmethod
    def ask(self) -> ArchSpec:
        """The next candidate, never one asked before; raises SpaceExhausted, or Waiting
        while it needs results of candidates still training."""

    @abstractmethod
    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        """The result of an asked candidate: objective values, or None when it failed."""

    def tell_stopped(
        self, spec: ArchSpec, values: list[float], rungs: list[dict[str, float]]
    ) -> None:
        """An asked candidate that the search's scheduler stopped early: ``values`` are its
        objectives at the rung where it stopped (NE on the rung's validation rows, after
        fewer steps), ``rungs`` its figures at each rung (``step``, ``ne``...). By default it
        is told like a result: a short training's NE is worse than a full one's, so the
        candidate ranks as poorly as it did when it was stopped."""
        self.tell(spec, values)

    # --- setup jobs (one-shot and differentiable strategies) -----------------------------

    @classmethod
    def check(cls, options: StrategyOptions, space: SearchSpace, schema, budget: int) -> None:
        """Refuse, before anything starts, a space or options this strategy cannot run with
        ``budget`` candidates (a ``ConfigError`` naming the field). Sampling strategies take
        any space."""
        return None

    def jobs(self) -> list[Job]:
        """Setup jobs still to run, in the order to start them (none for sampling
        strategies)."""
        return []

    def job_count(self) -> int:
        """How many setup jobs the strategy runs in all (done or not)."""
        return 0

    def job_started(self, job: Job) -> None:
        """The controller started ``job`` (again, after a resume): a worker is no longer
        kept for it."""
        return None  # only a strategy that orders its asks by it listens (dnas)

    def job_done(self, job: Job, result: dict[str, Any]) -> None:
        raise NotImplementedError(f"{self.name} runs no jobs")

    def offers(self) -> int | None:
        """How many architectures ``ask`` will give in all (None: as many as the budget
        asks for, or not known until the jobs are done)."""
        return None

    def estimate(self, spec: ArchSpec) -> dict[str, float]:
        """What the strategy predicted for an asked architecture (logged beside the real
        figures): a supernet's NE, a DNAS run's penalty..."""
        return {}

    def summary(self) -> dict[str, Any]:
        """What the strategy learned from its jobs, for the search's MLflow run."""
        return {}

    def job_settings(self) -> dict[str, Any]:
        """What every job needs from the search: the space, the seed, the training setup."""
        train = self.context.train
        # Fewer jobs than the search runs at once: each takes the CPUs the others would
        # have (a lone supernet trains faster on more threads). Fixed by the whole count,
        # not by the jobs left, so a resumed job runs on as many threads as it started on.
        share = max(1, self.context.concurrency // max(1, self.job_count()))
        return {
            "space": {"name": self.space.name, "options": self.space.options.model_dump()},
            "seed": self.context.seed,
            "threads": train.get("threads", 1) * share,
            "batch_size": train.get("batch_size", 1024),
            "lr": train.get("lr", 2e-3),
            "embedding_lr": train.get("embedding_lr", 1e-2),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "seen": sorted(self.seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.seen = set(state["seen"])

    # --- helpers for subclasses ---------------------------------------------------------

    def _first_unseen(self, draw, fallback=None) -> ArchSpec:
        """Call ``draw()`` until it gives an architecture not asked before, and mark it.
        After ``MAX_DRAWS // 10`` misses, draw from ``fallback`` instead (when given)."""
        for i in range(MAX_DRAWS):
            spec = (fallback or draw)() if i >= MAX_DRAWS // 10 else draw()
            if spec.arch_id not in self.seen:
                self.seen.add(spec.arch_id)
                return spec
        raise SpaceExhausted(
            f"{self.name}: {MAX_DRAWS} draws in a row gave architectures already tried "
            f"({len(self.seen)} so far); the search space is spent"
        )

    def losses(self, values: list[float]) -> np.ndarray:
        """Objective values as losses (maximised objectives negated): lower is better."""
        signs = [1.0 if o.direction == "min" else -1.0 for o in self.context.objectives]
        return np.asarray(values, dtype=float) * signs
