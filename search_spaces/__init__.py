"""Declarative search spaces built from blocks: sample, mutate, crossover, Optuna suggest.

>>> import search_spaces
>>> search_spaces.list_spaces()
['ctr_stack', 'dhen', 'hstu_seq', 'rocs', 'wukong']
"""

from search_spaces import ctr_stack, hstu_seq, rocs  # noqa: F401  (registers)
from search_spaces.base import SearchSpace, SpaceInputs, SpaceOptions
from search_spaces.registry import (
    check_options,
    create_space,
    get_space,
    list_spaces,
    register_space,
)

__all__ = [
    "SearchSpace",
    "SpaceInputs",
    "SpaceOptions",
    "check_options",
    "create_space",
    "get_space",
    "list_spaces",
    "register_space",
]
