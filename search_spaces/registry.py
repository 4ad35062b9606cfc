"""The space registry: ``register_space``, ``create_space``, ``list_spaces``."""

from __future__ import annotations

from typing import Any

from nas.core.catalog import Catalog
from search_spaces.base import SearchSpace, SpaceInputs

SPACES: Catalog[SearchSpace] = Catalog("search space", "space")
register_space = SPACES.register
get_space = SPACES.get
list_spaces = SPACES.names


def check_options(name: str, options: dict[str, Any] | None):
    return SPACES.options(name, options)


def create_space(name: str, options: dict[str, Any] | None, inputs: SpaceInputs) -> SearchSpace:
    """Space ``name`` over a dataset's ``inputs``, its options validated."""
    return get_space(name)(SPACES.options(name, options), inputs)
