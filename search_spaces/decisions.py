"""A space as a list of named decisions, and every move a strategy makes, derived from it.

    Decision("layer0.block", ("dcnv2", "fm"), requires=(("depth", (2, 3)),))

A decision is active when every ``(name, allowed values)`` pair it requires holds for the
values decided before it (a decision later in the list may depend on an earlier one, never
the reverse). An assignment of values to the active decisions is a member of the space;
the space decodes it into an ``ArchSpec`` and encodes a spec back into it.

From the list alone come: uniform sampling (active decisions drawn in order), mutation (one
active decision changed, newly active ones drawn), uniform crossover, Optuna's define-by-run
``suggest`` (one categorical distribution per name, whatever the other values), and the
count of members. Supernets read the same list: one architecture parameter per decision.

Values are JSON values (a list of widths stays a list); comparisons go through ``freeze``
so that ``[256, 128]`` and ``(256, 128)`` are the same choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from nas.core.errors import ConfigError, shown

Values = dict[str, Any]


def freeze(value: Any) -> Any:
    """A hashable form of a JSON value (lists become tuples)."""
    return tuple(freeze(v) for v in value) if isinstance(value, list | tuple) else value


def label(choice: Any) -> Any:
    """Optuna categorical choices must be None, bool, int, float or str: lists become text."""
    if isinstance(choice, list | tuple):
        return "-".join(str(v) for v in choice) or "none"
    return choice


@dataclass(frozen=True)
class Decision:
    name: str
    choices: tuple[Any, ...]
    requires: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    _frozen: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError(f"decision {self.name!r} has no choices")
        frozen = tuple(freeze(c) for c in self.choices)
        if len(set(frozen)) != len(frozen):
            raise ValueError(f"decision {self.name!r} lists a choice twice: {self.choices}")
        object.__setattr__(self, "_frozen", frozen)
        allowed = tuple((name, tuple(freeze(v) for v in values)) for name, values in self.requires)
        object.__setattr__(self, "requires", allowed)

    def active(self, values: Mapping[str, Any]) -> bool:
        return all(
            name in values and freeze(values[name]) in allowed for name, allowed in self.requires
        )

    def index(self, value: Any) -> int:
        """Position of ``value`` among the choices; a value outside them is a ``ConfigError``."""
        try:
            return self._frozen.index(freeze(value))
        except ValueError:
            choices = ", ".join(repr(c) for c in self.choices)
            message = f"{shown(value)} is not one of the choices: {choices}"
            raise ConfigError(self.name, message) from None

    def labels(self) -> list[Any]:
        return [label(c) for c in self.choices]


def pick(rng: np.random.Generator, choices: Sequence) -> Any:
    return choices[int(rng.integers(len(choices)))]


def complete(
    decisions: Sequence[Decision], values: Mapping[str, Any], draw: Callable[[Decision], Any]
) -> Values:
    """The active decisions' values: those given are kept, missing ones come from ``draw``,
    and values of decisions that are not active are dropped."""
    out: Values = {}
    for d in decisions:
        if d.active(out):
            out[d.name] = values[d.name] if d.name in values else draw(d)
    return out


def sample(decisions: Sequence[Decision], rng: np.random.Generator) -> Values:
    return complete(decisions, {}, lambda d: pick(rng, d.choices))


def mutate(decisions: Sequence[Decision], values: Values, rng: np.random.Generator) -> Values:
    """One active decision (with more than one choice) set to another of its choices."""
    movable = [d for d in decisions if d.name in values and len(d.choices) > 1]
    if not movable:
        return dict(values)
    d = pick(rng, movable)
    current = d.index(values[d.name])
    others = [c for i, c in enumerate(d.choices) if i != current]
    return complete(
        decisions, {**values, d.name: pick(rng, others)}, lambda e: pick(rng, e.choices)
    )


def crossover(
    decisions: Sequence[Decision], a: Values, b: Values, rng: np.random.Generator
) -> Values:
    """Uniform crossover: each active decision from either parent that has it (from a random
    draw when neither does, as after a depth taken from the deeper parent)."""
    out: Values = {}
    for d in decisions:
        if not d.active(out):
            continue
        donors = [p[d.name] for p in (a, b) if d.name in p]
        out[d.name] = pick(rng, donors) if donors else pick(rng, d.choices)
    return out


def suggest(decisions: Sequence[Decision], trial) -> Values:
    """The active decisions as Optuna categorical suggestions, one distribution per name."""

    def draw(d: Decision) -> Any:
        labels = d.labels()
        return d.choices[labels.index(trial.suggest_categorical(d.name, labels))]

    return complete(decisions, {}, draw)


def count(decisions: Sequence[Decision]) -> int:
    """How many assignments of the active decisions there are. Only the decisions that a
    later one depends on are branched on; the others multiply."""
    referenced = {name for d in decisions for name, _ in d.requires}

    @cache
    def walk(i: int, known: tuple[tuple[str, Any], ...]) -> int:
        if i == len(decisions):
            return 1
        d = decisions[i]
        values = dict(known)
        if not d.active(values):
            return walk(i + 1, known)
        if d.name in referenced:
            return sum(walk(i + 1, (*known, (d.name, freeze(c)))) for c in d.choices)
        return len(d.choices) * walk(i + 1, known)

    return walk(0, ())


def check_member(decisions: Sequence[Decision], values: Mapping[str, Any], space: str) -> None:
    """Every active decision has a value among its choices, and no other value is given."""
    active = complete(decisions, values, lambda d: _missing(d, space))
    for d in decisions:
        if d.name in active:
            try:
                d.index(active[d.name])
            except ConfigError as err:
                raise ConfigError(err.field, f"not in space {space!r}: {err.message}") from None
    extra = sorted(set(values) - set(active))
    if extra:
        raise ConfigError(extra[0], f"not in space {space!r}: this decision is not active here")


def _missing(d: Decision, space: str) -> Any:
    raise ConfigError(d.name, f"not in space {space!r}: no value for this decision")
