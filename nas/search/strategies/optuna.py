"""Optuna's samplers as a strategy: TPE for one objective, NSGA-II for several.

The samplers are wrapped, not rewritten. The space maps itself onto Optuna's define-by-run
API (``SearchSpace.suggest``), and the study lives in an Optuna RDB storage, by default the
search's registry database, so a resumed search sees every earlier trial.

Optuna samplers keep no history (they read it from the storage) but do keep an RNG. To make
"same seed, same asks" hold across a restart, each ask uses a sampler seeded from the search
seed and the ask's index, rather than one long-lived RNG whose state would be lost. What
NSGA-II derives from the history, the intersection of the trials' distributions, is
deterministic, so one cache of it serves every ask's sampler (``_nsga2``).
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import Field

from nas.arch.spec import ArchSpec
from nas.search.strategies.base import MAX_DRAWS, SpaceExhausted, Strategy, StrategyOptions
from nas.search.strategies.registry import register_strategy


class OptunaOptions(StrategyOptions):
    sampler: Literal["auto", "tpe", "nsga2", "random"] = "auto"  # auto: TPE if one objective
    n_startup_trials: int = Field(default=8, ge=0)  # TPE: random trials before modelling
    population_size: int = Field(default=10, ge=2)  # NSGA-II


@register_strategy
class OptunaStrategy(Strategy):
    name = "optuna"
    Options = OptunaOptions

    def __init__(self, options: OptunaOptions, context):
        super().__init__(options, context)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        directions = [
            "minimize" if o.direction == "min" else "maximize" for o in context.objectives
        ]
        self.study = optuna.create_study(
            storage=context.storage_url,
            study_name=context.study_name,
            directions=directions,
            load_if_exists=True,
        )
        self.asks = 0
        self.intersection = optuna.search_space.IntersectionSearchSpace()
        self.pending: dict[str, int] = {}  # arch_id -> Optuna trial number
        self.known: dict[str, list[float] | None] = {}  # told results, to answer duplicates

    @property
    def sampler_name(self) -> str:
        if self.options.sampler != "auto":
            return self.options.sampler
        return "tpe" if len(self.context.objectives) == 1 else "nsga2"

    def _sampler(self, random: bool = False):
        seed = (self.context.seed * 1_000_003 + self.asks) % 2**32
        samplers = self._optuna.samplers
        if random:
            return samplers.RandomSampler(seed=seed)
        if self.sampler_name == "tpe":
            return samplers.TPESampler(seed=seed, n_startup_trials=self.options.n_startup_trials)
        if self.sampler_name == "nsga2":
            return _nsga2(self._optuna)(
                self.intersection, seed=seed, population_size=self.options.population_size
            )
        return samplers.RandomSampler(seed=seed)

    def ask(self) -> ArchSpec:
        for i in range(MAX_DRAWS // 10):
            # A model that keeps suggesting tried architectures gets random company.
            self.study.sampler = self._sampler(random=i >= 10)
            self.asks += 1
            trial = self.study.ask()
            spec = self.space.suggest(trial)
            if spec.arch_id not in self.seen:
                self.seen.add(spec.arch_id)
                self.pending[spec.arch_id] = trial.number
                return spec
            # Already asked: answer Optuna with what we know, so it learns and moves on.
            values = self.known.get(spec.arch_id)
            self._tell(trial.number, values)
        raise SpaceExhausted(
            f"optuna: {MAX_DRAWS // 10} suggestions in a row were architectures already tried "
            f"({len(self.seen)} so far); the search space is spent"
        )

    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        self.known[spec.arch_id] = None if values is None else list(values)
        number = self.pending.pop(spec.arch_id, None)
        if number is not None:
            self._tell(number, values)

    def tell_stopped(
        self, spec: ArchSpec, values: list[float], rungs: list[dict[str, float]]
    ) -> None:
        """Optuna's own word for it: the trial is PRUNED. With one objective measured at
        the rungs (ne, auc, logloss), its rung values are the trial's intermediate values,
        which TPE ranks pruned trials by (Optuna keeps them for one objective only)."""
        self.known[spec.arch_id] = list(values)
        number = self.pending.pop(spec.arch_id, None)
        if number is None:
            return
        name = self.context.objectives[0].name
        if len(self.context.objectives) == 1 and all(name in r for r in rungs):
            # Study.tell takes a number, Trial.report a storage id: Optuna maps one to the
            # other only through its storage.
            storage = self.study._storage
            trial_id = storage.get_trial_id_from_study_id_trial_number(self.study._study_id, number)
            trial = self._optuna.Trial(self.study, trial_id)
            for figures in rungs:
                trial.report(float(figures[name]), int(figures["step"]))
        pruned = self._optuna.trial.TrialState.PRUNED
        self.study.tell(number, state=pruned, skip_if_finished=True)

    def _tell(self, number: int, values: list[float] | None) -> None:
        state = self._optuna.trial.TrialState
        if values is None:
            self.study.tell(number, state=state.FAIL, skip_if_finished=True)
        else:
            self.study.tell(number, list(values), skip_if_finished=True)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "asks": self.asks,
            "pending": self.pending,
            "known": self.known,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.asks = state["asks"]
        self.pending = dict(state["pending"])
        self.known = dict(state["known"])
        # An Optuna trial asked just before a crash, whose ask never reached our state:
        # close it, so samplers do not wait on it.
        ours = set(self.pending.values())
        running = self._optuna.trial.TrialState.RUNNING
        for trial in self.study.get_trials(deepcopy=False, states=(running,)):
            if trial.number not in ours:
                self._tell(trial.number, None)


@cache
def _nsga2(optuna):
    """Optuna's NSGA-II sampler, reading its search space from ``intersection``, a cache
    shared by the strategy's samplers. Optuna gives each sampler a cache of its own, which
    a sampler that lives one ask starts empty: it would read every trial's distributions at
    every ask, so a subnet search of n members (``workers/oneshot.py``) cost O(n^2)
    (``benchmarks/subnet_search.py``). The space is the same either way."""

    class NSGAII(optuna.samplers.NSGAIISampler):
        def __init__(self, intersection, **options):
            super().__init__(**options)
            self.intersection = intersection

        def infer_relative_search_space(self, study, trial):
            # as NSGAIISampler's own: single-valued distributions are sampled independently
            found = self.intersection.calculate(study)
            return {name: d for name, d in found.items() if not d.single()}

    return NSGAII
