"""The ``SearchSpace`` interface: every way a strategy can move through a space.

A space is declared once and offers each capability a strategy family needs:

- ``sample(rng)``            a random member (random search, evolution's first population)
- ``mutate(spec, rng)``      a neighbour that differs from ``spec`` (evolution)
- ``crossover(a, b, rng)``   a child mixing two members (evolution, NSGA-style strategies)
- ``suggest(trial)``         the same space as Optuna define-by-run calls (TPE, NSGA-II)

Every method returns an ``ArchSpec``; ``rng`` is a ``numpy.random.Generator`` owned by the
caller, so a strategy's seed fixes the sequence of specs. Options come from the search YAML
and are validated by the space's pydantic ``Options`` model. ``num_tokens`` is the number of
feature tokens of the dataset the search runs on, so a space only yields specs that build.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from nas.catalog import Options
from nas.spec import ArchSpec

if TYPE_CHECKING:
    import optuna


class SpaceOptions(Options):
    """Base of every space's options."""


class SearchSpace(ABC):
    name: ClassVar[str]
    Options: ClassVar[type[SpaceOptions]]

    def __init__(self, options: SpaceOptions, num_tokens: int):
        self.options = options
        self.num_tokens = num_tokens

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
