"""The strategy registry: ``register_strategy``, ``create_strategy(name, options, context)``,
``list_strategies``."""

from __future__ import annotations

from nas.core.catalog import Catalog
from nas.search.strategies.base import Strategy

STRATEGIES: Catalog[Strategy] = Catalog("strategy", "strategy")
register_strategy = STRATEGIES.register
get_strategy = STRATEGIES.get
list_strategies = STRATEGIES.names
check_options = STRATEGIES.options
create_strategy = STRATEGIES.create  # (name, options, StrategyContext)
