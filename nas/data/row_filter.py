"""Which of a source's rows a dataset reads: a schema file's ``source.where``, one condition
per column, a row read where every one holds (a team's logs hold years and every surface;
a model is searched on the last weeks of one):

    where:
      date: {from: 2024-05-01, until: 2024-06-01}   a time: from the first moment on, before
                                                     the second (a date, a date-time or unix
                                                     seconds; a column of times, of dates'
                                                     text, or numbers in source.time_unit)
      ts: {last: 30d}                                a time: the last 30 days before the newest
                                                     the files hold (``source_rows.
                                                     with_last_resolved``)
      price: {at_least: 1, below: 500}               a number: at least the one, below the other
      country: {one_of: [US, DE]}                    a value among these (as text)
      event_name: {none_of: [session_start]}         a value not among these

A row whose column is empty is not read, but under ``none_of`` (an empty value is none of
them). Values compare as ``nas/data/labels.py``'s ``one_of`` compares them: as the text
prepare reads (an integer's digits, ``true``/``false``). ``nas/data/source_rows.py`` reads
each condition's column beside the columns a pass asks for and passes the other rows by, and
passes by whole files whose partition folders' values (``date=2024-05-07/``, a Delta
table's log) or Parquet statistics (each row group's least and greatest value) leave no
room for a row, their rows unread, and such row groups of the files it reads;
``iceberg_table.py`` lets pyiceberg's planning pass by an Iceberg table's files likewise.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.core.errors import shown

DAY = 86_400
SPAN_UNITS = {"w": 7 * DAY, "d": DAY, "h": 3600, "m": 60, "s": 1}  # a span's, largest first


@dataclass(frozen=True)
class RowFilter:
    """One column's condition: its values ``one_of`` or ``none_of`` some, numbers in
    [``at_least``, ``below``), or times in [``since``, ``until``) (unix seconds)."""

    column: str
    one_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()
    at_least: float | None = None
    below: float | None = None
    since: int | None = None
    until: int | None = None
    last: int | None = None  # a span before the newest time (``since`` made from it)

    @property
    def reads(self) -> str:
        """How its column is read: ``text``, ``number`` or ``timestamp`` (``Rows``' kinds)."""
        if self.one_of or self.none_of:
            return "text"
        return "number" if self.at_least is not None or self.below is not None else "timestamp"

    def __str__(self) -> str:
        if self.one_of or self.none_of:
            values = self.one_of or self.none_of
            negated = "not " if self.none_of else ""
            if len(values) == 1:
                return f"{self.column} {'!=' if negated else '=='} {shown(values[0])}"
            return f"{self.column} {negated}in ({', '.join(map(shown, values))})"
        if self.reads == "number":
            low, high = self.at_least, self.below
        else:
            low, high = self.since, self.until
        shown_as = _moment if self.reads == "timestamp" else (lambda x: f"{x:g}")
        if self.last is not None and self.since is not None:  # (resolved: its newest time known)
            return f"{self.column} >= {shown_as(self.since)} (the last {span_text(self.last)})"
        if self.last is not None:
            return f"{self.column} in the last {span_text(self.last)}"
        if low is not None and high is not None:
            return f"{shown_as(low)} <= {self.column} < {shown_as(high)}"
        return (
            f"{self.column} >= {shown_as(low)}"
            if low is not None
            else (f"{self.column} < {shown_as(high)}")
        )

    def holds(self, values: pa.Array) -> np.ndarray:
        """Whether each value (none empty; as ``reads`` reads them: text, float64, int64
        seconds) meets the condition."""
        if self.one_of or self.none_of:
            found = pc.is_in(values, value_set=pa.array(self.one_of or self.none_of, pa.string()))
            found = np.asarray(pc.fill_null(found, False), dtype=bool)
            return ~found if self.none_of else found
        x = values.to_numpy(zero_copy_only=False)
        low, high = (
            (self.at_least, self.below) if self.reads == "number" else (self.since, self.until)
        )
        held = np.ones(len(x), dtype=bool)
        if low is not None:
            held &= x >= low
        if high is not None:
            held &= x < high
        return held


def span_text(seconds: int) -> str:
    """Seconds as the largest unit that divides them (``7d``, ``90m``)."""
    unit = next(u for u, size in SPAN_UNITS.items() if seconds % size == 0)
    return f"{seconds // SPAN_UNITS[unit]}{unit}"


def _moment(seconds: int) -> str:
    """A moment as its date where it is a midnight (UTC), else its ISO date-time."""
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return f"{seconds} (unix seconds)"
    return moment.date().isoformat() if seconds % DAY == 0 else moment.isoformat()


def passed_text(rows: int, files: int) -> str:
    """What the conditions passed by, as a manifest counts it: whole files (by their
    partition folders, their statistics, an Iceberg table's metadata), rows by their
    values."""
    said = [f"{files:,} whole file{'s' * (files != 1)}"] if files else []
    said += [f"{rows:,} row{'s' * (rows != 1)} by their values"] if rows or not files else []
    return " and ".join(said) + " passed by"


def described(filters: list[RowFilter]) -> str:
    """The conditions as one line: ``date >= 2024-05-01 and country in ('US', 'DE')``."""
    return " and ".join(map(str, filters))
