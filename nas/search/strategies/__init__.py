"""Search strategies behind one ask/tell interface: random, evolution, optuna (sampling);
oneshot (a weight-sharing supernet); dnas and distdnas (differentiable, cost-aware)."""

from nas.search.strategies import dnas, evolution, oneshot, optuna, random  # noqa: F401  (registers)
from nas.search.strategies.base import (
    Job,
    SpaceExhausted,
    Strategy,
    StrategyContext,
    StrategyOptions,
    Waiting,
)
from nas.search.strategies.registry import (
    check_options,
    create_strategy,
    get_strategy,
    list_strategies,
    register_strategy,
)

__all__ = [
    "Job",
    "SpaceExhausted",
    "Strategy",
    "StrategyContext",
    "StrategyOptions",
    "Waiting",
    "check_options",
    "create_strategy",
    "get_strategy",
    "list_strategies",
    "register_strategy",
]
