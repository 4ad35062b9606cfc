"""How the commands show things: the consoles, JSON output, numbers with SI units, statuses."""

from __future__ import annotations

import json
import math
import os

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text

# Progress and messages; stdout carries results. Every string prints as it is: no emoji codes
# (user text such as a passwd line's ":x:" would print as an emoji, rich's default) and no
# markup (gloo's errors read "[/__w/pytorch/...]", which rich takes for a closing tag and
# fails on; a path or a field may hold "[red]"). Colour is given with ``styled`` and ``phrase``.
console = Console(stderr=True, emoji=False, markup=False)

PIPED_WIDTH = 10_000  # wider than any table: rich would otherwise wrap and cut at 80 columns


def _results_console() -> Console:
    """Results on stdout: a terminal's own width; piped or redirected to a file, tables at
    their full width, never cut (unless $COLUMNS asks for a width)."""
    console = Console(emoji=False, markup=False)
    if console.is_terminal or "COLUMNS" in os.environ:
        return console
    return Console(width=PIPED_WIDTH, emoji=False, markup=False)


out = _results_console()


def emit_json(data: object) -> None:
    """``--json`` output: always valid JSON (``json_text``)."""
    try:
        print(json_text(data, indent=2), flush=True)
    except OSError as err:  # (a full disk under `> file`: said as the output's, not a cache's)
        err.filename = err.filename or STDOUT
        raise


STDOUT = "<stdout>"  # the file name of an error writing standard output


def json_text(data: object, indent: int | None = None) -> str:
    """``data`` as valid JSON: RFC 8259 has no NaN or Infinity (they are written as null),
    and values JSON has no type for (datetimes) are written as their text."""

    def finite(value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [finite(v) for v in value]
        return value

    return json.dumps(finite(data), indent=indent, default=str, allow_nan=False)


def si(value: float, digits: int = 2) -> str:
    """A count with an SI unit: 291072 -> 291.07K."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.{digits}f}{unit}"
    return f"{value:.0f}"


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: "1 seed", "3 seeds"."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def format_value(name: str, value) -> str:
    """An objective's or metric's value in a table: counts with a unit, rates to 4 places."""
    if value is None:
        return "-"
    if name in ("flops", "serving_flops", "params"):
        return si(value, 1)
    return f"{value:.4f}"


def preparing_under(status, doing: str):
    """``progress(what, rows, total)`` for a dataset's preparation under a spinner
    (``console.status``): its text, ``doing`` ("Preparing movielens-1m"), then the pass and
    its rows so far, or whose preparation it waits on. ``status`` None (``--json``): silent."""
    rows: dict[str, int] = {}

    def hear(what: str, read: int, total: int | None) -> None:
        if status is None:
            return
        rows[what] = rows.get(what, 0) + read
        done = f" ({rows[what]:,}" + (f" of {total:,}" if total else "") + " rows)"
        status.update(f"{doing}: {what}{done if rows[what] else ''} ...")

    return hear


def progress_bar(
    fields: str = "{task.fields[note]}", eta: bool = True, counts: bool = True
) -> Progress:
    """The commands' one progress-bar look: description, bar, done/total (unless not
    ``counts``: a total in bytes, say), ``fields`` (a task's own figures), elapsed and, with
    ``eta``, the time left."""
    # Below ~130 columns a 40-wide bar pushed the times off the line ("0:00:… eta 0:0…"
    # at 80): there the bar takes what the other columns leave.
    narrow = console.width < 130
    columns = [
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(bar_width=None, table_column=Column(ratio=1)) if narrow else BarColumn(),
        *([MofNCompleteColumn()] if counts else []),
        TextColumn(fields, markup=False),
        TimeElapsedColumn(),
    ]
    if eta:
        columns += [TextColumn("eta", markup=False), TimeRemainingColumn()]
    return Progress(*columns, console=console, expand=narrow)


def styled(text: object, style: str) -> Text:
    """``text`` as it is, in ``style`` (a colour, "bold")."""
    return Text(str(text), style=style)


def phrase(*parts: str | Text) -> Text:
    """One line of plain strings and ``styled`` parts."""
    return Text.assemble(*parts)


def status_text(status: str) -> Text:
    color = {
        "completed": "green",
        "running": "cyan",
        "crashed": "red",
        "failed": "red",
        "interrupted": "yellow",
        "cancelled": "yellow",
        "cancelling": "yellow",
        "stopped": "yellow",
    }.get(status, "white")
    return styled(status, color)
