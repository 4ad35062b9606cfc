"""A ``RawForm``'s encoding of an Arrow table a column at a time: a Parquet file's batch,
text rows made a table (``rows_table``), a DataFrame MLflow serves.

``RawForm.features`` encodes rows one by one in Python: about 17,000 rows a second. Logs
arrive as columns, and a column holds few distinct values: here each distinct value goes
through the same scalar functions the rows use (``RawForm.category``, ``lookup``,
``convert``), once, and numpy spreads the results over the rows (numbers, times and lists
by numpy and Arrow's kernels, tested to the same values). The rows stay the reference,
tested equal on every field kind (``tests/data/test_raw_table.py``), and the judge of bad
input: a column this path does not read (an Arrow type the rows would refuse, a missing
value in a required column) makes ``table_features`` return None, and the caller encodes
the rows, which name the bad row and column.

An events history is read as a list of ``{item, action, time}`` structs (``EVENTS``, or
the names a schema file's ``event_fields`` gave: what ``rows_table`` makes of JSON's
triples and objects, and Parquet's natural form of them), a list of triples of one type
(Parquet's ``list<list<int64>>``) or JSON text (MLflow's frame, CSV): each distinct item
looked up once, times read as a row's time is.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.data.raw import (
    EVENT_KEYS,
    FLOAT32_MAX,
    INT64_LIMIT,
    LATEST_SECONDS,
    NO_ACTION,
    RawForm,
    RawInputError,
    convert,
    encoded,
    event_fields,
    lookup,
)
from nas.data.row_files import text_view
from nas.data.schema import Features, Schema


class _RowsDecide(Exception):
    """A column the rows encode (or refuse, naming the row): not read here."""


def events_type(keys: tuple = EVENT_KEYS) -> pa.DataType:
    """A list of events: structs of an item (text), an action and a time (integers; no
    action where ``keys`` names none)."""
    kinds = zip(keys, (pa.string(), pa.int64(), pa.int64()), strict=True)
    return pa.list_(pa.struct([(key, kind) for key, kind in kinds if key is not None]))


EVENTS = events_type()


def rows_table(form: RawForm, rows: list[Any]) -> pa.Table | None:
    """Rows read from text (JSON lines, CSV) as a table of the columns ``form`` reads, each
    as Arrow types its values; None where the rows must decide: a row that is not an object
    or has none of the columns, a column whose values mix types (Arrow refuses them)."""
    names = list(form.columns)
    for row in rows:
        if not isinstance(row, dict) or (row and not any(name in row for name in names)):
            return None
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        if form.columns[name]["type"] == "events":
            columns[name] = events_array(values, event_keys(form, name))
            if columns[name] is None:
                return None
            continue
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            return None
        if not pa.types.is_boolean(columns[name].type) and any(
            v is True or v is False for v in values
        ):
            return None  # Arrow reads [1.5, True] as numbers; the rows refuse a boolean
    return pa.table(columns)


def event_keys(form: RawForm, column: str) -> tuple[str, ...]:
    """An "events" column's objects' keys for an event's item, action and time."""
    return tuple(form.columns[column].get("fields", EVENT_KEYS))


def events_array(values: list[Any], keys: tuple[str, ...] = EVENT_KEYS) -> pa.Array | None:
    """An "events" column's values as rows give them (each missing, a list of events or its
    JSON text) as a list of structs of ``keys`` (``EVENTS`` where the items are text and
    the rest integers), each field of one type as Arrow infers it: for events that are
    [item, action, time] triples or objects with those keys. None where the rows must
    decide (another shape, mixed types: they convert it or name it)."""
    lengths, flat = [], []
    for value in values:
        if isinstance(value, str) and value != "":
            try:
                value = json.loads(value)
            except ValueError:
                return None
            if type(value) is not list:
                return None  # JSON's null or "" in the text: the rows refuse it
        if value is None or value == "":
            lengths.append(0)
            continue
        if type(value) is not list:
            return None
        lengths.append(len(value))
        flat.extend(value)
    if not flat:
        return pa.array([[]] * len(values), events_type(keys))
    held = event_fields(keys)  # (an item and a time only, where the history has no action)
    width = len(held)
    if set(map(type, flat)) != {list}:
        try:
            flat = [e if type(e) is list else [e[key] for key in held] for e in flat]
        except (KeyError, TypeError):
            return None  # an object without the keys, or an event that is neither
    widths = np.fromiter(map(len, flat), np.int64, len(flat))
    if (widths != width).any() or len(flat) >= 2**31:
        return None  # (beyond a list array's offsets: the rows read them)
    laid = list(itertools.chain.from_iterable(flat))
    try:  # each field's type as Arrow infers it (faster than given): ``_events`` judges them
        fields = [pa.array(laid[k::width]) for k in range(width)]
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None  # mixed types; beyond 64 bits
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())
    structs = pa.StructArray.from_arrays(fields, names=list(held))
    return pa.ListArray.from_arrays(offsets, structs)


def table_features(form: RawForm, table: pa.Table, schema: Schema) -> Features | None:
    """``form.features(table.to_pylist(), schema)``, or None where the rows must decide."""
    try:
        return _Encoding(form, table).features(schema)
    except _RowsDecide:
        return None


class _Encoding:
    def __init__(self, form: RawForm, table: pa.Table):
        self.form, self.table, self.n = form, table, table.num_rows
        present = set(table.column_names)
        if present and not present & set(form.columns):
            raise _RowsDecide  # rows with none of the model's columns are refused

    def features(self, schema: Schema) -> Features:
        form, n = self.form, self.n
        categorical = np.zeros((n, len(form.categorical)), dtype=np.int64)
        for j, recipe in enumerate(form.categorical):
            categorical[:, j] = self._category(recipe)
        width = max((m["max_len"] for m in form.multi_hot), default=0)
        multi_hot = np.zeros((n, len(form.multi_hot), width), dtype=np.int64)
        for j, recipe in enumerate(form.multi_hot):
            rows, ids, position = self._list_ids(recipe["column"], recipe)
            kept = position < recipe["max_len"]
            multi_hot[rows[kept], j, position[kept]] = ids[kept]
        dense = np.zeros((n, len(form.dense)), dtype=np.float32)
        for j, recipe in enumerate(form.dense):
            dense[:, j] = self._dense(recipe)
        history = (lambda: self._history(schema.history.actions)) if schema.history else None
        return encoded(schema, categorical, multi_hot, dense, history)

    # --- columns, as the rows' ``convert`` reads their values --------------------------------

    def _column(self, name: str) -> pa.Array | None:
        """The column's values (None: the table has no such column), its nulls refused
        where the column is not optional (the rows would say it is missing)."""
        if name not in self.table.column_names:
            if not self.form.columns[name]["optional"]:
                raise _RowsDecide
            return None
        # binary values (Spark's text) as text, as prepare reads them; else the rows decide
        array = text_view(self.table.column(name).combine_chunks(), valid_only=True)
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if array.null_count and not self.form.columns[name]["optional"]:
            raise _RowsDecide
        return None if pa.types.is_null(array.type) else array  # all missing

    def _texts(self, name: str) -> pa.Array:
        """A "string" column: text, or integers, numbers and booleans as Arrow writes them
        (prepare's reading, ``convert``'s); missing (a number's NaN too): ""."""
        array = self._column(name)
        if array is None:
            return pa.array([""] * self.n, pa.string())
        if pa.types.is_floating(array.type):  # float32's 0.1 as float64's, as a row's
            array = pc.if_else(pc.is_nan(array), None, array).cast(pa.float64())
        if (
            pa.types.is_integer(array.type)
            or pa.types.is_floating(array.type)
            or (pa.types.is_boolean(array.type))
        ):
            array = array.cast(pa.string())
        elif not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            raise _RowsDecide
        return array.fill_null("")

    def _times(self, name: str) -> np.ndarray:
        """An "integer" column, a time (none missing), as int64 unix seconds: ``convert``'s
        "time" (integers as they are, numbers and date-times floored to the second)."""
        array = self._column(name)
        if array is None or array.null_count:
            raise _RowsDecide
        return _seconds(name, array, self.form.per_second(name))

    def _numbers(self, name: str) -> np.ndarray:
        """A "number" column as float64; NaN where a value is missing."""
        array = self._column(name)
        if array is None:
            return np.full(self.n, np.nan)
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            return _by_value(array.fill_null(""), lambda v: _number(name, v), np.float64)
        if not (
            pa.types.is_integer(array.type)
            or pa.types.is_floating(array.type)
            or pa.types.is_decimal(array.type)
            or pa.types.is_boolean(array.type)  # 1.0 and 0.0, as prepare reads them
        ):
            raise _RowsDecide
        x = array.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if pa.types.is_floating(array.type):
            if np.isinf(x).any():
                raise _RowsDecide
            if not self.form.columns[name]["optional"] and np.isnan(x).any():
                raise _RowsDecide
        elif array.null_count:  # integers: their nulls read as NaN
            x = np.where(array.is_null().to_numpy(zero_copy_only=False), np.nan, x)
        return x

    def _lists(self, name: str) -> tuple[np.ndarray, pa.Array]:
        """A "strings" column: each row's values (a list, or text split at the column's
        separator; missing: none) as the row each value is on and the values."""
        array = self._column(name)
        if array is None:
            return np.zeros(0, dtype=np.int64), pa.array([], pa.string())
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            sep = self.form.columns[name].get("sep", "|")
            if not sep:
                raise _RowsDecide
            array = pc.split_pattern(array, pattern=sep)
        elif not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            raise _RowsDecide
        values = array.flatten()
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if pa.types.is_integer(values.type):
            values = values.cast(pa.string())  # integer ids as their text, as prepare reads them
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            raise _RowsDecide  # a list holding a number or a boolean: the rows refuse it
        values = values.fill_null("")  # a null in a list: no value, as ""
        lengths = pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False)
        return np.repeat(np.arange(self.n), lengths), values

    # --- fields ----------------------------------------------------------------------------

    def _category(self, recipe: dict[str, Any]) -> np.ndarray:
        if "derive" in recipe:
            return RawForm.derived_ids(recipe, self._times(recipe["column"]))
        texts = self._texts(recipe["column"])
        return _by_value(texts, lambda v: RawForm.category(recipe, v), np.int64)

    def _list_ids(
        self, column: str, recipe: dict[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A "strings" column's non-empty values as ids by ``recipe``: the row of each, the
        id, and its place among its row's non-empty values."""
        rows, values = self._lists(column)
        kept = (pc.not_equal(values, "").to_numpy(zero_copy_only=False)).astype(bool)
        rows = rows[kept]
        ids = _by_value(values.filter(pa.array(kept)), lambda v: lookup(recipe, v), np.int64)
        counts = np.bincount(rows, minlength=self.n)
        starts = np.cumsum(counts) - counts
        return rows, ids, np.arange(len(rows)) - starts[rows]

    def _dense(self, recipe: dict[str, Any]) -> np.ndarray:
        """``dense_value`` of each row's value (a missing one: the recipe's fill)."""
        x = self._numbers(recipe["column"])
        fill = recipe.get("fill", 0.0)
        transform = recipe.get("transform", "log1p")
        x = np.where(np.isnan(x), fill, x)
        if transform == "log1p":  # math's own log1p, as the rows compute it
            x = np.frompyfunc(math.log1p, 1, 1)(np.where(x < 0, 0.0, x)).astype(np.float64)
        elif transform == "standardize":  # IEEE arithmetic: as the rows' floats
            x = (x - recipe["mean"]) / recipe["std"]
        if (np.abs(x) > FLOAT32_MAX).any():
            raise _RowsDecide  # the rows name the value beyond float32
        return x

    def _history(self, actions: int) -> tuple[tuple, tuple]:
        """``RawForm._history``: a plain history (a "strings" column of items, each of one
        action at time 0, the last ``max_len`` kept) or events (``_events``)."""
        recipe, n = self.form.history, self.n
        items = next(c for c in self.form.categorical if c["field"] == recipe["items"])
        if recipe.get("plain"):
            rows, ids, position = self._list_ids(recipe["column"], items)
            counts = np.bincount(rows, minlength=n)
            kept = position >= (counts - recipe["max_len"])[rows]
            item = ids[kept]
            lengths = np.minimum(counts, recipe["max_len"])
            action = np.full(len(item), 1, dtype=np.int64)
            time, now = np.zeros(len(item), dtype=np.int64), np.zeros(n, dtype=np.int64)
            end = np.cumsum(lengths)
        else:
            lengths, keys, action, time = self._events(recipe["column"])
            item = _by_value(keys, lambda v: lookup(items, v), np.int64)
            end = np.cumsum(lengths)
            if "now" in recipe:  # a row's own time, else its last event's
                now = self._times(recipe["now"])
            else:
                last = time[np.maximum(end - 1, 0)] if len(time) else np.zeros(n, np.int64)
                now = np.where(lengths > 0, last, 0)
        action = np.where((action > 0) & (action < actions), action, 0)
        return (end - lengths, end, now), (item, action, time)

    def _events(self, name: str) -> tuple[np.ndarray, pa.Array, np.ndarray, np.ndarray]:
        """An "events" column: each row's number of events, and the events' items (text),
        actions and times, as the rows convert them."""
        array = self._column(name)
        if array is None:
            empty = np.zeros(0, dtype=np.int64)
            return np.zeros(self.n, dtype=np.int64), pa.array([], pa.string()), empty, empty
        keys = event_keys(self.form, name)
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            array = events_array(array.to_pylist(), keys)  # JSON text
            if array is None:
                raise _RowsDecide
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            raise _RowsDecide
        events = array.flatten()
        held = event_fields(keys)  # (an item and a time only, where the history has no action)
        width = len(held)
        if pa.types.is_struct(events.type):
            if events.null_count or any(events.type.get_field_index(k) < 0 for k in held):
                raise _RowsDecide  # a null event, or one without the keys: the rows name it
            fields = [events.field(key) for key in held]
        elif is_list(events.type):
            widths = pc.list_value_length(events)
            if events.null_count or pc.any(pc.not_equal(widths, width)).as_py():
                raise _RowsDecide
            values = events.flatten()
            fields = [values.take(pa.array(np.arange(k, len(values), width))) for k in range(width)]
        else:
            raise _RowsDecide
        lengths = pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False)
        fields = [f.dictionary_decode() if pa.types.is_dictionary(f.type) else f for f in fields]
        if any(f.null_count for f in fields):
            raise _RowsDecide
        if width == 2:
            fields.insert(1, pa.array(np.full(len(fields[0]), NO_ACTION, dtype=np.int64)))
        item, action, time = fields
        if pa.types.is_integer(item.type):
            item = item.cast(pa.string())
        elif not (pa.types.is_string(item.type) or pa.types.is_large_string(item.type)):
            raise _RowsDecide
        return (
            lengths.astype(np.int64),
            item,
            _integers(f"{name}[action]", action),
            _seconds(f"{name}[time]", time, self.form.per_second(name)),
        )


def is_list(kind: pa.DataType) -> bool:
    """Whether an Arrow type is a list of any of Arrow's three kinds."""
    return (
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    )


def _seconds(name: str, array: pa.Array, per_second: int = 1) -> np.ndarray:
    """Times, none missing, as int64 unix seconds: ``convert``'s "time" (numbers in
    ``per_second`` units, integers floor-divided, fractions and date-times floored to the
    second); one past ``LATEST_SECONDS``: the rows name it."""
    seconds = _in_seconds(name, array, per_second)
    if len(seconds) and seconds.max() >= LATEST_SECONDS:
        raise _RowsDecide
    return seconds


def _in_seconds(name: str, array: pa.Array, per_second: int) -> np.ndarray:
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        time = functools.partial(_converted, name, "time", per_second=per_second)
        return _by_value(array, time, np.int64)
    if pa.types.is_timestamp(kind):
        array = pc.floor_temporal(array, unit="second").cast(pa.timestamp("s", kind.tz))
        return _int64(array)
    if pa.types.is_date(kind):
        return _int64(array.cast(pa.timestamp("s")))
    if pa.types.is_integer(kind):
        if pa.types.is_uint64(kind) and len(array) and pc.max(array).as_py() >= INT64_LIMIT:
            raise _RowsDecide  # beyond 64 bits: the rows name it
        return _int64(array) // per_second
    if not pa.types.is_floating(kind):
        raise _RowsDecide
    x = np.floor(array.to_numpy(zero_copy_only=False).astype(np.float64) / per_second)
    if not (np.isfinite(x) & (x >= -INT64_LIMIT) & (x < INT64_LIMIT)).all():
        raise _RowsDecide
    return x.astype(np.int64)


def _integers(name: str, array: pa.Array) -> np.ndarray:
    """Values the rows convert as "integer" (``_integer``), none missing, as int64."""
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _by_value(array, lambda v: _converted(name, "integer", v), np.int64)
    if pa.types.is_integer(kind):
        if pa.types.is_uint64(kind) and len(array) and pc.max(array).as_py() >= INT64_LIMIT:
            raise _RowsDecide
        return _int64(array)
    if not pa.types.is_floating(kind):
        raise _RowsDecide  # booleans: the rows refuse them
    x = array.to_numpy(zero_copy_only=False).astype(np.float64)
    if not (np.isfinite(x) & (x == np.floor(x)) & (x >= -INT64_LIMIT) & (x < INT64_LIMIT)).all():
        raise _RowsDecide
    return x.astype(np.int64)


def _by_value(array: pa.Array, function: Callable[[Any], Any], dtype) -> np.ndarray:
    """``function`` of each value of ``array``, computed once per distinct value."""
    encoded = pc.dictionary_encode(array)
    table = np.array([function(v) for v in encoded.dictionary.to_pylist()], dtype=dtype)
    if not len(table):
        return np.zeros(len(array), dtype=dtype)
    return table[encoded.indices.to_numpy(zero_copy_only=False)]


def _converted(name: str, kind: str, value: Any, per_second: int = 1) -> Any:
    try:
        return convert(0, name, kind, value, per_second=per_second)
    except RawInputError:
        raise _RowsDecide from None


def _number(name: str, value: Any) -> float:
    """A "number" value of text; NaN where it is missing."""
    x = _converted(name, "number", value)
    return math.nan if x is None else x


def _int64(array: pa.Array) -> np.ndarray:
    """``array`` as a numpy int64 array of its own (torch takes it without a copy)."""
    return array.cast(pa.int64()).to_numpy(zero_copy_only=False, writable=True)
