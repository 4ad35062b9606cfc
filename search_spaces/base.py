"""The ``SearchSpace`` interface: every way a strategy can move through a space.

A space declares its decisions once (``declare``, see ``search_spaces.decisions``) and
converts an assignment of them to a spec and back (``build`` / ``values_of``). Every
capability a strategy family needs is derived from that:

- ``sample(rng)``            a random member (random search, evolution's first population)
- ``mutate(spec, rng)``      a neighbour that differs from ``spec`` (evolution)
- ``crossover(a, b, rng)``   a child mixing two members (evolution, NSGA-style strategies)
- ``suggest(trial)``         the same space as Optuna define-by-run calls (TPE, NSGA-II)
- ``encode(spec)`` / ``decode(values)``  a member as decision values and back (supernets,
                              one-shot and differentiable search)
- ``size()``                 how many members there are

Every move returns an ``ArchSpec``; ``rng`` is a ``numpy.random.Generator`` owned by the
caller, so a strategy's seed fixes the sequence of specs. Options come from the search YAML
and are validated by the space's pydantic ``Options`` model. ``SpaceInputs`` says what the
dataset offers (feature tokens, request-side tokens, history length), so a space only yields
specs that build on it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import field_validator

from nas.arch.spec import ArchSpec
from nas.core.catalog import Options
from nas.core.errors import ConfigError, shown
from search_spaces import decisions
from search_spaces.decisions import Decision, Values, check_member

MAX_TRIES = 100  # draws before a mutation that keeps giving the parent back is a bug

if TYPE_CHECKING:
    import optuna

    from nas.data.schema import Schema


@dataclass(frozen=True)
class SpaceInputs:
    """What a space knows of the data its members will run on."""

    num_tokens: int  # feature tokens (one per field, one for the dense features)
    num_request_tokens: int = 0  # of them, request-side
    history_len: int = 0  # events a row's history keeps; 0: the data has no history

    @classmethod
    def of(cls, schema: Schema) -> SpaceInputs:
        history = schema.history
        return cls(schema.num_tokens, schema.num_request_tokens, history.max_len if history else 0)

    def input_tokens(self, spec: ArchSpec) -> tuple[int, int]:
        """(tokens, request-side tokens) the spec's first layer takes: the history's too."""
        extra = 1 if spec.sequence is not None else 0
        return self.num_tokens + extra, self.num_request_tokens + extra

    def check(self, spec: ArchSpec) -> ArchSpec:
        """``spec``, after checking every shape on these inputs (a failure is a space bug)."""
        if spec.sequence is not None:
            if spec.sequence.max_len > self.history_len:
                raise ValueError(f"sequence max_len {spec.sequence.max_len} > {self.history_len}")
            spec.sequence.layer_configs(spec.embedding_dim)
        spec.layer_configs(*self.input_tokens(spec))
        return spec


class ChoiceOptions(Options):
    """Options whose lists are choices: each list field, and each list in a mapping field
    (``block_params``), names at least one choice and no choice twice (a choice listed twice
    would weigh double when sampled, and Optuna refuses it)."""

    @field_validator("*")
    @classmethod
    def _distinct_choices(cls, value: Any) -> Any:
        _check_choices(value)
        return value


def _check_choices(value: Any, where: str = "") -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _check_choices(inner, f"{where}{key}: ")
    elif isinstance(value, list):
        if not value:
            raise ValueError(f"{where}lists no choice; give at least one choice")
        seen = set()
        for choice in value:
            key = decisions.freeze(choice)
            try:
                hash(key)
            except TypeError:  # a mapping as a choice: compared as written
                key = repr(choice)
            if key in seen:
                twice = f"{where}lists {shown(choice)} twice"
                raise ValueError(f"{twice}; the choices must be distinct")
            seen.add(key)


class SpaceOptions(ChoiceOptions):
    """Base of every space's options."""


class SearchSpace(ABC):
    """A space declares its decisions once (``declare``) and converts between an assignment of
    them and a spec (``build`` / ``values_of``); every move is derived from that."""

    name: ClassVar[str]
    Options: ClassVar[type[SpaceOptions]]

    def __init__(self, options: SpaceOptions, inputs: SpaceInputs):
        self.options = options
        self.inputs = inputs
        self._decisions: tuple[Decision, ...] | None = None

    # --- what a space writes ----------------------------------------------------------------

    @abstractmethod
    def declare(self) -> list[Decision]:
        """The named decisions, each after those it depends on."""

    @abstractmethod
    def build(self, values: Values) -> ArchSpec:
        """The spec of an assignment of the active decisions (already checked)."""

    @abstractmethod
    def values_of(self, spec: ArchSpec) -> Values:
        """The assignment a member spec comes from."""

    # --- derived ----------------------------------------------------------------------------

    @property
    def decisions(self) -> tuple[Decision, ...]:
        if self._decisions is None:
            self._decisions = tuple(self.declare())
        return self._decisions

    def decode(self, values: Mapping[str, Any]) -> ArchSpec:
        """The member an assignment describes; a value outside its choices is a ConfigError."""
        check_member(self.decisions, values, self.name)
        return self.build(dict(values))

    def encode(self, spec: ArchSpec) -> Values:
        """The assignment of a member: ``decode(encode(spec)) == spec``. A spec outside the
        space is a ConfigError naming the decision (or saying that it cannot be expressed)."""
        values = self.values_of(spec)
        check_member(self.decisions, values, self.name)
        if self.build(values).arch_id != spec.arch_id:
            raise ConfigError(
                "spec", f"is not a member of space {self.name!r} (a value it fixes differs)"
            )
        return values

    def sample(self, rng: np.random.Generator) -> ArchSpec:
        """A uniform draw of each active decision, in declaration order."""
        return self.build(decisions.sample(self.decisions, rng))

    def mutate(self, spec: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """A neighbour that differs from ``spec``: one decision changed."""
        values = self.encode(spec)
        for _ in range(MAX_TRIES):
            child = self.build(decisions.mutate(self.decisions, values, rng))
            if child.arch_id != spec.arch_id:
                return child
        raise RuntimeError(f"{self.name} could not mutate {spec.arch_id} in {MAX_TRIES} draws")

    def crossover(self, a: ArchSpec, b: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """Each decision from either parent."""
        return self.build(decisions.crossover(self.decisions, self.encode(a), self.encode(b), rng))

    def suggest(self, trial: optuna.Trial) -> ArchSpec:
        """The space as Optuna define-by-run calls (one categorical per decision name)."""
        return self.build(decisions.suggest(self.decisions, trial))

    def supernet_plan(self) -> Any:
        """The space as a weight-sharing supernet, as data (``nas.search.supernet`` builds it); a
        space without one says why, naming the field."""
        raise ConfigError(
            "space.name",
            f"space {self.name!r} has no supernet form, so one-shot and differentiable "
            "strategies cannot search it; they search ctr_stack, wukong, dhen and hstu_seq",
        )

    def size(self) -> int:
        """How many assignments the space holds (distinct architectures, unless two
        assignments build the same model; a space says so where that can happen)."""
        return decisions.count(self.decisions)
