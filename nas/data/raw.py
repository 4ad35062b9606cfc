"""A dataset's raw feature form: rows as a serving system sends them -> a model's ``Features``.

``prepare`` turns source files into ids with vocabularies; a registered model must do the
same to rows it has never seen, with the same vocabularies. ``RawForm`` keeps them, as data
(JSON next to the prepared arrays), with the recipe of each field:

    columns      raw column -> type: "string", "integer" (a time: unix seconds, read as
                 prepare reads a time: a fraction floored, or a date-time, UTC unless
                 zoned, or a date, or the text of one), "number", "strings" (a list, or
                 one string with "|" between values) or "events" (a list of
                 [item, action, time] triples, or of objects with those keys: the user's
                 past events, oldest first)
    categorical  one per categorical field, in schema order: a vocabulary lookup of a
                 column (optionally of its first ``prefix`` characters, or of a release
                 year, normalised), or a value derived from an integer unix time (hour,
                 weekday)
    multi_hot    one per multi-hot field: a lookup of each value of a "strings" column
    dense        one per dense field: log(1 + max(x, 0)) of a "number" column, or (schema
                 files) the field's ``transform`` after its ``fill`` for a missing value
    history      the "events" column, its items looked up in a categorical field's vocabulary
                 (schema files: a "strings" column of items, ``plain``)

Schema-file datasets (``nas/data/encoding.py``) add to a lookup: ``missing`` (the id of an empty
value), ``oov`` (of a value not in the vocabulary), or ``hash`` instead of a vocabulary.

An unknown category maps to id 0, the unknown id every vocabulary reserves. A column that is
missing, or has a value of the wrong type, raises ``RawInputError`` naming the row and the
column. Optional columns (the history, Criteo's sparse values) may be absent or empty.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nas.core.errors import NasError, shown
from nas.data.schema import Features, Schema

OOV_TEXT = "<out of vocabulary>"  # what an input example shows for an out-of-vocabulary id
INT64_LIMIT = 2**63  # integers are stored as int64
LATEST_SECONDS = 10**11  # unix seconds in the year 5138: a later "time" is in a finer unit
# a source's numeric times (``time_unit``), as a served row sends them too: per second
PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
# A number's text that means it is missing, as CSV writers spell it (R's NA, Python's nan,
# SQL's NULL, Excel's #N/A), besides "" and blanks: prepare and a served row read a "number"
# column's text alike. (Text columns take only "" as missing: "NA" is a country.)
# (\N: MySQL's and Hive's text files' null)
MISSING_NUMBER_TEXTS = (
    "NA", "N/A", "n/a", "#N/A", "NULL", "null", "None", "nan", "NaN", "-nan", "\\N"
)  # fmt: skip
DERIVED = {  # from a unix time in seconds, as prepare computes them (UTC)
    "hour": lambda t: (t // 3600) % 24 + 1,
    "weekday": lambda t: (t // 86400 + 3) % 7 + 1,  # 1970-01-01 was a Thursday; Monday = 1
}


def derived(derive: str, seconds: np.ndarray, tz: str | None = None) -> np.ndarray:
    """A derived field of unix seconds (``DERIVED``): in UTC, or in the zone ``tz`` (its
    offset at each moment, summer time included, from Arrow's time zone database: prepare
    and serving read the same one)."""
    if tz is not None:
        import pyarrow as pa
        import pyarrow.compute as pc

        moments = pa.array(np.asarray(seconds, dtype=np.int64), pa.timestamp("s", tz=tz))
        seconds = pc.local_timestamp(moments).cast(pa.int64()).to_numpy(zero_copy_only=False)
    return DERIVED[derive](seconds)


def stable_hash(values: list[str], salt: str = "") -> np.ndarray:
    """uint64 per value: the first 8 bytes of blake2b (never Python's ``hash()``, which
    changes from one process to the next)."""
    out = np.empty(len(values), dtype=np.uint64)
    for i, value in enumerate(values):
        digest = hashlib.blake2b(f"{salt}{value}".encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little")
    return out


class RawInputError(NasError):
    """A raw row the model cannot read: names the row (1-based; of ``file``, if given) and
    the column."""

    def __init__(self, row: int, column: str, problem: str, file: Path | None = None):
        where = f"{file} row {row}" if file else f"row {row}"
        super().__init__(f"{where}: {shown(column)} {problem}")
        self.row, self.column, self.problem, self.file = row, column, problem, file

    def in_file(self, file: Path | None) -> RawInputError:
        """The same error, naming the file the row is in."""
        return RawInputError(self.row, self.column, self.problem, file)


def normalise_year(text: str) -> str:
    """Release years are spelled '1995' or '1995.0'; normalise, keep '' for missing (and
    for what is no year: 'inf', 'nan')."""
    try:
        return str(int(float(text)))
    except (ValueError, OverflowError):
        return ""


@dataclass(frozen=True)
class RawForm:
    columns: dict[str, dict[str, Any]]  # name -> {"type", "optional"}
    categorical: list[dict[str, Any]]  # {"field", "column", "vocab" | "derive", "prefix", "year"}
    multi_hot: list[dict[str, Any]]  # {"field", "column", "vocab", "max_len"}
    dense: list[dict[str, Any]]  # {"field", "column"}
    history: dict[str, Any] | None = None  # {"column", "items": categorical field, "max_len"}

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RawForm:
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def per_second(self, column: str) -> int:
        """A time or history column's numeric times' units in a second (the source's
        ``time_unit``; 1, seconds, unless it said otherwise)."""
        return self.columns[column].get("per_second", 1)

    # --- raw rows -> features ---------------------------------------------------------------

    def typed(self, rows: Iterable[Mapping[str, Any]], first: int = 1) -> list[dict[str, Any]]:
        """Raw rows checked and converted to their columns' types ("strings" as lists,
        "events" as lists of triples, an absent optional column as its empty value);
        ``first``: the number errors give the first row (rows of a file read in batches)."""
        return [self._read(i, row) for i, row in enumerate(rows, start=first)]

    def features(
        self, rows: Iterable[Mapping[str, Any]], schema: Schema, first: int = 1
    ) -> Features:
        """Encode raw rows (dicts by column name) as the model's input; labels are 0."""
        cells = self.typed(rows, first)
        n = len(cells)
        categorical = np.zeros((n, len(self.categorical)), dtype=np.int64)
        for j, recipe in enumerate(self.categorical):
            values = [c[recipe["column"]] for c in cells]
            if "derive" in recipe:
                categorical[:, j] = self.derived_ids(recipe, np.array(values, dtype=np.int64))
            else:
                categorical[:, j] = [self.category(recipe, v) for v in values]
        width = max((m["max_len"] for m in self.multi_hot), default=0)
        multi_hot = np.zeros((n, len(self.multi_hot), width), dtype=np.int64)
        for j, recipe in enumerate(self.multi_hot):
            for i, c in enumerate(cells):
                ids = [lookup(recipe, v) for v in c[recipe["column"]] if v != ""]
                ids = ids[: recipe["max_len"]]
                multi_hot[i, j, : len(ids)] = ids
        dense = np.zeros((n, len(self.dense)), dtype=np.float32)
        for j, recipe in enumerate(self.dense):
            for i, c in enumerate(cells):
                dense[i, j] = _dense_cell(first + i, recipe, c[recipe["column"]])
        history = (lambda: self._history(cells, schema.history.actions)) if schema.history else None
        return encoded(schema, categorical, multi_hot, dense, history)

    def _history(self, cells: list[dict], actions: int) -> tuple[tuple, tuple]:
        """Each row's events laid end to end, with the row's bounds into them (``encoded``'s
        ``history``); a row's "now" is its own time column when it has one (else its last
        event's time). An action outside 1..actions-1 is unknown (0), as an unknown item is."""
        recipe = self.history
        items = next(c for c in self.categorical if c["field"] == recipe["items"])
        item, action, time, start, end, now = [], [], [], [], [], []
        for c in cells:
            start.append(len(item))
            found = c[recipe["column"]]
            if recipe.get("plain"):  # items only: one kind of action, no times
                found = [(key, 1, 0) for key in found if key != ""][-recipe["max_len"] :]
            for key, act, when in found:
                item.append(lookup(items, key))
                action.append(act if 0 < act < actions else 0)
                time.append(when)
            end.append(len(item))
            now.append(c.get(recipe.get("now", ""), time[-1] if end[-1] > start[-1] else 0))
        return (start, end, now), (item, action, time)

    @staticmethod
    def derived_ids(recipe: dict, seconds: np.ndarray) -> np.ndarray:
        """A derived field's ids of its column's times, every row's at once (a zone's
        offsets come from Arrow in one call: 0.1 ms a call)."""
        made = derived(recipe["derive"], seconds, recipe.get("tz"))
        if "vocab" not in recipe:  # a raw form written before derived fields had one
            return np.asarray(made, dtype=np.int64)
        ids = {m: RawForm.category(recipe, str(m)) for m in np.unique(made).tolist()}
        return np.array([ids[m] for m in np.asarray(made).tolist()], dtype=np.int64)

    @staticmethod
    def category(recipe: dict, value: str) -> int:
        """A categorical field's id of its column's (typed) text (a derived field's: the
        derived number's)."""
        if recipe.get("year"):
            value = normalise_year(value)
        if recipe.get("prefix"):
            value = value[: recipe["prefix"]]
        return lookup(recipe, value)

    def _read(self, number: int, row: Mapping[str, Any]) -> dict[str, Any]:
        """One row's columns, checked and converted to their types."""
        if not isinstance(row, Mapping):
            raise RawInputError(number, "(row)", f"must be an object of columns, got {shown(row)}")
        if row and not any(name in row for name in self.columns):
            raise RawInputError(
                number,
                "(row)",
                f"has none of the columns the model reads ({', '.join(self.columns)}); "
                f"its columns: {shown(', '.join(map(str, row)), 200)}",
            )
        out = {}
        for name, column in self.columns.items():
            kind = "time" if column["type"] == "integer" else column["type"]
            value = row.get(name)
            if is_missing(value):
                if not column["optional"]:
                    raise RawInputError(number, name, f"is missing; expected {_wants(kind)}")
                value = None
            keys = tuple(column["fields"]) if "fields" in column else EVENT_KEYS
            per_second = self.per_second(name)
            out[name] = convert(number, name, kind, value, column.get("sep", "|"), keys, per_second)
        return out

    # --- features -> raw rows (an input example) --------------------------------------------

    def decode(
        self,
        features: Features,
        times: np.ndarray | None,
        hashed_values: dict[str, dict[int, str]] | None = None,
    ) -> list[dict[str, Any]]:
        """Raw rows that encode to ``features`` (multi-hot and dense as far as the vocab
        and the log keep them); ``times``: each row's unix time, for derived fields;
        ``hashed_values``: per hashed field, a value for each id (none: left empty)."""
        hashed_values = hashed_values or {}
        rows: list[dict[str, Any]] = [{} for _ in range(len(features))]
        for j, recipe in enumerate(self.categorical):
            if "derive" in recipe:
                per_second = self.per_second(recipe["column"])
                for i, row in enumerate(rows):
                    row[recipe["column"]] = int(times[i]) * per_second if times is not None else 0
                continue
            if recipe.get("prefix") and recipe["column"] in rows[0]:
                continue  # the full value is there already
            names = _inverse(recipe) or hashed_values.get(recipe["field"], {})
            for i, row in enumerate(rows):
                row[recipe["column"]] = names.get(int(features.categorical[i, j]), "")
        for j, recipe in enumerate(self.multi_hot):
            names = _inverse(recipe) or hashed_values.get(recipe["field"], {})
            sep = self.columns[recipe["column"]].get("sep", "|")
            for i, row in enumerate(rows):
                ids = [int(v) for v in features.multi_hot[i, j] if v > 0]
                row[recipe["column"]] = sep.join(names[v] for v in ids if v in names)
        for j, recipe in enumerate(self.dense):
            for i, row in enumerate(rows):
                row[recipe["column"]] = _undense(recipe, float(features.dense[i, j]))
        history = features.history
        if self.history is not None and "now" in self.history:  # the time a history is read at
            per_second = self.per_second(self.history["now"])
            for i, row in enumerate(rows):
                row[self.history["now"]] = int(times[i]) * per_second if times is not None else 0
        if self.history is not None and history is not None:
            vocab = next(c for c in self.categorical if c["field"] == self.history["items"])
            names = _inverse(vocab)
            for i, row in enumerate(rows):
                begin = max(int(history.start[i]), int(history.end[i]) - history.max_len)
                events = range(begin, int(history.end[i]))
                if self.history.get("plain"):
                    row[self.history["column"]] = [
                        names.get(int(history.item[e]), "") for e in events
                    ]
                    continue
                per_second = self.per_second(self.history["column"])
                keys = self.columns[self.history["column"]].get("fields", EVENT_KEYS)
                row[self.history["column"]] = [
                    [
                        names.get(int(history.item[e]), ""),
                        *([int(history.action[e])] if keys[1] is not None else []),
                        int(history.time[e]) * per_second,
                    ]
                    for e in events
                ]
        return rows


def encoded(schema: Schema, categorical, multi_hot, dense, history=None) -> Features:
    """Rows' encoded fields as a model's input (labels 0). ``history``, where the schema has
    one: a function giving each row's ``(start, end, now)`` into its events laid end to end,
    and the events' ``(item, action, time)``."""
    arrays = {
        "categorical": categorical,
        "multi_hot": multi_hot,
        "dense": dense,
        "label": np.zeros(len(categorical), dtype=np.float32),
    }
    events: dict[str, np.ndarray] = {}
    if history is not None:
        bounds, found = history()
        names = ("history_start", "history_end", "history_now")
        arrays |= {k: np.asarray(v, dtype=np.int64) for k, v in zip(names, bounds, strict=True)}
        if not len(found[0]):  # History indexes its events: give it one padding event
            found = ([0], [0], [0])
        names = ("item", "action", "time")
        events = {k: np.asarray(v, dtype=np.int64) for k, v in zip(names, found, strict=True)}
    return Features.from_arrays(arrays, events, schema)


def lookup(recipe: dict, value: str) -> int:
    """A value's id: by the recipe's hash, or its vocabulary (unknown: ``oov``, else 0)."""
    if "missing" in recipe and value == "":
        return recipe["missing"]
    if "hash" in recipe:
        return 1 + int(stable_hash([value])[0] % np.uint64(recipe["hash"]))
    return recipe["vocab"].get(value, recipe.get("oov", 0))


def dense_value(recipe: dict, value: float | None) -> float:
    """A dense value as the model reads it (a missing one is None: the recipe's fill)."""
    x = recipe.get("fill", 0.0) if value is None else value
    transform = recipe.get("transform", "log1p")
    if transform == "log1p":
        return math.log1p(max(x, 0.0))
    if transform == "standardize":
        return (x - recipe["mean"]) / recipe["std"]
    return x


def _dense_cell(row: int, recipe: dict, value: float | None) -> float:
    """``dense_value`` of one row's value, which the model reads as float32: one beyond its
    range is refused (the model would score it NaN)."""
    x = dense_value(recipe, value)
    if abs(x) > FLOAT32_MAX:
        given = recipe.get("fill", 0.0) if value is None else value
        transform = recipe.get("transform", "log1p")
        raise RawInputError(
            row,
            recipe["column"],
            f"is {given:g}: as the model reads it ({transform}) beyond float32's range "
            f"(at most {FLOAT32_MAX:.3g})",
        )
    return x


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _undense(recipe: dict, x: float) -> float:
    """A raw value that ``dense_value`` turns into ``x`` (a log1p of a negative value reads 0)."""
    transform = recipe.get("transform", "log1p")
    if transform == "log1p":
        return float(np.expm1(x))
    if transform == "standardize":
        return x * recipe["std"] + recipe["mean"]
    return x


def _inverse(recipe: dict) -> dict[int, str]:
    """id -> a value with that id (the out-of-vocabulary id: a value no vocabulary holds)."""
    names = {v: k for k, v in recipe.get("vocab", {}).items()}
    if "oov" in recipe:
        names[recipe["oov"]] = OOV_TEXT
    return names


EVENT_KEYS = ("item", "action", "time")  # an "events" column's objects' keys, unless named
# an event's action where its history has none (``event_fields: {action: null}``): one kind
NO_ACTION = 1


def event_fields(keys: tuple) -> tuple[str, ...]:
    """The keys an event of a history holds (``keys``: its item, action and time; the
    action None where it holds none)."""
    return tuple(key for key in keys if key is not None)


def is_missing(value: Any) -> bool:
    """None, NaN, or pandas' NA and NaT (a nullable column's missing value)."""
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or type(value).__name__ in ("NAType", "NaTType")
    )


def _wants(kind: str, keys: tuple = EVENT_KEYS) -> str:
    if kind == "events":
        objects = "{" + ", ".join(f'"{key}"' for key in event_fields(keys)) + "}"
        if keys[1] is None:
            return f"a list of [item, time] pairs or {objects} objects"
        return f"a list of [item, action, time] triples or {objects} objects"
    return {
        "string": "a string",
        "integer": "an integer",
        "time": "a unix time in seconds or a date-time",
        "number": "a number",
        "strings": 'a list of ids (texts or integers), or one string with "|" between values',
    }[kind]


def convert(
    number: int,
    name: str,
    kind: str,
    value: Any,
    sep: str = "|",
    keys: tuple = EVENT_KEYS,
    per_second: int = 1,
) -> Any:
    """``value`` as ``kind``: a column type, or "time" (an "integer" column's, as
    ``unix_seconds``); an optional column's empty value: "" for a string, None for a
    number, [] for a list; ``sep`` splits a "strings" column's text; ``keys``: an "events"
    column's objects' keys for an event's item, action and time; ``per_second``: a numeric
    time's units in a second (``PER_SECOND``: milliseconds 1000)."""
    wants = _wants(kind, keys)
    if isinstance(value, np.ndarray):  # a list as pandas holds one (read from Parquet)
        value = value.tolist()
    elif is_missing(value):  # NaN, pandas' NA: as None
        value = None

    def bad() -> RawInputError:  # made only when raised: most values are fine
        return RawInputError(number, name, f"must be {wants}, got {shown(value)}")

    if kind == "string":
        if value is None:
            return ""
        if isinstance(value, bool | np.bool_):  # as prepare reads a column of booleans
            return "true" if value else "false"
        if isinstance(value, float | np.floating):
            return "" if math.isnan(value) else float_text(value)
        if not isinstance(value, str | int | np.integer):
            raise bad()
        try:
            return str(value)
        except ValueError:  # an int over sys.get_int_max_str_digits() digits
            raise bad() from None
    if kind == "time":
        if value is None or value == "":
            raise RawInputError(number, name, f"must be {wants}, got an empty value")
        seconds = unix_seconds(value, per_second)
        if seconds is None:
            raise bad()
        if not -INT64_LIMIT <= seconds < INT64_LIMIT:
            raise RawInputError(number, name, f"must be a time in 64 bits, got {shown(value)}")
        if seconds >= LATEST_SECONDS:
            raise RawInputError(number, name, too_late(value, per_second))
        return seconds
    if kind in ("integer", "number"):
        if value is None or (
            isinstance(value, str) and value.strip() in ("", *MISSING_NUMBER_TEXTS)
        ):
            if kind == "integer":
                raise RawInputError(number, name, f"must be {wants}, got an empty value")
            return None  # "", blanks, "NA": missing, as prepare reads them
        if isinstance(value, bool | np.bool_):
            if kind == "integer":
                raise bad()
            return float(value)  # as prepare reads a column of booleans: 1.0 and 0.0
        limit = (
            "a 64-bit integer (from -2^63 to 2^63 - 1)"
            if kind == "integer"
            else "a number a 64-bit float can hold"
        )

        def too_large() -> RawInputError:
            return RawInputError(number, name, f"must be {limit}, got {shown(value)}")

        try:
            parsed = float(value)
        except OverflowError:  # an int beyond a float's range
            raise too_large() from None
        except (TypeError, ValueError):
            raise bad() from None
        if math.isnan(parsed) and kind == "number":
            return None  # NaN: missing, as prepare reads it
        if not math.isfinite(parsed) or (kind == "integer" and parsed != int(parsed)):
            raise bad()
        if kind == "integer" and not -INT64_LIMIT <= parsed < INT64_LIMIT:
            raise too_large()
        return int(parsed) if kind == "integer" else parsed
    if kind == "strings":
        if value is None or value == "":
            return []
        if isinstance(value, str):
            return value.split(sep)
        if isinstance(value, list | tuple):
            if all(isinstance(v, str) for v in value):
                return list(value)
            # as prepare reads a list: integer ids as their text, a null as no value ("")
            if all(v is None or isinstance(v, int | np.integer) and not isinstance(v, bool)
                   or isinstance(v, str) for v in value):  # fmt: skip
                return ["" if v is None else str(v) for v in value]
        raise bad()
    # events
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise bad() from None
    if not isinstance(value, list | tuple):
        raise bad()
    events = []
    for event in value:
        # A history holds thousands of events: one of plain types is taken as it is.
        if type(event) in (list, tuple) and len(event) == 2 and keys[1] is None:
            key, when = event
            if (
                type(key) is str
                and type(when) is int
                and (-INT64_LIMIT <= when < LATEST_SECONDS * per_second)
            ):
                events.append([key, NO_ACTION, when // per_second])
                continue
        if type(event) in (list, tuple) and len(event) == 3:
            key, action, when = event
            if (
                type(key) is str
                and type(action) is int
                and type(when) is int
                and -INT64_LIMIT <= action < INT64_LIMIT
                and -INT64_LIMIT <= when < LATEST_SECONDS * per_second
            ):
                events.append([key, action, when // per_second])
                continue
        events.append(_event(number, name, event, bad, keys, per_second))
    return events


def too_late(value: Any, per_second: int) -> str:
    """Why a time past ``LATEST_SECONDS`` is refused (by prepare and in serving alike): a
    number, most likely in a finer unit than the data's; a date, a placeholder."""
    if not numeric(value):  # a date-time: no unit to misread
        text = value.isoformat() if isinstance(value, datetime.date) else value
        return (
            f"is {shown(text)}: past the year 5000 (a placeholder such as 9999-12-31?); "
            "give each row its real time"
        )
    unit = next(u for u, n in PER_SECOND.items() if n == per_second)
    finer = [u for u, n in PER_SECOND.items() if n > per_second]
    said = f"is {shown(value)}: as unix {UNIT_NAMES[unit]} (this data's unit), past the year 5000"
    if not finer:
        return said
    units = f"{', '.join(finer[:-1])}{' or ' * (len(finer) > 1)}{finer[-1]}"
    finer_name = UNIT_NAMES[finer[0]]
    return f"{said}; a time in {finer_name} or finer? declare the source's time_unit: {units}"


def numeric(value: Any) -> bool:
    """A number, or text that reads as one."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def float_text(value: float) -> str:
    """A number as prepare's Arrow casts it to text ("3" for 3.0, "1e-7"): a categorical
    column of floats (ids of a pandas column that held a null) serves as it trained. A
    float32 is read as the float64 it is (0.1f as "0.10000000149011612"), by prepare too:
    a served row's value (JSON, a Python float) no longer says its width."""
    import pyarrow as pa

    return pa.array([value], pa.float64()).cast(pa.string())[0].as_py()


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
SECOND = datetime.timedelta(seconds=1)


def unix_seconds(value: Any, per_second: int = 1) -> int | None:
    """A time as ``prepare`` reads one (``nas/data/source_rows.py``): a unix time, in
    seconds or ``per_second`` finer units (a fraction of a second floored), a date-time
    (UTC unless it says its zone; a fraction of a second floored), a date (its midnight,
    UTC), or the text of one of these (ISO 8601); None if it is none."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            try:
                value = datetime.datetime.fromisoformat(value)
            except ValueError:
                return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value) // per_second
    if isinstance(value, float | np.floating):
        return math.floor(value / per_second) if math.isfinite(value) else None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return (value - EPOCH) // SECOND
    if isinstance(value, datetime.date):
        return (value - EPOCH.date()).days * 86_400
    return None


def _event(
    number: int, name: str, event: Any, bad, keys: tuple = EVENT_KEYS, per_second: int = 1
) -> list:
    """One event of a history, a triple or an object with ``keys`` for its item, action
    and time (others ignored: a Parquet struct's extra fields), checked and converted
    (``bad()``: the column's error). Where its history has no action (``keys[1]`` None),
    a pair, an object of the item and time, or a triple (``decode``'s, the internal form)."""
    if isinstance(event, Mapping) and all(key in event for key in event_fields(keys)):
        action = event[keys[1]] if keys[1] is not None else NO_ACTION
        event = [event[keys[0]], action, event[keys[2]]]
    elif keys[1] is None and isinstance(event, list | tuple) and len(event) == 2:
        event = [event[0], NO_ACTION, event[1]]
    if not (isinstance(event, list | tuple) and len(event) == 3):
        raise bad()
    key, action, when = event
    if not isinstance(key, str | int) or isinstance(key, bool):
        raise bad()
    return [
        str(key),
        _integer(number, f"{name}[action]", action),
        _time(number, f"{name}[time]", when, per_second),
    ]


def _time(number: int, name: str, value: Any, per_second: int = 1) -> int:
    """``convert``'s "time" (an event's as a row's: unix seconds, or a date-time), a plain
    int in range taken as it is."""
    if type(value) is int and -INT64_LIMIT <= value < LATEST_SECONDS * per_second:
        return value // per_second
    return convert(number, name, "time", value, per_second=per_second)


def _integer(number: int, name: str, value: Any) -> int:
    """``convert``'s integer, a plain int in range taken as it is: a history's thousands
    of events take this path."""
    if type(value) is int and -INT64_LIMIT <= value < INT64_LIMIT:
        return value
    return convert(number, name, "integer", value)
