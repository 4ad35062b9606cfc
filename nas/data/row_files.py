"""Raw rows from the files a user scores (one file, a folder of a day's parts, a glob
pattern), read a batch at a time: a day of logs never sits in memory whole.

Formats, by the file's suffix: JSON lines (``.jsonl``), a JSON array or one of MLflow's scoring
request forms (``.json``, read whole: a request), CSV or TSV (every value a string, as a
serving system's text would be; a header names the columns; a CSV file's fields split by
the delimiter its first lines are: ``sniffed_delimiter``), Parquet, ORC and Avro (each batch
also as Arrow). A file without a suffix, as Hive names them, is known by its first bytes
(``by_magic``: text too, where the user named it or a job's part name is its name). A
UTF-8 byte-order mark is skipped. A line that is not JSON, a quote left open, a
file that is not Parquet, text that is not UTF-8: ``ConfigError`` naming the flag, the file
and the line or row. A folder's Hive-style partition folders (``date=2024-05-07/``) are
columns of their files' rows.

What every reader of a team's files shares lives here too, so that a draft, prepare and
serving read the same rows alike: the partitions (``partitions``, ``with_partitions``),
Parquet's binary columns as text (``binary_as_text``) and the UTF-8 check (``text_fault``).
"""

from __future__ import annotations

import copy
import csv
import io
import itertools
import json
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nas.core.errors import ConfigError, shown
from nas.core.user_files import require_file
from nas.data.avro_file import is_avro
from nas.data.lakehouse import table_files
from nas.data.table_files import (
    KEYS,
    FileView,
    Names,
    children,
    inside_table,
    names_by_id,
    table_above,
    table_format,
)

SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet", ".orc", ".avro")
# files of typed columns, by their names (Avro's rows are records, but typed alike)
COLUMNAR = {".parquet": "Parquet", ".orc": "ORC", ".avro": "Avro"}
DELIMITERS = {".csv": ",", ".tsv": "\t"}
TEXTS = (".csv", ".tsv", ".jsonl", ".json")  # text files, which may be compressed (CODECS)
# a text file's compression by its name's last suffix: Arrow's codec (its readers' names)
CODECS = {".gz": "gzip", ".bz2": "bz2", ".lz4": "lz4", ".zst": "zstd", ".br": "brotli"}
TEXT_NAMES = ("", ".txt", ".dat")  # files whose names say no layout: known by their bytes
# the delimiters a CSV file's lines are told apart by (sniffed_delimiter): Excel's two (";"
# where the decimal mark is a comma), TSV's, pipes, and Hive's text tables' Ctrl-A
DELIMITER_CHOICES = (",", ";", "\t", "|", "\x01")
HIVE_DELIMITER = "\x01"  # Hive's text tables' (Ctrl-A), whose fields are never quoted
# parts a job writes without a format's suffix: Hive's 000000_0 (and 000000_0_copy_1), Spark's
# and MapReduce's part-00000 and part-r-00000; such a file is read by its bytes (by_magic)
PART_NAME = re.compile(r"\d+_\d+(_copy_\d+)?|part-[\w.-]+")
BATCH_ROWS = 65_536  # rows scored at once: a few hundred MB at most with long histories
# MLflow's scoring request forms: a .json file may hold its rows under one of these keys, as
# a list of row objects (``{"dataframe_records": [...]}``), or (``instances``, ``inputs``) as
# columns, each a list of values (``{"inputs": {"site": [...], ...}}``); or as pandas' split
# form, ``{"dataframe_split": {"columns": [...], "data": [[...], ...]}}``.
JSON_ROW_KEYS = ("dataframe_records", "instances", "inputs")
JSON_SPLIT_KEY = "dataframe_split"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # a partition folder's value for null


@dataclass
class RowBatch:
    """Consecutive rows of one file: ``first`` is the number of the first of them in
    ``file`` (1-based)."""

    first: int
    table: Any = None  # a Parquet file's rows as an Arrow table
    _rows: list[Any] | None = field(default=None, repr=False)
    file: Path | None = None

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else self.table.num_rows

    def head(self, count: int) -> list[Any]:
        """The first ``count`` rows, as ``rows`` gives them."""
        if self._rows is not None:
            return self._rows[:count]
        return self.table.slice(0, count).to_pylist()

    def rows_of(self, columns: list[str]) -> list[Any]:
        """Each row with only ``columns`` (those it has): its labels, say."""
        if self._rows is not None or self.table is None:
            return self.rows
        present = [name for name in dict.fromkeys(columns) if name in self.table.column_names]
        if not present:
            return [{}] * len(self)
        return self.table.select(present).to_pylist()

    @property
    def rows(self) -> list[Any]:
        """Each row as a mapping of column to value (lists stay lists)."""
        if self._rows is None:
            self._rows = self.table.to_pylist()
        return self._rows


class RowFiles:
    """The files of raw rows a flag names: one file, a folder's files (its subfolders'
    too, as Spark writes a day's parts; names starting with "." or "_" skipped), or a glob
    pattern, all of one format, read in the order of their names. ``done`` and ``total``
    measure the reading in one unit: rows of Parquet, bytes of the text formats."""

    def __init__(self, given: str | Path, flag: str = "--input", columns: list[str] | None = None):
        # columns: a CSV file's, in order, where its first line is a row, not a header (a
        # model trained on CSV without a header reads its rows so)
        self.given, self.flag, self.columns = str(given), flag, columns
        self.encoding = "utf-8"  # a CSV file's text (a model's source's: read_as)
        self.delimiter: str | None = None  # a model's CSV source's, where not "," (read_as)
        self.decimal_commas: set[str] = set()  # number columns written 3,14 (read_as)
        self.thousands: str | None = None  # their thousands separator, passed by (read_as)
        # Python's csv reading of a model's CSV source's quoting and escape (read_as)
        self.dialect: dict[str, Any] = {}
        self.numbers: set[str] = set()  # the number columns a model reads (read_as)
        self.views: dict[Path, FileView] = {}  # how a Delta or Iceberg table's file is read
        root = pattern_root(self.given)
        if fmt := table_format(Path(self.given)):  # the files its log or metadata names
            table = table_files(Path(self.given), fmt, None, flag)
            kinds = dict.fromkeys(table.files, ".parquet")
            self.partitions, self.views = table.partitions, table.views
        elif found := table_above(root):
            table, fmt = found
            raise ConfigError(flag, inside_table(given, table, fmt, f"name its folder, {table}"))
        else:
            kinds = _named_files(self.given, flag)
            # a folder's or a pattern's Hive-style partitions (date=2024-05-07/...), per file
            self.partitions = {path: partitions(path, root) for path in kinds}
        self.paths = list(kinds)
        suffixes = sorted(set(kinds.values()))
        if len(suffixes) > 1:
            example = Path(given) / f"*{suffixes[0]}"
            raise ConfigError(
                flag,
                f"{given} holds files of several formats ({', '.join(suffixes)}): name those "
                f"of one with a pattern, e.g. '{example}'",
            )
        self.suffix = suffixes[0]
        self.done = 0
        if self.suffix in COLUMNAR:  # each part's footer only: a day may have thousands
            footers = [self._columnar(path) for path in self.paths]
            self.total = sum(footer.rows for footer in footers)
            schema = self._one_schema([footer.schema for footer in footers])
            keys = dict.fromkeys(k for found in self.partitions.values() for k in found)
            self.schema = with_partitions(schema.empty_table(), dict.fromkeys(keys)).schema
        else:
            self.total = sum(path.stat().st_size for path in self.paths)

    def read_as(self, info: dict) -> None:
        """CSV read as a model's source was (its ``info``): without a header, by its
        columns; in its encoding; its delimiter first where a file's lines could be split
        by several (``sniffed_delimiter``); its numbers by their decimal mark and thousands
        separator."""
        self.columns = info.get("csv_columns")
        self.encoding = info.get("csv_encoding") or "utf-8"
        self.delimiter = info.get("csv_delimiter")
        self.thousands = info.get("csv_thousands")
        self.dialect = {
            "quoting": csv.QUOTE_MINIMAL if info.get("csv_quoting", True) else csv.QUOTE_NONE,
            "escapechar": info.get("csv_escape"),
        }
        columns = info.get("raw_form", {}).get("columns", {})
        self.numbers = {c for c, form in columns.items() if form["type"] == "number"}
        self.numbers |= {  # a label's by a threshold too
            label["column"]
            for label in info.get("labels") or ()
            if label.get("at_least") is not None
        }
        if info.get("csv_decimal") == ",":
            self.decimal_commas = set(self.numbers)

    def anew(self) -> RowFiles:
        """Another reader of the same files, read as this one reads them, from the start."""
        again = copy.copy(self)
        again.done = 0
        return again

    def batches(self, size: int = BATCH_ROWS) -> Iterator[RowBatch]:
        """Every file's rows, ``size`` at a time (a batch within one file; none empty)."""
        for path in self.paths:
            if self.suffix in COLUMNAR:
                batches = self._columnar_batches(path, size)
            else:
                batches = self._text_batches(path, size)
            for batch in batches:
                batch.file = path
                yield batch

    def _text_batches(self, path: Path, size: int) -> Iterator[RowBatch]:
        rows: list[Any] = []
        first = 1
        found = self.partitions[path]
        for row in self._text_rows(path):
            if found and isinstance(row, dict):  # (a row that is not an object is named later)
                row = {**found, **row}
            rows.append(row)
            if len(rows) == size:
                yield RowBatch(first, _rows=rows)
                first, rows = first + size, []
        if rows:
            yield RowBatch(first, _rows=rows)

    # --- Parquet, ORC and Avro ----------------------------------------------------------------

    def _columnar(self, path: Path) -> ColumnarFile:
        """The file's footer, its errors ``ConfigError`` on ``path``."""
        with _columnar_errors(self.flag, path, self.suffix):
            return ColumnarFile(path, self.suffix[1:], self.views.get(path))

    def _one_schema(self, schemas: list):
        """The columns every part's rows are given with: the first part's, then any column
        a later part adds (missing in the others); a column whose type changes from part to
        part beyond a widening (int32 to int64) is refused, naming the part."""
        import pyarrow as pa

        schema = schemas[0]
        for path, part in zip(self.paths[1:], schemas[1:], strict=True):
            try:
                schema = pa.unify_schemas([schema, part], promote_options="permissive")
            except (pa.ArrowException, TypeError, ValueError) as err:
                reason = str(err).strip().splitlines()[0]
                raise ConfigError(
                    self.flag,
                    f"{path}: its columns disagree with those of {self.paths[0]} ({reason})",
                ) from None
        return schema

    def _columnar_batches(self, path: Path, size: int) -> Iterator[RowBatch]:
        import pyarrow as pa

        first = 1
        with _columnar_errors(self.flag, path, self.suffix):
            for batch in self._columnar(path).batches(size):
                if batch.num_rows == 0:
                    continue
                if fault := text_fault(batch, first):
                    raise ConfigError(self.flag, f"{path}: {fault}")
                table = with_partitions(pa.Table.from_batches([batch]), self.partitions[path])
                if len(self.paths) > 1:
                    table = _conformed(table, self.schema)
                self.done += batch.num_rows  # read: before its rows are scored
                yield RowBatch(first, table=table)
                first += batch.num_rows

    # --- text ---------------------------------------------------------------------------------

    def _text_rows(self, path: Path) -> Iterator[Any]:
        if self.suffix == ".json":
            yield from self._json_rows(path)
            return
        lines = self._lines(path)
        if self.suffix in DELIMITERS:
            yield from self._csv_rows(path, lines)
            return
        seen = False
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if not seen and line.lstrip().startswith("["):  # (pandas' to_json(orient="records"))
                raise ConfigError(
                    self.flag,
                    f"{path}: holds a JSON array, not JSON lines (an object a line): name it "
                    f"{path.name.split('.jsonl')[0]}.json, a file read whole",
                )
            seen = True
            try:
                yield json.loads(line)
            except ValueError as err:
                raise ConfigError(self.flag, f"{path} line {number}: not JSON ({err})") from None

    def _csv_rows(self, path: Path, lines: Iterator[str]) -> Iterator[dict[str, str | None]]:
        """A CSV file's rows by its header (a name it repeats numbered: ``numbered``), or by
        ``columns`` where its first line is not them (a row with fewer values: the rest
        missing; one whose line ends with the delimiter, an empty value past the last
        column: without it). A TSV file's fields are split by tabs; a CSV file's, by the
        delimiter its first lines are split by (``sniffed_delimiter``: Excel's ";", Hive's
        Ctrl-A)."""
        delimiter = DELIMITERS[self.suffix]
        first_lines = list(itertools.islice(lines, 50))
        lines = itertools.chain(first_lines, lines)
        if self.suffix == ".csv":
            delimiter = sniffed_delimiter(first_lines, self.delimiter or delimiter)
        first = next(lines, None)
        while first is not None and not first.strip():  # (blank lines: no rows)
            first = next(lines, None)
        if first is None:
            return
        header = next(csv.reader([first], delimiter=delimiter, **self.dialect), [])
        names, sample = None, first_lines
        if self.columns is not None:
            names = None if header == self.columns else self.columns
            lines = itertools.chain([first], lines)
        elif len(set(header)) < len(header):  # a name twice: numbered, as prepare reads it
            names, sample = numbered(header), first_lines[first_lines.index(first) + 1 :]
        else:
            lines = itertools.chain([first], lines)
        commas = self._comma_columns(sample, delimiter, names)
        # thousands passed by: "." only in a file that writes decimal commas (another writes
        # 3.14), any other in every number column
        separated = commas if self.thousands == "." else self.numbers if self.thousands else ()
        reader = csv.DictReader(lines, names, delimiter=delimiter, strict=True, **self.dialect)
        try:
            for row in reader:
                if row.get(None) == [""]:  # a delimiter ending the line (source_rows.TRAILING)
                    del row[None]
                for column in separated:
                    if row.get(column):
                        row[column] = row[column].replace(self.thousands, "")
                if commas:
                    self._pointed(row, commas, path, reader.reader.line_num)
                if None in row:
                    values = len(row) - 1 + len(row[None])
                    raise ConfigError(
                        self.flag,
                        f"{path} line {reader.reader.line_num}: {values} values, more "
                        f"than the {len(reader.fieldnames)} columns of "
                        f"{'its header' if names is None else 'the source the model read'}",
                    )
                yield row
        except csv.Error as err:
            where = f"{path} line {reader.reader.line_num}"
            raise ConfigError(self.flag, f"{where}: {err}") from None

    def _comma_columns(self, lines: list[str], delimiter: str, names: list[str] | None) -> set[str]:
        """The number columns a file writes with a decimal comma (3,14): a model's source's
        (``read_as``), in a file split by another delimiter than "," whose first ``lines``
        write none of their numbers with a point and a comma (a TSV file may
        write 3.14 still)."""
        if not self.decimal_commas or delimiter == ",":
            return set()
        try:
            rows = list(csv.DictReader(lines, names, delimiter=delimiter, **self.dialect))
        except csv.Error:  # (its reader names the line)
            return self.decimal_commas
        values = [str(row.get(c) or "") for row in rows for c in self.decimal_commas]
        points = any("." in v for v in values) and not any("," in v for v in values)
        return set() if points else self.decimal_commas

    def _pointed(self, row: dict[str, Any], columns: set[str], path: Path, line: int) -> None:
        """A row's numbers written with a decimal comma (3,14) as Python writes them."""
        for column in columns & row.keys():
            value = row[column]
            if value and "." in value:  # 1.234 may be a thousand and more: neither is guessed
                raise ConfigError(
                    self.flag,
                    f"{path} line {line}: column {column!r} must be a number with a decimal "
                    f"comma, as the model's source and this file's first lines write them, got "
                    f"{shown(value)}",
                )
            if value:
                row[column] = value.replace(",", ".")

    def _lines(self, path: Path) -> Iterator[str]:
        """The file's lines as text (with their line ends, as ``csv`` wants them): UTF-8,
        or where a line is not, in ``encoding`` (a model's CSV source's, cp1252: a file
        written so; UTF-8 text read in cp1252 would be other text, "DÃ¼sseldorf"). A
        compressed file (``CODECS``) decompressed as it is read; ``done`` counts its bytes
        read, as ``total`` does."""
        import pyarrow as pa

        packed = codec(path)
        try:
            with open(path, "rb") as file:
                lines = (
                    io.BufferedReader(pa.CompressedInputStream(file, packed)) if packed else file
                )
                counted = 0  # a compressed file's bytes counted in done
                for number, raw in enumerate(lines, start=1):
                    if not packed:
                        self.done += len(raw)
                    elif number % 4096 == 1:  # (its bytes read so far: a system call)
                        self.done += file.tell() - counted
                        counted = file.tell()
                    try:
                        yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
                        continue
                    except UnicodeDecodeError as err:
                        fault = err.reason
                    if self.encoding != "utf-8":
                        try:
                            yield raw.decode(self.encoding)
                            continue
                        except UnicodeDecodeError as err:
                            fault = f"nor {self.encoding}: {err.reason}"
                    raise ConfigError(
                        self.flag, f"{path} line {number}: not UTF-8 text ({fault})"
                    ) from None
                if packed:  # (the rest of its bytes)
                    self.done += file.tell() - counted
        except (OSError, pa.ArrowException) as err:  # (not the compression its name says)
            raise ConfigError(self.flag, f"{path}: cannot read it ({err})") from None

    def _json_rows(self, path: Path) -> list[Any]:
        """A .json file's rows (compressed as its name says: ``CODECS``): an array of row
        objects, one row object, or one of MLflow's request forms (``JSON_ROW_KEYS``,
        ``JSON_SPLIT_KEY``)."""
        import pyarrow as pa

        try:
            with pa.input_stream(str(path), compression=codec(path)) as stream:
                text = stream.read().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError, pa.ArrowException) as err:
            raise ConfigError(self.flag, f"{path}: cannot read it ({err})") from None
        self.done += path.stat().st_size
        try:
            found = json.loads(text)
        except ValueError as err:
            raise ConfigError(self.flag, f"{path}: not JSON ({err})") from None
        if isinstance(found, dict) and len(found) == 1:  # else a row, whatever its keys
            ((key, value),) = found.items()
            if key == JSON_SPLIT_KEY:
                return self._split_rows(path, value)
            if key in JSON_ROW_KEYS and isinstance(value, list):
                return value
            if key in JSON_ROW_KEYS and isinstance(value, dict):
                return self._column_rows(path, key, value)
        return found if isinstance(found, list) else [found]

    def _split_rows(self, path: Path, split: Any) -> list[dict[str, Any]]:
        """Pandas' split form: the columns' names, then each row's values in their order."""
        form = f'{{"{JSON_SPLIT_KEY}": {{"columns": [names], "data": [[values], ...]}}}}'
        columns = split.get("columns") if isinstance(split, dict) else None
        data = split.get("data") if isinstance(split, dict) else None
        if not (
            isinstance(columns, list)
            and all(isinstance(c, str) for c in columns)
            and isinstance(data, list)
        ):
            raise ConfigError(self.flag, f"{path}: {JSON_SPLIT_KEY} must be of the form {form}")
        for i, values in enumerate(data, 1):
            if not isinstance(values, list) or len(values) != len(columns):
                raise ConfigError(
                    self.flag,
                    f"{path}: {JSON_SPLIT_KEY}'s row {i} must be a list of {len(columns)} values "
                    f"(one per column), got {shown(values)}",
                )
        return [dict(zip(columns, values, strict=True)) for values in data]

    def _column_rows(self, path: Path, key: str, columns: dict[str, Any]) -> list[dict[str, Any]]:
        """The columnar form: each column a list of its rows' values, all of one length."""
        lengths = {
            name: len(values) if isinstance(values, list) else None
            for name, values in columns.items()
        }
        if None in lengths.values() or len(set(lengths.values())) > 1:
            said = [
                f"{shown(name, 40)}: {'not a list' if n is None else n}"
                for name, n in lengths.items()
            ]
            more = f", ... ({len(said)} columns)" if len(said) > 5 else ""
            raise ConfigError(
                self.flag,
                f"{path}: {key} holds columns, each a list of its rows' values, all of one "
                f"length; got {', '.join(said[:5])}{more}",
            )
        rows = len(next(iter(columns.values()))) if columns else 0
        return [{name: values[i] for name, values in columns.items()} for i in range(rows)]


@contextmanager
def _columnar_errors(flag: str, path: Path, kind: str) -> Iterator[None]:
    """Arrow's and the OS's errors while reading Parquet, ORC or Avro (``kind``: .parquet,
    .orc, .avro) as ``ConfigError`` on the file."""
    import pyarrow as pa

    try:
        yield
    # UnicodeDecodeError: a damaged footer whose column names are not UTF-8
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        text = str(err).strip()
        reason = text.splitlines()[0] if text else type(err).__name__
        raise ConfigError(flag, f"{path}: not readable as {COLUMNAR[kind]} ({reason})") from None


class ColumnarFile:
    """A Parquet, ORC or Avro file (by its name) as every reader of a team's files reads it:
    its footer's (header's) schema and rows, its rows in record batches, and the first rows
    of its row groups (Parquet), stripes (ORC) or blocks (Avro) for a sample. Arrow's errors
    pass through (Avro's as Arrow's: ``AvroFile``)."""

    def __init__(self, path: Path, fmt: str | None = None, view: FileView | None = None):
        """``fmt``: parquet, orc or avro (default: by the file's name; Hive names its files
        000000_0); ``view``: how a Delta or Iceberg table's Parquet file is read (its rows kept, its
        columns' names in the table)."""
        self.path = path
        self.kind = fmt or path.suffix.lower()[1:]
        view = view or FileView()
        self.kept, self.names = view.kept, view.names
        if self.kind == "avro":
            from nas.data.avro_file import AvroFile

            self._file = AvroFile(path)
            self.schema, self.rows = self._file.schema, self._file.rows
            self.groups = self._file.groups
        elif self.kind == "orc":
            from pyarrow import orc

            self._file = orc.ORCFile(str(path))
            self.schema, self.rows, self.groups = (
                self._file.schema,
                self._file.nrows,
                self._file.nstripes,
            )
        else:
            import pyarrow.parquet as pq

            self._file = pq.ParquetFile(path)
            self.schema = self._file.schema_arrow
            self.rows, self.groups = self._file.metadata.num_rows, self._file.num_row_groups
            if self.kept is not None:
                self.rows -= int((~self.kept[: self.rows]).sum())
        # text as Arrow's string views where the writer's Arrow schema says so (delta-rs,
        # DataFusion): read as plain text, as every reader of the rows expects
        self._stored, self._plain_schema = self.schema, _without_views(self.schema)
        self.schema = self._plain_schema
        self._physical = {}  # a column's physical name by its name in the table
        if view.ids is not None:  # (an Iceberg file's: by its fields' ids)
            self.names = names_by_id(self._plain_schema, view.ids)
        if self.names:  # as the table names its columns and their fields; a dropped one not
            self.names = _stored_names(self.names, list(self._plain_schema))
            self.schema = _named_schema(self._plain_schema, self.names)
            self._physical = {
                self.names[p][0]: p for p in self._plain_schema.names if p in self.names
            }

    def stored_name(self, column: str) -> str | None:
        """The name this file stores a column of its table under (a Delta or Iceberg
        table's file may store it under another: ``names``); None where it holds none."""
        if self.names:
            return self._physical.get(column)
        return column if column in self.schema.names else None

    def batches(self, size: int, columns: list[str] | None = None, groups=None) -> Iterator:
        """The rows of ``groups`` (default: all), ``size`` at a time, of ``columns``."""
        if self.kind == "avro":
            yield from self._file.batches(size, columns, groups)
            return
        groups = range(self.groups) if groups is None else groups
        if columns is not None and self.names:
            columns = [self._physical.get(c, c) for c in columns]
        if self.kept is not None:
            yield from self._kept_batches(size, columns, groups)
            return
        if self.kind != "orc":
            batches = self._file.iter_batches(size, row_groups=list(groups), columns=columns)
            yield from map(self._plain, batches)
            return
        for group in groups:  # (a stripe read whole, then cut)
            stripe = self._file.read_stripe(group, columns=columns)
            for start in range(0, stripe.num_rows, size):
                yield stripe.slice(start, size)

    def _kept_batches(self, size: int, columns: list[str] | None, groups) -> Iterator:
        """A Parquet file's rows of ``groups`` but those ``kept`` passes by, a group at a
        time (its first row's place in the file known)."""
        import numpy as np
        import pyarrow as pa

        starts = np.cumsum(
            [0] + [self._file.metadata.row_group(g).num_rows for g in range(self.groups)]
        )
        for group in groups:
            start = int(starts[group])
            for batch in self._file.iter_batches(size, row_groups=[group], columns=columns):
                n = batch.num_rows
                keep = np.ones(n, bool)
                held = self.kept[start : start + n]
                keep[: len(held)] = held
                start += n
                yield self._plain(batch.filter(pa.array(keep)))

    def _plain(self, batch):
        """A Parquet batch of its stored types as ``schema``'s: views as plain text, and
        physical names as the table's (``view``'s names: Arrow's zero-copy views)."""
        import pyarrow as pa

        if self._stored != self._plain_schema:
            batch = batch.cast(pa.schema([self._plain_schema.field(c) for c in batch.schema.names]))
        if not self.names:
            return batch
        fields, columns = [], []
        for physical, column in zip(batch.schema.names, batch.columns, strict=True):
            if physical in self.names:  # (a dropped column's: not the table's)
                fields.append(self.schema.field(self.names[physical][0]))
                columns.append(column.view(fields[-1].type))
        return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def _stored_names(names: Names, fields) -> Names:
    """``names`` by the names a file's ``fields`` store them under: the physical ones, or
    the table's own where its writer kept those (delta-rs does so with some table
    features); a field under neither is no longer the table's."""
    own = dict(names.values())
    out: Names = {KEYS: names[KEYS]} if KEYS in names else {}
    for f in fields:
        if f.name in names:
            name, inner = names[f.name]
        elif f.name in own:
            name, inner = f.name, own[f.name]
        else:
            continue
        out[f.name] = (name, _stored_names(inner, children(f.type)) if inner else {})
    return out


def _named_schema(schema, names: Names):
    """``schema`` with its columns and their fields (at any depth) named as ``names`` says
    (a Delta table's column mapping, an Iceberg file's names by field id)."""
    import pyarrow as pa

    def named(kind, within: Names):
        if pa.types.is_struct(kind):
            return pa.struct([renamed(f, within) for f in kind])
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            value = kind.value_field.with_type(named(kind.value_type, within))
            return pa.list_(value) if pa.types.is_list(kind) else pa.large_list(value)
        if pa.types.is_map(kind):
            keys = named(kind.key_type, within.get(KEYS, ("", {}))[1])
            return pa.map_(keys, kind.item_field.with_type(named(kind.item_type, within)))
        return kind

    def renamed(f, within: Names):
        name, inner = within.get(f.name, (f.name, {}))
        return pa.field(name, named(f.type, inner), f.nullable, f.metadata)

    return pa.schema([renamed(f, names) for f in schema if f.name in names], schema.metadata)


def _without_views(schema):
    """``schema`` with Arrow's string and binary views (at any depth) as plain ones."""
    import pyarrow as pa

    def plain(kind):
        if pa.types.is_string_view(kind):
            return pa.string()
        if pa.types.is_binary_view(kind):
            return pa.binary()
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            field = kind.value_field.with_type(plain(kind.value_type))
            return pa.list_(field) if pa.types.is_list(kind) else pa.large_list(field)
        if pa.types.is_struct(kind):
            return pa.struct([f.with_type(plain(f.type)) for f in kind])
        if pa.types.is_map(kind):
            return pa.map_(plain(kind.key_type), kind.item_field.with_type(plain(kind.item_type)))
        if pa.types.is_dictionary(kind):
            return pa.dictionary(kind.index_type, plain(kind.value_type), kind.ordered)
        return kind

    return pa.schema([f.with_type(plain(f.type)) for f in schema], schema.metadata)


def binary_as_text(table, valid_only: bool = False):
    """An Arrow table or batch with each column of binary values as text (``text_view``)."""
    if all(_as_text(kind) == kind for kind in table.schema.types):
        return table  # (its columns' names not read: a JSON key's bytes may not be UTF-8)
    columns = [text_view(column, valid_only) for column in table.columns]
    return type(table).from_arrays(columns, names=table.column_names)


def text_view(column, valid_only: bool = False):
    """An Arrow array or chunked array of binary values (or lists or a dictionary of them)
    as text: Spark and Hive write Parquet's text so unless told otherwise
    (``spark.sql.parquet.binaryAsString``), and a model reads such a column as the text it
    holds, in training and in serving alike. A view of the same bytes, unchecked
    (``text_fault`` names a value that is not UTF-8), or with ``valid_only`` the column as
    it is where a value is not UTF-8 (bytes that are not text: a serialized message, an
    image). The column itself where it holds no binary values."""
    import pyarrow as pa

    kind = _as_text(column.type)
    if kind == column.type:
        return column
    if isinstance(column, pa.ChunkedArray):
        viewed = pa.chunked_array([chunk.view(kind) for chunk in column.chunks], kind)
    else:
        viewed = column.view(kind)
    if valid_only:
        try:
            viewed.validate(full=True)
        except pa.ArrowInvalid:
            return column
    return viewed


def _as_text(kind):
    """``kind`` with binary values as text (of the same layout: a view, no copy)."""
    import pyarrow as pa

    if pa.types.is_binary(kind):
        return pa.string()
    if pa.types.is_large_binary(kind):
        return pa.large_string()
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_as_text(kind.value_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_as_text(kind.value_type)))
    if pa.types.is_dictionary(kind):
        return pa.dictionary(kind.index_type, _as_text(kind.value_type), kind.ordered)
    return kind


def text_fault(table, first: int | None = 1) -> str | None:
    """Where an Arrow table or batch of a file's rows holds text that is not UTF-8 (or
    other damage Arrow's full validation finds), in words: "column 'site' holds text that
    is not UTF-8 (row 6)", rows counted from ``first`` (None: no row said); None where
    it holds none. Parquet's reader and Arrow's JSON reader pass a writer's bytes on
    unchecked, and Python, so every step after them, fails on such text. Only columns that
    hold text are checked (about 12 ms for 65,536 rows of a list of 32 ids)."""
    import re

    import pyarrow as pa

    try:
        names = table.column_names
    except UnicodeDecodeError:  # a JSON key's bytes, passed on as a column's name
        return "a column's name is not UTF-8 text"
    for name, column in zip(names, table.columns, strict=True):
        if not _holds_text(column.type):
            continue
        before = 0
        for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
            try:
                chunk.validate(full=True)
            except pa.ArrowInvalid as err:
                found = re.fullmatch(r"Invalid UTF8 sequence at string index (\d+)", str(err))
                if found is None and "UTF8" not in str(err):
                    return f"column {name!r} is damaged ({str(err).strip().splitlines()[0]})"
                row = f" (row {first + before + int(found[1])})" if found and first else ""
                return f"column {name!r} holds text that is not UTF-8{row}"
            before += len(chunk)
    return None


def _holds_text(kind) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _holds_text(kind.value_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _holds_text(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_holds_text(field.type) for field in kind)
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _named_files(given: str, flag: str) -> dict[Path, str]:
    """The files ``given`` names (a file, a folder, a glob pattern), sorted by name, each
    with its format (``file_kind``: a file or a pattern's files are the user's to name,
    read by their bytes where their names say no format)."""
    import glob

    path = Path(given)
    try:
        pattern = any(c in given for c in "*?[") and not path.exists()
        folder = path.is_dir()
    except OSError as err:  # a name too long, a folder that may not be searched
        raise ConfigError(flag, f"cannot use {shown(given)} ({err.strerror})") from None
    if pattern:
        found = [Path(p) for p in glob.glob(given, recursive=True)]
        files = sorted(p for p in found if p.is_file() and _data_name(Path(p.name)))
        if not files:
            raise ConfigError(flag, f"no file matches {given}")
    elif folder:
        found = (p for p in path.rglob("*") if p.is_file() and _data_name(p.relative_to(path)))
        kinds = {p: kind for p in sorted(found) if (kind := file_kind(p)) is not None}
        if not kinds:
            raise ConfigError(
                flag,
                f"{given} is a folder with no {', '.join(SUFFIXES)} file (files whose names "
                f"say no format: name them with a quoted glob, '{Path(given) / '*'}')",
            )
        return kinds
    else:
        require_file(path, flag)
        files = [path]
    kinds = {}
    for file in files:
        if (kind := file_kind(file, named=True)) is None:
            raise ConfigError(
                flag,
                f"{file}: use a .jsonl (JSON lines), .json, .csv, .tsv, .parquet, .orc or .avro "
                f"file (text ones may be compressed: {', '.join(CODECS)})",
            )
        kinds[file] = kind
    return kinds


def file_kind(path: Path, named: bool = False) -> str | None:
    """A file's format as its suffix (``SUFFIXES``; a text file's before its compression's,
    ``CODECS``) names it, or for one whose name says none (Hive's 000000_0,
    a .txt file), as its first bytes do (``by_magic``: lines of text too where the file is
    ``named`` by the user, alone or by a glob pattern, a job's part name is its name, or it
    is named .txt or .dat);
    None for neither."""
    name = path.with_suffix("") if codec(path) else path
    suffix = name.suffix.lower()
    if suffix in SUFFIXES:
        return suffix if name == path or suffix in TEXTS else None
    if suffix in TEXT_NAMES:
        return by_magic(path, text=named or bool(suffix) or is_part(name))
    return None


def codec(path: Path) -> str | None:
    """A text file's compression as its name says (``CODECS``), Arrow's name for it."""
    return CODECS.get(path.suffix.lower())


def is_part(path: Path) -> bool:
    """Whether a file's name is one a job gives its parts (``PART_NAME``)."""
    return PART_NAME.fullmatch(path.name) is not None


def by_magic(path: Path, text: bool = False) -> str | None:
    """``.orc``, ``.parquet`` or ``.avro`` where a file's first bytes are ORC's, Parquet's or
    Avro's; with ``text``, ``.jsonl`` or ``.csv`` where they are lines (no NUL byte;
    decompressed as the name says) whose first holds a JSON object or not (Hive's text
    tables: fields split by Ctrl-A, ``sniffed_delimiter``)."""
    import pyarrow as pa

    try:
        with pa.input_stream(str(path), compression=codec(path)) as file:
            head = file.read(1 << 16)
    except (OSError, pa.ArrowException):  # (not the compression its name says)
        return None
    if not codec(path) and head[:3] == b"ORC":
        return ".orc"
    if not codec(path) and head[:4] == b"PAR1":
        return ".parquet"
    if not codec(path) and is_avro(head):
        return ".avro"
    if not text or not head.strip() or b"\0" in head:
        return None
    first = next(line for line in head.splitlines() if line.strip())
    return ".jsonl" if first.lstrip().startswith(b"{") else ".csv"


def numbered(names: list[str]) -> list[str]:
    """A CSV header's names, a name it repeats numbered as pandas reads it (``x``, ``x.1``,
    ``x.2``; past a name the header holds itself)."""
    seen: set[str] = set()
    count: dict[str, int] = {}
    found = []
    for name in names:
        unique = name
        while unique in seen:
            count[name] = count.get(name, 0) + 1
            unique = f"{name}.{count[name]}"
        seen.add(unique)
        found.append(unique)
    return found


def first_lines(path: Path, count: int = 50) -> list[str]:
    """The non-blank of a text file's first ``count`` lines (compressed as its name says),
    bytes that are not UTF-8 replaced."""
    import pyarrow as pa

    with io.TextIOWrapper(pa.input_stream(path, compression="detect"), errors="replace") as text:
        return [line for line in itertools.islice(text, count) if line.strip()]


def sniffed_delimiter(lines: list[str], default: str) -> str:
    """The delimiter (of ``DELIMITER_CHOICES``) that splits a CSV file's first ``lines``
    into the same number of fields, two or more: the first line and nine in ten of the
    others (a line that is not a row may be among them), lines that all end with the
    delimiter read without the empty field past it. Of several, the one of the most fields;
    ``default`` on a tie, or where none does. A delimiter after a backslash is text (an
    escaped one: ``escape``); Hive's Ctrl-A fields are never quoted. (Python's
    ``csv.Sniffer`` judges by how evenly each character recurs and takes the decimal comma
    of a file without a header, ``1;3,14;...``, for its delimiter.)"""
    lines = [line for line in lines if line.strip()]
    if len(lines) > 2:
        lines = lines[:-1]  # (the last may be cut short, or open a quote the next closes)
    best, most = default, 1
    for delimiter in sorted(DELIMITER_CHOICES, key=lambda d: d != default):
        try:
            rows = list(csv.reader(lines, delimiter=delimiter, **told_dialect(delimiter)))
        except csv.Error:
            continue
        if len(rows) > 1 and all(len(row) > 1 and row[-1] == "" for row in rows[1:]):
            rows = [row[:-1] if row and row[-1] == "" else row for row in rows]
        width = len(rows[0]) if rows else 0
        same = sum(len(row) == width for row in rows[1:])
        if width > most and same >= 0.9 * (len(rows) - 1):
            best, most = delimiter, width
    return best


def told_dialect(delimiter: str) -> dict[str, Any]:
    """How Python's csv splits a file's first lines to tell its delimiter, header and
    marks: a character after a backslash is text (an escaped delimiter: ``source.escape``),
    and Hive's Ctrl-A fields are never quoted (``source.quoting``)."""
    quoting = csv.QUOTE_NONE if delimiter == HIVE_DELIMITER else csv.QUOTE_MINIMAL
    return {"escapechar": "\\", "quoting": quoting}


def pattern_root(pattern: str | Path) -> Path:
    """The folder a file, folder or glob pattern names its files under: its leading parts
    without a wildcard (a file's own folder)."""
    path = Path(pattern)
    parts = []
    for part in path.parts:
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    root = Path(*parts) if parts else Path(".")
    try:
        return root if root.is_dir() else root.parent
    except OSError:  # a name too long: the reader names it
        return root.parent


def partitions(path: Path, root: Path) -> dict[str, str | None]:
    """The Hive-style partition columns of a file below ``root``: each folder between them
    named ``column=value`` (Spark and Hive write a table partitioned by date and country as
    ``date=2024-05-07/country=US/part-0.parquet``, and the files hold no such column), its
    value unescaped (``%2F``) and Hive's null, ``__HIVE_DEFAULT_PARTITION__``, as None."""
    from urllib.parse import unquote

    try:
        folders = path.absolute().parent.relative_to(root.absolute()).parts
    except ValueError:  # not below it
        return {}
    found: dict[str, str | None] = {}
    for folder in folders:
        name, equals, value = folder.partition("=")
        if equals and name:
            found[unquote(name)] = None if value == HIVE_NULL else unquote(value)
    return found


def nested_names(schema, wanted: Collection[str] = ()) -> list[str]:
    """A schema's column names and, for a column of objects (a struct: JSON lines' nested
    objects, Parquet's and ORC's groups, Avro's records), each of its fields' as
    ``column.field`` (a deeper one's likewise, ``column.field.inner``), and each ``wanted``
    name that is a key of a keyed column (``column.key``, ``column.key.field``) or a field
    of a list of objects' (``column.field``: a list of the field's values): the names a
    declared column may take (``with_fields``)."""
    kinds = _nested_kinds(schema)
    return [*kinds, *_key_names(kinds, wanted), *_list_field_names(kinds, wanted)]


def _list_field_names(kinds: dict[str, Any], wanted: Collection[str]) -> list[str]:
    """Each ``wanted`` name that is a field of a column of lists of objects (``items``'
    ``items.item_id``: each row's list of its objects' ``item_id``, as Spark names it): one
    whose objects hold that field (``list_field_path``). ``kinds``: ``_nested_kinds``."""
    roots = {n: root_column(n, list(kinds)) for n in wanted if n not in kinds}
    return [
        name
        for name, root in roots.items()
        if root != name and list_field_path(kinds[root], name[len(root) + 1 :]) is not None
    ]


def list_field_path(kind, text: str) -> list[int] | None:
    """For a column of lists of objects (not a keyed column's), the indices of the field
    ``text`` names in its objects (``geo.country``: deeper likewise); None where it is not
    one or they hold no such field."""
    import pyarrow as pa

    if keyed_parts(kind) or not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return None
    return field_path(kind.value_type, text)


def field_path(kind, text: str) -> list[int] | None:
    """The indices of the field ``text`` names in objects of Arrow type ``kind``
    (``geo.country``: ``geo``'s, then its ``country``'s); None where there is none."""
    import pyarrow as pa

    path = []
    for part in text.split("."):
        index = kind.get_field_index(part) if pa.types.is_struct(kind) else -1
        if index < 0:
            return None
        path.append(index)
        kind = kind.field(index).type
    return path


def key_names(schema, wanted: Collection[str]) -> dict[str, str]:
    """Each ``wanted`` name a keyed column (``keyed_parts``) of a schema is read for
    (``column.key``, ``column.key.field``), with that column's name."""
    return _key_names(_nested_kinds(schema), wanted)


def _key_names(kinds: dict[str, Any], wanted: Collection[str]) -> dict[str, str]:
    """``key_names`` of a schema's ``_nested_kinds``."""
    roots = {n: root_column(n, list(kinds)) for n in wanted if n not in kinds}
    return {name: root for name, root in roots.items() if root != name and keyed_parts(kinds[root])}


def _nested_kinds(schema) -> dict[str, Any]:
    """A schema's names and its objects' fields' (``nested_names``), each with its Arrow
    type."""
    import pyarrow as pa

    kinds: dict[str, Any] = {}

    def walk(prefix: str, fields) -> None:
        for part in fields:
            kinds[prefix + part.name] = part.type
            if pa.types.is_struct(part.type):
                walk(f"{prefix}{part.name}.", part.type)

    walk("", schema)
    return kinds


def keyed_parts(kind) -> tuple[Any, int, int] | None:
    """For a keyed column's Arrow type, its pairs' struct type and the indices of its key
    and value fields; None for another type. A keyed column holds a row's features by name:
    a map (Parquet's, ORC's, Avro's), or a list of ``{key, value}`` objects, as BigQuery
    writes Google Analytics' and Firebase's ``event_params`` and ``user_properties`` (and
    AWS its ``{Key, Value}`` tags), each value its own type or an object of typed fields
    (``{string_value, int_value, double_value}``)."""
    import pyarrow as pa

    if pa.types.is_map(kind):
        return pa.struct([kind.key_field, kind.item_field]), 0, 1
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return None
    pair = kind.value_type
    if not pa.types.is_struct(pair) or pair.num_fields != 2:
        return None
    names = [field.name.lower() for field in pair]
    if sorted(names) != ["key", "value"]:
        return None
    return pair, names.index("key"), names.index("value")


def keyed_pairs(array):
    """A keyed column's Arrow array (``keyed_parts``) as its rows' lists of pairs (a map's
    own buffers, viewed so: Arrow's list functions take no map)."""
    import pyarrow as pa

    if pa.types.is_map(array.type):
        return array.view(pa.list_(keyed_parts(array.type)[0]))
    return array


def root_column(name: str, held: list[str]) -> str:
    """The column of a file's ``held`` columns (its top level) that a declared ``name`` is
    read from: itself where held, else the longest ``held`` name it is a field of
    (``user`` for ``user.id``), else itself (a column the file lacks)."""
    if name in held:
        return name
    parts = name.split(".")
    for end in range(len(parts) - 1, 0, -1):
        if (root := ".".join(parts[:end])) in held:
            return root
    return name


def with_fields(table, wanted: Collection[str] = ()):
    """An Arrow table or batch with each column of objects' fields (``nested_names``) as
    columns of their own beside it, null where the object is, and of a column of maps
    (Parquet's, ORC's, Avro's: a row's own keys, features by name), each ``wanted`` name
    ``column.key``: the key's value, null where a row lacks the key. A name the table holds
    already keeps its column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def fields(name: str, column) -> Iterator[tuple[str, Any]]:
        for i, part in enumerate(column.type):
            child = pc.struct_field(column, [i])
            yield f"{name}.{part.name}", child
            if pa.types.is_struct(part.type):
                yield from fields(f"{name}.{part.name}", child)

    held = set(table.column_names)
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_struct(column.type):
            for field_name, child in fields(name, column):
                if field_name not in held:
                    table = table.append_column(field_name, child)
                    held.add(field_name)
    for name in wanted:
        root = root_column(name, table.column_names)
        if name in held or root == name:
            continue
        column = table.column(root)
        if (path := list_field_path(column.type, name[len(root) + 1 :])) is not None:
            table = table.append_column(name, _list_field(column, path))
            held.add(name)
            continue
        if (parts := keyed_parts(column.type)) is None:
            continue
        pair, key_at, value_at = parts
        text, path = key_and_path(name[len(root) + 1 :], pair.field(value_at).type)
        key = map_key(pair.field(key_at).type, text)
        values = _looked_up(column, key, key_at, value_at)
        for index in path:
            values = pc.struct_field(values, [index])
        table = table.append_column(name, values)
        held.add(name)
    return table


def held_keys(column, most: int = 12) -> list[str]:
    """A keyed column's (``keyed_parts``) keys its rows hold, the ``most`` most held
    first (a column a file reads with its objects' fields as columns beside it: a
    batch's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    at = keyed_parts(column.type)[1]
    keys = [pc.struct_field(pc.list_flatten(keyed_pairs(c)), [at]) for c in chunks]
    counts = pc.value_counts(pa.chunked_array(keys).drop_null()).to_pylist()
    counts.sort(key=lambda held: -held["counts"])
    return [str(held["values"]) for held in counts[:most]]


def key_and_path(text: str, kind) -> tuple[str, list[int]]:
    """A keyed column's key named by ``text`` (what follows ``column.``) and, where its
    values are objects, the indices of the field ``text`` ends with (``page.string_value``:
    the key ``page``, its value's field ``string_value``); else the whole ``text`` is the
    key (keys may hold dots)."""
    import pyarrow as pa

    start = 0
    while pa.types.is_struct(kind) and (dot := text.find(".", start)) > 0:
        if (path := field_path(kind, text[dot + 1 :])) is not None:
            return text[:dot], path
        start = dot + 1
    return text, []


def _list_field(column, path: list[int]):
    """A column of lists of objects' field (``list_field_path``) as a column of lists: each
    row's objects' values of it, in order (null where an object is or lacks it; a null
    list null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    large = pa.types.is_large_list(column.type)
    if isinstance(column, pa.ChunkedArray):  # (its type given: a table of no rows has none)
        inner = column.type.value_type
        for index in path:
            inner = inner.field(index).type
        kind = pa.large_list(inner) if large else pa.list_(inner)
        return pa.chunked_array([_list_field(c, path) for c in column.chunks], kind)
    values = column.values  # (every list's, a slice's too: its offsets say which)
    for index in path:
        values = pc.struct_field(values, [index])
    mask = column.is_null() if column.null_count else None
    return (pa.LargeListArray if large else pa.ListArray).from_arrays(
        column.offsets, values, mask=mask
    )


def _looked_up(column, key, key_at: int, value_at: int):
    """A keyed column's (``keyed_parts``) values of ``key`` (an Arrow scalar; None: a key no
    key of its type can be), each row's first; null where a row lacks it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        chunks = [_looked_up(c, key, key_at, value_at) for c in column.chunks]
        kind = keyed_parts(column.type)[0].field(value_at).type
        return pa.chunked_array(chunks, kind)
    if pa.types.is_map(column.type) and key is not None:
        return pc.map_lookup(column, key, "first")
    column = keyed_pairs(column)
    pairs = pc.list_flatten(column)  # (offsets-aware: a slice's own pairs)
    values = pc.struct_field(pairs, [value_at])
    if key is None:
        return pa.nulls(len(column), values.type)
    found = pc.fill_null(pc.equal(pc.struct_field(pairs, [key_at]), key), False)
    at = np.flatnonzero(np.asarray(found, dtype=bool))
    rows, first = np.unique(np.asarray(pc.list_parent_indices(column))[at], return_index=True)
    taken = np.full(len(column), -1, dtype=np.int64)
    taken[rows] = at[first]
    return values.take(pa.array(taken, mask=taken < 0))


def map_key(kind, text: str):
    """A map's key of Arrow type ``kind`` named by ``text`` (an integer key by its digits),
    as an Arrow scalar; None where no key of that type is."""
    import pyarrow as pa

    if pa.types.is_integer(kind):
        try:
            return pa.scalar(int(text), kind)
        except (ValueError, OverflowError, pa.ArrowException):
            return None
    try:
        return pa.scalar(text, kind)
    except (pa.ArrowException, TypeError):
        return None


def with_fields_of(row: dict) -> dict:
    """A JSON object with each object value's fields as values of its own beside it, named
    ``key.field`` (deeper ones likewise), as ``with_fields`` makes columns; a keyed
    column's (a map as Arrow gives one, ``[(key, value), ...]``, or a list of ``{key,
    value}`` objects: ``keyed_parts``) likewise, by its keys (the first of each). A key the
    object holds already keeps its value."""
    if not any(isinstance(value, dict | list) for value in row.values()):
        return row
    found = dict(row)
    for key, value in row.items():
        if (keyed := _keyed(value)) is not None:
            value = {str(k): v for k, v in reversed(keyed)}  # (the first of a key repeated)
        if isinstance(value, dict):
            for field, inner in with_fields_of(value).items():
                found.setdefault(f"{key}.{field}", inner)
    return found


def with_list_fields_of(row: dict, wanted: Collection[str]) -> dict:
    """A JSON object (``with_fields_of``'s) with each ``wanted`` name that is a field of a
    list of objects it holds (``items.item_id``: ``_list_field_names``) as a list of its
    own: each object's value of it, in order (None where an object lacks it). An empty
    list is left be (a keyed column's too: its key then missing, as a field's list is)."""
    found, held = None, None
    for name in wanted:
        if name in row:
            continue
        root = root_column(name, held := held or list(row))
        objects = row.get(root)
        if root == name or not objects or not isinstance(objects, list):
            continue
        if _keyed(objects) is not None:
            continue
        if not all(isinstance(item, dict) or item is None for item in objects):
            continue
        values = []
        for item in objects:
            for part in name[len(root) + 1 :].split("."):
                item = item.get(part) if isinstance(item, dict) else None
            values.append(item)
        found = found or dict(row)
        found[name] = values
    return found or row


def _keyed(value: Any) -> list[tuple[Any, Any]] | None:
    """A keyed column's value's (key, value) pairs, its null keys left out: a map as
    Arrow's ``to_pylist`` gives one (a list of tuples; JSON's lists hold lists, never
    tuples), or a list of objects of a key and a value (``{key, value}``, any case); None
    for another value."""
    if not isinstance(value, list) or not value:
        return None
    if all(type(pair) is tuple and len(pair) == 2 for pair in value):
        return [pair for pair in value if pair[0] is not None]
    if not all(isinstance(pair, dict) and len(pair) == 2 for pair in value):
        return None
    names = {name.lower() if isinstance(name, str) else name: name for name in value[0]}
    if set(names) != {"key", "value"} or any(pair.keys() != value[0].keys() for pair in value):
        return None
    key, item = names["key"], names["value"]
    return [(pair[key], pair[item]) for pair in value if pair[key] is not None]


def with_partitions(table, values: dict[str, str | None]):
    """An Arrow table or batch with each partition column (``partitions``) it lacks, as
    text, the file's value on every row."""
    import pyarrow as pa

    for name, value in values.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.repeat(pa.scalar(value, pa.string()), len(table)))
    return table


def _data_name(relative: Path) -> bool:
    """Not a hidden or bookkeeping file (``.crc``, ``_SUCCESS``), nor in such a folder."""
    return not any(part.startswith((".", "_")) for part in relative.parts)


def _conformed(table, schema):
    """``table``'s columns as ``schema`` has them: in its order, of its types, a column
    the table lacks as nulls."""
    import pyarrow as pa

    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
