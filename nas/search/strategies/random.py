"""Random search: uniform draws from the space, each architecture at most once.

The baseline every other strategy must beat (Li & Talwalkar 2019 found it hard to beat).
"""

from __future__ import annotations

from nas.arch.spec import ArchSpec
from nas.search.strategies.base import Strategy, StrategyOptions
from nas.search.strategies.registry import register_strategy


class RandomOptions(StrategyOptions):
    pass


@register_strategy
class RandomSearch(Strategy):
    name = "random"
    Options = RandomOptions

    def ask(self) -> ArchSpec:
        return self._first_unseen(lambda: self.space.sample(self.rng))

    def tell(self, spec: ArchSpec, values: list[float] | None) -> None:
        pass  # random search learns nothing
