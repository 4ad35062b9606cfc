"""The current files of a lakehouse table, Delta Lake's (``delta_table.py``) or Apache
Iceberg's (``iceberg_table.py``), read from its folder: a table's files are those its log
or its metadata names at a version, not its folder's, which also keeps the files later
commits removed (a DELETE, an UPDATE, a compaction, an overwrite) until they are vacuumed
or expired, so reading the folder's files would read removed rows again, compacted ones
twice. Each file is read as Parquet, as its ``FileView`` says (``row_files.ColumnarFile``):
the rows a delete marked gone passed by, and columns stored under other names (a rename
since, a column mapping) read by the table's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

TABLE_FORMATS = {"delta": "Delta", "iceberg": "Iceberg"}
A_TABLE = {"delta": "a Delta", "iceberg": "an Iceberg"}  # (a message's words)
DELTA_LOG = "_delta_log"
ICEBERG_METADATA = "metadata"
METADATA_SUFFIX = ".metadata.json"


# a struct's stored field names: each one's name in the table, and the names within it (a
# list's or a map's values' fields: its own; a map's keys' under KEYS)
Names = dict[str, tuple[str, "Names"]]
KEYS = "\0keys"


@dataclass(frozen=True)
class FileView:
    """How one of a table's Parquet files is read: ``kept``, its rows kept (a boolean
    array, rows past its end kept too; None: all); ``names``, each column it stores under
    another name as the table names it, with its fields' likewise (None: as stored; a
    column absent from them is no longer the table's, and is not read), or ``ids``, the
    table's names by field id, which the file's own footer gives its names by
    (``names_by_id``)."""

    kept: Any = None  # np.ndarray of bool
    names: Names | None = None
    ids: dict[int, str] | None = None  # (Iceberg) the table's name of each field id


def children(kind) -> list:
    """The fields within an Arrow type: a struct's, a list's values', a map's values'."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        return list(kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return children(kind.value_type)
    return children(kind.item_type) if pa.types.is_map(kind) else []


def names_by_id(schema, ids: dict[int, str]) -> Names:
    """A Parquet file's columns and fields as the table names them now, by their field ids
    (``ids``: Iceberg's; a column without one, as a Hive table migrated in left it, by its
    own name; one whose id the table no longer has, dropped since, left out)."""

    def within(fields) -> Names:
        out: Names = {}
        for f in fields:
            raw = (f.metadata or {}).get(b"PARQUET:field_id")
            if raw is not None and int(raw) not in ids:
                continue
            name = ids[int(raw)] if raw is not None else f.name
            out[f.name] = (name, within(children(f.type)))
        return out

    return within(schema)


@dataclass(frozen=True)
class TableFiles:
    """A table at a version: its Parquet files, sorted, each one's partition columns'
    values as text (None: null) where its files do not hold them (Delta's), and how each
    file is read where not as any Parquet file is; ``version``: Delta's version, Iceberg's
    snapshot id."""

    folder: Path
    version: int
    files: list[Path]
    partitions: dict[Path, dict[str, str | None]]
    views: dict[Path, FileView]
    passed_by: int = 0  # files of the table left out by ``source.where`` (Iceberg's)


def table_format(path: Path) -> str | None:
    """``delta`` or ``iceberg`` where ``path`` is such a table's folder (or an Iceberg
    table's metadata file), else None."""
    try:
        if path.is_dir() and (path / DELTA_LOG).is_dir():
            return "delta"
        if path.is_file() and path.name.endswith(METADATA_SUFFIX):
            return "iceberg"
        metadata = path / ICEBERG_METADATA
        if path.is_dir() and metadata.is_dir() and any(metadata.glob(f"*{METADATA_SUFFIX}")):
            return "iceberg"
    except OSError:
        pass
    return None


def table_above(path: Path) -> tuple[Path, str] | None:
    """The table whose folder holds ``path`` (a file or a folder in it) and its format."""
    for folder in (path, *path.absolute().parents):
        try:
            if not folder.is_dir():
                continue
        except OSError:  # a name too long, a folder that may not be searched: no table
            continue
        if (found := table_format(folder)) is not None:
            return folder, found
    return None


def inside_table(given: object, table: Path, fmt: str, instead: str) -> str:
    """Why files named in a table's folder (``given``) are refused, and what to do
    ``instead``."""
    told = "log" if fmt == "delta" else "metadata"
    return (
        f"{given} is in the {TABLE_FORMATS[fmt]} table {table}, whose {told} says which of "
        f"its files are current (the folder keeps the files later commits removed): {instead}"
    )


def local_path(folder: Path, path: str) -> Path | None:
    """A file a table's log or metadata names (a path relative to the table, URL-encoded,
    or an absolute URI) as a path in the table's folder; None where it is elsewhere."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file") and not parsed.netloc:
        found = Path(unquote(parsed.path))
        found = found if found.is_absolute() else folder / found
        try:
            found.absolute().relative_to(folder.absolute())
        except ValueError:
            return None
        return found
    return None


def outside(folder: Path, fmt: str, named: str) -> str:
    """Why a table holding a file outside its folder is refused."""
    return (
        f"the {TABLE_FORMATS[fmt]} table {folder} holds a file outside its folder ({named}): "
        "recnas reads a table whose files are in its own folder"
    )
