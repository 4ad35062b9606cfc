"""A first schema file for a team's own logs, read from a sample of their rows: which
columns are labels, keys and features, and of what kind (``nas data schema``).

    sample = read_sample(files, fmt, delimiter)        # rows spread over the files and in them
    draft = infer_schema(sample, name, source, labels)   # Draft: the schema's YAML and why

A column's kind comes from its Arrow type and its sampled values:

    0/1 values, named as a label is (click, label, ...) or in --labels    label
    a timestamp, a date, or whole seconds named as a time (ts, time, ...) keys.timestamp (and
                                                                          its hour and weekday)
    named as a user's id (user_id, uid, ...)                              keys.user + categorical
    named as a request's id (request_id, ...)                             keys.request
    text, booleans, integers of few values or named as ids, items or      categorical (hashed
    categories (movie, sku, site, app, campaign, ...)                     where most are distinct)
    other numbers                                                         dense (log1p if >= 0)
    lists of ids                                                          multi_hot, or a history
                                                                          (sequence) of an item
                                                                          column's ids
    lists of {item, action, time} structs, or their JSON text             a history of events

It is a draft to read: every choice is said with its reason (``Draft.reasons``), and
``nas data prepare`` checks the rest on every row.
"""

from __future__ import annotations

import csv
import glob
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.core.errors import ConfigError, shown
from nas.core.names import NAME_RULE, is_name
from nas.data.labels import LabelRule, common_values
from nas.data.lakehouse import table_files
from nas.data.raw import EVENT_KEYS, MISSING_NUMBER_TEXTS, PER_SECOND, UNIT_NAMES, numeric
from nas.data.row_files import (
    HIVE_DELIMITER,
    ColumnarFile,
    binary_as_text,
    file_kind,
    first_lines,
    keyed_pairs,
    keyed_parts,
    partitions,
    pattern_root,
    sniffed_delimiter,
    text_fault,
    told_dialect,
    with_fields,
    with_partitions,
)
from nas.data.schema_file import THOUSANDS_SEPARATORS
from nas.data.source_rows import (
    DATE_TIMES,
    DECIMAL_COMMA,
    SAMPLE_BYTES,
    SAMPLE_PARTS,
    TRAILING,
    JsonLines,
    Skipped,
    arrow_reason,
    as_text,
    bare_returns,
    blank,
    compressed,
    csv_parsing,
    header_names,
    json_array,
    json_array_fault,
    json_batch,
    json_block,
    json_object,
    spread_parts,
)
from nas.data.table_files import TABLE_FORMATS, inside_table, table_above, table_format

SAMPLE_ROWS = 100_000
SAMPLE_FILES = 8  # files sampled, spread over the source's
LABEL_NAMES = ("click", "clicked", "is_click", "label", "target", "y", "like", "liked",
               "conversion", "converted", "purchase", "purchased")  # fmt: skip
# (a "." parts an object's name from its field's, user.id: as "_" parts words)
TIME_NAME = re.compile(r"(^|[_.])(ts|time|timestamp|datetime|date|event_time)($|[_.])", re.I)
USER_NAME = re.compile(
    r"^(user|user_id|userid|uid|member_id|customer_id|visitor_id|user_pseudo_id|anonymous_id)$",
    re.I,
)  # (user_pseudo_id: Google Analytics'; anonymous_id: Segment's)
REQUEST_NAME = re.compile(r"^(request|request_id|req_id|impression_id|query_id|session_id)$", re.I)
ITEM_NAME = re.compile(
    r"(^|[_.])(item|item_id|itemid|product|product_id|movie|movie_id|ad_id)$", re.I
)
HISTORY_NAME = re.compile(r"(hist|history|seq|sequence|recent|past)", re.I)
# integers that name things, not amounts: user_id, itemId, zip_code (not "paid")
ID_NAME = re.compile(r"((^|[_.])(id|ID|Id|key|code)|[a-z0-9](Id|ID))$")
# integers that stand for a thing or a category in ad and feed logs (an ad's number, a site
# code, an app's): what a count or an amount is not named
CATEGORY_NAME = re.compile(
    r"(^|[_.])(site|app|ad|campaign|advertiser|creative|publisher|placement|slot|category|channel"
    r"|country|city|region|zip|zipcode|postcode|brand|shop|store|merchant|seller|vendor|sku"
    r"|os|device|browser|platform|genre|language|domain|position|pos|query|author|artist"
    r"|album|song|track|video|article|creator)s?$",
    re.I,
)
UNIX_SECONDS = (1e8, 1e10)  # 1973 to 2286: whole seconds, not milliseconds
FEW_VALUES = 25  # integers with at most this many values: categories (hours, codes)
# text holding lists: a tenth of its values or more hold one (Hive's arrays: Ctrl-B, \x02)
SEPARATORS = ("|", ";", "\x02")
HASH_SIZE = 1 << 20
# a map column's keys (features by name) held by this share of the sample's rows or more are
# columns of their own (``column.key``), the most held first, this many at most
MAP_KEY_SHARE, MAP_KEYS = 0.01, 64
INTEGER_TEXT = r"^[+-]?(0|[1-9][0-9]{0,17})$"  # an integer's text, as int64 holds it


FORMATS = {
    ".parquet": "parquet",
    ".orc": "orc",
    ".avro": "avro",
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
}
COMPRESSIONS = (".gz", ".bz2", ".zst")
KNOWN_FILES = ".parquet, .orc, .avro, .csv, .tsv or .jsonl files"
WHOLE = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Source:
    """A team's files: the schema's ``source.path`` (absolute; a folder's files of one
    format under it, or a Delta or Iceberg table's folder), the files it matches, their
    format and CSV delimiter."""

    pattern: str
    files: list[Path]
    format: str
    # each file's partition columns' values: its Hive-style folders', or a table's log's
    partitions: dict[Path, dict[str, str | None]] = field(default_factory=dict)
    views: dict = field(default_factory=dict)  # how a Delta or Iceberg table's file is read
    delimiter: str = ","
    columns: list[str] | None = None  # CSV without a header: its columns' names (c1, c2, ...)
    decimal: str = "."  # CSV: its numbers' decimal mark (``decimal_mark``)
    thousands: str | None = None  # CSV: its numbers' thousands separator (``thousands_mark``)
    escape: str | None = None  # CSV: the character that makes the next one text (``escape_mark``)


def found_source(given: str) -> Source:
    """A file, a folder of files of one format, a Delta or Iceberg table's folder, or a glob: its
    files (``ConfigError`` where none, or a folder's files of several formats, or files of
    a table named otherwise than by its folder)."""
    place = Path(given).expanduser()
    if fmt := table_format(place):
        table = table_files(place, fmt, None, "SOURCE")
        where = str(place.absolute())
        return Source(where, table.files, fmt, table.partitions, views=table.views)
    if found := table_above(pattern_root(str(place))):
        table, fmt = found
        raise ConfigError("SOURCE", inside_table(given, table, fmt, f"name its folder, {table}"))
    if place.is_dir():
        files = [p for p in sorted(place.rglob("*")) if p.is_file() and p.name[0] not in "._"]
        kinds = {_suffixes(p) for p in files} - {None}
        if not kinds and files:  # Hive's files have no suffix (000000_0): by their bytes
            kinds = {_by_bytes(p, named=False) for p in files}
            if len(kinds) == 1 and None not in kinds:
                return _found(str(place.absolute() / "**" / "*"), files, next(iter(kinds)))
            if kinds == {None}:
                raise ConfigError(
                    "SOURCE",
                    f"{given} holds no file of a known format: {KNOWN_FILES}, .txt or .dat "
                    "files of such text, or parts a job wrote without a suffix (Hive's "
                    f"000000_0, Spark's part-00000){_json_arrays(files)}",
                )
            kinds = {k if k else ("without a format",) for k in kinds}
        if len(kinds) != 1:
            listed = ", ".join(sorted("".join(k) for k in kinds)) or "none"
            raise ConfigError("SOURCE", f"{given} holds no files of one format ({listed})")
        (kind,) = kinds
        pattern = str(place.absolute() / "**" / f"*{''.join(kind)}")
        files = [p for p in files if _suffixes(p) == kind]
    else:
        pattern = str(place.absolute())
        files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
        if glob.has_magic(pattern):  # (a job's bookkeeping files, _SUCCESS: not its rows)
            files = [p for p in files if p.name[0] not in "._"]
    if not files:
        raise ConfigError("SOURCE", f"{given} matches no file")
    kind = _suffixes(files[0]) or _by_bytes(files[0], named=True)  # (alone or by a pattern)
    if kind is None:
        raise ConfigError("SOURCE", f"{files[0]}: use {KNOWN_FILES}{_json_arrays(files[:1])}")
    return _found(pattern, files, kind)


def _json_arrays(files: list[Path]) -> str:
    """Where one of ``files`` is a JSON array (``.json``), what to make of it: ``; NAME
    holds a JSON array ...``; else ""."""
    found = next((p for p in files if ".json" in p.suffixes[-2:] and json_array(p)), None)
    return f"; {found.name} {json_array_fault(found)}" if found else ""


def _found(pattern: str, files: list[Path], kind: tuple[str, ...]) -> Source:
    fmt, delimiter = FORMATS[kind[0]], "\t" if kind[0] == ".tsv" else ","
    columns, decimal, thousands, escape = None, ".", None, None
    if fmt == "csv":
        lines = _first_lines(files)
        if kind[0] != ".tsv":  # (Excel's ";", Hive's Ctrl-A)
            delimiter = sniffed_delimiter(lines, delimiter)
        columns = _headerless_names(lines, delimiter)
        decimal = decimal_mark(lines, delimiter)
        thousands = thousands_mark(lines, delimiter, decimal)
        escape = escape_mark(lines, delimiter)
    root = pattern_root(pattern)  # Hive-style folders below it: columns of their files' rows
    found = {path: partitions(path, root) for path in files}
    return Source(
        pattern,
        files,
        fmt,
        partitions=found,
        delimiter=delimiter,
        columns=columns,
        decimal=decimal,
        thousands=thousands,
        escape=escape,
    )


def escape_mark(lines: list[str], delimiter: str) -> str | None:
    """A CSV file's escape character, by its first lines: a backslash before a delimiter
    (Hive's ESCAPED BY '\\\\', MySQL's SELECT INTO OUTFILE: a delimiter in a value
    written ``\\,``); else none."""
    return "\\" if any("\\" + delimiter in line for line in lines) else None


def decimal_mark(lines: list[str], delimiter: str) -> str:
    """``,`` where a CSV file's fields are split by another delimiter and a column of its
    first ``lines`` (past the first, a header or not) holds numbers written with a decimal
    comma, 3,14 (its other values whole numbers or missing), as Excel writes them where that
    is the mark; else ``.``."""
    if delimiter == ",":
        return "."
    try:
        rows = list(csv.reader(lines[1:], delimiter=delimiter, **told_dialect(delimiter)))
    except csv.Error:  # (a NUL byte, a field past csv's limit: the sample's reader says so)
        return "."
    # 1.234,5 and 1 234,5: thousands separated (by anything but the comma)
    groups = [(s, _grouped(s, ",")) for s in THOUSANDS_SEPARATORS if s != ","]
    for values in _column_values(rows):
        for separator, grouped in groups:
            values = [v.replace(separator, "") if grouped.fullmatch(v) else v for v in values]
        if any(DECIMAL_COMMA.fullmatch(v) for v in values) and all(
            WHOLE.fullmatch(v) or DECIMAL_COMMA.fullmatch(v) for v in values
        ):
            return ","
    return "."


def thousands_mark(lines: list[str], delimiter: str, decimal: str) -> str | None:
    """The thousands separator of a CSV file's numbers (``THOUSANDS_SEPARATORS``, not its
    decimal mark; its delimiter where such numbers are quoted, "1,234.5") where a column of
    its first ``lines`` (past the first) holds numbers grouped by it (its other values plain
    numbers or missing); else None."""
    try:
        rows = list(csv.reader(lines[1:], delimiter=delimiter, **told_dialect(delimiter)))
    except csv.Error:
        return None
    for separator in THOUSANDS_SEPARATORS:
        if separator != decimal and any(
            _separated(values, separator, decimal) for values in _column_values(rows)
        ):
            return separator
    return None


def _grouped(separator: str, decimal: str) -> re.Pattern:
    """A number whose thousands are separated: 1,234,567.5 (``separator`` ",", ``decimal`` ".")."""
    s, d = re.escape(separator), re.escape(decimal)
    return re.compile(rf"[+-]?\d{{1,3}}({s}\d{{3}})+({d}\d+)?")


def _separated(values: list[str], separator: str, decimal: str) -> bool:
    """Whether a column's ``values`` (missing ones left out) are numbers, some with their
    thousands separated by ``separator``; not where every one of many is grouped and of one
    width, as codes are (a phone number's 555 123), not quantities."""
    grouped, plain = (
        _grouped(separator, decimal),
        re.compile(rf"[+-]?\d+({re.escape(decimal)}\d+)?"),
    )
    one_width = len(values) >= CODES_SEEN and len({len(v) for v in values}) == 1
    if one_width and all(grouped.fullmatch(v) and decimal not in v for v in values):
        return False
    return any(grouped.fullmatch(v) for v in values) and all(
        plain.fullmatch(v) or grouped.fullmatch(v) for v in values
    )


def _column_values(rows: list[list[str]]) -> Iterator[list[str]]:
    """Each column's values, stripped, those that say "missing" left out."""
    for i in range(max(map(len, rows), default=0)):
        yield _present([row[i] for row in rows if i < len(row)])


def _present(values: list[str | None]) -> list[str]:
    """Text values, stripped, less those that say "missing" (None, "", NA, ...)."""
    stripped = (v.strip() for v in values if v is not None)
    return [v for v in stripped if v and v not in MISSING_NUMBER_TEXTS]


def _unseparated(table: pa.Table, separator: str, decimal: str) -> pa.Table:
    """A sample's text columns of numbers whose thousands are separated (1,234.5) as numbers,
    as prepare reads them under ``source.thousands``."""
    for i, (name, column) in enumerate(zip(table.column_names, table.columns, strict=True)):
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        texts = column.to_pylist()
        if not _separated(_present(texts), separator, decimal):
            continue
        numbers = [
            float(v[0].replace(separator, "").replace(decimal, "."))
            if (v := _present([t]))
            else None
            for t in texts
        ]
        table = table.set_column(i, name, pa.array(numbers, pa.float64()))
    return table


def _by_bytes(path: Path, named: bool) -> tuple[str, ...] | None:
    """A file whose name says no format (Hive's 000000_0, a .txt file) as its first bytes
    say (``row_files.file_kind``: lines of text where ``named`` alone, a job's part, or
    named .txt or .dat)."""
    found = file_kind(path, named)
    return (found,) if found in FORMATS else None


def _first_lines(files: list[Path]) -> list[str]:
    """The first non-blank lines (up to 50) of the first CSV file that holds any."""
    return first_lines(next((p for p in files if not blank(p)), files[0]))


class _Sniffer(csv.Sniffer):
    """Python's judge of a CSV header, told the delimiter instead of guessing it."""

    def __init__(self, delimiter: str):
        super().__init__()
        self.dialect = type("Given", (csv.excel,), {"delimiter": delimiter})

    def sniff(self, sample, delimiters=None):
        return self.dialect


def _headerless_names(lines: list[str], delimiter: str) -> list[str] | None:
    """Names for CSV files' columns where the first file's first line is no header: Python's
    ``csv.Sniffer`` judges it none by its first lines (a header's cells differ in type or
    length from the values below them; a Criteo day's first row does not), and it holds a
    number or most of its cells stand again in their columns below it (values recur, names
    do not: a header of names holds none; where neither tells, a header, as before). Else
    None."""
    if len(lines) < 2:
        return None
    try:
        if _Sniffer(delimiter).has_header("".join(lines)):
            return None
    except csv.Error:
        return None
    first, *rest = csv.reader(lines, delimiter=delimiter, **told_dialect(delimiter))
    cells = [(i, cell) for i, cell in enumerate(first) if cell.strip()]
    again = sum(any(i < len(row) and row[i] == cell for row in rest) for i, cell in cells)
    if not (any(numeric(cell) for cell in first) or (len(cells) > 1 and 2 * again >= len(cells))):
        return None
    # lines that all end with the delimiter: no column past it (source_rows.header_names)
    width = len(first) - all(row and row[-1] == "" for row in [first, *rest])
    return [f"c{i}" for i in range(1, width + 1)]


def _suffixes(path: Path) -> tuple[str, ...] | None:
    """A data file's format suffix, with its compression's (.gz, .bz2, .zst) if any."""
    found = [s.lower() for s in path.suffixes[-2:]]
    compression = found[-1:] if found[-1:] and found[-1] in COMPRESSIONS else []
    data = found[: len(found) - len(compression)][-1:]
    return tuple(data + compression) if data and data[0] in FORMATS else None


@dataclass
class Draft:
    """A schema file's text and, per column, what it was taken for and why."""

    text: str
    reasons: list[tuple[str, str, str, str]] = field(default_factory=list)  # column, type, as, why


@dataclass
class Sample:
    """Rows of a source's files as Arrow reads them, joined: ``files``, the files read;
    ``absent``, each column some of them lack (no label or key, then), with the first that
    does; ``skipped``, the lines read that are not rows (``on_bad_lines``), passed by."""

    table: pa.Table
    files: list[Path]
    absent: dict[str, Path] = field(default_factory=dict)
    skipped: Skipped = field(default_factory=Skipped)
    encoding: str = "utf-8"  # a CSV source's text (``csv_encoding``)
    keyed: dict[str, str] = field(default_factory=dict)  # ``_keyed_names``


def read_sample(
    files: list[Path],
    fmt: str,
    delimiter: str = ",",
    rows: int = SAMPLE_ROWS,
    columns: list[str] | None = None,
    partitions: dict[Path, dict[str, str | None]] | None = None,
    decimal: str = ".",
    thousands: str | None = None,
    escape: str | None = None,
    views: dict | None = None,
) -> Sample:
    """Rows of up to ``SAMPLE_FILES`` files spread over ``files`` (the first, the last, and
    between; ``rows`` in all, from places spread in each file: ``_file_sample``), joined: a
    column empty in one file (a day without coupons) takes its type from the others; one
    whose types differ between files, as text where it can be (prepare reads declared text
    so). ``columns``: a CSV file's names, where it has no header. ``partitions``: each
    file's partition columns' values (``Source.partitions``); ``views``: how a lakehouse table's
    files are read (``Source.views``). ``decimal``,
    ``thousands``, ``escape``: a CSV file's decimal mark, thousands separator and escape
    character (Hive's Ctrl-A files: never quoted)."""
    fmt = "parquet" if fmt in TABLE_FORMATS else fmt  # (a Delta or Iceberg table's files)
    if fmt in ("csv", "jsonl"):  # a day of no rows written as nothing (prepare passes it by)
        files = [p for p in files if not blank(p)] or files
    chosen = [files[i] for i in _spread(len(files), SAMPLE_FILES)]
    each = max(1, rows // len(chosen))
    encoding = csv_encoding(chosen) if fmt == "csv" else "utf-8"
    skipped, tables = Skipped(), []
    for path in chosen:
        passed = Skipped()
        table = _file_sample(
            path, fmt, delimiter, each, columns, passed, encoding, decimal, escape, views
        )
        tables.append(_unseparated(table, thousands, decimal) if thousands else table)
        if passed.lines:
            skipped.lines += passed.lines
            skipped.first = skipped.first or f"{path.name}: {passed.first}"
    for path, table in zip(chosen, tables, strict=True):
        if fault := text_fault(table, None):  # (its rows spread over the file: none named)
            raise ConfigError("SOURCE", f"{path}: {fault}")
    # binary columns as their text where they hold text (Spark's), else left out as bytes;
    # the columns of the folders they are in (date=2024-05-07/); objects' fields (user.id)
    tables = [
        with_fields(
            with_partitions(
                binary_as_text(table, valid_only=True), (partitions or {}).get(path, {})
            )
        )
        for path, table in zip(chosen, tables, strict=True)
    ]
    keyed = _keyed_names(tables)  # (a map's keys: known only from its rows)
    if made := [*keyed, *_list_fields(tables)]:
        tables = [with_fields(table, made) for table in tables]
    joined = _joined(tables)
    if not len(joined):
        read = ", ".join(p.name for p in chosen)
        raise ConfigError("SOURCE", f"the files read have no rows ({read})")
    absent = {
        column: next(p for p, t in zip(chosen, tables, strict=True) if column not in t.column_names)
        for column in joined.column_names
        if any(column not in t.column_names for t in tables)
    }
    return Sample(joined, chosen, absent, skipped, encoding, keyed)


def _keyed_names(tables: list[pa.Table]) -> dict[str, str]:
    """Each keyed column's (a map, a list of ``{key, value}`` objects: ``keyed_parts``)
    keys, as ``column.key``, held by ``MAP_KEY_SHARE`` of the tables' rows or more (the
    ``MAP_KEYS`` most held); where its values are objects, each of their fields a key holds
    a value of so often, as ``column.key.field`` (Google Analytics' ``event_params``: one
    of ``string_value``, ``int_value``, ``double_value`` a key). Each with the name its
    kind is told by (an id's, a category's): ``column.key``."""
    counts: dict[str, Counter] = {}
    rows = sum(len(table) for table in tables)
    for table in tables:
        for name, column in zip(table.column_names, table.columns, strict=True):
            if (parts := keyed_parts(column.type)) is None:
                continue
            found = counts.setdefault(name, Counter())
            for chunk in column.chunks:
                pairs = pc.list_flatten(keyed_pairs(chunk))  # (offsets-aware: a slice's)
                keys = pc.struct_field(pairs, [parts[1]])
                for leaf, held in _leaves(pc.struct_field(pairs, [parts[2]])):
                    texts = (keys if held is None else keys.filter(held)).to_pylist()
                    found.update((str(key), leaf) for key in texts if key is not None)
    return {
        f"{name}.{key}{leaf}": f"{name}.{key}"
        for name, found in counts.items()
        for (key, leaf), count in found.most_common(MAP_KEYS)
        if count >= MAP_KEY_SHARE * rows
    }


def _list_fields(tables: list[pa.Table]) -> list[str]:
    """Each field of a column of lists of objects (``items.item_id``: each row's objects'
    values of it, a list), its objects' objects' fields likewise (``items.geo.country``);
    not a history's (objects of an item and a time) nor a keyed column's."""
    found: dict[str, None] = {}

    def walk(prefix: str, kind: pa.DataType) -> None:
        for part in kind:
            if pa.types.is_struct(part.type):
                walk(f"{prefix}{part.name}.", part.type)
            else:
                found[prefix + part.name] = None

    for table in tables:
        for name, kind in zip(table.column_names, table.schema.types, strict=True):
            if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or keyed_parts(kind):
                continue
            objects = kind.value_type
            if pa.types.is_struct(objects) and not {"item", "time"} <= set(objects.names):
                walk(f"{name}.", objects)
    return list(found)


def _leaves(values: pa.Array, prefix: str = "") -> Iterator[tuple[str, pa.Array | None]]:
    """A keyed column's values' fields that are not objects, as ``.field`` (deeper ones
    ``.field.inner``), each with where it holds a value; a value that is not an object as
    ``""``, held wherever its key is (None)."""
    if not pa.types.is_struct(values.type):
        yield prefix, None
        return
    for index, part in enumerate(values.type):
        child = pc.struct_field(values, [index])
        if pa.types.is_struct(part.type):
            yield from _leaves(child, f"{prefix}.{part.name}")
        else:
            yield f"{prefix}.{part.name}", pc.is_valid(child)


def _joined(tables: list[pa.Table]) -> pa.Table:
    """The tables' rows in one table: a column a table lacks, or holds only nulls of, takes
    the others' type; types that differ, their common one (int64 and double: double), else
    text (a list's values, which cannot be text, left null)."""
    names = list(dict.fromkeys(c for t in tables for c in t.column_names))
    columns = {}
    for name in names:
        parts = [
            t.column(name).combine_chunks() if name in t.column_names else pa.nulls(len(t))
            for t in tables
        ]
        kinds = [a.type for a in parts if not pa.types.is_null(a.type)]
        kind = kinds[0] if kinds else pa.null()
        if any(k != kind for k in kinds):
            try:
                kind = (
                    pa.unify_schemas(
                        [pa.schema([(name, k)]) for k in kinds], promote_options="permissive"
                    )
                    .field(name)
                    .type
                )
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                kind = pa.string()
        columns[name] = pa.concat_arrays([_as_type(a, kind) for a in parts])
    return pa.table(columns)


def _as_type(array: pa.Array, kind: pa.DataType) -> pa.Array:
    if array.type == kind:  # (Arrow 25's cast of a map of nulls to itself breaks its offsets)
        return array
    try:
        return array.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.nulls(len(array), kind)


def _file_sample(
    path: Path,
    fmt: str,
    delimiter: str,
    rows: int,
    columns: list[str] | None,
    passed: Skipped,
    encoding: str = "utf-8",
    decimal: str = ".",
    escape: str | None = None,
    views: dict | None = None,
) -> pa.Table:
    """About ``rows`` rows of a file as Arrow reads them (a CSV file's text in
    ``encoding``, its numbers by their ``decimal`` mark), from ``SAMPLE_PARTS`` places spread
    over it (a column that its first rows hold nothing of, one added to a large file's rows
    later, is seen): Parquet's row groups, an uncompressed text file's bytes (a row is a
    line of CSV or JSON lines, as prepare reads them). A compressed file, read from its
    start: its first rows (at most 8 MiB of text). A line that is not a row: passed by into
    ``passed``. ``views``: how a Delta or Iceberg table's files are read."""
    try:
        if fmt in ("parquet", "orc", "avro"):
            return _columnar_sample(path, fmt, rows, (views or {}).get(path))
        names = header_names(path, delimiter, columns, encoding) if fmt == "csv" else None
        if not compressed(path) and not bare_returns(path):
            quoted = fmt == "csv" and delimiter != HIVE_DELIMITER  # (Hive's: never quoted)
            parts = spread_parts(path, rows, quoted)  # a CSV file's header first
            if fmt == "csv":
                sample = _csv_sample(
                    parts, delimiter, columns, passed, names, encoding, decimal, escape
                )
                return _untrailed(sample)
            lines = [line for part in parts for line in part if line.strip()]
            return _json_sample(lines, passed)
        if fmt == "csv":
            import pyarrow.csv as pacsv

            read = pacsv.ReadOptions(
                block_size=SAMPLE_BYTES,
                column_names=names or columns,
                skip_rows=1 if names and columns is None else 0,
                encoding=encoding,
            )
            reader = pacsv.open_csv(
                path,
                read_options=read,
                parse_options=csv_parsing(delimiter, passed, delimiter != HIVE_DELIMITER, escape),
                convert_options=_csv_nulls(decimal),
            )
            return _untrailed(_first_rows(reader, rows))
        import pyarrow.json as pajson

        try:
            options = pajson.ReadOptions(block_size=SAMPLE_BYTES)
            return _first_rows(pajson.open_json(path, read_options=options), rows)
        except pa.ArrowInvalid:  # a column mixes JSON types: read as prepare reads it
            found = itertools.islice(JsonLines(path, passed).objects(), rows)
            return _objects_table([objects for _, objects in found])
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:  # a damaged file
        reason = " ".join(arrow_reason(err).split())[:200]
        raise ConfigError("SOURCE", f"{path} is not readable as {fmt}: {reason}") from None


def _spread(count: int, parts: int = SAMPLE_PARTS) -> list[int]:
    """Up to ``parts`` of ``range(count)`` spread from the first to the last."""
    return sorted(set(np.linspace(0, count - 1, parts).round().astype(int).tolist()))


def _columnar_sample(path: Path, fmt: str, rows: int, view=None) -> pa.Table:
    """The first rows from up to ``SAMPLE_PARTS`` places spread over the file: row groups
    (Parquet), stripes (ORC) or blocks (Avro), each read on into the groups after it up to
    the next place (Avro's blocks hold a few hundred rows); ``view``: a lakehouse table's
    file's (``FileView``)."""
    file = ColumnarFile(path, fmt, view)
    if file.groups == 0:
        return file.schema.empty_table()
    places = _spread(file.groups)
    each = max(1, rows // len(places))
    spans = zip(places, [*places[1:], file.groups], strict=True)
    batches = [next(file.batches(each, groups=range(*span)), None) for span in spans]
    found = [b for b in batches if b is not None and b.num_rows]
    return pa.Table.from_batches(found) if found else file.schema.empty_table()


def _csv_sample(
    parts: list[list[bytes]],
    delimiter: str,
    columns: list[str] | None,
    passed: Skipped,
    names: list[str] | None = None,
    encoding: str = "utf-8",
    decimal: str = ".",
    escape: str | None = None,
) -> pa.Table:
    """A CSV file's parts, the header first (else ``columns`` name them; or ``names``, its
    ``header_names``), each as Arrow reads it under the header (as one block: each
    column's type from every line), joined as files' rows are; the first part's rows of too
    many or too few fields passed by into ``passed``, and any other part that does not parse
    (it may have begun inside a quoted text that breaks lines) passed by whole."""
    import pyarrow.csv as pacsv

    header: list[bytes] = []
    if columns is None:
        first = parts[0]
        at = next((i for i, line in enumerate(first) if line.strip()), len(first))
        header, parts = first[at : at + 1], [first[at + 1 :], *parts[1:]]
    if names:  # the rows read by those names, not the header's
        header, columns = [], names
    tables = []
    for i, part in enumerate(parts):
        text = as_text(header + part)
        if not text.strip() and columns is not None:
            continue
        try:
            tables.append(
                pacsv.read_csv(
                    pa.BufferReader(text),
                    read_options=pacsv.ReadOptions(
                        block_size=len(text) + 1, column_names=columns, encoding=encoding
                    ),
                    parse_options=csv_parsing(
                        delimiter, passed if i == 0 else None, delimiter != HIVE_DELIMITER, escape
                    ),
                    convert_options=_csv_nulls(decimal),
                )
            )
        except pa.ArrowInvalid:
            if i == 0:
                raise
    return _joined(tables)


def csv_encoding(files: list[Path]) -> str:
    """The encoding a draft gives CSV files: UTF-8 where the bytes a sample reads of each
    (spread over it; a compressed file's first) are UTF-8 text, else cp1252 (Windows'
    Western European, as Excel writes CSV there; Latin-1 but for 0x80-0x9F), else Latin-1
    (which any bytes are)."""
    for path in files:
        if compressed(path) or bare_returns(path):
            with pa.input_stream(path, compression="detect") as stream:
                text = stream.read(SAMPLE_BYTES)
            text = text[: text.rfind(b"\n") + 1] or text  # (a character cut at the end)
        else:
            text = b"".join(line for part in spread_parts(path, SAMPLE_ROWS, True) for line in part)
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            try:
                text.decode("cp1252")
                return "cp1252"
            except UnicodeDecodeError:
                return "iso8859-1"
    return "utf-8"


def _csv_nulls(decimal: str = "."):
    """Arrow's CSV types with its missing spellings and MySQL's and Hive's ``\\N``, as
    prepare reads a number (``raw.MISSING_NUMBER_TEXTS``): a column of numbers with some
    written so is numbers; numbers by their ``decimal`` mark."""
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(
        null_values=[*pacsv.ConvertOptions().null_values, "\\N"], decimal_point=decimal
    )


def _untrailed(table: pa.Table) -> pa.Table:
    """A CSV sample without the empty field past its header's (``header_names``)."""
    return table.drop_columns([TRAILING]) if TRAILING in table.column_names else table


def _json_sample(lines: list[bytes], passed: Skipped) -> pa.Table:
    """JSON lines as Arrow reads them in one block (``json_block``), or where a column mixes
    JSON types or a line is not an object (passed by into ``passed``), as Python's json
    reads them (``_objects_table``)."""
    try:
        return json_block(lines)
    except pa.ArrowInvalid:
        pass
    objects = []
    for line in lines:
        found, problem = json_object(line)
        if found is None:
            passed.add(f"a line {problem}")
        else:
            objects.append(found)
    return _objects_table(objects)


def _objects_table(objects: list[dict]) -> pa.Table:
    """JSON objects as a table: a column whose values mix JSON types as their text
    (``source_rows.json_batch``, as prepare reads them)."""
    columns = list(dict.fromkeys(name for found in objects for name in found))
    return pa.Table.from_batches([json_batch(objects, columns)])


def _first_rows(reader, rows: int) -> pa.Table:
    """A CSV or JSON reader's first batch's first ``rows`` rows (none: a file of a header)."""
    try:
        return pa.Table.from_batches([reader.read_next_batch()]).slice(0, rows)
    except StopIteration:
        return reader.schema.empty_table()


def infer_schema(
    sample: Sample,
    name: str,
    source: str,
    labels: list[str] | None = None,
    tz: str | None = None,
    joined: list[tuple[str, str, str]] = (),
) -> Draft:
    """A schema file for rows like ``sample``'s; ``source``: the schema's source mapping's
    inside (``format: csv, path: ...``); ``labels``: the label columns, else those 0/1
    columns named as labels are (none where ``joined`` gives labels); ``tz``: the zone of
    the hours and weekdays derived (UTC without one); ``joined``: labels from other logs,
    each its name, its key column and its entry."""
    draft = Draft("")
    table = sample.table
    columns = {c: _readable(table.column(c).combine_chunks()) for c in table.column_names}
    fields: dict[str, str] = {}  # each column's field name: its own, or one made of it
    for column in columns:
        fields[column] = (
            column if is_name(column) else field_name(column, {*columns, *fields.values()})
        )
    # labels and keys: columns every file holds (a feature may be missing from a file)
    whole = {c: a for c, a in columns.items() if c not in sample.absent}
    binary = [c for c, a in whole.items() if _binary(a)]
    chosen = _labels(labels, whole, binary, fields) if labels or not joined else []
    labels = list(dict.fromkeys(rule.column for rule in chosen))
    entries = [entry for _, _, entry in joined]  # (their keys drafted as any column)
    for rule in chosen:
        column, kind = rule.column, str(columns[rule.column].type)
        named = f"name: {rule.name}, column: {quoted(column)}"
        if rule.at_least is not None:
            entries.append(f"{{{named}, at_least: {rule.at_least:g}}}")
            why = f"1 where >= {rule.at_least:g}"
        elif rule.one_of:
            entries.append(f"{{{named}, one_of: [{', '.join(map(quoted, rule.one_of))}]}}")
            share = _share_of(columns[column], rule.one_of)
            why = f"1 where it is {' or '.join(rule.one_of)}: {share:.2%} of the rows"
        else:
            entries.append(column if rule.name == column else f"{{{named}}}")
            draft.reasons.append((column, kind, "label", "0/1 values"))
            continue
        draft.reasons.append((column, kind, f"label {rule.name}", why))
    keys: dict[str, str] = {}
    units = {c: u for c, a in whole.items() if c not in labels and (u := _time_unit(fields[c], a))}
    unit = "s"  # the source's numeric times': the key's
    if units:
        keys["timestamp"] = time = next(iter(units))
        unit = units[time] if units[time] != "date-time" else "s"
        why = "a time: the split is by time" + f" (in {UNIT_NAMES[unit]})" * (unit != "s")
        draft.reasons.append((time, str(columns[time].type), "keys.timestamp", why))
        if unit != "s":
            source += f", time_unit: {unit}"
    for key, pattern in (("user", USER_NAME), ("request", REQUEST_NAME)):
        found = [
            c
            for c in whole
            if c not in labels
            and pattern.match(fields[c].replace(".", "_"))  # (user.id: an object's field)
            and _is_text_or_integer(whole[c])
        ]
        if found:
            keys[key] = found[0]
    items = next(
        (
            fields[c]
            for c in columns
            if ITEM_NAME.search(fields[c]) and _is_text_or_integer(columns[c])
        ),
        None,
    )
    keyed = {key: fields[column] for key, column in keys.items()}  # as fields are named
    features: list[str] = []
    for column, array in columns.items():
        if column in labels or column == keys.get("timestamp"):
            continue
        if column == keys.get("request"):
            draft.reasons.append((column, str(array.type), "keys.request", "a request's id"))
            continue
        if units.get(column) == "date-time":  # (a date partition's folders: date=2024-05-07)
            why = (
                f"a date or time beside keys.timestamp ({keys['timestamp']}): as a category, "
                "its days would be ones later rows never hold"
            )
            draft.reasons.append((column, str(array.type), "left out", why))
            continue
        if units.get(column, unit) not in (unit, "date-time"):
            why = (
                f"a time in {UNIT_NAMES[units[column]]}? the source's numeric times are in "
                f"{UNIT_NAMES[unit]} (time_unit, by {keys['timestamp']})"
            )
            draft.reasons.append((column, str(array.type), "left out", why))
            continue
        try:
            told_by = sample.keyed.get(column)  # (a keyed value's field: by its key's name)
            line, kind, why = _feature(fields[column], array, len(table), items, keyed, told_by)
            if line and fields[column] != column:  # read from the column named otherwise
                made = f"{{name: {fields[column]}, "
                line = line.replace(made, f"{made}from: {quoted(column)}, ", 1)
                why += f"; as the field {fields[column]} (a schema's names: {NAME_RULE})"
        except pa.ArrowNotImplementedError:  # a type Arrow's compute functions do not take
            line, kind, why = None, "left out", f"of type {array.type}"
        if column == keys.get("user"):
            why = f"a user's id (keys.user); {why}"
        if column in sample.absent and line:
            why += f"; not in {sample.absent[column].name}: missing on its rows"
        draft.reasons.append((column, str(array.type), kind, why))
        if line:
            features.append(line)
    if "timestamp" in keys:  # the hour and weekday of each row's time, as MovieLens's
        time = keys["timestamp"]
        days = _whole_days(columns[time], unit)  # dates: no hour to learn from
        for part in ("weekday",) if days else ("hour", "weekday"):
            field = part if part not in fields.values() else f"{fields[time]}_{part}"
            zone = f", tz: {tz}" if tz else ""
            made = f"type: categorical, from: {quoted(time)}, derive: {part}{zone}"
            features.append(f"{{name: {field}, {made}}}")
            why = f"the {part} ({tz or 'UTC'}) of each row's {time}, as a category"
            draft.reasons.append((field, "", "categorical", why))
    split = (
        "{method: time, valid: 0.1, test: 0.1}"
        if "timestamp" in keys
        else "{method: hash, valid: 0.1, test: 0.1}"
        if "user" in keys
        else "{method: random, valid: 0.1, test: 0.1}"
    )
    lines = [
        f"# A draft from {len(table):,} rows of its source (nas data schema): read it, then",
        "# nas data prepare THIS_FILE (docs/models-and-data.md, 'Your own data').",
        f"name: {name}",
        f"source: {{{source}}}",
        f"labels: [{', '.join(entries)}]",
        f"keys: {{{', '.join(f'{k}: {quoted(v)}' for k, v in keys.items())}}}",
        f"split: {split}",
        "features:",
        *(f"  - {line}" for line in features),
    ]
    if not features:
        raise ConfigError("SOURCE", "no column but the labels and keys could be a feature")
    draft.text = "\n".join(lines) + "\n"
    return draft


def _feature(
    column: str,
    array: pa.Array,
    rows: int,
    items: str | None,
    keys: dict[str, str],
    told_by: str | None = None,
) -> tuple[str | None, str, str]:
    """A column's feature line (None: left out), its kind and why; ``told_by``: the name
    its kind is told by (an id's, a category's), where not its own."""
    told_by = told_by or column
    kind = array.type
    side = ", side: request" if column == keys.get("user") else ""
    if keyed_parts(kind):
        held = "a map" if pa.types.is_map(kind) else "a list of {key, value} objects"
        why = f"its keys in {MAP_KEY_SHARE:.0%} of the rows or more are columns of their own"
        return None, "left out", f"{held}: {why}"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _lists(column, array, items)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        texts = pc.drop_null(array)
        starts = pc.utf8_slice_codeunits(texts, 0, 2)
        if len(texts) and pc.mean(pc.is_in(starts, pa.array(["[[", "[{"]))).as_py() > 0.5:
            if items:  # JSON text of [item, action, time] triples or objects (a CSV's cell)
                return (f"{{name: {column}, type: sequence, vocab_of: {items}}}", "sequence",
                        f"JSON text of events of {items}'s ids")  # fmt: skip
            return None, "left out", "JSON text of lists, and no item column to read them by"
        for sep in SEPARATORS:
            if len(texts) and pc.mean(pc.match_substring(texts, sep)).as_py() >= 0.1:
                lists = pc.split_pattern(texts, sep)
                return _lists(column, lists, items, sep)
    if pa.types.is_struct(kind):
        return None, "left out", "an object: its fields are columns of their own"
    if pa.types.is_null(kind):
        return None, "left out", f"of type {kind}"
    if pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
        kind = array.type
    distinct = pc.count_distinct(array).as_py()
    if distinct <= 1:
        return None, "left out", "one value in the sample: nothing to learn from"
    numbers = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    integers = pa.types.is_integer(kind)
    named = (
        distinct <= FEW_VALUES
        or ID_NAME.search(told_by)
        or ITEM_NAME.search(told_by)
        or CATEGORY_NAME.search(told_by)
        or column in keys.values()
    )
    if numbers and not (integers and named):
        x = pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        low = np.nanmin(x) if np.isfinite(x).any() else 0.0
        transform = "log1p" if low >= 0 else "standardize"
        why = "numbers >= 0 (log1p)" if low >= 0 else "numbers of both signs (standardize)"
        if integers:  # an amount by its name; ids named otherwise are the user's to say
            why += "; if they are ids, type: categorical"
        return f"{{name: {column}, type: dense, transform: {transform}}}", "dense", why
    if not (numbers or _is_text_or_integer(array) or pa.types.is_boolean(kind)):
        return None, "left out", f"of type {kind}"
    if distinct > 0.5 * rows and rows >= 1000:
        return (f"{{name: {column}, type: categorical, hash: {HASH_SIZE}{side}}}", "categorical",
                f"{distinct:,} values in {rows:,} rows: hashed")  # fmt: skip
    return (f"{{name: {column}, type: categorical, min_freq: 2{side}}}", "categorical",
            f"{distinct:,} values; those seen once in train are one unknown id")  # fmt: skip


def _lists(
    column: str, array: pa.Array, items: str | None, sep: str | None = None
) -> tuple[str | None, str, str]:
    """A list column's (or text's split at ``sep``) feature line, kind and why."""
    values = pc.list_flatten(array)
    if pa.types.is_struct(values.type):
        fields = {f.name for f in values.type}
        if set(EVENT_KEYS) <= fields and items:
            return (f"{{name: {column}, type: sequence, vocab_of: {items}}}", "sequence",
                    f"events ({', '.join(EVENT_KEYS)}) of {items}'s ids")  # fmt: skip
        if {"item", "time"} <= fields and items:  # (viewed items and their times)
            fields_line = "event_fields: {action: null}"
            line = f"{{name: {column}, type: sequence, vocab_of: {items}, {fields_line}}}"
            return (line, "sequence", f"events (item, time) of {items}'s ids; no action: one "
                    "kind of action")  # fmt: skip
        if {"item", "time"} <= fields:  # (``_list_fields`` leaves a history's fields be)
            return None, "left out", "events of items, and no item column to read their ids by"
        return None, "left out", "a list of objects: their fields are lists of their own"
    if not _is_text_or_integer(values):
        return None, "left out", f"a list of {values.type}, not of ids"
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    width = max(1, int(np.percentile(lengths, 99))) if len(lengths) else 1
    split, sep = (f" split at {sep!r}", f", sep: {json.dumps(sep)}") if sep else ("", "")
    if items and HISTORY_NAME.search(column):
        return (f"{{name: {column}, type: sequence, vocab_of: {items}, max_len: {width}{sep}}}",
                "sequence", f"a list{split} of {items}'s ids, named as a history")  # fmt: skip
    return (f"{{name: {column}, type: multi_hot, max_len: {width}{sep}}}", "multi_hot",
            f"a list{split} of ids, {width} kept (the 99th percentile)")  # fmt: skip


CODES_SEEN = 10  # values of one width, each grouped, that make a column codes (555 123)
LABEL_FLAG = re.compile(
    r"(?:(?P<name>[^=>]+)=)?(?P<column>[^=>]+?)(?:(?P<op>>=|==)(?P<operand>.+))?"
)
LABEL_FORMS = (
    "COLUMN, NAME=COLUMN>=NUMBER, NAME=COLUMN==VALUE|VALUE... or NAME=KEY in PATH (a label "
    "from another log)"
)
EVENT_KINDS = ("event", "action", "outcome", "result", "status", "type")  # most telling first


def _labels(
    given: list[str] | None, columns: dict[str, pa.Array], binary: list[str], fields: dict
) -> list[LabelRule]:
    """How each label is read: as ``--labels`` gives them (``click``, ``like=rating>=4``,
    ``purchase=event_name==purchase``), else the 0/1 columns named as labels are; a label
    of a column whose header is no name is named as its field (``fields``)."""
    if not given:
        found = [LabelRule(fields[c], c) for c in binary if fields[c].lower() in LABEL_NAMES]
        if not found:
            have = f"0/1 columns: {', '.join(binary)}" if binary else "no column holds only 0/1"
            raise ConfigError(
                "--labels", f"name the label column(s) ({have}; a label from a number: "
                f"--labels like=rating>=4; {_text_label_hint(columns)}; a label from another "
                "log: --labels click=KEY in PATH)"
            )  # fmt: skip
        return found
    out = []
    for text in given:
        read = _label_flag(text, columns)
        name, column, op, operand = read or ("", "", None, None)
        name = name or fields.get(column, column)
        if read is None or not is_name(name):
            raise ConfigError("--labels", f"{shown(text)} is not {LABEL_FORMS}")
        if column not in columns:
            raise ConfigError(
                "--labels", f"{column!r} is not a column; its columns: {', '.join(columns)}"
            )
        if op is None:
            if column not in binary:
                raise ConfigError(
                    "--labels", f"{column!r} holds values other than 0 and 1 (a threshold: "
                    f"--labels NAME={column}>=NUMBER; values: --labels NAME={column}==VALUE)"
                )  # fmt: skip
            out.append(LabelRule(name, column))
        elif op == "==":
            out.append(_text_label(text, name, column, operand, columns[column]))
        else:
            out.append(LabelRule(name, column, _threshold(text, operand, columns[column])))
    return out


def _threshold(text: str, operand: str, array: pa.Array) -> float:
    try:
        at_least = float(operand)
    except ValueError:
        at_least = math.nan
    kind = array.type
    if not math.isfinite(at_least) or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise ConfigError("--labels", f"{shown(text)}: a threshold is a number on a numeric column")
    return at_least


def _text_label(text: str, name: str, column: str, operand: str, array: pa.Array) -> LabelRule:
    """A label 1 where ``column``'s value is one of ``operand``'s (``|`` between them),
    refused where the sample holds none of them (a misspelling, most likely)."""
    values = tuple(dict.fromkeys(v for v in operand.split("|") if v))
    if not values:
        raise ConfigError("--labels", f"{shown(text)} names no value after == (VALUE|VALUE...)")
    if not _is_text_or_integer(array):
        raise ConfigError(
            "--labels", f"{shown(text)}: values (==VALUE|VALUE...) are of a column of text "
            f"or integers; {column!r} is of {array.type}"
        )  # fmt: skip
    if _share_of(array, values) == 0:
        raise ConfigError(
            "--labels", f"no row of the sample has {column} {' or '.join(map(shown, values))}; "
            f"its values, the most held first: {common_values(array)}"
        )  # fmt: skip
    return LabelRule(name, column, one_of=values)


def _share_of(array: pa.Array, values: tuple[str, ...]) -> float:
    """The share of the rows whose value (as text) is one of ``values``."""
    if not len(array):
        return 0.0
    found = pc.is_in(pc.cast(array, pa.string()), value_set=pa.array(values, pa.string()))
    return pc.sum(pc.fill_null(found, False).cast(pa.int64())).as_py() / len(array)


def _text_label_hint(columns: dict[str, pa.Array]) -> str:
    """How to make a label of a column of events' kinds, where one is: GA4's event_name."""
    kinds = [
        c
        for word in EVENT_KINDS
        for c, a in columns.items()
        if word in c.lower() and _is_text_or_integer(a) and 2 <= len(pc.unique(a)) <= 100
    ]
    if not kinds:
        return "a label from values: --labels NAME=COLUMN==VALUE"
    column = kinds[0]
    return (
        f"a label from values: --labels NAME={column}==VALUE, its values the most held first: "
        f"{common_values(columns[column])}"
    )


def _label_flag(text: str, columns: dict) -> tuple[str, str, str | None, str | None] | None:
    """``--labels``' ``text`` as its name ("" where it gives none), column, and operator
    (``>=``, ``==`` or None: a 0/1 column) with its operand: of its readings as COLUMN,
    COLUMN>=NUMBER, COLUMN==VALUE and those with NAME= first, the first whose column is one
    of ``columns`` (a header may hold "=" or ">="), else as ``LABEL_FLAG`` reads it; None
    where that does not."""
    named = [("", text)]
    if "=" in text and is_name(text.split("=", 1)[0]):  # a name holds no "="
        named.append(tuple(text.split("=", 1)))
    readings = []
    for name, rest in named:
        readings.append((name, rest, None, None))
        for op in ("==", ">="):
            if op in rest:
                column, operand = rest.split(op, 1) if op == "==" else rest.rsplit(op, 1)
                readings.append((name, column, op, operand))
    if found := next((r for r in readings if r[1] in columns), None):
        return found
    match = LABEL_FLAG.fullmatch(text)
    return (match["name"] or "", match["column"], match["op"], match["operand"]) if match else None


def _readable(array: pa.Array) -> pa.Array:
    """The column as Arrow's compute functions read it: half floats as floats; and as the
    draft judges it: text of integers as integers (BigQuery's JSON writes an INT64 as text,
    ``"1730800000000000"``; not codes with a leading zero, ``"01234"``), as prepare reads
    a number or a time from text."""
    if pa.types.is_float16(array.type) or (
        pa.types.is_list(array.type) and pa.types.is_float16(array.type.value_type)
    ):
        return array.cast(pa.list_(pa.float32()) if pa.types.is_list(array.type) else pa.float32())
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        texts = pc.drop_null(array)
        if len(texts) and pc.all(pc.match_substring_regex(texts, INTEGER_TEXT)).as_py():
            return pc.cast(array, pa.int64())
    return array


def _binary(array: pa.Array) -> bool:
    kind = array.type
    if pa.types.is_boolean(kind):
        return True
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)) or array.null_count:
        return False
    return set(pc.unique(array).to_pylist()) == {0, 1}


def _time_unit(column: str, array: pa.Array) -> str | None:
    """A column of times: "date-time" (timestamps, dates, ISO 8601 text), or, named as a
    time, numbers of seconds, or of milliseconds, microseconds or nanoseconds (``PER_SECOND``)
    from 1973 to 2286; else None."""
    kind = array.type
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return "date-time"
    if not TIME_NAME.search(column) or array.null_count:
        return None
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        low, high = (x.as_py() for x in pc.min_max(array).values())
        if low is None:
            return None
        return next(
            (u for u, n in PER_SECOND.items()
             if UNIX_SECONDS[0] * n <= low and high < UNIX_SECONDS[1] * n),
            None,
        )  # fmt: skip
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):  # ISO 8601 text
        for moment in DATE_TIMES:  # as prepare reads them
            try:
                pc.cast(array, moment)
                return "date-time"
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
    return None


def _whole_days(array: pa.Array, unit: str) -> bool:
    """Whether a time column (``_time_unit``; numbers in ``unit``) holds dates, each time
    at midnight (UTC): a date partition's, a day's date written as a time."""
    kind = array.type
    if pa.types.is_date(kind):
        return True
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        try:
            array = pc.cast(array, DATE_TIMES[0])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            array = pc.cast(array, DATE_TIMES[1])  # zoned text
        kind = array.type
    if pa.types.is_timestamp(kind):
        day = np.int64(86_400) * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[kind.unit]
        ticks = pc.cast(array.cast(pa.timestamp(kind.unit)), pa.int64())
    else:
        day = np.int64(86_400 * PER_SECOND[unit])
        ticks = pc.cast(array, pa.int64(), safe=False)
    values = ticks.drop_null().to_numpy(zero_copy_only=False)
    return len(values) > 0 and bool((values % day == 0).all())


def _is_text_or_integer(array: pa.Array) -> bool:
    kind = array.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)


def field_name(column: str, taken: set[str]) -> str:
    """A schema name for a column whose own is none ("User ID" -> "User_ID"): its runs of
    other characters as "_", unlike any in ``taken``."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", column).strip("_.-")[:90] or "column"
    base = base if base[0].isalnum() else f"c{base}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def quoted(text: str) -> str:
    """Text as a YAML flow scalar: as it is where plain and YAML reads it back as this text
    (not ``*.csv``, an alias to YAML; not ``2024``, ``true`` or ``null``), else in double
    quotes."""
    import yaml

    plain = re.fullmatch(r"[A-Za-z0-9_./*-]+", text) and not text.startswith("*")
    return text if plain and yaml.safe_load(text) == text else json.dumps(text)
