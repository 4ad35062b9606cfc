"""An Apache Iceberg table's current files (Spark's, Trino's, Flink's, Snowflake's and
PyIceberg's tables), read from its folder without a catalog: its metadata file
(``metadata/*.metadata.json``: the one ``version-hint.text`` names, else the newest) and
the manifests of its snapshot say which Parquet files make the table; the ``pyiceberg``
package reads them. The folder keeps the files later snapshots removed until they expire.

Iceberg finds a file's columns by their field ids, not their names: a file written
before a column was renamed holds it under its old name, which its ``FileView`` reads by
the table's (a dropped column not at all). A table copied from object storage (``aws s3
sync``) reads as the same table: a file the metadata names under the table's location
(``s3://bucket/events/data/...``) is that file in the folder. Rows a merge-on-read
DELETE, UPDATE or MERGE marked gone in position delete files (Spark's: Parquet files of
``file_path`` and ``pos``) are passed by, as its ``FileView`` keeps them. Refused: equality
delete files (Flink's upserts; pyiceberg does not plan them), data files other than
Parquet, and files outside the table."""

from __future__ import annotations

import datetime
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nas.core.errors import ConfigError
from nas.data.row_filter import RowFilter
from nas.data.table_files import (
    ICEBERG_METADATA,
    METADATA_SUFFIX,
    FileView,
    TableFiles,
    local_path,
    outside,
)

EQUALITY_DELETES = (
    "marks rows deleted by their values (equality delete files, as Flink's upserts write "
    "them), which recnas does not read; rewrite them into the data files first (Spark: CALL "
    "catalog.system.rewrite_data_files)"
)


def iceberg_files(
    path: Path,
    snapshot: int | None,
    field: str,
    source: str | None = None,
    as_of: int | None = None,
    filters: tuple[RowFilter, ...] = (),
    per_second: int = 1,
) -> TableFiles:
    """The files of the Iceberg table at ``path`` (its folder or a metadata file) at
    ``snapshot`` (None: its current one) or at the moment ``as_of`` (unix seconds: its
    last snapshot then), but those its manifests show hold no row ``filters`` keep
    (``pruned``); ``ConfigError`` on ``field`` (of the file ``source``) where it cannot be
    read so."""
    from pyiceberg.table import StaticTable

    metadata = path if path.is_file() else current_metadata(path)
    folder = metadata.parent.parent  # (metadata/ is in the table's folder)

    def refused(problem: str) -> ConfigError:
        return ConfigError(field, f"the Iceberg table {folder}: {problem}", source)

    try:
        table = StaticTable.from_metadata(str(metadata))
        if as_of is not None:
            then = table.snapshot_as_of_timestamp(as_of * 1000)
            if then is None:
                moment = datetime.datetime.fromtimestamp(as_of, datetime.UTC).isoformat()
                raise refused(f"has no snapshot as of {moment} (its first is later)")
            snapshot = then.snapshot_id
        if snapshot is not None and table.metadata.snapshot_by_id(snapshot) is None:
            held = ", ".join(str(s.snapshot_id) for s in table.metadata.snapshots[-5:])
            raise refused(f"has no snapshot {snapshot}; its latest: {held or 'none'}")
        tasks = list(table.scan(snapshot_id=snapshot).plan_files())
        every = len(tasks)
        tasks = pruned(table, snapshot, tasks, filters, per_second)
    except ConfigError:
        raise
    except Exception as err:  # pyiceberg's errors have no common base (ValueError, OSError, ...)
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "equality deletes" in text:
            raise refused(EQUALITY_DELETES) from None
        raise refused(f"cannot be read ({text})") from None
    location = table.metadata.location.rstrip("/")
    ids = {f.field_id: f.name for f in _fields(table.schema())}

    def local(named: str) -> Path:
        """A file the metadata names, in the table's folder (``ConfigError`` outside)."""
        if named.startswith(location + "/"):  # (a table copied from where it was written)
            file = local_path(folder, named[len(location) + 1 :])
        else:
            file = local_path(folder, named)
        if file is None:
            raise ConfigError(field, outside(folder, "iceberg", named), source)
        return file

    deletes = PositionDeletes(local, refused)
    views = {}
    for task in tasks:
        named = task.file.file_path
        if str(task.file.file_format).rsplit(".", 1)[-1].upper() != "PARQUET":
            raise refused(f"holds a data file of {task.file.file_format} ({named}): read Parquet")
        kept = deletes.kept(task) if task.delete_files else None
        views[local(named)] = FileView(kept=kept, ids=ids)  # (names: by each file's footer)
    files = sorted(views)
    version = snapshot if snapshot is not None else table.metadata.current_snapshot_id
    partitions = {file: {} for file in files}
    return TableFiles(folder, version or 0, files, partitions, views, every - len(tasks))


def pruned(table, snapshot: int | None, tasks: list, filters, per_second: int) -> list:
    """The scan's ``tasks`` but those whose files' partition values and column bounds (as
    the manifests record them) show they hold no row ``filters`` keep: pyiceberg's own
    planning, given the conditions it can weigh exactly as the rows are read (``_bounds``;
    the others are left to the rows). All of them where it cannot plan so."""
    from pyiceberg.expressions import And

    schema = table.schema()
    found = [p for rule in filters for p in _bounds(rule, schema, per_second)]
    if not found:
        return tasks
    expression = found[0] if len(found) == 1 else And(*found)
    try:
        return list(table.scan(snapshot_id=snapshot, row_filter=expression).plan_files())
    except Exception:  # (pyiceberg's errors have no common base): the rows decide
        return tasks


def _bounds(rule: RowFilter, schema, per_second: int) -> list:
    """A condition as pyiceberg's predicates on its column's Iceberg type, where they keep
    every file holding a row the condition keeps as ``source_rows`` reads it: an integer's
    text (``one_of``), an integer or double number, a time floored to seconds; none where
    they might not (a float's rounding, a date's text, ``none_of``)."""
    from pyiceberg import types as t
    from pyiceberg.expressions import GreaterThanOrEqual, In, LessThan

    try:
        kind = schema.find_field(rule.column).field_type
    except ValueError:  # (a map's key, a list's objects' field: left to the rows)
        return []
    whole = isinstance(kind, t.IntegerType | t.LongType)
    if rule.one_of:
        if isinstance(kind, t.StringType):
            return [In(rule.column, set(rule.one_of))]
        ints = {int(v) for v in rule.one_of if re.fullmatch(r"-?[1-9]\d*|0", v)}
        return [In(rule.column, ints)] if whole and ints else []
    if rule.reads == "number":  # (whole: x >= 2.5 is x >= 3; x < 2.5 is x < 3)
        if not (whole or isinstance(kind, t.DoubleType)):
            return []
        cast = math.ceil if whole else float
        low, high = rule.at_least, rule.below
    elif rule.reads == "timestamp" and (cast := _from_seconds(kind, per_second)):
        low, high = rule.since, rule.until
    else:
        return []
    low, high = (None if x is None or abs(x) >= 2**62 else cast(x) for x in (low, high))
    out = [GreaterThanOrEqual(rule.column, low)] if low is not None else []
    return out + ([LessThan(rule.column, high)] if high is not None else [])


def _from_seconds(kind, per_second: int):
    """Unix seconds as a bound on an Iceberg column of times (a time ``x`` floored to
    seconds is at least ``s`` where ``x`` is at least ``s``'s value, and below ``s`` where
    ``x`` is below it): microseconds, days (rounded up: a date is its midnight), or
    numbers in ``per_second`` units; None for another type."""
    from pyiceberg import types as t

    if isinstance(kind, t.TimestampType | t.TimestamptzType):
        return lambda seconds: seconds * 1_000_000
    if isinstance(kind, t.DateType):
        return lambda seconds: -(-seconds // 86_400)
    if isinstance(kind, t.IntegerType | t.LongType | t.DoubleType):
        return lambda seconds: seconds * per_second
    return None


class PositionDeletes:
    """The rows of a table's data files that its position delete files mark deleted (a
    merge-on-read DELETE, UPDATE or MERGE's, as Spark writes them: Parquet files of
    ``file_path`` and ``pos``), each delete file read once."""

    def __init__(self, local, refused):
        self._local, self._refused = local, refused
        self._read: dict[str, dict[str, object]] = {}  # per delete file: positions by file

    def kept(self, task):
        """A data file's rows kept (a boolean array) by the delete files planned with it;
        delete files other than Parquet position deletes refused."""
        from pyiceberg.manifest import DataFileContent, FileFormat

        kept = np.ones(task.file.record_count, dtype=bool)
        for delete in task.delete_files:  # (equality deletes: pyiceberg's planning refuses)
            if delete.content != DataFileContent.POSITION_DELETES or (
                delete.file_format != FileFormat.PARQUET
            ):
                raise self._refused(
                    f"marks rows deleted in a delete file of {delete.file_format} "
                    f"({delete.file_path}): read Parquet position deletes"
                )
            positions = self._positions(delete.file_path).get(task.file.file_path)
            if positions is not None:
                kept[positions[positions < len(kept)]] = False
        return kept

    def _positions(self, named: str) -> dict:
        """A position delete file's positions, by the data file they are in."""
        if named not in self._read:
            try:
                table = pq.read_table(self._local(named), columns=["file_path", "pos"])
            except (pa.ArrowException, OSError) as err:
                raise self._refused(f"cannot read its delete file {named} ({err})") from None
            found = {}
            for path in pc.unique(table.column("file_path")).to_pylist():
                mine = table.filter(pc.equal(table.column("file_path"), path))
                found[path] = np.asarray(mine.column("pos").to_numpy(), dtype=np.int64)
            self._read[named] = found
        return self._read[named]


def current_metadata(folder: Path) -> Path:
    """The table's current metadata file: the version ``version-hint.text`` names (a
    Hadoop catalog's), else the one of the highest number (``00003-uuid``, ``v3``)."""
    found = folder / ICEBERG_METADATA
    hint = found / "version-hint.text"
    if hint.is_file():
        named = found / f"v{hint.read_text().strip()}{METADATA_SUFFIX}"
        if named.is_file():
            return named

    def number(path: Path) -> int:
        match = re.match(r"v?(\d+)", path.name)
        return int(match.group(1)) if match else -1

    return max(found.glob(f"*{METADATA_SUFFIX}"), key=lambda p: (number(p), p.name))


def _fields(schema):
    """Every field of an Iceberg schema, at any depth."""
    from pyiceberg.types import ListType, MapType, StructType

    def walk(kind):
        if isinstance(kind, StructType):
            for f in kind.fields:
                yield f
                yield from walk(f.field_type)
        elif isinstance(kind, ListType):
            yield from walk(kind.element_type)
        elif isinstance(kind, MapType):
            yield from walk(kind.key_type)
            yield from walk(kind.value_type)

    yield from walk(schema.as_struct())
