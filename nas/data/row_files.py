"""Raw rows from a file a user scores, read a batch at a time: a day of logs never sits in
memory whole.

Formats, by the file's suffix: JSON lines (``.jsonl``), a JSON array or one of MLflow's scoring
request forms (``.json``, read whole: a request), CSV or TSV (every value a string, as a
serving system's text would be; a header names the columns) and Parquet (each batch also as
Arrow). A UTF-8 byte-order mark is skipped. A line that is not JSON, a quote left open, a
file that is not Parquet: ``ConfigError`` naming the flag, the file and the line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nas.core.errors import ConfigError
from nas.core.user_files import require_file

SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")
DELIMITERS = {".csv": ",", ".tsv": "\t"}
BATCH_ROWS = 65_536  # rows scored at once: a few hundred MB at most with long histories
# MLflow's scoring request forms (``{"dataframe_records": [...]}`` and the like) whose value
# is a list of row objects: a .json file may hold its rows under one of these.
JSON_ROW_KEYS = ("dataframe_records", "instances", "inputs")


@dataclass
class RowBatch:
    """Consecutive rows of a file: ``first`` is the 1-based number of the first of them."""

    first: int
    table: Any = None  # a Parquet file's rows as an Arrow table
    _rows: list[Any] | None = field(default=None, repr=False)

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


class RowFile:
    """A file of raw rows; ``flag`` names it in errors. ``done`` and ``total`` measure
    the reading in the same unit: rows of a Parquet file, bytes of the text formats."""

    def __init__(self, path: str | Path, flag: str = "--input"):
        self.path, self.flag = Path(path), flag
        require_file(self.path, flag)
        self.suffix = self.path.suffix.lower()
        if self.suffix not in SUFFIXES:
            raise ConfigError(
                flag,
                f"{self.path}: use a .jsonl (JSON lines), .json, .csv, .tsv or .parquet file",
            )
        self.done = 0
        if self.suffix == ".parquet":
            self._parquet = self._open_parquet()
            self.total = self._parquet.metadata.num_rows
        else:
            self.total = self.path.stat().st_size

    def batches(self, size: int = BATCH_ROWS) -> Iterator[RowBatch]:
        """The file's rows, ``size`` at a time (the last batch may be smaller, none empty)."""
        if self.suffix == ".parquet":
            yield from self._parquet_batches(size)
            return
        rows: list[Any] = []
        first = 1
        for row in self._text_rows():
            rows.append(row)
            if len(rows) == size:
                yield RowBatch(first, _rows=rows)
                first, rows = first + size, []
        if rows:
            yield RowBatch(first, _rows=rows)

    # --- Parquet ------------------------------------------------------------------------------

    def _open_parquet(self):
        import pyarrow.parquet as pq

        with _parquet_errors(self.flag, self.path):
            return pq.ParquetFile(self.path)

    def _parquet_batches(self, size: int) -> Iterator[RowBatch]:
        import pyarrow as pa

        first = 1
        with _parquet_errors(self.flag, self.path):
            for batch in self._parquet.iter_batches(batch_size=size):
                if batch.num_rows == 0:
                    continue
                yield RowBatch(first, table=pa.Table.from_batches([batch]))
                first += batch.num_rows
                self.done += batch.num_rows

    # --- text ---------------------------------------------------------------------------------

    def _text_rows(self) -> Iterator[Any]:
        if self.suffix == ".json":
            yield from self._json_rows()
            return
        lines = self._lines()
        if self.suffix in DELIMITERS:
            yield from self._csv_rows(lines)
            return
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as err:
                where = f"{self.path} line {number}"
                raise ConfigError(self.flag, f"{where}: not JSON ({err})") from None

    def _csv_rows(self, lines: Iterator[str]) -> Iterator[dict[str, str | None]]:
        """A CSV file's rows by its header (a row with fewer values: the rest missing)."""
        reader = csv.DictReader(lines, delimiter=DELIMITERS[self.suffix], strict=True)
        try:
            for row in reader:
                if None in row:
                    values = len(row) - 1 + len(row[None])
                    raise ConfigError(
                        self.flag,
                        f"{self.path} line {reader.reader.line_num}: {values} values, more "
                        f"than the header's {len(reader.fieldnames)} columns",
                    )
                yield row
        except csv.Error as err:
            where = f"{self.path} line {reader.reader.line_num}"
            raise ConfigError(self.flag, f"{where}: {err}") from None

    def _lines(self) -> Iterator[str]:
        """The file's lines as text (with their line ends, as ``csv`` wants them)."""
        try:
            with open(self.path, "rb") as file:
                for number, raw in enumerate(file, start=1):
                    self.done += len(raw)
                    try:
                        yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
                    except UnicodeDecodeError as err:
                        raise ConfigError(
                            self.flag, f"{self.path} line {number}: not UTF-8 text ({err.reason})"
                        ) from None
        except OSError as err:
            raise ConfigError(self.flag, f"{self.path}: cannot read it ({err})") from None

    def _json_rows(self) -> list[Any]:
        """A .json file's rows: an array of row objects, one row object, or an object
        holding the array under one of ``JSON_ROW_KEYS``."""
        try:
            text = self.path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(self.flag, f"{self.path}: cannot read it ({err})") from None
        self.done = self.total
        try:
            found = json.loads(text)
        except ValueError as err:
            raise ConfigError(self.flag, f"{self.path}: not JSON ({err})") from None
        if isinstance(found, dict):
            wrapped = [key for key in JSON_ROW_KEYS if isinstance(found.get(key), list)]
            if wrapped and len(found) == 1:
                found = found[wrapped[0]]
        return found if isinstance(found, list) else [found]


@contextmanager
def _parquet_errors(flag: str, path: Path) -> Iterator[None]:
    """Arrow's and the OS's errors while reading Parquet as ``ConfigError`` on the file."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError) as err:
        text = str(err).strip()
        reason = text.splitlines()[0] if text else type(err).__name__
        raise ConfigError(flag, f"{path}: not readable as Parquet ({reason})") from None
