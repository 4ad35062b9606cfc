"""The space registry: ``register_space``, ``create_space(name, options, inputs)``,
``list_spaces``."""

from __future__ import annotations

from nas.core.catalog import Catalog
from search_spaces.base import SearchSpace

SPACES: Catalog[SearchSpace] = Catalog("search space", "space")
register_space = SPACES.register
get_space = SPACES.get
list_spaces = SPACES.names
check_options = SPACES.options
create_space = SPACES.create  # (name, options, SpaceInputs)
