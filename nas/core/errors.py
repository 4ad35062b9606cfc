"""The recnas error family: every message names what is wrong and what would be valid.

User input (a spec, a config, a data file, a CLI flag) is checked with these, never with
``assert``; the CLI turns a ``NasError`` into a one-paragraph message and exit code 2.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: error messages never echo a huge value
    (nor fail on an integer too long to print)."""
    try:
        text = repr(value)
    except ValueError:  # an int over sys.get_int_max_str_digits() digits
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


class NasError(Exception):
    """Base of every error recnas raises on purpose."""


class ConfigError(NasError):
    """A value in a spec or config is invalid. ``field`` is its dotted path (``a[0].b``)."""

    def __init__(self, field: str, message: str, source: str | None = None):
        self.field = field
        self.message = message
        self.source = source
        text = f"{field}: {message}" if field else message
        super().__init__(f"{source}: {text}" if source else text)

    def within(self, prefix: str = "", source: str | None = None) -> ConfigError:
        """The same error, its field placed under ``prefix``, naming ``source`` (a file).
        An error of another file (a schema file a search config names) keeps that file's
        name and field in its message, under ``prefix``; one of a file ``source`` already
        names ("spec.json (on movielens-1m)") takes ``source`` as it is."""
        if source and self.source and self.source not in source:
            return ConfigError(prefix, str(self), source)
        field = ".".join(part for part in (prefix, self.field) if part)
        return ConfigError(field, self.message, source or self.source)


class UnknownNameError(ConfigError):
    """A name that is not registered; the message lists the close matches and the choices."""

    def __init__(self, field: str, kind: str, name: str, choices: Iterable[str]):
        choices = sorted(choices)
        close = difflib.get_close_matches(str(name)[:200], choices, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
        super().__init__(
            field, f"unknown {kind} {shown(name)}.{hint} Valid {plural}: {', '.join(choices)}."
        )


class DataError(NasError):
    """A data file is missing or malformed. Names the file (and line, when there is one)."""

    def __init__(self, path: object, message: str, line: int | None = None):
        where = f"{path}, line {line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class TrainingError(NasError):
    """Training could not produce a usable model (a NaN/Inf loss, for instance)."""


def config_error_from_pydantic(
    err, source: str | None = None, prefix: str = "", model=None
) -> ConfigError:
    """The first problem of a pydantic ``ValidationError`` as a ``ConfigError`` naming its
    field. With ``model`` (the pydantic class validated), an unknown field lists the valid ones."""
    first = _first_problem(err.errors())
    loc = tuple(part for part in first["loc"] if not _union_member(part))
    field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown field"
        found = _model_at(model, first["loc"][:-1]) if model is not None else None
        if found is not None and found.model_fields:
            message += f"; valid fields here: {', '.join(found.model_fields)}"
    elif first["type"] == "missing":
        message = "is required"
    elif first["type"] in _IN_YAML_WORDS:  # pydantic's words name Python's types
        message = _IN_YAML_WORDS[first["type"]]
    elif first["type"] == "model_type":  # pydantic's words name our class
        found = _model_at(model, first["loc"]) if model is not None else None
        message = "must be a mapping" if found is None else _mapping_of(found)
    if loc and first["type"] not in ("missing", "extra_forbidden", "value_error"):
        message += f" (got {shown(first['input'])})"
    return ConfigError(field.lstrip("."), message).within(prefix, source)


def _union_member(part) -> bool:
    """Whether a part of an error's location names a member of a union type (pydantic's
    ``constrained-str``, ``tuple[str, ...]``, ``int``), not a field or an index."""
    return isinstance(part, str) and (not part.isidentifier() or part in _TYPE_NAMES)


_IN_YAML_WORDS = {
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
}
_TYPE_NAMES = {"str", "int", "float", "bool", "bytes", "none", "list", "tuple", "dict"}


def _first_problem(errors: list[dict]) -> dict:
    """The first error, or where a value failed every member of a union, the member it went
    furthest in (a list of names with one bad item: that item, not "should be a string")."""
    first = errors[0]
    at = next((i for i, part in enumerate(first["loc"]) if _union_member(part)), None)
    if at is None:
        return first
    members = [
        e
        for e in errors
        if e["loc"][:at] == first["loc"][:at] and len(e["loc"]) > at and _union_member(e["loc"][at])
    ]
    return max(members, key=lambda e: len(e["loc"]))  # the first of the furthest


def _mapping_of(model) -> str:
    """What a field holding ``model`` takes, in a user's words."""
    fields = f"a mapping of {', '.join(model.model_fields)}"
    return f"must be a name or {fields}" if "name" in model.model_fields else f"must be {fields}"


def _model_at(model, loc: tuple):
    """The (nested) pydantic model found at ``loc`` inside ``model`` (``X | None`` read as
    ``X``), or None."""
    for part in loc:
        if isinstance(part, int):  # an item of a list, whose model the list's field named
            continue
        info = getattr(model, "model_fields", {}).get(part)
        if info is None:
            return None
        model = info.annotation
        models = [a for a in typing.get_args(model) if hasattr(a, "model_fields")]
        if len(models) == 1:
            model = models[0]
    return model if hasattr(model, "model_fields") else None
