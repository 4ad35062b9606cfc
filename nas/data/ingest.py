"""A schema file's source rows -> the prepared layout, in bounded memory.

Three passes over the files, each in record batches (pyarrow), none holding the rows:

1. the labels and keys: every row's split (``time`` and ``user_time`` need every timestamp
   first), and each label checked;
2. every declared column checked against its type (a wrong one fails here, before anything
   is written, naming the file, the row and the column), and on the training split only:
   the vocabularies (value counts, kept by ``min_freq`` and ``max_size``) and the dense
   statistics;
3. the rows encoded into memory-mapped ``.npy`` files (``nas/data/prepared.py``).

Memory holds one batch, a few bytes per row (the split, the timestamps or user hashes the
split needs) and the vocabularies' distinct values.

Ids: 0 is padding and a missing value (null or ""); 1 is out of vocabulary (a value seen
fewer than ``min_freq`` times in train, past ``max_size``, or unseen); the vocabulary starts
at 2, most frequent first. A hashed field maps a value to ``1 + blake2b(value) mod hash``.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.core.errors import DataError, shown
from nas.data.chronology import Chronology
from nas.data.prepared import SPLITS, PreparedWriter, row_chunks, unlearnable
from nas.data.raw import (
    DERIVED,
    EVENT_KEYS,
    FLOAT32_MAX,
    INT64_LIMIT,
    MISSING_NUMBER_TEXTS,
    RawForm,
    RawInputError,
    convert,
    float_text,
    normalise_year,
    stable_hash,
    unix_seconds,
)
from nas.data.raw_table import events_array, is_list
from nas.data.schema import LABEL, Field
from nas.data.schema import Schema as ModelSchema
from nas.data.schema_file import Feature, SchemaFile, utc_text

BATCH_ROWS = 65_536
BLOCK_BYTES = 8 << 20  # csv and jsonl: bytes parsed at a time
PAD, OOV, FIRST_ID = 0, 1, 2
DEFAULT_MAX_LEN = {"multi_hot": 16, "sequence": 64}
COMPACT_AT = 1 << 20  # value-count rows kept before merging them
RELEASE_ROWS = 1 << 20  # rows written between two releases of the written pages
ACTION_MAX = 127  # a history's action is stored as int8


# --- reading ----------------------------------------------------------------------------


@dataclass
class Batch:
    file: Path
    first: int  # the batch's first row, counted from 0 within its file
    start: int  # the same row, counted over every file
    columns: dict[str, pa.Array]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def bad(self, column: str, index: int, problem: str) -> DataError:
        """A ``DataError`` naming the file, the row (1-based, header excluded) and column."""
        return DataError(self.file, f"row {self.first + index + 1}: column {column!r} {problem}")


@dataclass
class EventsOf(Batch):
    """A batch's history events: an error at an event names the event's row."""

    row_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def bad(self, column: str, index: int, problem: str) -> DataError:
        return super().bad(column, int(self.row_of[index]), problem)


class Rows:
    """The source's files, read a few columns at a time, each column converted to what its
    declaration needs (``_convert``)."""

    def __init__(self, schema: SchemaFile, files: list[Path]):
        self.schema, self.files = schema, files
        self._kinds = schema.column_kinds()

    def check_columns(self) -> None:
        """Every declared column is in every file (before reading any row)."""
        wanted = self.schema.columns()
        for path in self.files:
            present = self._file_columns(path)
            missing = [c for c in wanted if c not in present]
            if missing:
                raise DataError(
                    path,
                    f"has no column {', '.join(map(repr, missing))} (the schema declares "
                    f"it); its columns: {', '.join(present) or 'none'}",
                )

    def batches(self, columns: list[str]) -> Iterator[Batch]:
        start = 0
        for path in self.files:
            first = 0
            for record in self._read(path, columns):
                n = record.num_rows
                if n == 0:
                    continue
                raw = {c: record.column(c) for c in columns}
                batch = Batch(path, first, start, {})
                batch.columns = {c: self._convert(batch, c, raw[c]) for c in columns}
                yield batch
                first += n
                start += n

    # -- formats

    def _file_columns(self, path: Path) -> list[str]:
        fmt = self.schema.source.format
        try:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                return list(pq.ParquetFile(path).schema_arrow.names)
            if fmt == "csv":
                if not self.schema.source.header:
                    return list(self.schema.source.columns or ())
                return list(self._open_csv(path, None).schema.names)
            return list(self._open_json(path).schema.names)
        except pa.ArrowInvalid as err:
            if fmt == "jsonl" and _mixed_json_types(err):
                return _json_keys(path)
            raise DataError(path, f"is not readable as {fmt}: {_first_line(err)}") from None
        except (pa.ArrowException, OSError) as err:
            raise DataError(path, f"is not readable as {fmt}: {_first_line(err)}") from None

    def _read(self, path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
        fmt = self.schema.source.format
        try:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                yield from pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=columns)
            elif fmt == "csv":
                yield from self._open_csv(path, columns)
            else:
                yield from self._json(path, columns)
        # Arrow's errors; OSError: damaged bytes mid-file ("Corrupt snappy compressed data"),
        # a truncated .gz, the disk
        except (pa.ArrowException, OSError) as err:
            raise DataError(path, f"could not be read as {fmt}: {_first_line(err)}") from None

    def _json(self, path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """Arrow's reader, or from where a column mixes JSON types (ids written as numbers on
        some rows and as strings on others, which Arrow refuses) or Arrow reads a batch
        wrong, the file line by line in Python, several times slower, each mixed column's
        values as their JSON text."""
        done = 0
        try:
            for record in self._open_json(path):
                record = record.select(columns)
                try:  # Arrow 25 drops a list's first nulls ([null, 1]): offsets past the values
                    record.validate()
                except pa.ArrowInvalid:
                    break
                yield record
                done += record.num_rows
            else:
                return
        except pa.ArrowInvalid as err:
            if not _mixed_json_types(err):
                raise
        lists = {c for c in columns if self._kinds[c] == "list"}
        events = {  # history columns: their events made into structs at once
            c: event_names(f)
            for c in lists
            if (f := self.schema.reading(c)).type == "sequence" and f.sep is None
        }
        yield from _json_by_line(path, columns, lists, events, skip=done)

    def _open_csv(self, path: Path, columns: list[str] | None):
        import pyarrow.csv as pacsv

        source = self.schema.source
        read = pacsv.ReadOptions(
            block_size=BLOCK_BYTES,
            column_names=list(source.columns) if not source.header else None,
        )
        parse = pacsv.ParseOptions(delimiter=source.delimiter)
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
    def _open_json(path: Path):
        import pyarrow.json as pajson

        return pajson.open_json(path, read_options=pajson.ReadOptions(block_size=BLOCK_BYTES))

    # -- types

    def _convert(self, batch: Batch, column: str, array: pa.Array) -> pa.Array:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        kind = self._kinds[column]
        if kind in ("label", "number"):
            return _numbers(batch, column, array, kind)
        if kind == "timestamp":
            return _seconds(batch, column, array)
        if kind == "list":
            return _lists(batch, column, array, self.schema.reading(column))
        return _texts(batch, column, array)


def _mixed_json_types(err: Exception) -> bool:
    """Whether Arrow's JSON reader stopped at a column whose JSON type changed."""
    return "changed from" in str(err)


def json_objects(path: Path) -> Iterator[dict]:
    """The object on each non-empty line of a JSON-lines file (compressed as its name says,
    as Arrow's reader reads it)."""
    with io.BufferedReader(pa.input_stream(path, compression="detect")) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                found = json.loads(line)
            except ValueError as err:
                raise DataError(path, f"is not JSON: {err}", line=number) from None
            if not isinstance(found, dict):
                raise DataError(path, f"holds {shown(found)}, not an object", line=number)
            yield found


def _json_keys(path: Path, rows: int = 10_000) -> list[str]:
    """The keys of a JSON-lines file's first ``rows`` objects, in the order first seen."""
    keys: dict[str, None] = {}
    for i, found in enumerate(json_objects(path)):
        keys.update(dict.fromkeys(found))
        if i + 1 == rows:
            break
    return list(keys)


def _json_by_line(
    path: Path, columns: list[str], lists: set[str], events: dict[str, tuple], skip: int
) -> Iterator[pa.RecordBatch]:
    """The rows after the first ``skip`` as record batches, read by Python's json (``events``:
    history columns, by their events' field names). Refused as Arrow's types would be: a
    list or an object in a column other than ``lists``, a number with a fraction or a
    boolean in a list."""
    chunk: list[dict] = []
    for row, found in enumerate(json_objects(path)):
        if row < skip:
            continue
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
            raise DataError(path, f"row {row + 1}: column {column!r} {problem}")
        chunk.append(found)
        if len(chunk) == BATCH_ROWS:
            yield json_batch(chunk, columns, events)
            chunk = []
    if chunk:
        yield json_batch(chunk, columns, events)


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
    for as_text in (None, _json_text):
        try:
            return pa.array(values if as_text is None else [as_text(v) for v in values])
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


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _first_value(array: pa.Array) -> int:
    """The first row with a value (0 when all are null): the sample an error shows."""
    if array.null_count == len(array):
        return 0
    return _first(~np.asarray(array.is_null(), dtype=bool))


def _scalar_only(batch: Batch, column: str, array: pa.Array, wants: str) -> None:
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        index = _first_value(array)
        raise batch.bad(
            column, index, f"holds a list ({shown(array[index].as_py())}) where {wants} is declared"
        )
    if pa.types.is_struct(array.type) or pa.types.is_map(array.type):
        raise batch.bad(column, 0, f"holds objects where {wants} is declared")


def _numbers(batch: Batch, column: str, array: pa.Array, kind: str) -> pa.Array:
    """float64 (nulls kept for dense; a label must be 0 or 1 on every row)."""
    wants = "a 0/1 label" if kind == "label" else "a number"
    _scalar_only(batch, column, array, wants)
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        missing = pa.array(["", *MISSING_NUMBER_TEXTS])  # as a served row's are
        array = pc.if_else(pc.is_in(pc.utf8_trim_whitespace(array), missing), None, array)
    try:
        values = pc.cast(array, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        texts = array.to_pylist()
        for i, text in enumerate(texts):
            try:
                if text is not None:
                    float(text)
            except (TypeError, ValueError):
                raise batch.bad(column, i, f"must be {wants}, got {shown(text)}") from None
        raise batch.bad(column, 0, f"must be {wants}, got type {array.type}") from None
    numbers = values.to_numpy(zero_copy_only=False)
    if kind == "label":
        bad = ~np.isin(numbers, (0.0, 1.0))  # NaN (a missing label) is not in it either
        if bad.any():
            i = _first(bad)
            got = "an empty value" if values[i].as_py() is None else shown(array[i].as_py())
            hint = (
                "drop the rows without a label before preparing"
                if values[i].as_py() is None
                else f"for another coding (-1/1, a rating), declare the label as "
                f"{{name: {column}, column: {column}, at_least: THRESHOLD}}"
            )
            raise batch.bad(column, i, f"must be 0 or 1 on every row, got {got} ({hint})")
    elif not np.isfinite(numbers[~np.isnan(numbers)]).all():
        i = _first(np.isinf(numbers))
        raise batch.bad(column, i, f"must be a finite number, got {numbers[i]}")
    return values


def _texts(batch: Batch, column: str, array: pa.Array) -> pa.Array:
    """Strings; "", null and a number's NaN all mean missing (null), as in a served row."""
    _scalar_only(batch, column, array, "one value")
    if pa.types.is_floating(array.type):
        array = pc.if_else(pc.is_nan(array), None, array)
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        try:
            array = pc.cast(array, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise batch.bad(column, 0, f"of type {array.type} cannot be read as text") from None
    array = pc.cast(array, pa.string())
    return pc.if_else(pc.equal(array, ""), None, array)


def _lists(batch: Batch, column: str, array: pa.Array, feature: Feature) -> pa.Array:
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
        return _events_otherwise(batch, column, array, event_names(feature))
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
        return _events(batch, column, array, event_names(feature))
    if not (
        pa.types.is_null(value_type)
        or pa.types.is_string(value_type)
        or pa.types.is_integer(value_type)
        or pa.types.is_large_string(value_type)
    ):
        raise batch.bad(column, 0, f"is a list of {value_type}; a list of ids or texts is needed")
    return _without_empty(pc.cast(array, pa.list_(pa.string())))


def _events_otherwise(batch: Batch, column: str, array: pa.Array, names: tuple) -> pa.Array:
    """A history column's events given as ``[item, action, time]`` triples, or as JSON text
    (a CSV cell; a JSON-lines column whose types mix) of triples or objects: read as a
    served row's are (``events_array``; where it leaves them to the rows, or its actions are
    no integers, ``convert`` row by row), then checked as structs are (``_events``)."""
    values = array.to_pylist()
    structs = events_array(values, names)
    if structs is None or not pa.types.is_integer(structs.type.value_type[1].type):
        structs = _converted_events(batch, column, values, names)
    return _events(batch, column, structs, names)


def _converted_events(batch: Batch, column: str, values: list, names: tuple) -> pa.Array:
    """Each row's events as a served row's are converted, a bad one named with its row."""
    lengths, items, actions, times = [], [], [], []
    for i, value in enumerate(values):
        try:
            events = convert(i + 1, column, "events", value, keys=names)
        except RawInputError as err:
            hint = "; for a list of items in one text column, declare sep:"
            raise batch.bad(column, i, err.problem + hint * isinstance(value, str)) from None
        lengths.append(len(events))
        for item, action, time in events:
            items.append(item), actions.append(action), times.append(time)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), pa.int64())
    fields = [pa.array(items, pa.string()), pa.array(actions, pa.int64()),
              pa.array(times, pa.int64())]  # fmt: skip
    return pa.LargeListArray.from_arrays(
        offsets, pa.StructArray.from_arrays(fields, names=list(names))
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


def _events(batch: Batch, column: str, array: pa.Array, names: tuple[str, ...]) -> pa.Array:
    """A history column of events, each row's list of ``{item, action, time}`` structs (by
    ``names``; other fields ignored), as a large list of structs of ``EVENT_KEYS``: items
    as text ("" missing),
    actions integers from 0 to ``ACTION_MAX``, times int64 unix seconds (read as a row's
    time is: ``_seconds``). A missing list is an empty one; an event without its item,
    action or time is refused, naming its row."""
    kind = array.type.value_type
    lacking = [name for name in names if kind.get_field_index(name) < 0]
    if lacking:
        raise batch.bad(
            column,
            0,
            f"is a list of {kind}; a history of events needs the fields "
            f"{', '.join(names[:2])} and {names[2]} (it lacks {', '.join(lacking)}; "
            "event_fields: names others)",
        )
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    row_of = np.repeat(np.arange(len(array)), lengths)  # each event's row
    events = pc.list_flatten(array)
    fields = dict(zip([f.name for f in events.type], events.flatten(), strict=True))
    out = []
    for name, given in zip(EVENT_KEYS, names, strict=True):
        values = fields[given]
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if values.null_count:
            i = row_of[_first(np.asarray(values.is_null(), dtype=bool))]
            raise batch.bad(column, i, f"holds an event without its {name}")
        if name == "item":
            if not (pa.types.is_string(values.type) or pa.types.is_integer(values.type)
                    or pa.types.is_large_string(values.type)):  # fmt: skip
                raise batch.bad(column, 0, f"has items of type {values.type}; ids or texts")
            values = pc.cast(values, pa.string())
            out.append(pc.if_else(pc.equal(values, ""), None, values))  # "": missing, id 0
            continue
        if name == "time":  # as a row's time: unix seconds, or date-times
            out.append(_seconds(EventsOf(batch.file, batch.first, batch.start, {}, row_of),
                                f"{column}[time]", values))  # fmt: skip
            continue
        if not pa.types.is_integer(values.type) or (
            pa.types.is_uint64(values.type) and pc.max(values).as_py() >= 2**63
        ):
            raise batch.bad(
                column, 0, f"has {name}s of type {values.type}; {name}s must be 64-bit integers"
            )
        x = values.to_numpy(zero_copy_only=False).astype(np.int64)
        if name == "action" and ((x < 0) | (x > ACTION_MAX)).any():
            i = _first((x < 0) | (x > ACTION_MAX))
            raise batch.bad(
                column, row_of[i], f"holds an action of {x[i]}; actions are 0 to {ACTION_MAX}"
            )
        out.append(pa.array(x))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64())
    structs = pa.StructArray.from_arrays(out, names=list(EVENT_KEYS))
    return pa.LargeListArray.from_arrays(offsets, structs)


def _seconds(batch: Batch, column: str, array: pa.Array) -> pa.Array:
    """int64 seconds: from integers, or from timestamps and dates (as UTC; a fraction of a
    second floored, as a number's is)."""
    _scalar_only(batch, column, array, "a time")
    if array.null_count:
        raise batch.bad(
            column,
            _first(np.asarray(array.is_null(), dtype=bool)),
            "is empty; every row needs its time",
        )
    try:
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            array = _time_from_text(batch, column, array)
        if pa.types.is_timestamp(array.type):  # a fraction of a second floored
            array = pc.floor_temporal(array, unit="second")
        if pa.types.is_timestamp(array.type) or pa.types.is_date(array.type):
            array = pc.cast(pc.cast(array, pa.timestamp("s")), pa.int64())
        elif pa.types.is_floating(array.type):
            x = array.to_numpy(zero_copy_only=False)
            beyond = ~(np.abs(x) < 2.0**63)  # NaN and Inf too
            if beyond.any():
                i = _first(beyond)
                raise batch.bad(column, i, f"must be a unix time in seconds, got {x[i]:g}")
            array = pc.floor(array)
        return pc.cast(array, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise batch.bad(
            column,
            0,
            f"must be a unix time in seconds or a date-time, got type {array.type} "
            f"({shown(array[0].as_py())})",
        ) from None


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


# --- the split --------------------------------------------------------------------------


def hashed(array: pa.Array, salt: str = "") -> np.ndarray:
    """``stable_hash`` of each value of a string array, computing each distinct value once;
    a null hashes as the empty string."""
    encoded = pc.dictionary_encode(pc.fill_null(array, ""))
    return stable_hash(encoded.dictionary.to_pylist(), salt)[
        encoded.indices.to_numpy(zero_copy_only=False)
    ]


def _cut_points(count, valid: float, test: float):
    """Of ``count`` ordered rows, the first ceil((1 - valid - test) count) train, up to
    ceil((1 - test) count) validate, the rest test. In exact fractions: 0.1/0.1 gives
    today's 80/10/10 rule row for row."""
    train, before_test = 1 - Fraction(str(valid)) - Fraction(str(test)), 1 - Fraction(str(test))
    count = np.asarray(count, dtype=np.int64)
    train_end = (count * train.numerator + train.denominator - 1) // train.denominator
    valid_end = (count * before_test.numerator + before_test.denominator - 1) // (
        before_test.denominator
    )
    return train_end, valid_end


def _cut(position: np.ndarray, count: np.ndarray | int, valid: float, test: float) -> np.ndarray:
    """The split code of the row at ``position`` of ``count`` (``_cut_points``)."""
    train_end, valid_end = _cut_points(count, valid, test)
    return np.where(position < train_end, 0, np.where(position < valid_end, 1, 2)).astype(np.int8)


def _by_fraction(h: np.ndarray, valid: float, test: float) -> np.ndarray:
    """Split codes from uniform uint64 hashes."""
    scale = 2**64
    train_top = int(scale * (1 - Fraction(str(valid)) - Fraction(str(test))))
    valid_top = int(scale * (1 - Fraction(str(test))))
    train_top, valid_top = min(train_top, scale - 1), min(valid_top, scale - 1)
    return np.where(h < np.uint64(train_top), 0, np.where(h < np.uint64(valid_top), 1, 2)).astype(
        np.int8
    )


def _mix(rows: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of each row number: a uniform, seeded and order-free hash."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _codes(sizes: tuple[int, int, int]) -> np.ndarray:
    return np.repeat(np.arange(3, dtype=np.int8), sizes)


def assign_split(
    schema: SchemaFile, rows: int, times: np.ndarray | None, users: np.ndarray | None
) -> np.ndarray:
    """Each row's split code (0 train, 1 valid, 2 test) by the schema's method. Memory: the
    keys it is given, and for ``time`` one int64 per row more (the sort)."""
    split = schema.split
    method, valid, test = split.method, split.valid, split.test
    if method == "time" and split.at_moments:
        return np.where(
            times >= split.test_from, 2, np.where(times >= split.valid_from, 1, 0)
        ).astype(np.int8)
    if method in ("order", "time"):
        train_end, valid_end = (int(x) for x in _cut_points(rows, valid, test))
        sizes = (train_end, valid_end - train_end, rows - valid_end)
        if method == "order":
            return _codes(sizes)
        out = np.empty(rows, dtype=np.int8)  # by time; ties keep the files' order
        out[np.argsort(times, kind="stable")] = _codes(sizes)
        return out
    if method == "random":  # chunk by chunk: no per-row int64 temporaries
        out = np.empty(rows, dtype=np.int8)
        for part in row_chunks(rows):
            index = np.arange(part.start, part.stop, dtype=np.int64)
            out[part] = _by_fraction(_mix(index, split.seed), valid, test)
        return out
    if method == "hash":
        return _by_fraction(users, valid, test)
    # user_time: per user, by time, ties in the files' order
    index = np.arange(rows, dtype=np.int64)
    order = np.lexsort((index, times, users))
    sorted_users = users[order]
    starts = np.flatnonzero(np.r_[True, sorted_users[1:] != sorted_users[:-1]])
    counts = np.diff(np.r_[starts, rows])
    group_start = np.repeat(starts, counts)
    out = np.empty(rows, dtype=np.int8)
    out[order] = _cut(index - group_start, np.repeat(counts, counts), valid, test)
    return out


# --- vocabularies -----------------------------------------------------------------------


@dataclass
class ValueCounts:
    """Distinct values and their counts, merged batch by batch in Arrow."""

    parts: list[pa.Table] = field(default_factory=list)
    size: int = 0

    def add(self, values: pa.Array) -> None:
        values = values.drop_null()
        if len(values) == 0:
            return
        counted = pc.value_counts(values)
        self.parts.append(pa.table({"value": counted.field(0), "count": counted.field(1)}))
        self.size += len(counted)
        if self.size > COMPACT_AT:
            self._compact()

    def _compact(self) -> pa.Table:
        if not self.parts:
            return pa.table({"value": pa.array([], pa.string()), "count": pa.array([], pa.int64())})
        merged = pa.concat_tables(self.parts).group_by("value").aggregate([("count", "sum")])
        merged = merged.rename_columns(["value", "count"])
        self.parts, self.size = [merged], len(merged)
        return merged

    def vocabulary(self, min_freq: int, max_size: int | None) -> list[str]:
        """Values seen at least ``min_freq`` times, most frequent first (ties by value),
        the first ``max_size``."""
        table = self._compact()
        table = table.filter(pc.greater_equal(table["count"], min_freq))
        table = table.sort_by([("count", "descending"), ("value", "ascending")])
        if max_size is not None:
            table = table.slice(0, max_size)
        return table["value"].to_pylist()


@dataclass
class DenseStats:
    """A dense field's training values: their count, mean and sum of squared deviations,
    merged batch by batch (Chan, Golub and LeVeque's update), not E[x^2] - mean^2, which
    loses the variance to cancellation when the mean is large against the spread."""

    count: int = 0
    mean: float = 0.0
    deviations: float = 0.0  # the sum of (x - mean)^2

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is mean_std's to name
            mean = float(values.mean())
            deviations = float(np.square(values - mean).sum())
        if self.count == 0:
            self.count, self.mean, self.deviations = len(values), mean, deviations
            return
        total = self.count + len(values)
        delta = mean - self.mean
        self.mean += delta * len(values) / total
        self.deviations += deviations + delta * delta * self.count * len(values) / total
        self.count = total

    def mean_std(self) -> tuple[float, float]:
        """The mean and standard deviation (1 where it is 0); NaN or Inf where the values
        are too large for float64's squares."""
        if self.count == 0:
            return 0.0, 1.0
        finite = math.isfinite(self.deviations)
        std = math.sqrt(self.deviations / self.count) if finite else math.inf
        return self.mean, 1.0 if std <= 1e-12 else std


def _stored_dense(batch: Batch, encoder: Encoder) -> np.ndarray:
    """A dense field's values after its fill and transform, refused where float32 cannot
    hold one (a row standardized by the training rows' spread, far beyond them), as a served
    row's value is."""
    x = encoder.dense(encoder.values(batch))
    beyond = np.abs(x) > FLOAT32_MAX
    if beyond.any():
        i = _first(beyond)
        raise batch.bad(
            encoder.column,
            i,
            f"is {encoder.values(batch)[i].as_py():g}, {x[i]:g} after its transform "
            f"({encoder.feature.transform}, by the training rows): beyond the float32 a dense "
            f"feature is stored as (at most {FLOAT32_MAX:.3g}); drop or cap the value",
        )
    return x


def _check_dense(batch: Batch, encoder: Encoder, values: np.ndarray) -> None:
    """A dense field read as it is (transform none) must fit the float32 it is stored as."""
    if (encoder.feature.transform or "none") != "none":
        return
    beyond = np.abs(values) > FLOAT32_MAX  # NaN (missing) compares False
    if beyond.any():
        i = _first(beyond)
        raise batch.bad(
            encoder.column,
            i,
            f"is {values[i]:g}, beyond the float32 a dense feature is stored as "
            f"(at most {FLOAT32_MAX:.3g}); declare transform: log1p or standardize",
        )


# --- encoding ---------------------------------------------------------------------------


@dataclass
class Encoder:
    """One field's recipe: its source column (and what is derived from it), a vocabulary
    (or a hash) and, for dense, its transform."""

    field: str
    feature: Feature
    vocab: list[str] | None = None
    value_set: pa.Array | None = None
    mean: float = 0.0
    std: float = 1.0
    # a hashed field's ids, each with the first value seen to have it: rows read back
    # (``nas data rows``) encode to the ids they were stored with
    hashed_values: dict[int, str] = field(default_factory=dict)

    @property
    def column(self) -> str:
        """The source column it reads."""
        return self.feature.column_of(self.field)

    @property
    def cardinality(self) -> int:
        if self.feature.hash is not None:
            return self.feature.hash + 1
        return FIRST_ID + len(self.vocab or ())

    def values(self, batch: Batch) -> pa.Array:
        """Its source column in ``batch``, and for a derived field the derived text."""
        values = batch.columns[self.column]
        derive, prefix = self.feature.derive, self.feature.prefix
        if derive in DERIVED:
            seconds = values.to_numpy(zero_copy_only=False)
            return pc.cast(pa.array(DERIVED[derive](seconds)), pa.string())
        if derive == "year":  # each distinct value once
            encoded = pc.dictionary_encode(values)
            years = [normalise_year(v) or None for v in encoded.dictionary.to_pylist()]
            return pa.array(years, pa.string()).take(encoded.indices)
        if prefix is not None:
            return pc.utf8_slice_codeunits(values, 0, prefix)
        return values

    def ids(self, values: pa.Array) -> np.ndarray:
        """int64 ids of a string array (null -> 0)."""
        missing = np.asarray(values.is_null(), dtype=bool)
        if self.feature.hash is not None:
            out = (hashed(values) % np.uint64(self.feature.hash)).astype(np.int64) + 1
            if len(self.hashed_values) < self.feature.hash:
                self._note_values(values, out)
        else:
            found = pc.index_in(values, value_set=self.value_set)
            out = (
                pc.fill_null(found, OOV - FIRST_ID).to_numpy(zero_copy_only=False).astype(np.int64)
                + FIRST_ID
            )
        out[missing] = PAD
        return out

    def _note_values(self, values: pa.Array, ids: np.ndarray) -> None:
        """Each id not yet noted, with a value of ``values`` that has it."""
        rows = np.flatnonzero(~np.asarray(values.is_null(), dtype=bool))
        found, first = np.unique(ids[rows], return_index=True)
        fresh = np.array([i not in self.hashed_values for i in found.tolist()], dtype=bool)
        if fresh.any():
            taken = values.take(pa.array(rows[first[fresh]])).to_pylist()
            self.hashed_values.update(zip(found[fresh].tolist(), taken, strict=True))

    def dense(self, values: pa.Array) -> np.ndarray:
        x = values.to_numpy(zero_copy_only=False).astype(np.float64)
        x = np.where(np.isnan(x), self.feature.fill or 0.0, x)
        transform = self.feature.transform or "none"
        if transform == "log1p":
            x = np.log1p(np.maximum(x, 0.0))
        elif transform == "standardize":
            x = (x - self.mean) / self.std
        return x  # float64: stored as float32 once checked (``_stored_dense``)

    def recipe(self) -> dict:
        """This field's entry in the raw form (how serving encodes it)."""
        if self.feature.type == "dense":
            return {
                "field": self.field,
                "column": self.column,
                "transform": self.feature.transform or "none",
                "fill": self.feature.fill or 0.0,
                "mean": self.mean,
                "std": self.std,
            }
        entry = {"field": self.field, "column": self.column, "missing": PAD}
        if self.feature.derive in DERIVED:
            entry["derive"] = self.feature.derive
        elif self.feature.derive == "year":
            entry["year"] = True
        elif self.feature.prefix is not None:
            entry["prefix"] = self.feature.prefix
        if self.feature.hash is not None:
            entry["hash"] = self.feature.hash
        else:
            entry["vocab"] = {v: i + FIRST_ID for i, v in enumerate(self.vocab or ())}
            entry["oov"] = OOV
        return entry


def _last(lists: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's last ``width`` entries: where they are among the lists' entries laid end
    to end (``pc.list_flatten``), and how many each row keeps."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    lengths = lengths.astype(np.int64)
    ends = np.cumsum(lengths)
    first_kept = np.repeat(ends - np.minimum(lengths, width), lengths)
    return np.flatnonzero(np.arange(len(first_kept)) >= first_kept), np.minimum(lengths, width)


def _padded(lists: pa.Array, encoder: Encoder, width: int) -> np.ndarray:
    """Each row's first ``width`` values as ids: [rows, width], 0 after a row's last."""
    rows = len(lists)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    lengths = lengths.astype(np.int64)
    values = pc.list_flatten(lists)
    ids = encoder.ids(values) if len(values) else np.zeros(0, dtype=np.int64)
    row = np.repeat(np.arange(rows), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    position = np.arange(len(row)) - starts
    keep = position < width
    out = np.zeros((rows, width), dtype=np.int64)
    out[row[keep], position[keep]] = ids[keep]
    return out


# --- the whole preparation ---------------------------------------------------------------


@dataclass
class Plan:
    """What pass 2 fitted: each field's encoder."""

    categorical: list[Encoder]
    multi_hot: list[Encoder]
    dense: list[Encoder]
    sequence: Encoder | None
    multi_hot_width: int
    sequence_len: int
    events: int = 0  # history events kept over every row
    actions: int = 2  # a history's kinds of action, 0 (unknown) included
    items: int = 0  # a history from rows: distinct items over every row
    events_in_column: bool = False  # a history column of {item, action, time} events

    def encoder(self, field: str) -> Encoder:
        return next(e for e in self.categorical if e.field == field)


def prepare_schema_file(
    schema: SchemaFile,
    files: list[Path],
    root: Path,
    source: dict,
    progress=None,
    extra: dict | None = None,
) -> None:
    """Read the source (three passes), then write the prepared dataset at ``root`` (with
    ``extra`` entries in its manifest)."""
    reader = Rows(schema, files)
    reader.check_columns()
    rows, split, chronology, labels = _first_pass(schema, reader, progress)
    if rows == 0:
        raise DataError(files[0], "has no rows")
    plan = _fit(schema, reader, split, progress)  # every column checked: malformed rows first
    _check_learnable(schema, split, labels, files[0] if len(files) == 1 else schema.source.path)
    _write(schema, reader, split, plan, chronology, root, source, progress, manifest=extra or {})


def _tick(progress, what: str, rows: int, total: int | None = None) -> None:
    if progress is not None:
        progress(what, rows, total)


def _label_values(schema: SchemaFile, batch: Batch) -> list[np.ndarray]:
    """Each label of the batch's rows as 0/1 (a label by a threshold: its column checked)."""
    out = []
    for name, column, at_least in schema.label_columns():
        values = batch.columns[column].to_numpy(zero_copy_only=False)
        if at_least is not None:
            empty = np.isnan(values)
            if empty.any():
                raise batch.bad(
                    column, _first(empty), f"is empty; label {name!r} needs a number on every row"
                )
            values = values >= at_least
        out.append(values.astype(np.int8))
    return out


def _split_values(batch: Batch, column: str) -> np.ndarray:
    """The split codes a ``column`` split's column gives the batch's rows."""
    values = batch.columns[column]
    codes = pc.index_in(values, value_set=pa.array(SPLITS))
    if codes.null_count:
        index = _first(np.asarray(codes.is_null()))
        value = values[index].as_py()
        found = "is empty" if value is None else f"is {shown(value)}"
        raise batch.bad(column, index, f"{found}; split.column's values are {', '.join(SPLITS)}")
    return codes.to_numpy(zero_copy_only=False).astype(np.int8)


def _check_learnable(schema: SchemaFile, split: np.ndarray, labels: np.ndarray, where) -> None:
    """``unlearnable`` data refused, before anything is written."""
    sizes = np.bincount(split, minlength=3)
    train = split == 0
    rates = {
        name: float(labels[train, j].mean()) if sizes[0] else 0.5
        for j, name in enumerate(schema.label_names)
    }
    why = unlearnable(dict(zip(SPLITS, sizes.tolist(), strict=True)), rates, schema.split.column)
    if why:
        raise DataError(where, why)


def _first_pass(
    schema: SchemaFile, reader: Rows, progress
) -> tuple[int, np.ndarray, Chronology | None, np.ndarray]:
    """Every row's split, and for a history from rows every row's place in it: reads the
    labels (each checked, and returned: rows x labels) and the keys these need."""
    method, keys = schema.split.method, schema.keys
    from_rows = schema.history is not None and schema.history.from_rows
    time_key = keys.timestamp if method in ("time", "user_time") or from_rows else None
    user_key = keys.user if method in ("hash", "user_time") or from_rows else None
    label_columns = [column for _, column, _ in schema.label_columns()]
    given = schema.split.column
    columns = list(dict.fromkeys([*label_columns, *(k for k in (time_key, user_key, given) if k)]))
    times, users, labels, codes, rows = [], [], [], [], 0
    for batch in reader.batches(columns):
        rows += len(batch)
        labels.append(np.stack(_label_values(schema, batch), axis=1))
        if given:
            codes.append(_split_values(batch, given))
        if time_key:
            times.append(batch.columns[time_key].to_numpy(zero_copy_only=False))
        if user_key:
            users.append(hashed(batch.columns[user_key], f"{schema.split.seed}:"))
        _tick(progress, "1/3 reading labels and keys", len(batch))
    all_times = np.concatenate(times) if times else None
    del times
    all_users = np.concatenate(users) if users else None
    del users
    if given:
        split = np.concatenate(codes) if codes else np.zeros(0, np.int8)
    else:
        split = assign_split(schema, rows, all_times, all_users)
    del codes
    chronology = Chronology.of(all_users, all_times) if from_rows and rows else None
    all_labels = np.concatenate(labels) if labels else np.zeros((0, len(label_columns)), np.int8)
    return rows, split, chronology, all_labels


def _fit(schema: SchemaFile, reader: Rows, split: np.ndarray, progress) -> Plan:
    encoders = {
        name: Encoder(name, feature)
        for feature in schema.features
        if feature.type != "sequence"
        for name in feature.fields
    }
    counts = {
        name: ValueCounts()
        for name, e in encoders.items()
        if e.feature.type in ("categorical", "multi_hot") and e.feature.hash is None
    }
    stats = {name: DenseStats() for name, e in encoders.items() if e.feature.type == "dense"}
    sequence = schema.history
    from_rows = sequence is not None and sequence.from_rows
    keep = (sequence.max_len or DEFAULT_MAX_LEN["sequence"]) if sequence else 0
    action = sequence.action if sequence is not None else None
    columns = [c for f in schema.features for c in f.columns] + ([action] if action else [])
    columns = list(dict.fromkeys(columns))
    events, items, actions = 0, ValueCounts(), 1
    forms: set[bool] = set()  # a history column: of events (structs), or of items only
    for batch in reader.batches(columns):  # every column checked, on every row
        if action:
            actions = max(actions, int(_actions(batch, action).max()))
        if sequence is not None and not from_rows:
            lists = batch.columns[sequence.columns[0]]
            lengths = pc.fill_null(pc.list_value_length(lists), 0)
            events += int(np.minimum(lengths.to_numpy(zero_copy_only=False), keep).sum())
            forms.add(pa.types.is_struct(lists.type.value_type))
            if forms == {False} and sequence.event_fields is not None and len(lists):
                raise batch.bad(
                    sequence.columns[0],
                    0,
                    "holds lists of items, not of events: event_fields names the fields of a "
                    "column of structs; drop it",
                )
            if len(forms) > 1:
                raise batch.bad(
                    sequence.columns[0],
                    0,
                    "holds lists of items here and lists of events elsewhere; give one form",
                )
            if forms == {True} and len(lists):
                found = pc.max(pc.struct_field(pc.list_flatten(lists), "action")).as_py()
                actions = max(actions, found or 0)
        if from_rows:
            items.add(encoders[sequence.vocab_of].values(batch))
        train = split[batch.start : batch.start + len(batch)] == 0
        for name, stat in stats.items():
            x = encoders[name].values(batch).to_numpy(zero_copy_only=False)
            _check_dense(batch, encoders[name], x)
            stat.add(np.where(np.isnan(x[train]), encoders[name].feature.fill or 0.0, x[train]))
        if train.any():
            mask = pa.array(train)
            for name, counter in counts.items():
                values = encoders[name].values(batch).filter(mask)
                if encoders[name].feature.type == "multi_hot":
                    values = pc.list_flatten(values)
                counter.add(values)
        _tick(progress, "2/3 checking every column, fitting on train", len(batch), len(split))
    for name, encoder in encoders.items():
        if name in counts:
            feature = encoder.feature
            encoder.vocab = counts[name].vocabulary(feature.min_freq or 1, feature.max_size)
            encoder.value_set = pa.array(encoder.vocab, pa.string())
        if name in stats:
            encoder.mean, encoder.std = stats[name].mean_std()
            if encoder.feature.transform == "standardize" and not (
                math.isfinite(encoder.mean) and math.isfinite(encoder.std)
            ):
                raise DataError(
                    schema.source.path,
                    f"dense field {name!r} (column {encoder.column!r}): its training values "
                    "are too large to standardize (their squares overflow float64); declare "
                    "transform: log1p or rescale the column",
                )
    sequence_encoder = None
    if sequence is not None:
        owner = encoders[sequence.vocab_of]
        sequence_encoder = Encoder(sequence.fields[0], sequence, owner.vocab, owner.value_set)

    def of_type(kind: str) -> list[Encoder]:
        return [e for e in encoders.values() if e.feature.type == kind]

    multi_hot = of_type("multi_hot")
    return Plan(
        categorical=of_type("categorical"),
        multi_hot=multi_hot,
        dense=of_type("dense"),
        sequence=sequence_encoder,
        multi_hot_width=max(
            (e.feature.max_len or DEFAULT_MAX_LEN["multi_hot"] for e in multi_hot), default=0
        ),
        sequence_len=keep,
        events=len(split) if from_rows else events,
        actions=actions + 1,
        events_in_column=forms == {True},
        items=len(items.vocabulary(1, None)) if from_rows else 0,
    )


def model_schema(plan: Plan, labels: list[str]) -> ModelSchema:
    def side(encoder: Encoder, default: str = "candidate") -> str:
        return encoder.feature.side or default

    fields = [
        Field(e.field, "categorical", max(2, e.cardinality), side=side(e)) for e in plan.categorical
    ]
    fields += [
        Field(
            e.field,
            "multi_hot",
            max(2, e.cardinality),
            max_len=e.feature.max_len or DEFAULT_MAX_LEN["multi_hot"],
            side=side(e),
        )
        for e in plan.multi_hot
    ]
    fields += [Field(e.field, "dense") for e in plan.dense]
    if plan.sequence is not None:
        fields.append(
            Field(
                plan.sequence.field,
                "sequence",
                max(2, plan.sequence.cardinality),
                max_len=plan.sequence_len,
                side="request",
                actions=plan.actions,
            )
        )
    if len(labels) > 1:  # one head per label
        fields += [Field(name, LABEL) for name in labels]
    return ModelSchema(tuple(fields))


def raw_form(plan: Plan, keys) -> RawForm:
    """How serving rows become this dataset's features; ``keys``: the schema's keys."""
    columns: dict[str, dict] = {}
    for e in plan.categorical:
        if e.feature.derive in DERIVED:  # from the row's time
            columns[e.column] = {"type": "integer", "optional": False}
        else:
            columns.setdefault(e.column, {"type": "string", "optional": True})
    for e in plan.multi_hot:
        columns.setdefault(
            e.column, {"type": "strings", "optional": True, "sep": e.feature.sep or "|"}
        )
    for e in plan.dense:
        columns.setdefault(e.column, {"type": "number", "optional": True})
    history = None
    if plan.sequence is not None:
        feature = plan.sequence.feature
        history = {"column": plan.sequence.field, "items": feature.vocab_of}
        if feature.from_rows:  # the user's past events, each [item, action, time]
            columns[plan.sequence.field] = {"type": "events", "optional": True}
            columns[keys.timestamp] = {"type": "integer", "optional": False}
            history["now"] = keys.timestamp
        elif plan.events_in_column:  # the same, a column of each row's own
            columns[plan.sequence.column] = {"type": "events", "optional": True}
            if event_names(feature) != EVENT_KEYS:
                columns[plan.sequence.column]["fields"] = list(event_names(feature))
            history["column"] = plan.sequence.column
            if keys.timestamp:  # else a row's last event's time is its "now"
                columns[keys.timestamp] = {"type": "integer", "optional": False}
                history["now"] = keys.timestamp
        else:
            column = plan.sequence.column
            columns[column] = {"type": "strings", "optional": True, "sep": feature.sep or "|"}
            history |= {"column": column, "max_len": plan.sequence_len, "plain": True}
    multi_hot = [
        e.recipe() | {"max_len": e.feature.max_len or DEFAULT_MAX_LEN["multi_hot"]}
        for e in plan.multi_hot
    ]
    return RawForm(
        columns=columns,
        categorical=[e.recipe() for e in plan.categorical],
        multi_hot=multi_hot,
        dense=[e.recipe() for e in plan.dense],
        history=history,
    )


def _actions(batch: Batch, column: str) -> np.ndarray:
    """A history's action column as int8 kinds (empty: 0, unknown)."""
    x = batch.columns[column].to_numpy(zero_copy_only=False)
    x = np.where(np.isnan(x), 0, x)
    bad = (x != np.floor(x)) | (x < 0) | (x > ACTION_MAX)
    if bad.any():
        i = _first(bad)
        raise batch.bad(
            column, i, f"must be an integer action from 0 to {ACTION_MAX}, got {x[i]:g}"
        )
    return x.astype(np.int8)


def _write(
    schema: SchemaFile,
    reader: Rows,
    split: np.ndarray,
    plan: Plan,
    chronology: Chronology | None,
    root: Path,
    source: dict,
    progress,
    manifest: dict,
) -> None:
    """Encode every row into the prepared files at ``root``; ``manifest``: extra entries."""
    rows, labels, keys = len(split), list(schema.label_names), schema.keys
    n_cat, n_mh, n_dense = len(plan.categorical), len(plan.multi_hot), len(plan.dense)
    columns = [c for _, c, _ in schema.label_columns()]
    columns += [e.column for e in plan.categorical + plan.multi_hot + plan.dense]
    sequence = plan.sequence
    action = sequence.feature.action if sequence is not None else None
    if sequence is not None and not sequence.feature.from_rows:
        columns.append(sequence.column)
    columns += [action] if action else []
    key_files = {"timestamp": keys.timestamp, "user_key": keys.user, "request_key": keys.request}
    key_files = {name: column for name, column in key_files.items() if column}
    columns = list(dict.fromkeys([*columns, *key_files.values()]))
    # Rows are stored split by split (train, valid, test), each in the files' order (with a
    # history from rows: in its events' order): a split is then one contiguous slice, which
    # trainers map without reading it into memory.
    sizes = np.bincount(split, minlength=3)
    cursor = np.array([0, sizes[0], sizes[0] + sizes[1]], dtype=np.int64)  # next free row
    stored_at = chronology.positions(split) if chronology is not None else None
    with PreparedWriter(root) as out:
        categorical = out.array("categorical", (rows, n_cat), np.int32)
        multi_hot = out.array("multi_hot", (rows, n_mh, plan.multi_hot_width), np.int32)
        dense = out.array("dense", (rows, n_dense), np.float32)
        label = out.array("label", (rows,), np.int8)
        stacked = out.array("labels", (rows, len(labels)), np.int8) if len(labels) > 1 else None
        out.array("split", (rows,), np.int8)[:] = _codes(tuple(sizes))
        source_row = out.array("source_row", (rows,), np.int64)
        key_arrays = {name: out.array(name, (rows,), np.int64) for name in key_files}
        if chronology is not None and not keys.request:  # requests: a user's rows at a time
            key_arrays["request_key"] = out.array("request_key", (rows,), np.int64)
        if sequence is not None:  # rows point into the events
            event_item = out.array("event_item", (max(plan.events, 1),), np.int32)
            event_action = out.array("event_action", (max(plan.events, 1),), np.int8)
            history_start = out.array("history_start", (rows,), np.int64)
            history_end = out.array("history_end", (rows,), np.int64)
            events = 0
        event_time = history_now = None
        if plan.events_in_column:  # each event's own time; a row's own, or its last event's
            event_time = out.array("event_time", (max(plan.events, 1),), np.int64)
            if not keys.timestamp:
                history_now = out.array("history_now", (rows,), np.int64)
        if chronology is not None:
            item_column = plan.categorical.index(plan.encoder(sequence.feature.vocab_of))
        written = 0
        for batch in reader.batches(columns):
            n = len(batch)
            mine = slice(batch.start, batch.start + n)
            if stored_at is not None:
                at = stored_at[mine]
            else:
                codes = split[mine]
                at = np.empty(n, dtype=np.int64)  # where each row of the batch is stored
                for code in range(3):
                    chosen = codes == code
                    count = int(chosen.sum())
                    at[chosen] = cursor[code] + np.arange(count)
                    cursor[code] += count
            source_row[at] = batch.start + np.arange(n)
            for name, column in key_files.items():
                values = batch.columns[column]
                key_arrays[name][at] = (
                    values.to_numpy(zero_copy_only=False)
                    if name == "timestamp"
                    else hashed(values).view(np.int64)
                )
            for j, values in enumerate(_label_values(schema, batch)):
                if j == 0:
                    label[at] = values
                if stacked is not None:
                    stacked[at, j] = values
            ids = np.empty((n, n_cat), dtype=np.int64)
            for j, e in enumerate(plan.categorical):
                ids[:, j] = e.ids(e.values(batch))
            categorical[at] = ids
            for j, e in enumerate(plan.multi_hot):
                found = _padded(e.values(batch), e, plan.multi_hot_width)
                multi_hot[at, j, :] = found
            for j, e in enumerate(plan.dense):
                dense[at, j] = _stored_dense(batch, e)
            if chronology is not None:  # the events are the rows themselves
                event = chronology.event_of_row[mine]
                event_item[event] = ids[:, item_column]
                kinds = _actions(batch, action) if action else np.ones(n, dtype=np.int8)
                event_action[event] = kinds
                history_start[at] = chronology.history_start[event]
                history_end[at] = chronology.history_end[event]
                if not keys.request:
                    key_arrays["request_key"][at] = chronology.request[event]
            elif sequence is not None:  # a history column: each row's last events
                lists = batch.columns[sequence.column]
                kept_at, kept = _last(lists, plan.sequence_len)
                found = pc.list_flatten(lists).take(kept_at)
                taken = slice(events, events + len(found))
                ends = events + np.cumsum(kept)
                history_start[at], history_end[at] = ends - kept, ends
                if event_time is None:  # items only: one kind of action, no times
                    ids = sequence.ids(found) if len(found) else np.zeros(0, dtype=np.int64)
                    event_item[taken], event_action[taken] = ids, ids > 0
                else:
                    event_item[taken] = sequence.ids(pc.struct_field(found, "item"))
                    event_action[taken] = pc.struct_field(found, "action").to_numpy()
                    times = pc.struct_field(found, "time").to_numpy()
                    event_time[taken] = times
                    if history_now is not None and len(times):
                        last = times[np.maximum(ends - events - 1, 0)]
                        history_now[at] = np.where(kept > 0, last, 0)
                events += len(found)
            written += n
            if written >= RELEASE_ROWS:
                out.release()
                written = 0
            _tick(progress, "3/3 encoding", n, rows)
        extra = {}
        if chronology is not None:
            out.array("event_time", (rows,), np.int64)[:] = chronology.time
            out.array("user_offsets", (chronology.users + 1,), np.int64)[:] = (
                chronology.user_offsets
            )
            extra = {
                "users": chronology.users,
                "items": plan.items,
                "requests": chronology.requests,
                "history_rule": f"each row's history: its {keys.user}'s earlier rows by "
                f"{keys.timestamp} (the same time excluded), the last {plan.sequence_len} kept",
            }
        elif sequence is not None and event_time is None:  # no times: ages are 0
            out.array("event_time", (len(event_item),), np.int64)
            out.array("history_now", (rows,), np.int64)
        split_rule = _split_rule(schema)
        out.finish(
            {
                "name": schema.name,
                "source": source,
                "schema": model_schema(plan, labels).to_list(),
                "labels": labels,
                "ids": {"missing": PAD, "oov": OOV, "first": FIRST_ID},
                "keys": schema.keys.model_dump(exclude_none=True),
                "split_rule": split_rule,
                "split_ranges": {  # the rows of each split: [start, end)
                    name: [int(sizes[:i].sum()), int(sizes[: i + 1].sum())]
                    for i, name in enumerate(("train", "valid", "test"))
                },
                "label_rule": _label_rule(schema),
                "label_columns": [  # how raw rows carry each label (a model measures on them)
                    {"name": name, "column": column, "at_least": at_least}
                    for name, column, at_least in schema.label_columns()
                ],
                "raw_form": raw_form(plan, keys).to_dict(),
                "hashed_values": {
                    e.field: e.hashed_values
                    for e in plan.categorical + plan.multi_hot
                    if e.feature.hash is not None
                },
                **extra,
                **manifest,
            }
        )


def _label_rule(schema: SchemaFile) -> str:
    rules = [
        f"{column} >= {at_least:g}" if at_least is not None else f"column {column}"
        for _, column, at_least in schema.label_columns()
    ]
    return rules[0] if len(rules) == 1 else f"{', '.join(rules)} (one head each)"


def _split_rule(schema: SchemaFile) -> str:
    s = schema.split
    if s.at_moments:
        return (
            f"by {schema.keys.timestamp}: valid from {utc_text(s.valid_from)}, test from "
            f"{utc_text(s.test_from)}"
        )
    train = 1 - Fraction(str(s.valid)) - Fraction(str(s.test))
    shares = f"{float(train):g}/{s.valid:g}/{s.test:g}"
    return {
        "order": f"the files' order: {shares} of the rows",
        "time": f"by {schema.keys.timestamp}, oldest first: {shares}",
        "random": f"random by row (seed {s.seed}): {shares}",
        "hash": f"by a hash of {schema.keys.user} (seed {s.seed}): {shares} of the users",
        "user_time": f"per {schema.keys.user}, by {schema.keys.timestamp}: {shares}",
        "column": f"as the column {s.column} says ({', '.join(SPLITS)})",
    }[s.method]
