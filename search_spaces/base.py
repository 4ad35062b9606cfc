"""The ``SearchSpace`` interface: every way a strategy can move through a space.

A space is declared once and offers each capability a strategy family needs:

- ``sample(rng)``            a random member (random search, evolution's first population)
- ``mutate(spec, rng)``      a neighbour that differs from ``spec`` (evolution)
- ``crossover(a, b, rng)``   a child mixing two members (evolution, NSGA-style strategies)
- ``suggest(trial)``         the same space as Optuna define-by-run calls (TPE, NSGA-II)

Every method returns an ``ArchSpec``; ``rng`` is a ``numpy.random.Generator`` owned by the
caller, so a strategy's seed fixes the sequence of specs. Options come from the search YAML
and are validated by the space's pydantic ``Options`` model. ``SpaceInputs`` says what the
dataset offers (feature tokens, request-side tokens, history length), so a space only yields
specs that build on it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from nas.catalog import Options
from nas.spec import ArchSpec

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


class SpaceOptions(Options):
    """Base of every space's options."""


def pick(rng: np.random.Generator, choices: list) -> Any:
    return choices[int(rng.integers(len(choices)))]


def label(choice: Any) -> Any:
    """Optuna categorical choices must be None, bool, int, float or str: lists become text."""
    if isinstance(choice, list):
        return "-".join(str(v) for v in choice) or "none"
    return choice


class SearchSpace(ABC):
    name: ClassVar[str]
    Options: ClassVar[type[SpaceOptions]]

    def __init__(self, options: SpaceOptions, inputs: SpaceInputs):
        self.options = options
        self.inputs = inputs

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> ArchSpec: ...

    @abstractmethod
    def mutate(self, spec: ArchSpec, rng: np.random.Generator) -> ArchSpec: ...

    @abstractmethod
    def crossover(self, a: ArchSpec, b: ArchSpec, rng: np.random.Generator) -> ArchSpec: ...

    @abstractmethod
    def suggest(self, trial: optuna.Trial) -> ArchSpec: ...

    def size(self) -> int | None:
        """How many distinct architectures the space holds, when that is countable."""
        return None
