"""A Delta Lake table's current files (the tables of Databricks, of Spark's and delta-rs's
writers): its log, ``_delta_log/``, says which of the Parquet files in its folder make the
table at a version. The folder also holds the files later commits removed (a DELETE, an
UPDATE, an OPTIMIZE, an overwrite) until a VACUUM, so its files read as a folder would
read removed rows again, twice over after an OPTIMIZE. The ``deltalake`` package (delta-rs)
replays the log, checkpoints and all; recnas reads the files it names as Parquet, each
with its partition columns' values as the log records them (not as its folders' names
say: a writer may name them otherwise).

How each file is read is its ``FileView``, which ``row_files.ColumnarFile`` applies: a
DELETE, UPDATE or MERGE of a table with deletion vectors (Databricks' default since 2024)
marks rows gone inside a file that stays, and only the rows kept are read; a table with
column mapping (a column renamed or dropped: Databricks turns it on so) stores its
columns, and its objects' fields, under physical names (``col-5f2a...``), read under the
table's names. Refused: files outside the table's folder (a shallow clone's, or in object
storage)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from nas.core.errors import ConfigError

DELTA_LOG = "_delta_log"


def is_delta_table(path: Path) -> bool:
    """Whether ``path`` is a Delta table's folder (one holding ``_delta_log/``)."""
    try:
        return path.is_dir() and (path / DELTA_LOG).is_dir()
    except OSError:
        return False


def delta_table_above(path: Path) -> Path | None:
    """The Delta table whose folder holds ``path`` (a file or a folder in it), if any."""
    for folder in (path, *path.absolute().parents):
        if is_delta_table(folder):
            return folder
    return None


def inside_table(given: object, table: Path, instead: str) -> str:
    """Why files named in a Delta table's folder (``given``) are refused, and what to do
    ``instead``."""
    return (
        f"{given} is in the Delta table {table}, whose log says which of its files are "
        f"current (the folder keeps the files later commits removed): {instead}"
    )


@dataclass(frozen=True)
class FileView:
    """How one of a Delta table's Parquet files is read: ``kept``, its rows kept (a
    boolean array, rows past its end kept too; None: all); ``names``, each column it
    stores under a physical name as the table names it, with its fields' likewise
    (``Names``; None: as stored)."""

    kept: Any = None  # np.ndarray of bool
    names: Names | None = None


# a struct's physical field names: each one's name in the table, and the names within it
# (a list's or a map's values' fields: its own; a map's keys' under KEYS)
Names = dict[str, tuple[str, "Names"]]
KEYS = "\0keys"


def column_names(schema: dict) -> Names:
    """A Delta schema's (its log's JSON) physical names of every field, at any depth."""

    def within(kind) -> Names:
        if not isinstance(kind, dict):
            return {}
        if kind.get("type") == "struct":
            out = {}
            for f in kind["fields"]:
                physical = f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"])
                out[physical] = (f["name"], within(f["type"]))
            return out
        if kind.get("type") == "array":
            return within(kind["elementType"])
        if kind.get("type") == "map":
            inner = within(kind["valueType"])
            keys = within(kind["keyType"])
            return {**inner, KEYS: ("", keys)} if keys else inner
        return {}

    return within(schema)


@dataclass(frozen=True)
class DeltaFiles:
    """A Delta table at a version: its Parquet files, sorted, and each one's partition
    columns' values as text (None: null), as a Hive-style folder's would read."""

    folder: Path
    version: int
    files: list[Path]
    partitions: dict[Path, dict[str, str | None]]
    views: dict[Path, FileView]  # how a file is read, where not as any Parquet file is


def delta_files(folder: Path, version: int | None, field: str, source: str | None = None):
    """The files of the Delta table at ``folder``, at ``version`` (None: its latest);
    ``ConfigError`` on ``field`` (of the file ``source``) where it cannot be read so."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    folder = folder.absolute()  # (the deletion vectors name their files so)

    def refused(problem: str) -> ConfigError:
        return ConfigError(field, f"the Delta table {folder}: {problem}", source)

    try:
        table = DeltaTable(str(folder), version=version)
        actions = pa.table(table.get_add_actions(flatten=True))
        vectors = pa.table(table.deletion_vectors())
    except (DeltaError, OSError) as err:
        problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        latest = _latest_version(folder)
        if version is not None and latest is not None and version > latest:
            problem = f"has no version {version}; its latest is {latest}"
        raise refused(f"cannot be read ({problem})") from None
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    names = column_names(json.loads(table.schema().to_json())) if mode != "none" else None
    kept = {}  # (a byte a row of each file a DELETE marked: no Python object a row)
    masks = vectors.column("selection_vector").combine_chunks()
    flat, ends = masks.flatten().to_numpy(zero_copy_only=False), masks.offsets.to_numpy()
    for i, uri in enumerate(vectors.column("filepath").to_pylist()):
        kept[_local(folder, uri)] = flat[ends[i] : ends[i + 1]].astype(bool)
    files, partitions = [], {}
    named = [c for c in actions.column_names if c.startswith("partition.")]
    texts = {c: pc.cast(actions.column(c), pa.string()).to_pylist() for c in named}
    for i, relative in enumerate(actions.column("path").to_pylist()):
        path = _local(folder, relative)
        if path is None:
            raise refused(
                f"holds a file outside its folder ({relative}): recnas reads a table whose "
                "files are in its own folder"
            )
        files.append(path)
        partitions[path] = {c.removeprefix("partition."): texts[c][i] for c in named}
    files.sort()
    views = {
        path: FileView(kept.get(path), names) for path in files if names is not None or path in kept
    }
    return DeltaFiles(folder, table.version(), files, partitions, views)


def _local(folder: Path, path: str) -> Path | None:
    """A file the log names (a path relative to the table, URL-encoded, or an absolute
    URI) as a path in the table's folder; None where it is elsewhere."""
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


def _latest_version(folder: Path) -> int | None:
    """The highest version the log's commits name (None: none)."""
    versions = [
        int(p.name[:20]) for p in (folder / DELTA_LOG).glob("*.json") if p.name[:20].isdigit()
    ]
    return max(versions) if versions else None
