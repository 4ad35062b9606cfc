"""A schema file's source files read in record batches (pyarrow), each declared column
converted to what its declaration needs, a wrong value refused naming the file, the row and
the column: Parquet, CSV and JSON lines (Arrow's readers; JSON lines whose types mix, line by
line in Python), numbers, text, lists, histories of events and times as ``convert``
(``nas/data/raw.py``) reads a served row's, so that a model serves what it trained on.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import itertools
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nas.core.disk import NO_ROOM
from nas.core.errors import DataError, shown
from nas.data.labels import common_values
from nas.data.raw import (
    EVENT_KEYS,
    INT64_LIMIT,
    LATEST_SECONDS,
    MISSING_NUMBER_TEXTS,
    NO_ACTION,
    RawInputError,
    convert,
    event_fields,
    float_text,
    too_late,
    unix_seconds,
)
from nas.data.raw_table import events_array, is_list
from nas.data.row_files import (
    CODECS,
    ColumnarFile,
    binary_as_text,
    first_lines,
    held_keys,
    key_names,
    keyed_parts,
    nested_names,
    numbered,
    root_column,
    sniffed_delimiter,
    text_fault,
    told_dialect,
    with_fields,
    with_fields_of,
    with_list_fields_of,
    with_partitions,
)
from nas.data.row_filter import RowFilter, span_text
from nas.data.schema_file import (
    Condition,
    Feature,
    SchemaFile,
    Source,
    SourceFiles,
)
from nas.data.table_files import FileView

BATCH_ROWS = 65_536
BLOCK_BYTES = 8 << 20  # csv and jsonl: bytes parsed at a time
ACTION_MAX = 127  # a history's action is stored as int8
SAMPLE_PARTS = 4  # within a file: places its rows are read from, spread over it
SAMPLE_BYTES = 8 << 20  # a text file's bytes read, at most
SAMPLE_ROWS = 40_000  # a JSON-lines file's rows read for its keys' types
COMPRESSED = tuple(CODECS)  # the names Arrow's readers decompress
TRAILING = "\x00trailing"  # a CSV file's empty field past its header's (``header_names``)


DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+([eE][+-]?\d+)?")  # 3,14: Excel's where "," is the mark
# 1,234.5 and 1,234,567: thousands separated by "," (not 1,234 alone: a decimal comma too)
THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+\.\d+|[+-]?\d{1,3}(,\d{3}){2,}")
ONE_THOUSANDS = re.compile(r"[+-]?\d{1,3},\d{3}")  # 3,000: three thousand, or three
BAD_LINES_HINT = "to pass such lines by, counted and told, give the source on_bad_lines: skip"


@dataclass
class Skipped:
    """Lines of a source passed by as not rows (``on_bad_lines: skip``): how many, and the
    first's place and why."""

    lines: int = 0
    first: str = ""

    def add(self, what: str) -> None:
        self.lines += 1
        self.first = self.first or what

    def csv_row(self, row) -> str:
        """Arrow's ``invalid_row_handler``: the row counted and passed by."""
        fields = f"{row.actual_columns} fields, not {row.expected_columns}"
        self.add(f"a row of {fields}: {_cut(row.text.encode())}")
        return "skip"


@dataclass
class Batch:
    file: Path
    first: int  # the batch's first row, counted from 0 within its file
    start: int  # its first row among the rows read (those source.where keeps), over every file
    columns: dict[str, pa.Array]
    # under source.where: each row's place counted from ``first`` (the rows passed by left
    # out); None: every row from ``first`` on
    kept: np.ndarray | None = None
    origin: int | None = None  # its first row over the files read, rows passed by too

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def bad(self, column: str, index: int, problem: str) -> DataError:
        """A ``DataError`` naming the file, the row (1-based, header excluded) and column."""
        row = self.first + (index if self.kept is None else int(self.kept[index]))
        return DataError(self.file, f"row {row + 1}: column {column!r} {problem}")

    def source_rows(self) -> np.ndarray:
        """Each row's place in the source, counted over the files read (the rows
        ``source.where`` passed by in them too)."""
        origin = self.start if self.origin is None else self.origin
        return origin + (np.arange(len(self)) if self.kept is None else self.kept)


@dataclass
class EventsOf(Batch):
    """A batch's history events: an error at an event names the event's row."""

    row_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def bad(self, column: str, index: int, problem: str) -> DataError:
        return super().bad(column, int(self.row_of[index]), problem)


@dataclass(frozen=True)
class ColumnsOf:
    """A source read for some of its columns, each as a kind (``Rows``' reading of a
    schema file, for a log that is no dataset of its own)."""

    source: Source
    kinds: dict[str, str]

    def columns(self) -> list[str]:
        return list(dict.fromkeys([*self.kinds, *(self.source.where or ())]))

    required_columns = columns

    def column_kinds(self) -> dict[str, str]:
        return dict(self.kinds)

    def reading(self, column: str) -> Any:
        raise KeyError(column)  # (no list is read)


def with_last_resolved(source: Source, files: SourceFiles) -> Source:
    """``source`` with each ``where`` condition on the ``last`` span of a time made a
    ``from``: a span before the newest time its files hold (the column's greatest value:
    from Parquet footers' statistics or partition folders where they give it, else a pass
    over the column), so that ``Rows`` reads it as any range of times."""
    if not any(c.last is not None for c in (source.where or {}).values()):
        return source
    where = dict(source.where)
    for column, condition in source.where.items():
        if condition.last is None:
            continue
        newest = newest_time(source, files, column)
        if newest is None:
            raise DataError(
                source.path,
                f"has no row with a time in {column!r} (source.where: {column} in the last "
                f"{span_text(condition.last)})",
            )
        where[column] = Condition.model_construct(
            since=newest - condition.last + 1, last=condition.last
        )
    return source.model_copy(update={"where": where})


def newest_time(source: Source, files: SourceFiles, column: str) -> int | None:
    """The greatest time in ``column`` over a source's files (unix seconds, as ``Rows``
    reads it; empty values passed by), None where none holds one: from the partition
    folders where every file has one; else each Parquet file's footer statistics where they
    tell (a table's file by the name it stores the column under; not one with rows deleted,
    whose greatest time may be a deleted row's), and a pass over the column of the others."""
    rule = RowFilter(column, since=-(2**63))
    folders = [files.partitions.get(p, {}) for p in files.files]
    if folders and all(column in f for f in folders):  # a partition column: its folders' values
        values = pa.array([f[column] for f in folders], pa.string())
        held = values.filter(pc.is_valid(values))
        seconds = _seconds(Batch(Path(source.path), 0, 0, {}), column, held, source.per_second)
        return int(pc.max(seconds).as_py()) if len(seconds) else None
    newest, unread = None, list(files.files)
    if source.file_format == "parquet":
        unread = []
        for path in files.files:
            view = files.views.get(path)
            # (not a file with rows deleted: the greatest time may be a deleted row's)
            weighed = _stored_rules([rule], path, view) if view is None or view.kept is None else []
            span = None
            try:
                for _, stored in weighed:
                    span = _column_span(pq.read_metadata(path), stored, source.per_second)
            except (pa.ArrowException, OSError):
                span = None  # (the pass names the problem)
            if span is None:
                unread.append(path)
            else:
                newest = int(span[1]) if newest is None else max(newest, int(span[1]))
    if not unread:
        return newest
    reading = ColumnsOf(source.model_copy(update={"where": {column: _any_time()}}), {})
    rows = Rows(reading, unread, files.partitions, None, files.views, files.passed_by)
    rows.check_columns()
    for batch in rows.batches([column]):
        most = int(pc.max(batch.columns[column]).as_py())
        newest = most if newest is None else max(newest, most)
    return newest


def _stored_rules(
    rules: list[RowFilter], path: Path, view: FileView | None
) -> list[tuple[RowFilter, RowFilter]]:
    """Each rule with the same rule on its column as a Parquet file stores it: a Delta or
    Iceberg table's file may store a column under another name (column mapping, a rename:
    ``view``; the file opened once to find them); a rule whose column the file does not hold
    (one the table added later), or all where it cannot be read, left out."""
    if view is None or (view.names is None and view.ids is None):
        return [(rule, rule) for rule in rules]
    try:
        file = ColumnarFile(path, "parquet", view)
    except (pa.ArrowException, OSError):
        return []
    stored = [(rule, file.stored_name(rule.column)) for rule in rules]
    return [(rule, dataclasses.replace(rule, column=name)) for rule, name in stored if name]


def _any_time() -> Condition:
    """A condition every time meets (a row without one passed by)."""
    return Condition.model_construct(since=-(2**63))


class Rows:
    """The source's files, read a few columns at a time, each column converted to what its
    declaration needs (``_convert``)."""

    def __init__(
        self,
        schema: SchemaFile,
        files: list[Path],
        partitions: dict[Path, dict[str, str | None]] | None = None,
        scratch: Path | None = None,
        views: dict | None = None,
        passed_by: int = 0,
    ):
        self.schema = schema
        self._kinds = schema.column_kinds()
        self._per_second = schema.source.per_second
        self._decimal = schema.source.decimal if schema.source.format == "csv" else "."
        self._thousands = schema.source.thousands  # (csv only)
        # source.where: its conditions, and the files whose partition folders' values or
        # Parquet statistics fail one, their rows never read (``_in_partitions``,
        # ``_in_statistics``)
        self.filters = schema.source.row_filters()
        for rule in self.filters:  # a column read only for its condition: read so
            self._kinds.setdefault(rule.column, rule.reads)
        # rows (and partition folders) each condition held on, every pass; a text
        # condition's first values read, and its partition folders' values
        self.held_by: dict[RowFilter, int] = {}
        self._values_seen: dict[str, pa.Array] = {}
        self._folder_values: dict[str, list[str | None]] = {}
        # per Parquet file read in part: which row groups to read, and each group's rows
        self._groups: dict[Path, tuple[np.ndarray, list[int]]] = {}
        given = files
        self.views = views or {}  # how a Delta or Iceberg table's file is read (``ColumnarFile``)
        files = [
            p
            for p in files
            if self._in_partitions(p, (partitions or {}).get(p, {})) and self._in_statistics(p)
        ]
        self.files = files
        # (``passed_by``: those a table's metadata showed hold none, not listed in ``files``)
        self.files_passed_by = len(given) - len(files) + passed_by
        self.rows_passed_by = 0  # by source.where in the last whole pass over the rows
        # Avro: per file, the columns the schema reads decoded once into Arrow's IPC format in
        # the folder ``scratch`` (prepare reads the features twice; fastavro decodes each
        # record into Python objects, several times slower than reading them back)
        self.scratch = scratch
        self._decoded: dict[Path, tuple[Path, list[str]]] = {}  # the copy, its columns
        # per file, its partition columns' values (Hive-style folders, date=2024-05-07/, or
        # a Delta table's log: ``SourceFiles``)
        self.partitions = {path: (partitions or {}).get(path, {}) for path in files}
        self._holds: dict[Path, list[str]] = {}  # per file, the columns it holds itself
        # per file, its top-level columns (those of _holds that are no object's field)
        self._tops: dict[Path, list[str]] = {}
        text = schema.source.text  # a blank text file: a day of no rows
        self._blank = {path for path in files if text and blank(path)}
        self._required = schema.required_columns()
        # per file, the declared feature columns it lacks (a column added to the logs later):
        # read as missing there
        self.absent: dict[Path, list[str]] = {}
        # JSON lines: per file, the columns asked for that some row holds as a key, and its
        # keys' types (``json_types``)
        self._keys_seen: dict[Path, set[str]] = {}
        self._json_types: dict[Path, pa.Schema] = {}
        # CSV: per file, the names its rows are read by where not its header's as Arrow
        # takes them (``header_names``: read once, not on every pass)
        self._read_names: dict[Path, list[str] | None] = {}
        self._asked: set[str] = set()
        # each declared column read as a keyed column's key (``key_names``), with its column,
        # and those some row held a value of
        self._keyed: dict[str, str] = {}
        self._keyed_held: set[str] = set()
        # JSON lines read line by line in Python (several times slower), and why
        self.by_line: dict[Path, str] = {}
        # csv, jsonl under on_bad_lines: skip: per file, the lines passed by as not rows
        self.skip = schema.source.on_bad_lines == "skip"
        self.skipped: dict[Path, Skipped] = {}

    def check_columns(self) -> None:
        """Before reading any row: every file but a blank text one (a day of no rows written
        as nothing) holds the labels' and keys' columns, and each declared column is in some
        file; a feature column a Parquet or CSV file lacks is noted in ``absent`` (JSON
        lines omit a key whose value is null: one a file's first rows lack is missing
        there, and read where it shows up; ``check_keys`` notes those no row held)."""
        wanted = self.schema.columns()
        checked = [p for p in self.files if p not in self._blank]
        present = {path: self._file_columns(path) for path in checked}
        jsonl = self.schema.source.file_format == "jsonl"
        held = {c for found in present.values() for c in found}  # by some file
        for path, found in present.items():
            have = set(found)
            missing = [c for c in wanted if c not in have]
            lacking = [c for c in missing if c in self._required or not (jsonl or c in held)]
            if lacking:
                raise DataError(
                    path,
                    f"has no column {', '.join(map(repr, lacking))} (the schema declares "
                    f"it); its columns: {', '.join(found) or 'none'}",
                )
            if missing and not jsonl:
                self.absent[path] = missing

    def check_keys(self) -> None:
        """Once every column was read: a declared keyed column's key (``key_names``) no row
        held a value of is refused (a misspelt key or field, most likely), naming the keys
        its rows hold. JSON lines: a column asked for that no row of a file held as a key
        is noted in ``absent`` for that file (a key added to the logs later), and refused
        where no row of any file held it."""
        read = [p for p in self.files if p not in self._blank]
        if never := sorted(set(self._keyed) - self._keyed_held):
            self._no_key(never[0], read)
        if self.schema.source.file_format != "jsonl":
            return
        held = set().union(*(self._keys_seen.get(p, set()) for p in read))
        if never := sorted(self._asked - held):
            where = read[0] if len(read) == 1 else self.schema.source.path
            seen = ", ".join(sorted(held)) or "none"
            raise DataError(
                where,
                f"has no row with the key {', '.join(map(repr, never))} (the schema declares "
                f"it); the keys its rows hold among those declared: {seen}",
            )
        for path in read:
            if lacking := sorted(self._asked - self._keys_seen.get(path, set())):
                self.absent[path] = lacking

    def _no_key(self, name: str, read: list[Path]) -> NoReturn:
        """Refuse a declared keyed column's key no row held a value of, naming the keys a
        file's first rows hold (where Arrow reads them: not a JSON file read by line)."""
        root = self._keyed[name]
        path = next(p for p in read if root in self._holds.get(p, ()))
        said = ""
        first = next(self._read(path, [name]), None)
        if first is not None and root in first.schema.names:
            column = first.column(root)
            said = f"; the keys the rows of {root} hold, the most held first: " + (
                ", ".join(held_keys(column)) or "none"
            )
            pair, _, value_at = keyed_parts(column.type)
            if pa.types.is_struct(kind := pair.field(value_at).type):
                fields = ", ".join(f.name for f in kind)
                said += f"; each value an object of {fields}: {root}.KEY.FIELD"
        raise DataError(
            read[0] if len(read) == 1 else self.schema.source.path,
            f"has no row with a value of {name!r} (the schema declares it){said}",
        )

    def batches(self, columns: list[str]) -> Iterator[Batch]:
        """The rows' ``columns``, converted, a batch at a time: under ``source.where``, only
        the rows its conditions keep (their columns read beside)."""
        start = origin = passed = 0
        read = list(dict.fromkeys([*columns, *(f.column for f in self.filters)]))
        for path in self.files:
            if path in self._blank:
                continue
            first = 0
            for groups, skipped in self._group_runs(path):
                if skipped:  # row groups whose statistics leave no room for a row
                    first, origin, passed = first + skipped, origin + skipped, passed + skipped
                    continue
                for record in self._read(path, read, groups, first):
                    n = record.num_rows
                    if n == 0:
                        continue
                    names = record.schema.names  # a column the file lacks: missing on every row
                    self._asked.update(read)
                    self._keys_seen.setdefault(path, set()).update(c for c in read if c in names)
                    raw = {c: record.column(c) if c in names else pa.nulls(n) for c in read}
                    self._keyed_held.update(
                        c for c in read if c in self._keyed and raw[c].null_count < n
                    )
                    batch = Batch(path, first, start, {}, None, origin)
                    if self.filters:
                        batch.kept = self._kept(batch, raw, n)
                        passed += n - len(batch.kept)
                        raw = {c: raw[c].take(pa.array(batch.kept)) for c in columns}
                    first += n
                    origin += n
                    if batch.kept is not None and len(batch.kept) == 0:
                        continue
                    batch.columns = {c: self._convert(batch, c, raw[c]) for c in columns}
                    start += len(batch)
                    yield batch
        self.rows_passed_by = passed

    def _kept(self, batch: Batch, raw: dict[str, pa.Array], n: int) -> np.ndarray:
        """The places of the rows every ``source.where`` condition keeps."""
        keep = np.ones(n, dtype=bool)
        for rule in self.filters:
            try:
                held = self._holding(batch, rule, raw[rule.column])
            except DataError as err:  # (a value its condition cannot read)
                said = str(err).removeprefix(f"{err.path}: ")
                raise DataError(err.path, f"{said} (source.where: {rule})") from None
            self.held_by[rule] = self.held_by.get(rule, 0) + int(held.sum())
            keep &= held
        return np.flatnonzero(keep)

    def unmet(self) -> str:
        """The ``source.where`` conditions that held on no row read, each with the values
        its column holds where they are compared as text (a misspelt one, most likely)."""
        said = []
        for rule in self.filters:
            if self.held_by.get(rule, 0) or rule not in self.held_by:
                continue
            if folders := self._folder_values.get(rule.column):
                values = pa.array(folders, pa.string())
                held = f" (its partition folders' values: {common_values(values, 12)})"
            elif (values := self._values_seen.get(rule.column)) is not None:
                held = (
                    f" (its values in the first {len(values):,} rows read, the most held "
                    f"first: {common_values(values)})"
                )
            else:
                held = ""
            said.append(f"{rule} holds on none{held}")
        return "; ".join(said)

    def _holding(
        self, batch: Batch, rule: RowFilter, array: pa.Array, rows: bool = True
    ) -> np.ndarray:
        """Where a column's values meet its condition; an empty one meets ``none_of`` only
        (a time's is left out before reading: every time read must be one). ``rows``:
        whether the values are rows' (else a partition folder's)."""
        if rule.reads != "timestamp":
            values = self._convert(batch, rule.column, array, rule.reads)
            if rule.reads == "text" and rows:
                self._values_seen.setdefault(rule.column, values)
            return rule.holds(values)
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            array = pc.if_else(pc.equal(pc.utf8_trim_whitespace(array), ""), None, array)
        valid = np.asarray(array.is_valid(), dtype=bool)
        held = np.zeros(len(array), dtype=bool)
        if valid.any():
            rows = np.flatnonzero(valid)
            given = Batch(batch.file, batch.first, batch.start, {}, _within(batch, rows))
            seconds = _seconds(given, rule.column, array.filter(valid), self._per_second)
            held[rows] = rule.holds(seconds)
        return held

    def _in_statistics(self, path: Path) -> bool:
        """Whether a Parquet file's statistics (each row group's least and greatest value
        of a column, in its footer) leave room for a row the number and time conditions
        keep in some row group; those that leave none are noted to be passed by
        (``_group_runs``). A group whose statistics cannot tell (none written, a column
        the table's file does not hold, Spark's INT96 times, text) is read. A table's file
        storing a column under another name is weighed by that name."""
        view = self.views.get(path)
        weighable = [rule for rule in self.filters if rule.reads in ("number", "timestamp")]
        bounded = _stored_rules(weighable, path, view) if weighable else []
        if not bounded or self.schema.source.file_format != "parquet":
            return True
        try:
            footer = pq.read_metadata(path)
        except (pa.ArrowException, OSError):
            return True  # (its reading names the problem)
        keep = np.ones(footer.num_row_groups, dtype=bool)
        for rule, stored in bounded:
            low, high = (
                (rule.at_least, rule.below) if rule.reads == "number" else (rule.since, rule.until)
            )
            for group, span in enumerate(_group_spans(footer, stored, self._per_second)):
                if span is not None and (
                    (low is not None and span[1] < low) or (high is not None and span[0] >= high)
                ):
                    keep[group] = False
                    self.held_by.setdefault(rule, 0)
        if keep.all():
            return True
        if keep.any():
            rows = [footer.row_group(g).num_rows for g in range(footer.num_row_groups)]
            self._groups[path] = (keep, rows)
        return bool(keep.any())

    def _group_runs(self, path: Path) -> Iterator[tuple[list[int] | None, int]]:
        """How a file is read: runs of its row groups to read (None: the whole file), each
        with 0, or a count of rows passed by in row groups ``_in_statistics`` ruled out
        (those of a table's deletion vector not counted, as they are not read)."""
        if path not in self._groups:
            yield None, 0
            return
        keep, rows = self._groups[path]
        kept = getattr(self.views.get(path), "kept", None)
        start = 0
        for read, run in itertools.groupby(range(len(keep)), key=lambda g: bool(keep[g])):
            groups = list(run)
            count = sum(rows[g] for g in groups)
            if read:
                yield groups, 0
            else:  # (a deletion vector's rows left out: the reading of a group leaves them)
                gone = 0 if kept is None else int((~kept[start : start + count]).sum())
                yield [], count - gone
            start += count

    def _in_partitions(self, path: Path, values: dict[str, str | None]) -> bool:
        """Whether a file's partition folders' values (``date=2024-05-07/``) meet the
        ``source.where`` conditions on them; one that cannot be read so leaves the file to
        its rows (which name the problem)."""
        for rule in self.filters:
            if rule.column in values:
                value = values[rule.column]
                self._folder_values.setdefault(rule.column, []).append(value)
                array = pa.array([value], pa.string())
                try:
                    held = bool(self._holding(Batch(path, 0, 0, {}), rule, array, False)[0])
                except DataError:
                    continue
                self.held_by[rule] = self.held_by.get(rule, 0) + held
                if not held:
                    return False
        return True

    # -- formats

    def _file_columns(self, path: Path) -> list[str]:
        """The file's columns, then those of its partition folders it does not hold."""
        held = self._holds[path] = self._held_columns(path)
        return held + [c for c in self.partitions[path] if c not in held]

    def _held_columns(self, path: Path) -> list[str]:
        """The file's columns, and its objects' fields as columns (``nested_names``)."""
        fmt = self.schema.source.file_format
        try:
            if not self.schema.source.text:
                schema = ColumnarFile(path, fmt, self.views.get(path)).schema
                self._tops[path] = schema.names
                self._keyed.update(key_names(schema, self.schema.columns()))
                return nested_names(schema, self.schema.columns())  # (a map's keys declared)
            if fmt == "csv":
                if not self.schema.source.header:
                    names = list(self.schema.source.columns or ())
                else:
                    names = self._open_csv(path, None, Skipped()).schema.names
                self._tops[path] = [c for c in names if c != TRAILING]
                return self._tops[path]
            if json_array(path):
                raise DataError(path, json_array_fault(path))
            first = self._open_json(path).schema
            self._json_types[path] = json_types(path, first, self.schema.columns())
            self._tops[path] = self._json_types[path].names
            self._keyed.update(key_names(self._json_types[path], self.schema.columns()))
            return nested_names(self._json_types[path], self.schema.columns())
        except pa.ArrowInvalid as err:
            if fmt == "jsonl":  # mixed types, or a line that is not JSON: Python finds which
                passed = Skipped() if self.skip else None
                keys = _json_keys(path, passed, self.schema.columns())  # (fields too)
                self._tops[path] = keys
                return keys
            raise DataError(
                path, f"is not readable as {fmt}: {self._csv_fault(err, path)}"
            ) from None
        # UnicodeDecodeError: a damaged Parquet footer whose column names are not UTF-8
        except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
            raise DataError(path, f"is not readable as {fmt}: {arrow_reason(err)}") from None

    def _read(
        self, path: Path, columns: list[str], groups: list[int] | None = None, start: int = 0
    ) -> Iterator[pa.RecordBatch]:
        """A file's ``columns`` in record batches (a Parquet file's row ``groups`` only,
        where given, the first of them at row ``start``)."""
        fmt = self.schema.source.file_format
        absent = self.absent.get(path, ())
        found = self.partitions[path]  # its folders' columns, added to each batch
        # the columns it holds (a label's, which every file holds, where it holds none of
        # them: a reader given no column reads them all)
        held = self._holds.get(path, [])
        added = {c: v for c, v in found.items() if c in columns and c not in held}
        columns = [c for c in columns if c not in absent and c not in added]
        columns = columns or [c for c in self._required if c not in added][:1] or held[:1]
        # an object's field (user.id) read as its object's column, its fields then columns
        tops = self._tops.get(path, [])
        roots = list(dict.fromkeys(root_column(c, tops) for c in columns))
        nested = fmt != "csv" and roots != columns
        passed = Skipped()  # the same lines on every pass over the file
        try:
            if self.scratch is not None:
                batches = self._decoded_batches(path, roots)
            elif not self.schema.source.text:
                columnar = ColumnarFile(path, fmt, self.views.get(path))
                batches = columnar.batches(BATCH_ROWS, roots, groups)
            elif fmt == "csv":  # Arrow's CSV reader refuses text that is not UTF-8 itself
                batches = self._open_csv(path, columns, passed)
            else:
                batches = self._json(path, columns, roots, passed)
            first = start + 1
            for batch in batches:
                if nested:
                    batch = with_fields(batch, columns)
                if fmt != "csv":
                    batch = binary_as_text(batch)
                    if fault := text_fault(batch, first):
                        raise DataError(path, fault)
                yield with_partitions(batch, added)
                first += batch.num_rows
        # Arrow's errors; OSError: damaged bytes mid-file ("Corrupt snappy compressed data"),
        # a truncated .gz, the disk (one with no room for what is written: the command says)
        except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
            if isinstance(err, OSError) and err.errno in NO_ROOM:
                raise
            raise DataError(
                path, f"could not be read as {fmt}: {self._csv_fault(err, path)}"
            ) from None
        if passed.lines:
            self.skipped[path] = passed

    def _decoded_batches(self, path: Path, roots: list[str]) -> Iterator[pa.RecordBatch]:
        """An Avro file's ``roots`` columns from its decoded copy in ``scratch`` (made on the
        first read: every column the schema reads that the file holds, in the batches the
        file itself gives; lz4-compressed, each column read alone)."""
        if path not in self._decoded:
            tops = self._tops.get(path, [])
            wanted = {root_column(c, tops) for c in self.schema.columns()}
            columns = [c for c in tops if c in wanted]
            copy = self.scratch / f"{len(self._decoded)}.arrow"
            file = ColumnarFile(path, "avro")
            kinds = pa.schema([file.schema.field(c) for c in columns])
            options = pa.ipc.IpcWriteOptions(compression="lz4")
            try:
                with (
                    pa.OSFile(str(copy), "wb") as sink,
                    pa.ipc.new_file(sink, kinds, options=options) as out,
                ):
                    for batch in file.batches(BATCH_ROWS, columns):
                        out.write_batch(batch)
            except OSError as err:  # (a full disk: said so, where, not as the file's fault)
                if err.errno in NO_ROOM:
                    err.filename = err.filename or str(copy)
                raise
            self._decoded[path] = copy, columns
        copy, names = self._decoded[path]
        fields = [names.index(c) for c in roots if c in names]
        with pa.OSFile(str(copy)) as source:
            options = pa.ipc.IpcReadOptions(included_fields=fields)
            reader = pa.ipc.open_file(source, options=options)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def _csv_fault(self, err: Exception, path: Path) -> str:
        """Arrow's reason; at a CSV row of too many or too few fields, what would pass it by;
        at text that is not UTF-8, its column and the source's encoding. (Arrow's reasons
        hold "Row #12: " where its reader knows the row's number.)"""
        reason = arrow_reason(err)
        text = r"In CSV column #(\d+): (Row #(\d+): )?CSV conversion error to string: invalid"
        if found := re.match(text, reason):
            held = self._holds.get(path) or []
            at = int(found[1])
            column = repr(held[at]) if at < len(held) else f"#{at + 1}"
            encoding = self.schema.source.encoding.replace("utf-8", "UTF-8")
            where = f" (row {found[3]})" if found[3] else ""
            return (
                f"column {column} holds text that is not {encoding}{where}: say the file's "
                "encoding in the source (encoding: cp1252 where Excel wrote it on Windows in "
                "Western Europe; latin-1, shift_jis, gbk, ...), or write it as UTF-8"
            )
        if not re.match(r"CSV parse error: (Row #\d+: )?Expected", reason):
            return reason
        if "\ufffd" in reason:  # (Arrow shows bytes that are not UTF-8 so)
            return (
                f"{reason} (a row whose bytes are not UTF-8 text, which Arrow's reader cannot "
                "pass by even under on_bad_lines: skip: mend or remove that line)"
            )
        declared = self.schema.source.delimiter
        sniffed = sniffed_delimiter(first_lines(path), declared)
        if sniffed != declared:  # (Excel's ";" read by ",": every line's fields but one)
            return (
                f"{reason} (its first lines are split by {sniffed!r}, not {declared!r}: say "
                f"delimiter: {json.dumps(sniffed)} in the source)"
            )
        if self.schema.source.escape is None and "\\" + declared in reason:
            escaped = 'a delimiter after a backslash, escaped: say escape: "\\\\" in the source'
            return f"{reason} ({escaped})"
        return reason if self.skip else f"{reason} ({BAD_LINES_HINT})"

    def _json(
        self, path: Path, columns: list[str], roots: list[str], passed: Skipped
    ) -> Iterator[pa.RecordBatch]:
        """Arrow's reader, or from where a column asked for mixes JSON types (ids written as
        numbers on some rows and as strings on others, which Arrow refuses), shows up when
        its first rows lacked it, or Arrow reads a batch wrong, the file line by line in
        Python, several times slower, each mixed column's values as their JSON text.

        Where Arrow's reader stops, Python's reads a block's worth of lines from the first
        row Arrow did not give: a line there that is not a row is refused, naming it, or
        under on_bad_lines: skip passed by into ``passed``, and Arrow's reader goes on
        after that block (in an uncompressed file); where none is, the rest is read by
        line. ``roots``: the columns Arrow reads, the objects ``columns`` are fields of
        among them (``root_column``; Python's objects hold their fields: ``json_object``)."""
        # the columns asked for, each of a type json_types found: read as those types, other
        # keys passed by (one that shows up later, or changes type, no longer matters)
        known = self._json_types.get(path)
        typed = known is not None and all(c in known.names for c in roots)
        types = pa.schema([known.field(c) for c in roots]) if typed else None
        lists = {c for c in columns if self._kinds[c] == "list"}
        events = {  # history columns: their events made into structs at once
            c: event_names(f)
            for c in lists
            if (f := self.schema.reading(c)).type == "sequence" and f.sep is None
        }
        lines = JsonLines(path, passed if self.skip else None)
        resumable = self.skip and not compressed(path)
        while True:
            done = 0
            try:
                for record in self._open_json(path, types, lines.place.offset):
                    record = record.select([c for c in roots if c in record.schema.names])
                    try:  # Arrow 25 drops a list's first nulls ([null, 1]): offsets past values
                        record.validate()
                    except pa.ArrowInvalid:
                        why = "a list whose first items are null"
                        break
                    yield record
                    done += record.num_rows
                else:
                    return
            except pa.ArrowInvalid as err:  # (as the types given: a value not of its type)
                # "JSON parse error: Column(/id) changed from string to number in row 5":
                # the row is the block's
                why = re.sub(r"^JSON parse error: | in row \d+$", "", arrow_reason(err))
            before = passed.lines
            most = BLOCK_BYTES if resumable else None
            yield from _json_by_line(lines, columns, lists, events, done, most)
            if passed.lines == before:  # Arrow stopped at no line that is not a row: at why
                self.by_line.setdefault(path, why)
                if not lines.ended:
                    yield from _json_by_line(lines, columns, lists, events, 0, None)
                return
            if lines.ended:
                return

    def _open_csv(self, path: Path, columns: list[str] | None, passed: Skipped):
        """Arrow's streaming reader of the ``columns`` (None: every one); under on_bad_lines:
        skip, a row of too many or too few fields passed by into ``passed``."""
        import pyarrow.csv as pacsv

        source = self.schema.source
        declared = list(source.columns) if not source.header else None
        if path not in self._read_names:
            self._read_names[path] = header_names(path, source.delimiter, declared, source.encoding)
        names = self._read_names[path]
        read = pacsv.ReadOptions(
            block_size=BLOCK_BYTES,
            column_names=names or declared,
            skip_rows=1 if names and source.header else 0,  # (the header: read as names)
            encoding=source.encoding,  # (Arrow transcodes all but UTF-8 in Python's codecs)
        )
        parse = csv_parsing(
            source.delimiter, passed if self.skip else None, source.quoting, source.escape
        )
        # Declared text stays text (an id column of digits in one block and letters in the
        # next would otherwise change type mid-file); numbers are parsed by _convert.
        types = {c: pa.string() for c in (columns or []) if self._kinds[c] != "timestamp"}
        # Only "" is missing text ("NA" may be a country; a served row reads it so); a
        # number's missing spellings are read as missing by _numbers.
        convert = pacsv.ConvertOptions(
            include_columns=columns,
            column_types=types,
            strings_can_be_null=True,
            null_values=[""],
        )
        return pacsv.open_csv(path, read_options=read, parse_options=parse, convert_options=convert)

    @staticmethod
    def _open_json(path: Path, types: pa.Schema | None = None, offset: int = 0):
        """Arrow's reader, of the types its first block holds, or of ``types`` (other keys
        passed by), from the line at ``offset`` (of an uncompressed file)."""
        import pyarrow.json as pajson

        parse = pajson.ParseOptions(explicit_schema=types, unexpected_field_behavior="ignore")
        source: Path | pa.NativeFile = path
        if offset:
            source = pa.OSFile(str(path))
            source.seek(offset)
        return pajson.open_json(
            source,
            read_options=pajson.ReadOptions(block_size=BLOCK_BYTES),
            parse_options=parse if types is not None else None,
        )

    # -- types

    def _convert(
        self, batch: Batch, column: str, array: pa.Array, kind: str | None = None
    ) -> pa.Array:
        """A column as its declaration reads it (or as ``kind``: a ``source.where``
        condition's column)."""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        kind = kind or self._kinds[column]
        if kind in ("label", "number"):
            return _numbers(batch, column, array, kind, self._decimal, self._thousands)
        if kind == "timestamp":
            return _seconds(batch, column, array, self._per_second)
        if kind == "list":
            return _lists(batch, column, array, self.schema.reading(column), self._per_second)
        return _texts(batch, column, array)


def _column_span(footer, rule: RowFilter, per_second: int) -> tuple[float, float] | None:
    """The least and greatest value of ``rule``'s column over a Parquet footer's row
    groups (``_group_spans``); None where a group's statistics cannot tell."""
    spans = _group_spans(footer, rule, per_second)
    if not spans or None in spans:
        return None
    return min(low for low, _ in spans), max(high for _, high in spans)


def _group_spans(footer, rule: RowFilter, per_second: int) -> list[tuple[float, float] | None]:
    """Each row group's least and greatest value of ``rule``'s column, as ``Rows`` reads
    them for the rule (numbers as floats, times as unix seconds floored); None for a group
    whose statistics cannot tell (none written, Spark's INT96 times, text), and for every
    group where the footer has no such column."""
    at = next(
        (i for i in range(footer.num_columns) if footer.schema.column(i).path == rule.column),
        None,
    )
    spans: list[tuple[float, float] | None] = []
    for group in range(footer.num_row_groups):
        chunk = footer.row_group(group).column(at) if at is not None else None
        stats = chunk.statistics if chunk is not None else None
        if stats is None or not stats.has_min_max or chunk.physical_type == "INT96":
            spans.append(None)
            continue
        low, high = (_as_read(v, rule.reads, per_second) for v in (stats.min, stats.max))
        spans.append(None if low is None or high is None else (low, high))
    return spans


def _as_read(value, reads: str, per_second: int) -> float | None:
    """A statistic's value as a condition reads its column's: a number, or a time's unix
    seconds (a timestamp's, naive as UTC; a date's midnight; a number in the source's
    ``per_second`` units, floored); None for another kind of value."""
    if isinstance(value, bool):
        return None
    if reads == "number":
        return float(value) if isinstance(value, int | float) else None
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        return math.floor(moment.timestamp())
    if isinstance(value, datetime.date):
        return (value - datetime.date(1970, 1, 1)).days * 86_400
    if isinstance(value, int | float) and math.isfinite(value):
        return math.floor(value / per_second) if isinstance(value, float) else value // per_second
    return None


def _within(batch: Batch, rows: np.ndarray) -> np.ndarray:
    """Some of a batch's rows' places counted from its ``first`` (``Batch.kept``)."""
    return rows if batch.kept is None else batch.kept[rows]


def json_array(path: Path) -> bool:
    """Whether a text file (compressed as its name says) opens a JSON array: its first
    character past white space and a byte-order mark is "[" (pandas' ``to_json(orient=
    "records")``, an API's dump), where JSON lines hold an object a line."""
    try:
        with pa.input_stream(path, compression="detect") as stream:
            while chunk := stream.read(1 << 16):
                if text := chunk.removeprefix(b"\xef\xbb\xbf").lstrip():
                    return text.startswith(b"[")
    except (pa.ArrowException, OSError):
        return False  # unreadable: its reader names the problem
    return False


def json_array_fault(path: Path) -> str:
    """What to do with a JSON array where JSON lines are read."""
    stem = path.name.split(".json")[0]
    plain = path.suffix.lower() not in COMPRESSED
    command = f"jq -c '.[]' {path.name if plain else '(it, decompressed)'} > {stem}.jsonl"
    return (
        "holds a JSON array ([{...}, {...}]), not JSON lines (an object a line, as Spark, "
        'BigQuery and pandas\' to_json(orient="records", lines=True) write them): write it '
        f"so, e.g. {command}"
    )


def blank(path: Path, block: int = 1 << 16) -> bool:
    """Whether a text file (compressed as its name says) holds nothing but white space."""
    try:
        with pa.input_stream(path, compression="detect") as stream:
            while chunk := stream.read(block):
                if chunk.strip():
                    return False
    except (pa.ArrowException, OSError):
        return False  # unreadable: its reader names the problem
    return True


def csv_parsing(
    delimiter: str, passed: Skipped | None = None, quoting: bool = True, escape: str | None = None
):
    """CSV as prepare (and a draft's sample) parses it: a quoted text may break lines (a
    comment, a title), so Arrow's chunker finds rows' ends by their quotes, at no cost
    measured (1M rows: 0.23-0.25 s either way); without ``quoting``, a '"' is text (Hive's
    tables); ``escape``: the character that makes the next one text. ``passed``: where a
    row of too many or too few fields is counted and passed by (else refused)."""
    import pyarrow.csv as pacsv

    if passed is not None:
        _quiet_undecodable_rows()
    return pacsv.ParseOptions(
        delimiter=delimiter,
        quote_char='"' if quoting else False,
        escape_char=escape or False,
        newlines_in_values=quoting or escape is not None,
        invalid_row_handler=passed.csv_row if passed is not None else None,
    )


def header_names(
    path: Path, delimiter: str, columns: list[str] | None, encoding: str = "utf-8"
) -> list[str] | None:
    """The names to read a CSV file's rows by, where they are not its header's as Arrow
    would take them (or ``columns``, a headerless file's names): a header naming a column
    twice, its names as pandas makes them (``x``, ``x.1``: ``row_files.numbered``); rows
    that end with a delimiter the header lacks, as some exporters write every line
    (``a,b,c`` over ``1,2,3,``), ``TRAILING`` last for the empty field (as pandas reads such
    a file with ``index_col=False``). Else None. Told by its first lines."""
    try:
        with io.BufferedReader(pa.input_stream(path, compression="detect")) as raw:
            encoding = "utf-8-sig" if encoding == "utf-8" else encoding
            text = io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="")
            rows = csv.reader(text, delimiter=delimiter, **told_dialect(delimiter))
            first = list(itertools.islice((row for row in rows if row), 1 + (columns is None)))
    except (csv.Error, pa.ArrowException, OSError):
        return None  # (its reader names what is wrong)
    if columns is None:
        if not first:
            return None
        columns, first = first[0], first[1:]
        if len(set(columns)) < len(columns):
            columns = numbered(columns)
            return [*columns, TRAILING] if _trailing(columns, first) else columns
    return [*columns, TRAILING] if _trailing(columns, first) else None


def _trailing(columns: list[str], rows: list[list[str]]) -> bool:
    """Whether a CSV file's first row ends with an empty field past its ``columns``."""
    if not rows or not columns or columns[-1] == "":
        return False
    return len(rows[0]) == len(columns) + 1 and rows[0][-1] == ""


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 else f"{count:,} bytes"


def _quiet_undecodable_rows() -> None:
    """Arrow decodes a CSV row of the wrong width as UTF-8 before it calls
    ``invalid_row_handler``; where the row's bytes are not UTF-8, that raises inside Arrow,
    which prints it ("Exception ignored in: ... UnicodeDecodeError") and refuses the file,
    naming the row (``Rows._csv_fault`` says why). The print is left out: Python's hook for
    such errors passes that one by (installed once)."""
    previous = sys.unraisablehook
    if getattr(previous, "passes_undecodable_rows", False):
        return

    def hook(unraisable) -> None:
        handler = getattr(unraisable.object, "__self__", None)
        if not (
            isinstance(unraisable.exc_value, UnicodeDecodeError) and isinstance(handler, Skipped)
        ):
            previous(unraisable)

    hook.passes_undecodable_rows = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def compressed(path: Path) -> bool:
    return path.suffix.lower() in COMPRESSED


def json_types(path: Path, first: pa.Schema, wanted: list[str]) -> pa.Schema:
    """A JSON-lines file's keys and their types: its first block's (Arrow's reader infers
    them there), and where the file runs past that block and the block lacks a ``wanted``
    key or holds only nulls of it (a writer that omits a null's key, a field the logs gained
    later), those of the keys rows spread over the file hold (read as one block). Where
    those rows mix a key's JSON types, the first block's alone."""
    held = set(nested_names([f for f in first if not pa.types.is_null(f.type)]))
    if set(wanted) <= held:
        return first
    if compressed(path) or path.stat().st_size <= BLOCK_BYTES or bare_returns(path):
        return first
    parts = spread_parts(path, SAMPLE_ROWS, quoted=False)
    try:
        sampled = json_block([line for part in parts for line in part if line.strip()]).schema
    except pa.ArrowInvalid:
        return first
    fields = {f.name: f for f in first}
    fields.update(
        (f.name, f) for f in sampled if f.name not in held and not pa.types.is_null(f.type)
    )
    return pa.schema(list(fields.values()))


def bare_returns(path: Path) -> bool:
    """Whether the file's first line holds a carriage return that ends no line feed's line
    (lines ended by carriage returns alone, as classic Mac OS wrote them: Arrow reads them,
    ``readline`` finds no line end)."""
    with open(path, "rb") as file:
        first = file.readline(SAMPLE_BYTES)
    return b"\r" in first.rstrip(b"\r\n")


def spread_parts(path: Path, rows: int, quoted: bool) -> list[list[bytes]]:
    """About ``rows`` rows of a text file in ``SAMPLE_PARTS`` parts, each read from a place
    spread over its bytes: its lines begin at or past its place and before the next's
    (``SAMPLE_BYTES`` in all, at most). ``quoted`` (CSV): a part ends where it holds an even
    count of quotes, so that a row whose quoted text breaks lines ends whole."""
    size = path.stat().st_size
    places = [size * i // SAMPLE_PARTS for i in range(SAMPLE_PARTS)] + [size]
    each, budget = max(1, rows // SAMPLE_PARTS), SAMPLE_BYTES // SAMPLE_PARTS
    parts: list[list[bytes]] = []
    with open(path, "rb") as file:
        for start, end in itertools.pairwise(places):
            if start:
                file.seek(start - 1)
                file.readline()  # to the first line that begins at or past start
            part, read, within = [], 0, False  # within: a quoted text begun, not ended
            while read < budget and (within or (len(part) < each and file.tell() < end)):
                line = file.readline()
                if not line:
                    break
                read += len(line)
                within ^= quoted and line.count(b'"') % 2 == 1
                part.append(line)
            parts.append(part)
    return parts


def as_text(lines: list[bytes]) -> bytes:
    return b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)


def json_block(lines: list[bytes]) -> pa.Table:
    """JSON lines as Arrow's reader reads them in one block (each key any of them holds a
    column, of a type read from all of them); ``pa.ArrowInvalid`` where a key's JSON types
    mix."""
    import pyarrow.json as pajson

    text = as_text(lines)
    if not text:
        return pa.table({})
    options = pajson.ReadOptions(block_size=len(text) + 1)
    return pajson.read_json(pa.BufferReader(text), read_options=options)


@dataclass(frozen=True)
class Place:
    """Where a line of a text file begins: its byte offset, and the lines before it."""

    offset: int = 0
    lines: int = 0


class JsonLines:
    """A JSON-lines file read line by line with Python's json (compressed as its name says,
    as Arrow's reader reads it), each call of ``objects`` from where the last one stopped
    (a compressed file: at most one call, from its start). A line that is not an object is
    refused, or with ``passed``, counted there and passed by. ``place``: where the line
    after the last one read begins; ``ended``: whether that was the file's last."""

    def __init__(self, path: Path, passed: Skipped | None = None):
        self.path, self.passed, self.place, self.ended = path, passed, Place(), False

    def objects(self, skip: int = 0, most: int | None = None) -> Iterator[tuple[int, dict]]:
        """The object on each non-empty line, with its line's number, after the first
        ``skip`` of them (passed by unparsed), until ``most`` bytes were read past those
        (None: to the file's end)."""
        start = self.place
        if compressed(self.path):
            assert start == Place(), "a compressed file is read from its start"
            stream = io.BufferedReader(pa.input_stream(self.path, compression="detect"))
        else:
            stream = open(self.path, "rb")  # noqa: SIM115 (closed by the with below)
            stream.seek(start.offset)
        with stream:
            offset, number, read = start.offset, start.lines, 0
            for line in stream:
                offset, number = offset + len(line), number + 1
                self.place = Place(offset, number)
                if not line.strip():
                    continue
                if skip:
                    skip -= 1
                    continue
                found, problem = json_object(line)
                if found is not None:
                    yield number, found
                elif self.passed is None:
                    raise DataError(self.path, f"{problem} ({BAD_LINES_HINT})", line=number)
                else:
                    self.passed.add(f"line {number} {problem}")
                read += len(line)
                if most is not None and read >= most:
                    return
        self.ended = True


def json_object(line: bytes) -> tuple[dict | None, str]:
    """A JSON line's object, or None and why the line is not one."""
    try:
        found = json.loads(line)
    except ValueError as err:  # (UnicodeDecodeError among them)
        return None, f"is not JSON ({getattr(err, 'msg', err)}): {_cut(line)}"
    if not isinstance(found, dict):
        return None, f"holds {shown(found)}, not an object"
    return with_fields_of(found), ""


def _cut(line: bytes, most: int = 80) -> str:
    """A line as shown in a message: its text, cut short."""
    text = line.decode(errors="replace").strip()
    return shown(text if len(text) <= most else text[:most] + "...")


def _json_keys(
    path: Path, passed: Skipped | None, wanted: list[str], rows: int = 10_000
) -> list[str]:
    """The keys of a JSON-lines file's first ``rows`` objects, in the order first seen (a
    line that is not one refused, or with ``passed``, passed by), and the ``wanted`` fields
    of their lists of objects (``with_list_fields_of``)."""
    keys: dict[str, None] = {}
    for i, (_, found) in enumerate(JsonLines(path, passed).objects()):
        keys.update(dict.fromkeys(with_list_fields_of(found, wanted)))
        if i + 1 == rows:
            break
    return list(keys)


def _json_by_line(
    lines: JsonLines,
    columns: list[str],
    lists: set[str],
    events: dict[str, tuple],
    skip: int,
    most: int | None,
) -> Iterator[pa.RecordBatch]:
    """``lines``' rows after the first ``skip``, up to ``most`` bytes of them (None: all), as
    record batches, read by Python's json (``events``: history columns, by their events'
    field names). Refused as Arrow's types would be: a list or an object in a column other
    than ``lists``, a number with a fraction or a boolean in a list."""
    path = lines.path
    chunk: list[dict] = []
    for line, found in lines.objects(skip, most):
        found = with_list_fields_of(found, columns)  # (items.item_id: a list of objects')
        for column in columns:
            value = found.get(column)
            if column not in lists and isinstance(value, list | dict):
                problem = f"holds {shown(value)} where one value is declared"
            elif (
                column in lists
                and isinstance(value, list)
                and any(isinstance(item, float | bool) for item in value)
            ):
                problem = f"holds {shown(value)}; a list of ids (texts or integers) is needed"
            else:
                continue
            raise DataError(path, f"column {column!r} {problem}", line=line)
        chunk.append(found)
        if len(chunk) == BATCH_ROWS:
            yield json_batch(chunk, _keys_held(chunk, columns), events)
            chunk = []
    if chunk:
        yield json_batch(chunk, _keys_held(chunk, columns), events)


def _keys_held(objects: list[dict], columns: list[str]) -> list[str]:
    """The columns some object holds as a key (a column none holds is missing on every row:
    ``Rows.batches`` reads it so, and ``Rows.check_keys`` tells of it)."""
    return [c for c in columns if any(c in found for found in objects)]


def json_batch(
    objects: list[dict], columns: list[str], events: dict[str, tuple] | None = None
) -> pa.RecordBatch:
    """Objects as a record batch of ``columns``; a history column of ``events`` as structs
    where ``events_array`` reads it (else, as any column, ``_json_array``)."""
    arrays = []
    for column in columns:
        values = [found.get(column) for found in objects]
        names = (events or {}).get(column)
        array = events_array(values, names) if names else None
        arrays.append(_json_array(values) if array is None else array)
    return pa.RecordBatch.from_arrays(arrays, names=columns)


def _json_array(values: list) -> pa.Array:
    """A column's values as Arrow infers them; where JSON types mix, as their text (a list's
    items likewise); where lists and single values mix, every value as its JSON text."""
    for written in (None, _json_text):
        try:
            return pa.array(values if written is None else [written(v) for v in values])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            continue
    return pa.array([_json_text(v, items=False) for v in values], pa.string())


def _json_text(value: object, items: bool = True) -> object:
    """A JSON value as text: a string as it is, a list item by item (with ``items``; a list
    of lists or objects, a history's events, whole: ``_events_otherwise`` reads it), else as
    JSON writes it."""
    if items and isinstance(value, list):
        if any(isinstance(item, list | dict) for item in value):
            return json.dumps(value)
        return [_json_text(item) for item in value]
    if isinstance(value, float):  # JSON's NaN (Python writes it): missing, as served
        return None if math.isnan(value) else float_text(value)
    return value if value is None or isinstance(value, str) else json.dumps(value)


def arrow_reason(err: Exception) -> str:
    """Arrow's reason, its first line; what Arrow's CSV reader says of a row that does not
    end in the bytes it reads at a time, said as what it most likely is."""
    reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
    if "straddling object straddles two block boundaries" in reason:
        return (
            f"a row runs on past {_size(BLOCK_BYTES)} of the file: most likely a quoted "
            'text that never ends (a " that opens a text no " closes)'
        )
    return reason


def first_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _first_value(array: pa.Array) -> int:
    """The first row with a value (0 when all are null): the sample an error shows."""
    if array.null_count == len(array):
        return 0
    return first_row(~np.asarray(array.is_null(), dtype=bool))


def _scalar_only(batch: Batch, column: str, array: pa.Array, wants: str) -> None:
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        index = _first_value(array)
        raise batch.bad(
            column, index, f"holds a list ({shown(array[index].as_py())}) where {wants} is declared"
        )
    if pa.types.is_struct(array.type):  # (a keyed column's value's field misspelled)
        fields = ", ".join(f.name for f in array.type)
        raise batch.bad(
            column, 0, f"holds objects (of {fields}) where {wants} is declared: name a field"
        )
    if pa.types.is_map(array.type):
        raise batch.bad(column, 0, f"holds maps where {wants} is declared: name a key")


def _numbers(
    batch: Batch,
    column: str,
    array: pa.Array,
    kind: str,
    decimal: str = ".",
    thousands: str | None = None,
) -> pa.Array:
    """float64 (nulls kept for dense; a label must be 0 or 1 on every row). ``decimal``: a
    CSV source's decimal mark (``,``: 3,14 is 3.14); ``thousands``: its thousands separator,
    passed by (1.234,5 is 1234.5)."""
    wants = "a 0/1 label" if kind == "label" else "a number"
    _scalar_only(batch, column, array, wants)
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        missing = pa.array(["", *MISSING_NUMBER_TEXTS])  # as a served row's are
        array = pc.if_else(pc.is_in(pc.utf8_trim_whitespace(array), missing), None, array)
        if thousands:
            array = pc.replace_substring(array, thousands, "")
        if decimal != ".":
            pointed = np.asarray(pc.fill_null(pc.match_substring(array, "."), False))
            if pointed.any():  # 1.234 may be a thousand and more: neither is guessed
                i = first_row(pointed)
                raise batch.bad(
                    column,
                    i,
                    f"must be a number with a decimal comma (source.decimal), got "
                    f"{shown(array[i].as_py())} (write numbers without a point, 1234,5, or "
                    'say thousands: "." in the source where the point is one)',
                )
            array = pc.replace_substring(array, decimal, ".")
    try:  # unsafe: an integer past 2**53 is its nearest float64, not refused
        values = pc.cast(array, pa.float64(), safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        texts = array.to_pylist()
        for i, text in enumerate(texts):
            try:
                if text is not None:
                    float(text)
            except (TypeError, ValueError):
                hint = ""
                if decimal == "." and THOUSANDS.fullmatch(text.strip()):
                    hint = ' (a thousands separator: say thousands: "," in the source)'
                elif decimal == "." and ONE_THOUSANDS.fullmatch(text.strip()):  # (3,000)
                    hint = (
                        ' (a thousands separator or a decimal comma: say thousands: "," or '
                        'decimal: "," in the source)'
                    )
                elif decimal == "." and DECIMAL_COMMA.fullmatch(text.strip()):
                    hint = ' (a decimal comma: say decimal: "," in the source)'
                elif kind == "label":
                    hint = (
                        f" (a label 1 where the value is one of some: {{name: {column}, "
                        f"column: {column}, one_of: [{shown(text)}]}})"
                    )
                raise batch.bad(column, i, f"must be {wants}, got {shown(text)}{hint}") from None
        raise batch.bad(column, 0, f"must be {wants}, got type {array.type}") from None
    numbers = values.to_numpy(zero_copy_only=False)
    if kind == "label":
        bad = ~np.isin(numbers, (0.0, 1.0))  # NaN (a missing label) is not in it either
        if bad.any():
            i = first_row(bad)
            got = "an empty value" if values[i].as_py() is None else shown(array[i].as_py())
            hint = (
                "drop the rows without a label before preparing"
                if values[i].as_py() is None
                else f"for another coding (-1/1, a rating), declare the label as "
                f"{{name: {column}, column: {column}, at_least: THRESHOLD}}"
            )
            raise batch.bad(column, i, f"must be 0 or 1 on every row, got {got} ({hint})")
    elif not np.isfinite(numbers[~np.isnan(numbers)]).all():
        i = first_row(np.isinf(numbers))
        raise batch.bad(column, i, f"must be a finite number, got {numbers[i]}")
    return values


def _texts(batch: Batch, column: str, array: pa.Array) -> pa.Array:
    """Strings; "", null and a number's NaN all mean missing (null), as in a served row."""
    _scalar_only(batch, column, array, "one value")
    if pa.types.is_floating(array.type):  # as float64's text, as a served row's are
        array = pc.if_else(pc.is_nan(array), None, array).cast(pa.float64())
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        try:
            array = pc.cast(array, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise batch.bad(column, 0, f"of type {array.type} cannot be read as text") from None
    array = pc.cast(array, pa.string())
    return pc.if_else(pc.equal(array, ""), None, array)


def _lists(
    batch: Batch, column: str, array: pa.Array, feature: Feature, per_second: int = 1
) -> pa.Array:
    """list<string>: a list column, or text split at the feature's ``sep``. A file whose
    lists are all empty or missing (a day with no genres: JSON and CSV readers then infer no
    value type) gives empty lists."""
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.list_(pa.string()))
    text = pa.types.is_string(array.type) or pa.types.is_large_string(array.type)
    if (
        feature.type == "sequence"
        and feature.sep is None
        and (text or (is_list(array.type) and is_list(array.type.value_type)))
    ):
        return _events_otherwise(batch, column, array, event_names(feature), per_second)
    if text:
        if feature.sep is None:
            i = _first_value(array)
            raise batch.bad(
                column,
                i,
                f"holds text ({shown(array[i].as_py())}) where a list is declared; "
                "give a list column, or sep: to split the text",
            )
        array = pc.split_pattern(pc.cast(array, pa.string()), feature.sep)
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise batch.bad(
            column, 0, f"of type {array.type} is not a list (give a list column, or text with sep:)"
        )
    value_type = array.type.value_type
    if pa.types.is_dictionary(value_type):  # a list of categories (pandas', Spark's)
        value_type = value_type.value_type
        array = pc.cast(array, pa.large_list(value_type))
    if pa.types.is_struct(value_type) and feature.type == "sequence":
        return _events(batch, column, array, event_names(feature), per_second)
    if not (
        pa.types.is_null(value_type)
        or pa.types.is_string(value_type)
        or pa.types.is_integer(value_type)
        or pa.types.is_large_string(value_type)
    ):
        raise batch.bad(column, 0, f"is a list of {value_type}; a list of ids or texts is needed")
    return _without_empty(pc.cast(array, pa.list_(pa.string())))


def _events_otherwise(
    batch: Batch, column: str, array: pa.Array, names: tuple, per_second: int
) -> pa.Array:
    """A history column's events given as ``[item, action, time]`` triples, or as JSON text
    (a CSV cell; a JSON-lines column whose types mix) of triples or objects: read as a
    served row's are (``events_array``; where it leaves them to the rows, or its actions are
    no integers, ``convert`` row by row), then checked as structs are (``_events``)."""
    values = array.to_pylist()
    structs = events_array(values, names)
    kinds = None if structs is None else structs.type.value_type
    if kinds is None or names[1] is not None and not pa.types.is_integer(kinds[1].type):
        structs = _converted_events(batch, column, values, names, per_second)
        per_second = 1  # the times converted: seconds
    return _events(batch, column, structs, names, per_second)


def _converted_events(
    batch: Batch, column: str, values: list, names: tuple, per_second: int
) -> pa.Array:
    """Each row's events as a served row's are converted, a bad one named with its row."""
    lengths, items, actions, times = [], [], [], []
    for i, value in enumerate(values):
        try:
            events = convert(i + 1, column, "events", value, keys=names, per_second=per_second)
        except RawInputError as err:
            hint = "; for a list of items in one text column, declare sep:"
            raise batch.bad(column, i, err.problem + hint * isinstance(value, str)) from None
        lengths.append(len(events))
        for item, action, time in events:
            items.append(item), actions.append(action), times.append(time)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), pa.int64())
    fields = [pa.array(items, pa.string()), pa.array(actions, pa.int64()),
              pa.array(times, pa.int64())]  # fmt: skip
    named = [(f, n) for f, n in zip(fields, names, strict=True) if n is not None]
    return pa.LargeListArray.from_arrays(
        offsets, pa.StructArray.from_arrays([f for f, _ in named], names=[n for _, n in named])
    )


def _without_empty(lists: pa.Array) -> pa.Array:
    """Lists of text without their empty values: "" and null are no value (text split at
    ``sep``: "a||b"; JSON's ``[1, null]``), as a served row's lists are read
    (``RawForm.features``)."""
    values = pc.list_flatten(lists)
    kept = np.asarray(pc.fill_null(pc.not_equal(values, ""), False), dtype=bool)
    if kept.all():
        return lists
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    row = np.repeat(np.arange(len(lists)), lengths)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(row[kept], minlength=len(lists)))])
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), values.filter(pa.array(kept)), mask=lists.is_null()
    )


def event_names(feature: Feature) -> tuple[str, ...]:
    """A history column's struct fields for its events' item, action and time."""
    return feature.event_fields.names if feature.event_fields else EVENT_KEYS


def _events(
    batch: Batch, column: str, array: pa.Array, names: tuple[str, ...], per_second: int = 1
) -> pa.Array:
    """A history column of events, each row's list of ``{item, action, time}`` structs (by
    ``names``; other fields ignored), as a large list of structs of ``EVENT_KEYS``: items
    as text ("" missing),
    actions integers from 0 to ``ACTION_MAX`` (``NO_ACTION`` where ``names`` has none),
    times int64 unix seconds (read as a row's time is: ``_seconds``). A missing list is an
    empty one; an event without its item, action or time is refused, naming its row."""
    kind = array.type.value_type
    lacking = [name for name in event_fields(names) if kind.get_field_index(name) < 0]
    if lacking:
        held = event_fields(names)
        also = (
            ", or event_fields: {action: null} where its events have none (one kind of action)"
            if lacking == [names[1]] and names[1] == "action"
            else ""
        )
        raise batch.bad(
            column,
            0,
            f"is a list of {kind}; a history of events needs the fields "
            f"{', '.join(held[:-1])} and {held[-1]} (it lacks {', '.join(lacking)}; "
            f"event_fields: names others{also})",
        )
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    row_of = np.repeat(np.arange(len(array)), lengths)  # each event's row
    events = pc.list_flatten(array)
    fields = dict(zip([f.name for f in events.type], events.flatten(), strict=True))
    out = []
    for name, given in zip(EVENT_KEYS, names, strict=True):
        if given is None:  # (the action of a history without one)
            out.append(pa.array(np.full(len(events), NO_ACTION, dtype=np.int64)))
            continue
        values = fields[given]
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if values.null_count:
            i = row_of[first_row(np.asarray(values.is_null(), dtype=bool))]
            raise batch.bad(column, i, f"holds an event without its {name}")
        if name == "item":
            if not (pa.types.is_string(values.type) or pa.types.is_integer(values.type)
                    or pa.types.is_large_string(values.type)):  # fmt: skip
                raise batch.bad(column, 0, f"has items of type {values.type}; ids or texts")
            values = pc.cast(values, pa.string())
            out.append(pc.if_else(pc.equal(values, ""), None, values))  # "": missing, id 0
            continue
        if name == "time":  # as a row's time: unix seconds, or date-times
            of = EventsOf(batch.file, batch.first, batch.start, {}, batch.kept, row_of=row_of)
            out.append(_seconds(of, f"{column}[time]", values, per_second))
            continue
        if not pa.types.is_integer(values.type) or (
            pa.types.is_uint64(values.type) and pc.max(values).as_py() >= 2**63
        ):
            raise batch.bad(
                column, 0, f"has {name}s of type {values.type}; {name}s must be 64-bit integers"
            )
        x = values.to_numpy(zero_copy_only=False).astype(np.int64)
        if name == "action" and ((x < 0) | (x > ACTION_MAX)).any():
            i = first_row((x < 0) | (x > ACTION_MAX))
            raise batch.bad(
                column, row_of[i], f"holds an action of {x[i]}; actions are 0 to {ACTION_MAX}"
            )
        out.append(pa.array(x))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64())
    structs = pa.StructArray.from_arrays(out, names=list(EVENT_KEYS))
    return pa.LargeListArray.from_arrays(offsets, structs)


def _seconds(batch: Batch, column: str, array: pa.Array, per_second: int = 1) -> pa.Array:
    """int64 seconds: from unix times in ``per_second`` units (integers floor-divided, a
    fraction floored), or from timestamps and dates (as UTC; a fraction of a second floored,
    as a number's is); one past ``LATEST_SECONDS`` refused, as a served row's is."""
    _scalar_only(batch, column, array, "a time")
    if array.null_count:
        raise batch.bad(
            column,
            first_row(np.asarray(array.is_null(), dtype=bool)),
            "is empty; every row needs its time",
        )
    given = array
    try:
        text = pa.types.is_string(array.type) or pa.types.is_large_string(array.type)
        if text:  # numbers (float64), date-times, or date-times read one by one (int64 seconds)
            array = _time_from_text(batch, column, array)
        if pa.types.is_timestamp(array.type):  # a fraction of a second floored
            array = pc.floor_temporal(array, unit="second")
        if pa.types.is_timestamp(array.type) or pa.types.is_date(array.type):
            seconds = pc.cast(pc.cast(array, pa.timestamp("s")), pa.int64()).to_numpy()
        elif pa.types.is_floating(array.type):
            x = array.to_numpy(zero_copy_only=False)
            beyond = ~(np.abs(x) < 2.0**63)  # NaN and Inf too
            if beyond.any():
                i = first_row(beyond)
                raise batch.bad(column, i, f"must be a unix time in seconds, got {x[i]:g}")
            seconds = np.floor(x / per_second).astype(np.int64)
        else:
            seconds = pc.cast(array, pa.int64()).to_numpy()
            if not text:
                seconds = seconds // per_second
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise batch.bad(
            column,
            0,
            f"must be a unix time in seconds or a date-time, got type {array.type} "
            f"({shown(array[0].as_py())})",
        ) from None
    late = seconds >= LATEST_SECONDS
    if late.any():
        i = first_row(late)
        raise batch.bad(column, i, too_late(given[i].as_py(), per_second))
    return pa.array(seconds, pa.int64())


# Date-times as Arrow casts text: naive (read as UTC) or with a zone; dates, fractions
DATE_TIMES = (pa.timestamp("ns"), pa.timestamp("ns", tz="UTC"))


def _time_from_text(batch: Batch, column: str, array: pa.Array) -> pa.Array:
    """Times written as text: unix seconds ('1600000000') or date-times, the same on every
    row; else the first row that is not as the first is named. Date-times Arrow does not
    read at once (naive on some rows and zoned on others, beyond its nanoseconds' years) are
    read one by one as a served row's are (``unix_seconds``)."""
    for kind in (pa.float64(), *DATE_TIMES):
        try:
            return pc.cast(array, kind)
        except pa.ArrowInvalid:
            continue
    texts = array.to_pylist()
    seconds = [_casts(text, pa.float64()) for text in texts]
    times = [
        None if number else unix_seconds(text) for number, text in zip(seconds, texts, strict=True)
    ]
    for i, text in enumerate(texts):
        if not seconds[i] and (times[i] is None or not -INT64_LIMIT <= times[i] < INT64_LIMIT):
            raise batch.bad(
                column, i, f"must be a unix time in seconds or a date-time, got {shown(text)}"
            )
    if not any(seconds):
        return pa.array(times, pa.int64())
    i = seconds.index(not seconds[0])  # every row is one or the other: they mix
    kinds = ("unix seconds", "a date-time") if seconds[i] else ("a date-time", "unix seconds")
    raise batch.bad(
        column, i, f"is {kinds[0]} ({shown(texts[i])}) where row {batch.first + 1} is {kinds[1]}"
    )


def _casts(text: str, kind: pa.DataType) -> bool:
    try:
        pc.cast(pa.array([text]), kind)
    except pa.ArrowInvalid:
        return False
    return True
