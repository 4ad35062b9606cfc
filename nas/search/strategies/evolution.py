"""Regularized (ageing) evolution, Real et al. 2019, "Regularized Evolution for Image
Classifier Architecture Search".

    until the population holds P members: ask a random architecture
    then: S members drawn at random -> the best is the parent -> child = mutate(parent)
          (with probability crossover_prob: child = mutate(crossover(parent, second best)))
    tell(child): the child joins the population and the oldest member leaves

Ageing removes the oldest, not the worst, member, so a lucky early architecture cannot
dominate for ever. With several objectives, "best" in a tournament is the lowest Pareto rank
within the sample, ties broken by the first objective. A failed candidate never joins.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, model_validator

from nas.arch.spec import ArchSpec
from nas.search.pareto import nondominated_ranks
from nas.search.strategies.base import Strategy, StrategyOptions
from nas.search.strategies.registry import register_strategy


class EvolutionOptions(StrategyOptions):
    population_size: int = Field(default=10, ge=2)
    sample_size: int = Field(default=3, ge=1)
    crossover_prob: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sample_fits(self) -> EvolutionOptions:
        if self.sample_size > self.population_size:
            raise ValueError(
                f"sample_size ({self.sample_size}) must be at most "
                f"population_size ({self.population_size})"
            )
        return self


@register_strategy
class RegularizedEvolution(Strategy):
    name = "evolution"
    Options = EvolutionOptions

    def __init__(self, options: EvolutionOptions, context):
        super().__init__(options, context)
        self.population: list[tuple[ArchSpec, list[float]]] = []  # oldest first
        self.pending = 0  # asked, not yet told

    def ask(self) -> ArchSpec:
        if len(self.population) + self.pending < self.options.population_size:
            spec = self._first_unseen(lambda: self.space.sample(self.rng))
        else:
            # A parent whose neighbours were all tried: explore at random instead.
            spec = self._first_unseen(self._child, lambda: self.space.sample(self.rng))
        self.pending += 1
        return spec

    def _child(self) -> ArchSpec:
        if not self.population:  # every early candidate failed: keep exploring
            return self.space.sample(self.rng)
        parent, second = self._tournament()
        if second is not None and self.rng.random() < self.options.crossover_prob:
            return self.space.mutate(self.space.crossover(parent, second, self.rng), self.rng)
        return self.space.mutate(parent, self.rng)

    def _tournament(self) -> tuple[ArchSpec, ArchSpec | None]:
        size = min(self.options.sample_size, len(self.population))
        picked = self.rng.choice(len(self.population), size=size, replace=False)
        members = [self.population[int(i)] for i in picked]
        losses = np.array([self.losses(values) for _, values in members])
        ranks = nondominated_ranks(losses, ["min"] * losses.shape[1])
        order = sorted(range(size), key=lambda i: (ranks[i], losses[i][0]))
        return members[order[0]][0], members[order[1]][0] if size > 1 else None

    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        self.pending = max(0, self.pending - 1)
        if values is None:
            return
        self.population.append((spec, list(values)))
        if len(self.population) > self.options.population_size:
            self.population.pop(0)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "population": [[spec.to_dict(), values] for spec, values in self.population],
            "pending": self.pending,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.population = [(ArchSpec.from_dict(s), list(v)) for s, v in state["population"]]
        self.pending = state["pending"]
