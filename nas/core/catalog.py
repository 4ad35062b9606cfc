"""The one registry style: entries looked up by the name a user writes.

``Registry``: named entries of any kind (blocks, objectives, datasets, cost targets). A
duplicate name is an error; an unknown one is a ``ConfigError`` naming the field, the close
matches and every choice.

``Catalog``: a ``Registry`` of classes, each configured by a pydantic ``Options`` model (search
spaces and strategies: a name in a search YAML with an ``options`` mapping beside it). Bad
options name their field (``strategy.options.population_size``) and what would be valid.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from nas.core.errors import UnknownNameError, config_error_from_pydantic


class Options(BaseModel):
    """Base of every options model: unknown keys are errors, values are not coerced, and
    numbers are finite."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


E = TypeVar("E")
T = TypeVar("T")


class Registry(Generic[E]):
    def __init__(self, kind: str, field: str):
        self.kind = kind  # "objective": how messages name an entry
        self.field = field  # "objectives": where a user writes the name
        self._entries: dict[str, E] = {}

    @classmethod
    def of(cls, kind: str, field: str, entries: Iterable[E]) -> Registry[E]:
        """A registry of ``entries``, each under its ``name`` attribute."""
        registry = cls(kind, field)
        for entry in entries:
            registry.add(entry.name, entry)
        return registry

    def add(self, name: str, entry: E) -> E:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: str, field: str | None = None) -> E:
        """The entry ``name``; ``field`` (default: the registry's) is what an error names."""
        if not isinstance(name, str) or name not in self._entries:
            raise UnknownNameError(field or self.field, self.kind, name, self._entries)
        return self._entries[name]

    def names(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def items(self) -> list[tuple[str, E]]:
        """Every entry, in the order registered (``names`` sorts, for messages)."""
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self):
        return iter(self._entries)


class Catalog(Registry[type[T]]):
    def __init__(self, kind: str, field: str):
        super().__init__(kind, f"{field}.name")
        self.options_field = f"{field}.options"  # where the options sit in a search config

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: register ``cls`` under its ``name`` attribute."""
        return self.add(cls.name, cls)

    def create(self, name: str, options: dict[str, Any] | None, *args: Any) -> T:
        """An instance of ``name`` with its options validated, and ``args`` after them."""
        return self.get(name)(self.options(name, options), *args)

    def options(self, name: str, options: dict[str, Any] | None) -> Options:
        """``name``'s options, validated; errors name ``<field>.options.<key>``."""
        cls = self.get(name)
        try:
            return cls.Options.model_validate(options or {})
        except ValidationError as err:
            raise config_error_from_pydantic(
                err, prefix=self.options_field, model=cls.Options
            ) from None
