"""A Delta Lake table's current files (the tables of Databricks, of Spark's and delta-rs's
writers): its log, ``_delta_log/``, says which of the Parquet files in its folder make the
table at a version. The folder also holds the files later commits removed (a DELETE, an
UPDATE, an OPTIMIZE, an overwrite) until a VACUUM, so its files read as a folder would
read removed rows again, twice over after an OPTIMIZE. The ``deltalake`` package (delta-rs)
replays the log, checkpoints and all; recnas reads the files it names as Parquet, each
with its partition columns' values as the log records them (not as its folders' names
say: a writer may name them otherwise).

A DELETE, UPDATE or MERGE of a table with deletion vectors (Databricks' default since
2024) marks rows gone inside a file that stays: each such file's rows kept are read, as a
boolean array per file (``kept``) that ``row_files.ColumnarFile`` passes the others by.
Refused, as rows recnas would read wrongly: column mapping (columns stored under other
names: renamed or dropped ones), and files outside the table's folder (a shallow clone's,
or in object storage)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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
class DeltaFiles:
    """A Delta table at a version: its Parquet files, sorted, and each one's partition
    columns' values as text (None: null), as a Hive-style folder's would read."""

    folder: Path
    version: int
    files: list[Path]
    partitions: dict[Path, dict[str, str | None]]
    kept: dict  # Path -> np.ndarray of bool: a file's rows kept, where a DELETE marked some


def delta_files(folder: Path, version: int | None, field: str, source: str | None = None):
    """The files of the Delta table at ``folder``, at ``version`` (None: its latest);
    ``ConfigError`` on ``field`` (of the file ``source``) where it cannot be read so."""
    import numpy as np
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
    if mode != "none":
        raise refused(
            f"stores its columns under other names (column mapping, mode {mode}: a column "
            "renamed or dropped), which recnas does not read; write the table to Parquet "
            "files (Spark: df.write.parquet) and declare format: parquet"
        )
    kept = {}
    uris, masks = vectors.column("filepath"), vectors.column("selection_vector")
    for uri, mask in zip(uris.to_pylist(), masks.to_pylist(), strict=True):
        kept[_local(folder, uri)] = np.asarray(mask, dtype=bool)
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
    return DeltaFiles(folder, table.version(), files, partitions, kept)


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
