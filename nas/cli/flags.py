"""Flag types and flags shared by the commands."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nas.core.errors import ConfigError, shown
from nas.service.config import SEED_MAX, default_registry_url


def integer(text: str) -> int:
    """An integer flag's value; argparse's own message would echo any text back in full."""
    try:
        return int(text)
    except ValueError:  # not a number, or over Python's 4,300-digit limit
        raise argparse.ArgumentTypeError(f"expected an integer, got {shown(text)}") from None


def whole_number(minimum: int):
    """The type of an integer flag that must be at least ``minimum``."""

    def parse(text: str) -> int:
        value = integer(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its message
    return parse


def seed_number(text: str) -> int:
    """A seed flag's value: numpy's and torch's range, as a search YAML's ``seed``."""
    value = integer(text)
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 0 to {SEED_MAX}, got {shown(text)}"
        )
    return value


def _without_nul(text: str) -> str:
    """A path flag's text, refused if it holds a NUL (which no path may: a shell cannot pass
    one, but a script calling ``nas.cli.main`` can)."""
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"{shown(text)}: a path holds no NUL character")
    return text


def folder(text: str) -> Path:
    """A folder flag's value: an existing folder, or one that can be made where it is named
    (a write is tried in its nearest existing parent and undone; nothing is left behind)."""
    path = Path(_without_nul(text)).expanduser()
    try:
        existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    except OSError as err:  # a name too long, a parent that may not be searched
        raise argparse.ArgumentTypeError(f"{shown(text)}: {err.strerror}") from None
    if not existing.is_dir():
        where = "" if existing == path.absolute() else f" ({existing} is a file)"
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a folder{where}")
    try:
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise argparse.ArgumentTypeError(
            f"{shown(text)}: cannot write in {existing} ({reason})"
        ) from None
    return path


def new_file(*suffixes: str):
    """The type of a flag naming a file to write: a new ``NAME.SUFFIX`` (one of
    ``suffixes``) in a folder that exists or can be made (``folder``); nothing is ever
    overwritten."""

    def parse(text: str) -> Path:
        path = Path(_without_nul(text)).expanduser()
        if path.suffix.lower() not in suffixes or path.name.lower() in suffixes:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not a {_either(suffixes)} file's name (give "
                f"{_either(['NAME' + s for s in suffixes])})"
            )
        folder(str(path.parent))
        try:
            there = path.exists() or path.is_symlink()
        except OSError as err:  # a name too long
            raise argparse.ArgumentTypeError(f"{shown(text)}: {err.strerror}") from None
        if there:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} exists; give a new file name (nothing is overwritten)"
            )
        return path

    parse.__name__ = "file name"
    return parse


def _either(choices) -> str:
    """The choices as "a, b or c"."""
    *first, last = choices
    return f"{', '.join(first)} or {last}" if first else last


def number(text: str) -> float:
    """A finite number flag's value."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {shown(text)}")
    return value


def common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        type=folder,
        help="dataset cache (default $RECNAS_CACHE_DIR or ./nas-runs/data)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )


@contextmanager
def as_flags() -> Iterator[None]:
    """Name option errors by the flag the user typed (``--batch-size``, not ``batch_size``)."""
    try:
        yield
    except ConfigError as err:
        if err.field in FLAG_FIELDS and err.source is None:  # not a field of a file
            raise ConfigError("--" + err.field.replace("_", "-"), err.message) from None
        raise


FLAG_FIELDS = ("steps", "batch_size", "lr", "embedding_lr", "seed", "source", "rows", "min_count")


def registry_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry-url", help="SQLAlchemy URL of the registry (default: sqlite in nas-runs)"
    )


def tracking_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking store (default: MLFLOW_TRACKING_URI, else the runs folder's)",
    )


def tracking_uri(args: argparse.Namespace) -> str:
    """The MLflow tracking store ``tracking_flag`` names."""
    from nas.service import endpoints

    given = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    return endpoints.tracking_uri(given) if given else endpoints.local_tracking_uri()


def open_registry(args: argparse.Namespace, url: str | None = None, create: bool = False):
    """The registry the command names. Only ``nas submit`` creates one: every other command
    reads a runs folder that has none as empty, and leaves it as it is."""
    from nas.service.registry import Registry

    return Registry(args.registry_url or url or default_registry_url(), create=create)
