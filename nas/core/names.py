"""The names users give what recnas stores (searches, datasets, labels, registered models):
letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit. MLflow's metric
keys and model names, the registry's ids and file names all take them as they are."""

from __future__ import annotations

import re

NAME_RULE = "letters, digits, '_', '.' or '-', starting with a letter or digit"


def name_pattern(longest: int = 100) -> str:
    """The regular expression of a name of at most ``longest`` characters (unanchored)."""
    return rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{longest - 1}}}"


def is_name(text: object, longest: int = 100) -> bool:
    return isinstance(text, str) and re.fullmatch(name_pattern(longest), text) is not None
