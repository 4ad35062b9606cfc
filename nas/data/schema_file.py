"""A dataset declared in a YAML schema file instead of coded: where its rows are, which
columns are labels, keys and features, and how rows are split.

    name: my_ctr
    source: {format: parquet, path: data/*.parquet}    # parquet|orc|avro|csv|jsonl|delta|iceberg
    labels: [click]                                     # one or more binary labels
    keys: {user: user_id, request: request_id, timestamp: ts}      # each optional
    split: {method: time, valid: 0.1, test: 0.1}
    features:
      - {name: [I1, I2], type: dense, transform: log1p, fill: 0}
      - {name: [C1, C2], type: categorical, min_freq: 2, max_size: 1000000}
      - {name: site_id, type: categorical, hash: 100000}
      - {name: genres, type: multi_hot, sep: "|", max_len: 8}
      - {name: hist_items, type: sequence, max_len: 64, vocab_of: item_id}
      - {name: item_id, type: categorical, side: candidate}

Fields may also be made from other columns (``from:``), so the built-in MovieLens is a schema
file too (``builtin/movielens.yaml``):

    labels: [{name: like, column: rating, at_least: 4}]        # 1 where rating >= 4
    labels: [{name: purchase, column: event_name, one_of: [purchase]}]   # 1 where it is
      - {name: hour, type: categorical, from: ts, derive: hour}   # or weekday; year: of text
      - {name: zip_prefix, type: categorical, from: zip, prefix: 3}
      - {name: history, type: sequence, from: rows, vocab_of: item, action: rating}

A sequence ``from: rows`` is each row's history made of the log itself: its user's earlier
rows (by ``keys.timestamp``; rows of the same time excluded), their items and actions.
A sequence of a column is a list of items, or of ``{item, action, time}`` events (a
precomputed history: ``nas/data/source_rows.py``'s ``_events``; ``event_fields`` names its
struct's fields where they are named otherwise).

``source.path`` is relative to the schema file's folder and may be a glob; its files are read
in sorted order. ``nas/data/ingest.py`` prepares the rows (``source_rows.py`` reads them);
``docs/models-and-data.md`` is the user's guide.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime
import glob
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nas.core.errors import ConfigError, config_error_from_pydantic, shown
from nas.core.names import is_name, name_pattern
from nas.core.user_files import parse_yaml, read_text
from nas.data.labels import LabelRule
from nas.data.lakehouse import table_files
from nas.data.raw import LATEST_SECONDS, PER_SECOND
from nas.data.row_files import partitions, pattern_root
from nas.data.row_filter import SPAN_UNITS, RowFilter, span_text
from nas.data.table_files import A_TABLE, TABLE_FORMATS, inside_table, table_above, table_format

SCHEMA_SUFFIXES = (".yaml", ".yml")
# a CSV source's thousands separators (pandas' thousands): Excel's by its locale, Swiss
# apostrophes, French Excel's narrow no-break space
THOUSANDS_SEPARATORS = (",", ".", " ", "'", "\u00a0", "\u202f")
Name = Annotated[str, Field(min_length=1, max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _encoding(name: str) -> str:
    """An encoding Python knows, by its own name (latin1 as iso8859-1, UTF8 as utf-8)."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise ValueError(
            f"unknown encoding {shown(name)}; give one of Python's names, such as utf-8, "
            "cp1252 (Windows' Western European), latin-1, shift_jis or gbk"
        ) from None


def unix_seconds(value: object) -> int:
    """A moment a time split cuts at, in unix seconds: given as such, or as a date or a
    date-time (YAML reads ``2024-05-01`` as a date; ISO text too), UTC unless it names its
    zone (a date: its midnight)."""
    if isinstance(value, str) and value.strip().removeprefix("-").isdigit() and len(value) < 30:
        value = int(value)  # unix seconds, quoted
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.datetime.fromisoformat(value)
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = datetime.datetime.combine(value, datetime.time())
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp())
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**62:
        if value >= LATEST_SECONDS:  # (a source's time_unit is for its rows' times)
            raise ValueError(
                f"{value} is past the year 5000 as unix seconds: give a moment in seconds "
                "or as a date (2024-05-01), whatever the source's time_unit"
            )
        return value
    raise ValueError(
        f"must be a date (2024-05-01), a date-time (2024-05-01 12:00:00, UTC unless it "
        f"names its zone) or unix seconds, got {shown(value)}"
    )


def utc_text(seconds: int) -> str:
    """Unix seconds as an ISO date-time in UTC (the seconds themselves beyond its range)."""
    try:
        return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"{seconds} (unix seconds)"


Moment = Annotated[int, BeforeValidator(unix_seconds)]


def _as_texts(values):
    """A list of values each as text, as prepare reads a column compared to them: YAML's
    ``yes`` or ``true`` is a boolean, which the column's text would never equal."""
    if not isinstance(values, list):
        return values
    for value in values:
        if isinstance(value, bool):
            raise ValueError(
                f"holds {value}, a boolean: YAML reads an unquoted yes, no, true, false, "
                f"on or off so; quote the value as the column writes it (one_of: "
                f'["yes"]): it is compared to the column\'s text'
            )
        if not isinstance(value, str | int):
            hint = f' (quote it: "{value}")' if isinstance(value, float) else ""
            raise ValueError(
                f"{shown(value)} is not text or an integer: one_of and none_of values are "
                f"compared to the column's text{hint}"
            )
    return [str(value) for value in values]


# values a column's text is compared to (a label's one_of, a condition's one_of and none_of)
Texts = Annotated[list[Name], BeforeValidator(_as_texts), Field(min_length=1, max_length=1000)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


def _span(value: object) -> int:
    """A span of time in seconds: given as seconds (3600), or as a number and a unit
    (``30m``, ``12h``, ``7d``, ``2w``)."""
    text = str(value).strip().lower()
    number, unit = (text[:-1], text[-1]) if text[-1:] in SPAN_UNITS else (text, "s")
    try:
        seconds = float(number) * SPAN_UNITS[unit]
    except ValueError:
        seconds = math.nan
    if isinstance(value, bool) or not (0 < seconds < 2**40):
        raise ValueError(
            f"must be a span of time: seconds (3600), or a number and a unit (30m, 12h, 7d; "
            f"s, m, h, d, w), got {shown(value)}"
        )
    return math.ceil(seconds)


Span = Annotated[int, BeforeValidator(_span)]


class Condition(_Strict):
    """``source.where``'s condition on one column (``nas/data/row_filter.py``): its value
    ``one_of`` or ``none_of`` some, a number ``at_least`` and ``below`` some, or a time
    ``from`` and ``until`` some moments."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    one_of: Texts | None = None
    none_of: Texts | None = None
    at_least: Finite | None = None
    below: Finite | None = None
    since: Moment | None = Field(None, alias="from")
    until: Moment | None = None
    # a time: in the last span before the newest time the source holds (a day's logs
    # added, the window moves with them: ``source_rows.with_last_resolved``)
    last: Span | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Condition:
        kinds = {
            "one_of": self.one_of is not None,
            "none_of": self.none_of is not None,
            "at_least/below": self.at_least is not None or self.below is not None,
            "from/until": self.since is not None or self.until is not None,
            "last": self.last is not None,
        }
        given = [kind for kind, told in kinds.items() if told]
        if not given:
            raise ValueError(
                "give one_of or none_of (values), at_least and/or below (a number's range), "
                "from and/or until (a time's range) or last (a span before the newest time)"
            )
        if len(given) > 1:
            raise ValueError(f"give one kind of condition a column, not {' and '.join(given)}")
        if None not in (self.at_least, self.below) and self.at_least >= self.below:
            raise ValueError(
                f"at_least and below leave no value between them ({self.at_least:g} and "
                f"{self.below:g})"
            )
        if None not in (self.since, self.until) and self.since >= self.until:
            raise ValueError(
                f"from and until leave no moment between them ({utc_text(self.since)} and "
                f"{utc_text(self.until)})"
            )
        return self

    def row_filter(self, column: str) -> RowFilter:
        return RowFilter(
            column,
            tuple(self.one_of or ()),
            tuple(self.none_of or ()),
            self.at_least,
            self.below,
            self.since,
            self.until,
            self.last,
        )


class Source(_Strict):
    # delta, iceberg: a Delta Lake or Apache Iceberg table, path its folder: the Parquet
    # files its log or metadata names (``nas/data/table_files.py``), at its latest version
    # or at ``version`` (Delta's version, Iceberg's snapshot id)
    format: Literal["parquet", "orc", "avro", "csv", "jsonl", "delta", "iceberg"]
    path: Name
    version: Annotated[int, Field(ge=0)] | None = None  # delta, iceberg: the version read
    # delta, iceberg: the table as it was at a moment (its last version then; unix seconds,
    # given as a date, a date-time or unix seconds, as split.at_moments takes them)
    as_of: int | None = None
    delimiter: Annotated[str, Field(min_length=1, max_length=1)] = ","  # csv
    header: bool = True  # csv: the first line names the columns
    columns: tuple[Name, ...] | None = None  # csv without a header: the columns' names
    # numeric times (keys.timestamp, a derived field's column, a history's events): unix
    # seconds, or milliseconds, microseconds or nanoseconds since 1970
    time_unit: Literal["s", "ms", "us", "ns"] = "s"
    # csv, jsonl: a line that is not a row (a CSV row of more or fewer fields than the
    # header's, a JSON line that does not parse or holds no object, a line a writer killed
    # mid-write left cut off) refuses the source (error), or is passed by, counted, and told
    # by `nas data prepare` (skip), as pandas' on_bad_lines. A row whose values do
    # not fit its declaration (a label of 2, text for a number) is refused either way.
    on_bad_lines: Literal["error", "skip"] = "error"
    # csv: the text's encoding, by Python's names (cp1252: Windows' Western European, as
    # Excel writes CSV there; latin-1, shift_jis, gbk, ...); JSON is UTF-8 (RFC 8259)
    encoding: Annotated[Name, AfterValidator(_encoding)] = "utf-8"
    # csv: the numbers' decimal mark, "," where Excel writes 3,14 (its delimiter is ";" then)
    decimal: Literal[".", ","] = "."
    # csv: the numbers' thousands separator, passed by (1,234.5; 1.234,5 with decimal ","; a
    # space, an apostrophe or French Excel's narrow no-break space), as pandas' thousands
    thousands: Literal[THOUSANDS_SEPARATORS] | None = None
    # csv: false where no field is quoted, a '"' being text like any other (Hive's text
    # tables, which `nas data schema` drafts so; a field opening with '"' would otherwise be
    # read as quoted, its quotes dropped, or run on to the next '"' lines later)
    quoting: bool = True
    # csv: the character that makes the next one text, a delimiter too (Hive's ESCAPED BY
    # '\\': a Ctrl-A in a value written \^A; pandas' escapechar)
    escape: Annotated[str, Field(min_length=1, max_length=1)] | None = None
    # the rows read: those where every column's condition holds (``nas/data/row_filter.py``;
    # files whose partition folders' values or Parquet statistics fail one are not read)
    where: dict[Name, Condition] | None = None

    @property
    def text(self) -> bool:
        """Whether its files are text, of lines (CSV, JSON lines), not typed columns."""
        return self.format in ("csv", "jsonl")

    @property
    def file_format(self) -> str:
        """The format its files are read as (a Delta or Iceberg table's: Parquet)."""
        return "parquet" if self.format in TABLE_FORMATS else self.format

    def row_filters(self) -> list[RowFilter]:
        """``where``'s conditions, a column each."""
        return [c.row_filter(column) for column, c in (self.where or {}).items()]

    @property
    def per_second(self) -> int:
        """Its numeric times' units in a second."""
        return PER_SECOND[self.time_unit]

    @field_validator("as_of", mode="before")
    @classmethod
    def _a_moment(cls, value):
        return None if value is None else unix_seconds(value)

    @model_validator(mode="after")
    def _csv_options(self) -> Source:
        if self.format != "csv" and (
            self.delimiter != "," or not self.header or self.columns is not None
        ):
            raise ValueError("delimiter, header and columns apply to format csv only")
        if self.format != "csv" and self.encoding != "utf-8":
            raise ValueError("encoding applies to format csv only (JSON lines are UTF-8)")
        if self.format != "csv" and self.decimal != ".":
            raise ValueError(
                "decimal applies to format csv only (other formats' numbers are typed)"
            )
        if self.format != "csv" and self.thousands is not None:
            raise ValueError(
                "thousands applies to format csv only (other formats' numbers are typed)"
            )
        if self.format != "csv" and (not self.quoting or self.escape is not None):
            raise ValueError("quoting and escape apply to format csv only")
        if self.escape is not None and self.escape in (self.delimiter, '"'):
            raise ValueError(f"escape is {json.dumps(self.escape)}, a delimiter or a quote")
        if self.thousands is not None and self.thousands == self.decimal:
            raise ValueError(f'thousands and decimal are both "{self.thousands}"')
        if self.decimal == self.delimiter:
            raise ValueError(
                f'decimal and delimiter are both "{self.decimal}": a file whose numbers are '
                'written 3,14 splits its fields by another, delimiter: ";"'
            )
        if not self.text and self.on_bad_lines != "error":
            raise ValueError(
                "on_bad_lines applies to formats csv and jsonl (Parquet, ORC and Avro have no "
                "lines)"
            )
        for told in ("version", "as_of"):
            if getattr(self, told) is not None and self.format not in TABLE_FORMATS:
                raise ValueError(f"{told} applies to formats delta and iceberg only (a table's)")
        if self.version is not None and self.as_of is not None:
            raise ValueError("give version or as_of (the table at a moment), not both")
        if self.format in TABLE_FORMATS and glob.has_magic(self.path):
            raise ValueError(
                f"{A_TABLE[self.format]} table's path is its folder, not a pattern: "
                f"{shown(self.path)}"
            )
        if self.format == "csv" and not self.header and not self.columns:
            raise ValueError("a csv file without a header needs columns: [its column names]")
        if self.columns is not None and len(set(self.columns)) != len(self.columns):
            raise ValueError("columns names a column twice")
        if self.where is not None and not self.where:
            raise ValueError("where names no column (leave it out to read every row)")
        return self


class Joined(_Strict):
    """A label read from another log (a click's, a conversion's: ``nas/data/joined_labels.py``):
    1 where that log holds a row of the same ``key``, at or after this row's time and
    ``within`` a span of it where ``time`` names the other log's time column, else 0."""

    source: Source  # the other log (its own where: its purchases only, say)
    # this source's key column(s), of the same names in the other log, or {this: other}
    key: Name | Annotated[list[Name], Field(min_length=1, max_length=8)] | dict[Name, Name]
    time: Name | None = None  # the other log's time column: its rows at or after this row's
    within: Span | None = None  # ... and at most this long after it (needs time)

    @model_validator(mode="after")
    def _a_key_and_a_time(self) -> Joined:
        if isinstance(self.key, dict) and not self.key:
            raise ValueError("key names no column")
        if self.within is not None and self.time is None:
            raise ValueError("within needs time (the other log's time column)")
        if self.time in {other for _, other in self.pairs()}:
            raise ValueError(f"time names {self.time!r}, a column of the key")
        return self

    def pairs(self) -> list[tuple[str, str]]:
        """Each key column of this source, with the other log's column of that key."""
        if isinstance(self.key, dict):
            return list(self.key.items())
        return [(k, k) for k in ([self.key] if isinstance(self.key, str) else self.key)]

    def __str__(self) -> str:
        pairs = self.pairs()
        keys = ", ".join(a if a == b else f"{a} as {b}" for a, b in pairs)
        said = f"{keys} in {self.source.path}"
        if self.time:
            after = f"within {span_text(self.within)} after" if self.within else "at or after"
            said += f" {after} the row (by {self.time})"
        return said


class Label(_Strict):
    """A 0/1 column (written as its name, or ``{name, column}``), or a label made from a
    column: 1 where its number is at least ``at_least``, or where its value is ``one_of``
    some values, else 0 (``nas/data/labels.py``). Its name names metrics (``ne:click``,
    ``auc:click``) and the model's outputs (``probability_click``)."""

    name: Name
    column: Name | None = None  # default: the column of that name
    at_least: Finite | None = None
    one_of: Texts | None = None
    # a label from another log (a click's, a conversion's): by a key, after the row's time
    joined: Joined | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_name(cls, value):
        return {"name": value} if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _a_metric_name(cls, name: str) -> str:
        if not is_name(name, longest=64):
            raise ValueError(
                f"{shown(name)} may hold only letters, digits, _, - and . (up to 64; it names "
                f"metrics such as ne:NAME); to read a column named otherwise, give "
                f"{{name: click, column: {shown(name)}}}"
            )
        return name

    @model_validator(mode="after")
    def _one_rule(self) -> Label:
        if self.joined is not None and (
            self.column is not None or self.at_least is not None or self.one_of is not None
        ):
            raise ValueError(
                "give joined (a label from another log) or column, at_least and one_of (a "
                "label from this one's column), not both"
            )
        if self.at_least is not None and self.one_of is not None:
            raise ValueError(
                "give at_least (1 where a number is at least it) or one_of (1 where the "
                "value is one of them), not both"
            )
        return self

    def rule(self) -> LabelRule:
        """How a row carries the label: its column, read by its rule (a label from another
        log as a 0/1 column of its own name: the rows ``nas data rows`` writes, a day of logs
        scored with the labels joined)."""
        one_of = tuple(self.one_of or ())
        return LabelRule(self.name, self.column or self.name, self.at_least, one_of)


class Keys(_Strict):
    user: Name | None = None
    request: Name | None = None
    timestamp: Name | None = None


class Split(_Strict):
    """``time``: by the timestamp key, oldest rows train (a share of the rows each, or at
    ``valid_from`` and ``test_from``: rows from that moment on). ``random``: each row by a seeded
    hash of its position. ``hash``: each user by a hash of the user key, so a user's rows
    stay together. ``user_time``: per user, chronologically (MovieLens's split). ``order``:
    the files' order, first rows train. ``column``: as a column of the files says, each
    row's value train, valid or test (a split made elsewhere, or `nas data export`'s)."""

    method: Literal["time", "random", "hash", "user_time", "order", "column"]
    valid: Annotated[float, Field(ge=0, lt=1)] = 0.1
    test: Annotated[float, Field(ge=0, lt=1)] = 0.1
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0  # random, hash
    column: Name | None = None  # column
    valid_from: Moment | None = None  # time
    test_from: Moment | None = None  # time

    @model_validator(mode="after")
    def _fractions(self) -> Split:
        if self.method == "column" and self.column is None:
            raise ValueError("split method column needs column: the column naming each split")
        if self.column is not None and self.method != "column":
            raise ValueError(f"column applies to split method column, not {self.method}")
        cuts = [n for n in ("valid_from", "test_from") if getattr(self, n) is not None]
        if cuts and self.method != "time":
            raise ValueError(f"{cuts[0]} applies to split method time, not {self.method}")
        if len(cuts) == 1:
            raise ValueError(
                "a time split at moments needs both valid_from and test_from (each a date, a "
                "date-time or unix seconds)"
            )
        if cuts and self.valid_from > self.test_from:
            raise ValueError(
                f"valid_from ({utc_text(self.valid_from)}) is after test_from "
                f"({utc_text(self.test_from)}); validation rows come before test rows"
            )
        shares = [n for n in ("valid", "test", "seed") if n in self.model_fields_set]
        if shares and (self.column or cuts):
            given = (
                "split method column: the column names each row's split"
                if self.column
                else "a time split at valid_from and test_from: those moments split the rows"
            )
            verb = "does" if len(shares) == 1 else "do"
            raise ValueError(f"{', '.join(shares)} {verb} not apply to {given}")
        if self.valid + self.test >= 1:
            raise ValueError(
                f"valid + test must leave rows to train on, got {self.valid} + {self.test}"
            )
        return self

    @property
    def at_moments(self) -> bool:
        """Whether a time split cuts at ``valid_from`` and ``test_from``."""
        return self.valid_from is not None


FROM_ROWS = "rows"  # a sequence's ``from``: the history made of the log's own rows


class EventFields(_Strict):
    """A history column's events are structs: the names of their item, action and time;
    ``action: null`` where they hold none (a history of viewed items and their times):
    each event is then one kind of action, as a history of items only is."""

    item: Name = "item"
    action: Name | None = "action"
    time: Name = "time"

    @model_validator(mode="after")
    def _distinct(self) -> EventFields:
        names = [n for n in self.names if n is not None]
        if len(set(names)) < len(names):
            raise ValueError("item, action and time must be fields of their own")
        return self

    @property
    def names(self) -> tuple[str, str | None, str]:
        return (self.item, self.action, self.time)


DERIVE = ("hour", "weekday", "year")  # hour, weekday: of keys.timestamp (UTC); year: of text


def not_a_zone(name: str) -> str:
    """Why ``name`` is refused as a zone (``time_zone``), and what would do."""
    return (
        f"{shown(name)} is not a time zone; give an IANA name such as America/New_York, "
        "Europe/Berlin or Asia/Kolkata, or an offset such as +05:30"
    )


def time_zone(name: str) -> bool:
    """Whether Arrow's time zone database (which derives a zone's hours) knows ``name``: an
    IANA name or an offset (+05:30); not "", which Arrow reads as no zone."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not name:
        return False
    try:
        pc.local_timestamp(pa.array([0], pa.timestamp("s", tz=name)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return False
    return True


class Feature(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: Name | tuple[Name, ...]
    type: Literal["dense", "categorical", "multi_hot", "sequence"]
    side: Literal["request", "candidate"] | None = None
    source: Name | None = Field(None, alias="from")  # the column it is made from (or rows)
    derive: Literal["hour", "weekday", "year"] | None = None  # categorical
    tz: str | None = None  # derive hour, weekday: in this IANA zone (Europe/Berlin), not UTC
    prefix: Annotated[int, Field(ge=1, le=1000)] | None = None  # categorical: first N chars
    action: Name | None = None  # a sequence from rows: the integer column of each event's kind
    # dense
    transform: Literal["log1p", "standardize", "none"] | None = None
    fill: Annotated[float, Field(allow_inf_nan=False, ge=-3.4e38, le=3.4e38)] | None = None
    # categorical, multi_hot
    min_freq: Annotated[int, Field(ge=1, le=2**62)] | None = None
    max_size: Annotated[int, Field(ge=1, le=2**31 - 3)] | None = None
    hash: Annotated[int, Field(ge=1, le=2**31 - 2)] | None = None
    # multi_hot, sequence
    max_len: Annotated[int, Field(ge=1, le=4096)] | None = None
    sep: Annotated[str, Field(min_length=1)] | None = None  # multi_hot in one string column
    vocab_of: Name | None = None  # sequence: the categorical feature whose ids it holds
    event_fields: EventFields | None = None  # sequence: its events' field names, if not these

    @field_validator("name")
    @classmethod
    def _names(cls, value):
        if isinstance(value, tuple) and not value:
            raise ValueError("names no column")
        return value

    @model_validator(mode="after")
    def _options_of_type(self) -> Feature:
        allowed = {
            "dense": {"transform", "fill", "side", "from"},
            "categorical": {
                "min_freq",
                "max_size",
                "hash",
                "side",
                "from",
                "derive",
                "prefix",
                "tz",
            },  # fmt: skip
            "multi_hot": {"min_freq", "max_size", "hash", "max_len", "sep", "side", "from"},
            "sequence": {"max_len", "vocab_of", "sep", "side", "from", "action", "event_fields"},
        }[self.type]
        options = {
            "transform",
            "fill",
            "min_freq",
            "max_size",
            "hash",
            "max_len",
            "sep",
            "vocab_of",
            "side",
            "derive",
            "tz",
            "prefix",
            "action",
            "event_fields",
        }
        given = sorted(k for k in options if getattr(self, k) is not None)
        given += ["from"] if self.source is not None else []
        wrong = [k for k in given if k not in allowed]
        if wrong:
            raise ValueError(
                f"{', '.join(wrong)} does not apply to type {self.type} (its options: "
                f"{', '.join(sorted(allowed))})"
            )
        if self.source is not None and isinstance(self.name, tuple):
            raise ValueError("from: makes one field; give name as one name")
        if (self.derive is not None or self.prefix is not None) and self.source is None:
            raise ValueError("derive and prefix need from: the column they are made from")
        if self.derive is not None and self.prefix is not None:
            raise ValueError("give derive or prefix, not both")
        if self.tz is not None and self.derive not in ("hour", "weekday"):
            raise ValueError("tz applies to derive: hour or weekday")
        if self.tz is not None and not time_zone(self.tz):
            raise ValueError(f"tz: {not_a_zone(self.tz)}")
        from_rows = self.source == FROM_ROWS and self.type == "sequence"
        if self.action is not None and not from_rows:
            raise ValueError("action applies to a sequence from: rows")
        if from_rows and self.sep is not None:
            raise ValueError("a sequence from: rows reads no list column: drop sep")
        if self.event_fields is not None and (from_rows or self.sep is not None):
            raise ValueError("event_fields name a history column's struct fields: drop them")
        if self.hash is not None and (self.min_freq is not None or self.max_size is not None):
            raise ValueError("hash replaces the vocabulary: drop min_freq and max_size")
        if self.type == "sequence" and self.vocab_of is None:
            raise ValueError("a sequence needs vocab_of: the categorical feature of its items")
        if self.type == "dense" and self.side == "request":
            raise ValueError("dense features are candidate-side")
        return self

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields it makes (the model's names for them)."""
        return self.name if isinstance(self.name, tuple) else (self.name,)

    @property
    def from_rows(self) -> bool:
        return self.type == "sequence" and self.source == FROM_ROWS

    @property
    def columns(self) -> tuple[str, ...]:
        """The source columns it reads (none for a sequence from rows: see ``SchemaFile``)."""
        if self.from_rows:
            return ()
        return (self.source,) if self.source is not None else self.fields

    def column_of(self, field: str) -> str:
        """The source column of one of its fields."""
        return self.source if self.source is not None else field


class SchemaFile(_Strict):
    name: Annotated[str, Field(pattern=f"^{name_pattern()}$")]
    description: str = ""
    source: Source
    labels: Annotated[tuple[Label, ...], Field(min_length=1, max_length=16)]
    keys: Keys = Keys()
    split: Split
    features: Annotated[tuple[Feature, ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> SchemaFile:
        seen: dict[str, str] = {}
        for name in self.label_names:
            _claim(seen, name, "a label")
        for i, feature in enumerate(self.features):
            for name in feature.fields:
                _claim(seen, name, f"features[{i}]")
        if self.name.endswith(SCHEMA_SUFFIXES):
            raise ValueError("name is the dataset's name, not a file name")
        needs = {"time": ("timestamp",), "hash": ("user",), "user_time": ("user", "timestamp")}
        for key in needs.get(self.split.method, ()):
            if getattr(self.keys, key) is None:
                raise ValueError(f"split method {self.split.method} needs keys.{key}")
        label_columns = {rule.column for rule in self.source_label_rules()}
        for label in self.labels:
            if label.joined and label.joined.time and not self.keys.timestamp:
                raise ValueError(
                    f"label {label.name}: joined.time needs keys.timestamp (each row's time, "
                    "which the other log's rows follow)"
                )
        for i, feature in enumerate(self.features):
            leaked = label_columns & set(feature.columns)
            if leaked:
                raise ValueError(f"features[{i}] reads the label column {sorted(leaked)[0]!r}")
            if feature.derive in ("hour", "weekday") and feature.source != self.keys.timestamp:
                raise ValueError(
                    f"features[{i}]: derive {feature.derive} reads keys.timestamp; give "
                    f"from: {self.keys.timestamp or '(declare keys.timestamp)'}"
                )
        self.column_kinds()
        self._check_sequence()
        if not any(f.type != "sequence" for f in self.features):
            raise ValueError("features need at least one dense, categorical or multi_hot field")
        return self

    def _check_sequence(self) -> None:
        categorical = {n: f for f in self.features if f.type == "categorical" for n in f.fields}
        sequences = [f for f in self.features if f.type == "sequence"]
        if len(sequences) > 1 or (sequences and len(sequences[0].fields) > 1):
            raise ValueError("one sequence feature at most (the row's history)")
        for feature in sequences:
            owner = categorical.get(feature.vocab_of)
            if owner is None:
                raise ValueError(
                    f"sequence {feature.fields[0]}: vocab_of must name a categorical "
                    f"feature, got {feature.vocab_of!r}"
                )
            if owner.hash is not None:
                raise ValueError(
                    f"vocab_of {feature.vocab_of!r} is hashed; a sequence needs a vocabulary"
                )
            if feature.from_rows and not (self.keys.user and self.keys.timestamp):
                raise ValueError(
                    "a sequence from: rows is each user's earlier rows: it needs keys.user "
                    "and keys.timestamp"
                )

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self.labels)

    def label_rules(self) -> list[LabelRule]:
        """How each label is read from a row's column."""
        return [label.rule() for label in self.labels]

    def source_label_rules(self) -> list[LabelRule]:
        """How each label read from the source's own columns (not ``joined``) reads them."""
        return [label.rule() for label in self.labels if label.joined is None]

    def label_columns(self) -> list[str]:
        """The source columns its labels read: their own, a joined label's keys, and the
        time a joined label's rows follow."""
        found = [rule.column for rule in self.source_label_rules()]
        for label in self.labels:
            if label.joined is not None:
                found += [ours for ours, _ in label.joined.pairs()]
                found += [self.keys.timestamp] if label.joined.time else []
        return list(dict.fromkeys(found))

    @property
    def history(self) -> Feature | None:
        return next((f for f in self.features if f.type == "sequence"), None)

    def column_kinds(self) -> dict[str, str]:
        """How each source column is read: ``label`` (0/1), ``number``, ``text``,
        ``timestamp`` (int64 seconds) or ``list``; a column read two ways is an error."""
        kinds: dict[str, tuple[str, str]] = {}

        def read(column: str, kind: str, owner: str) -> None:
            if column in kinds and kinds[column][0] != kind:
                raise ValueError(
                    f"column {column!r} is read as {kinds[column][0]} ({kinds[column][1]}) "
                    f"and as {kind} ({owner})"
                )
            kinds[column] = (kind, owner)

        for rule in self.source_label_rules():
            read(rule.column, rule.reads, f"label {rule.name}")
        for label in self.labels:
            for ours, _ in label.joined.pairs() if label.joined else ():
                read(ours, "text", f"label {label.name}'s key")
        for key in ("user", "request"):
            if getattr(self.keys, key):
                read(getattr(self.keys, key), "text", f"keys.{key}")
        if self.keys.timestamp:
            read(self.keys.timestamp, "timestamp", "keys.timestamp")
        if self.split.column:
            read(self.split.column, "text", "split.column")
        for i, feature in enumerate(self.features):
            kind = {"dense": "number", "categorical": "text"}.get(feature.type, "list")
            if feature.derive in ("hour", "weekday"):
                kind = "timestamp"
            for column in feature.columns:
                read(column, kind, f"features[{i}]")
            if feature.action:
                read(feature.action, "number", f"features[{i}].action")
        return {column: kind for column, (kind, _) in kinds.items()}

    def reading(self, column: str) -> Feature:
        """The (first) feature that reads source ``column``."""
        return next(f for f in self.features if column in f.columns)

    def required_columns(self) -> list[str]:
        """The columns every file must hold: the labels', the keys', the split's and
        ``source.where``'s."""
        keys = (self.keys.user, self.keys.request, self.keys.timestamp, self.split.column)
        found = self.label_columns() + [k for k in keys if k]
        return list(dict.fromkeys(found + list(self.source.where or ())))

    def columns(self) -> list[str]:
        """Every column the dataset reads: labels, keys, the split's, features (and a
        history's action), ``source.where``'s."""
        keys = (self.keys.user, self.keys.request, self.keys.timestamp, self.split.column)
        found = self.label_columns() + [k for k in keys if k]
        found += [c for f in self.features for c in (*f.columns, *([f.action] if f.action else []))]
        return list(dict.fromkeys(found + list(self.source.where or ())))


def _claim(seen: dict[str, str], column: str, owner: str) -> None:
    if column in seen:
        raise ValueError(f"{column!r} is declared twice ({seen[column]} and {owner})")
    seen[column] = owner


def is_schema_path(text: str) -> bool:
    """Whether a dataset argument names a schema file rather than a dataset."""
    return text.endswith(SCHEMA_SUFFIXES) or "/" in text


def load_schema_file(path: Path) -> SchemaFile:
    """The schema file at ``path``, every field checked (``ConfigError`` naming the file)."""
    source = str(path)
    data = parse_yaml(read_text(path, "dataset schema file"), source)
    if not isinstance(data, dict):
        raise ConfigError("", "a dataset schema file must be a mapping", source)
    try:
        return SchemaFile.model_validate(data)
    except ValidationError as err:
        raise config_error_from_pydantic(err, source, model=SchemaFile) from None


@dataclass(frozen=True)
class SourceFiles:
    """The source's files, sorted, and each one's partition columns' values: those of the
    Hive-style folders it is in below the source's (``date=2024-05-07/``), or those a
    Delta table's log records; ``version``: a Delta table's version read; ``views``: how
    its files are read, where not as any Parquet file is (``DeltaFiles``)."""

    files: list[Path]
    partitions: dict[Path, dict[str, str | None]]
    version: int | None = None
    views: dict = field(default_factory=dict)
    passed_by: int = 0  # files ``source.where`` left out by a table's metadata (Iceberg's)


def source_files(schema: SchemaFile, schema_path: Path) -> SourceFiles:
    """The source's files, but for bookkeeping ones a pattern matches (Spark's
    ``_SUCCESS``, as ``row_files`` passes them by); a Delta or Iceberg table's, those its
    log or metadata names; ``ConfigError`` when the path matches none, or is (in) such a
    table not declared so."""
    return files_of(schema.source, schema_path, "source")


def joined_files(schema: SchemaFile, schema_path: Path) -> dict[str, SourceFiles]:
    """Each joined label's other log's files (``source_files``), by the label's name."""
    return {
        label.name: files_of(label.joined.source, schema_path, f"labels[{i}].joined.source")
        for i, label in enumerate(schema.labels)
        if label.joined is not None
    }


def files_of(source: Source, schema_path: Path, field: str) -> SourceFiles:
    """The files of a ``source`` the schema file at ``schema_path`` declares at ``field``
    (``source_files``)."""
    where, at = str(schema_path), f"{field}.path"
    pattern = _source_pattern(source, schema_path)
    fmt = source.format
    if fmt in TABLE_FORMATS:
        if table_format(pattern) != fmt:
            holds = "a folder holding _delta_log" if fmt == "delta" else "a folder of metadata/"
            raise ConfigError(at, f"{pattern} is not {A_TABLE[fmt]} table ({holds})", where)
        table = table_files(
            pattern,
            fmt,
            source.version,
            at,
            where,
            source.as_of,
            tuple(source.row_filters()),
            source.per_second,
        )
        return SourceFiles(
            table.files, table.partitions, table.version, table.views, table.passed_by
        )
    if found := table_above(pattern_root(pattern)):
        table, kind = found
        instead = f"declare format: {kind}, path: {quoted_path(table, schema_path)}"
        raise ConfigError(at, inside_table(pattern, table, kind, instead), where)
    found = sorted(Path(p) for p in glob.glob(str(pattern), recursive=True))
    named = not glob.has_magic(str(pattern))  # one file, by its name: whatever its name
    files = [p for p in found if p.is_file() and (named or not p.name.startswith(("_", ".")))]
    if not files:
        raise ConfigError(at, f"matches no file ({pattern})", where)
    root = pattern_root(pattern)
    return SourceFiles(files, {path: partitions(path, root) for path in files})


def quoted_path(path: Path, schema_path: Path) -> str:
    """``path`` as a schema file's source.path may give it: relative to its folder."""
    return json.dumps(os.path.relpath(path, schema_path.resolve().parent))


def _source_pattern(source: Source, schema_path: Path) -> Path:
    pattern = Path(source.path).expanduser()
    return pattern if pattern.is_absolute() else schema_path.resolve().parent / pattern


# What ``nas data prepare`` writes from a schema file, in versions: a new one prepares every
# schema-file dataset again. 2: several labels as label fields, with their rates. 3: fields
# from other columns (from, derive, prefix), labels by a threshold, a history from rows.
INGEST_VERSION = 3


def fingerprint(schema: SchemaFile, files: list[Path]) -> str:
    """The cache key: the schema's content and each source file's path, size and mtime (a
    changed file is read again; hashing every byte of a large log would take minutes)."""
    digest = hashlib.sha256(f"ingest {INGEST_VERSION}\n".encode())
    # fields added since (time_unit, on_bad_lines, encoding, decimal, thousands, quoting,
    # escape, version, tz, a label's one_of, where) unsaid where they are the defaults, as before
    # they existed: caches prepared before stay current
    unsaid: dict = {"features": {i: {"tz"} for i, f in enumerate(schema.features) if f.tz is None}}
    unsaid["labels"] = {
        i: {k for k in ("one_of", "joined") if getattr(x, k) is None}
        for i, x in enumerate(schema.labels)
    }
    defaults = {
        "time_unit": "s",
        "on_bad_lines": "error",
        "encoding": "utf-8",
        "decimal": ".",
        "thousands": None,
        "quoting": True,
        "escape": None,
        "version": None,
        "as_of": None,
        "where": None,
    }
    unsaid["source"] = {k for k, v in defaults.items() if getattr(schema.source, k) == v}
    digest.update(
        json.dumps(schema.model_dump(mode="json", exclude=unsaid), sort_keys=True).encode()
    )
    for path in files:
        stat = path.stat()
        digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()
