"""Search strategies behind one ask/tell interface: random, evolution, optuna."""

from nas.strategies import evolution, optuna, random  # noqa: F401  (registers)
from nas.strategies.base import SpaceExhausted, Strategy, StrategyContext, StrategyOptions
from nas.strategies.registry import (
    check_options,
    create_strategy,
    get_strategy,
    list_strategies,
    register_strategy,
)

__all__ = [
    "SpaceExhausted",
    "Strategy",
    "StrategyContext",
    "StrategyOptions",
    "check_options",
    "create_strategy",
    "get_strategy",
    "list_strategies",
    "register_strategy",
]
