"""The strategy registry: ``register_strategy``, ``create_strategy``, ``list_strategies``."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from nas.errors import UnknownNameError, config_error_from_pydantic
from nas.strategies.base import Strategy, StrategyContext

_REGISTRY: dict[str, type[Strategy]] = {}


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    if cls.name in _REGISTRY:
        raise ValueError(f"strategy {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def get_strategy(name: str, field: str = "strategy.name") -> type[Strategy]:
    if name not in _REGISTRY:
        raise UnknownNameError(field, "strategy", name, _REGISTRY)
    return _REGISTRY[name]


def list_strategies() -> list[str]:
    return sorted(_REGISTRY)


def check_options(name: str, options: dict[str, Any] | None, field: str = "strategy"):
    """Strategy ``name``'s options, validated; errors name ``field.options.<key>``."""
    cls = get_strategy(name, f"{field}.name")
    try:
        return cls.Options.model_validate(options or {})
    except ValidationError as err:
        raise config_error_from_pydantic(
            err, prefix=f"{field}.options", model=cls.Options
        ) from None


def create_strategy(name: str, options: dict[str, Any] | None, context: StrategyContext):
    return get_strategy(name)(check_options(name, options), context)
