"""The strategy registry: ``register_strategy``, ``create_strategy``, ``list_strategies``."""

from __future__ import annotations

from typing import Any

from nas.core.catalog import Catalog
from nas.search.strategies.base import Strategy, StrategyContext

STRATEGIES: Catalog[Strategy] = Catalog("strategy", "strategy")
register_strategy = STRATEGIES.register
get_strategy = STRATEGIES.get
list_strategies = STRATEGIES.names


def check_options(name: str, options: dict[str, Any] | None):
    return STRATEGIES.options(name, options)


def create_strategy(name: str, options: dict[str, Any] | None, context: StrategyContext):
    return get_strategy(name)(STRATEGIES.options(name, options), context)
