"""The space registry: ``register_space``, ``create_space``, ``list_spaces``."""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import ValidationError

from nas.errors import UnknownNameError, config_error_from_pydantic
from search_spaces.base import SearchSpace

_REGISTRY: dict[str, type[SearchSpace]] = {}


def register_space(cls: type[SearchSpace]) -> type[SearchSpace]:
    """Class decorator: register a space under its ``name``. A duplicate name is an error."""
    if cls.name in _REGISTRY:
        raise ValueError(f"search space {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def get_space(name: str, field: str = "space.name") -> type[SearchSpace]:
    if name not in _REGISTRY:
        raise UnknownNameError(field, "search space", name, _REGISTRY)
    return _REGISTRY[name]


def list_spaces(pattern: str = "*") -> list[str]:
    return sorted(n for n in _REGISTRY if fnmatch.fnmatch(n, pattern))


def create_space(
    name: str, options: dict[str, Any] | None, num_tokens: int, field: str = "space"
) -> SearchSpace:
    """Space ``name`` with ``options`` validated; errors name ``field.options.<key>``."""
    cls = get_space(name, f"{field}.name")
    try:
        parsed = cls.Options.model_validate(options or {})
    except ValidationError as err:
        raise config_error_from_pydantic(
            err, prefix=f"{field}.options", model=cls.Options
        ) from None
    return cls(parsed, num_tokens)
