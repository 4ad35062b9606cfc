"""Reading the files users hand to recnas (search YAML, spec JSON), with limits that turn any
malformed, binary, huge or hostile file into one clear ``ConfigError``:

    require_file(path, flag)   a regular file, or an error saying what is there instead
    read_text(path)    UTF-8 text of at most MAX_FILE_BYTES
    parse_yaml(text)   YAML mappings without duplicate keys, nested at most MAX_DEPTH
    parse_json(text)   the same for JSON

Parsers recurse: without a depth limit, ``[[[[...]]]]`` raises ``RecursionError``. Python
refuses to turn integers of over 4,300 digits into text (and back), so such a number is
reported as a value, not a crash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from nas.core.errors import ConfigError, shown

MAX_FILE_BYTES = 1 << 20  # 1 MiB: a search config or a spec is a few hundred bytes
MAX_DEPTH = 32  # the deepest real config nests 5 levels
MAX_VALUES = 100_000  # values in one document, YAML aliases expanded


def require_file(path: Path, flag: str) -> None:
    """A ``ConfigError`` on ``flag`` unless ``path`` is a regular file, saying what it is."""
    try:
        if path.is_file():
            return
        if path.is_dir():
            raise ConfigError(flag, f"{path} is a folder, not a file")
        if path.exists():
            raise ConfigError(flag, f"{path} is not a regular file")
    except OSError as err:  # a name too long, a folder that may not be searched
        raise ConfigError(flag, f"cannot use {shown(str(path))} ({err.strerror})") from None
    raise ConfigError(flag, f"no file at {path}")


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of a user's file (``what``: "search config", "spec")."""
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise ConfigError("", f"is a folder, not a {what}", str(path))
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                "", f"{size} bytes is too large for a {what} (limit {MAX_FILE_BYTES})", str(path)
            )
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError("", f"cannot read the {what} ({err.strerror})", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            "", f"is not UTF-8 text (byte {err.start}): a {what} is a text file", str(path)
        ) from None


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice in one mapping (PyYAML keeps the last)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, list | dict):
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse_yaml(text: str, source: str) -> Any:
    _check_nesting(text, "[{", source)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f", line {where.line + 1}" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError("", f"not valid YAML{line}: {problem}", source) from None
    except (RecursionError, ValueError) as err:
        raise ConfigError("", f"not a usable YAML document: {_short(err)}", source) from None
    return _checked_depth(data, source)


def parse_json(text: str, source: str) -> Any:
    _check_nesting(text, "[{", source)

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
        keys = [k for k, _ in pairs]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ConfigError("", f"duplicate key {twice[0]!r}", source)
        return dict(pairs)

    try:
        data = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise ConfigError(
            "", f"not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}", source
        ) from None
    except (RecursionError, ValueError) as err:
        raise ConfigError("", f"not a usable JSON document: {_short(err)}", source) from None
    return _checked_depth(data, source)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_nesting(text: str, openers: str, source: str) -> None:
    """Refuse deep nesting before a recursive parser sees it (a cheap upper bound: brackets
    inside strings count too, which no real config comes near)."""
    depth = deepest = 0
    for char in text:
        if char in openers:
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    if deepest > MAX_DEPTH:
        raise ConfigError("", f"nests lists or mappings deeper than {MAX_DEPTH} levels", source)


def _checked_depth(data: Any, source: str) -> Any:
    """Block-style YAML nests by indentation, not brackets: check the parsed value too, and
    its size counted with YAML aliases expanded (a few lines of ``&a [*b, *b, ...]`` stand
    for billions of values)."""
    stack, values = [(data, 0)], 0
    while stack:
        value, depth = stack.pop()
        values += 1
        if depth > MAX_DEPTH:
            raise ConfigError("", f"nests lists or mappings deeper than {MAX_DEPTH} levels", source)
        if values > MAX_VALUES:
            raise ConfigError("", f"holds over {MAX_VALUES} values (aliases expanded)", source)
        if isinstance(value, dict):
            stack.extend((child, depth + 1) for child in value.values())
        elif isinstance(value, list):
            stack.extend((child, depth + 1) for child in value)
    return data


def _short(err: Exception) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 200 else text[:180] + "..."
