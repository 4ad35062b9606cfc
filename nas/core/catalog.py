"""``Catalog``: classes registered by name, each configured by a pydantic ``Options`` model.

Search spaces and strategies are both looked up by the name a user writes in a search YAML
and configured by the ``options`` mapping beside it; this is the one place that does that.
A duplicate name is an error; an unknown one lists the close matches; bad options name
their field (``strategy.options.population_size``) and what would be valid.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from nas.core.errors import UnknownNameError, config_error_from_pydantic


class Options(BaseModel):
    """Base of every options model: unknown keys are errors, values are not coerced, and
    numbers are finite."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


T = TypeVar("T")


class Catalog(Generic[T]):
    def __init__(self, kind: str, field: str):
        self.kind = kind  # "strategy": how messages name an entry
        self.field = field  # "strategy": where its name and options sit in a search config
        self._entries: dict[str, type[T]] = {}

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: register ``cls`` under its ``name`` attribute."""
        if cls.name in self._entries:
            raise ValueError(f"{self.kind} {cls.name!r} is already registered")
        self._entries[cls.name] = cls
        return cls

    def get(self, name: str) -> type[T]:
        if name not in self._entries:
            raise UnknownNameError(f"{self.field}.name", self.kind, name, self._entries)
        return self._entries[name]

    def names(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def options(self, name: str, options: dict[str, Any] | None) -> Options:
        """``name``'s options, validated; errors name ``<field>.options.<key>``."""
        cls = self.get(name)
        try:
            return cls.Options.model_validate(options or {})
        except ValidationError as err:
            raise config_error_from_pydantic(
                err, prefix=f"{self.field}.options", model=cls.Options
            ) from None
