"""How a label is read from its source column, in one place: ``nas data prepare`` reads a
source's rows by it, a registered model reads raw rows' labels by it (``nas predict``'s
and ``nas models compare``'s figures), and ``nas data export --raw`` writes rows that read
back to the same labels.

    click                                            the column's 0/1 (or true/false)
    {name: like, column: rating, at_least: 4}        1 where the number is at least 4, else 0
    {name: purchase, column: event_name, one_of: [purchase, refund]}
                                                     1 where the value is one of these, else 0

A value ``one_of`` compares to is text, as prepare reads the column (an integer's digits,
``true``/``false`` for a boolean). An empty value is no label under any rule: rows a
serving system sends carry none; a day of logs scored after the fact carries them all, and
rows some of which lack them cannot be measured together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.core.errors import shown
from nas.data.raw import RawInputError, convert, is_missing


@dataclass(frozen=True)
class LabelRule:
    """A label's name (it names metrics and outputs), its column, and how the column's
    value reads as 1 or 0: as itself (0/1), ``at_least`` a threshold, or ``one_of`` some
    values."""

    name: str
    column: str
    at_least: float | None = None
    one_of: tuple[str, ...] = ()

    @classmethod
    def of(cls, recipe: Mapping[str, Any]) -> LabelRule:
        """A rule as a manifest and a registered model record it (``to_dict``)."""
        return cls(
            recipe["name"],
            recipe["column"],
            recipe.get("at_least"),
            tuple(recipe.get("one_of") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "column": self.column, "at_least": self.at_least}
        return out | ({"one_of": list(self.one_of)} if self.one_of else {})

    @property
    def reads(self) -> str:
        """How prepare reads the column: ``label`` (0/1), ``number`` or ``text``."""
        return "number" if self.at_least is not None else "text" if self.one_of else "label"

    def __str__(self) -> str:
        if self.at_least is not None:
            return f"{self.column} >= {self.at_least:g}"
        if len(self.one_of) == 1:
            return f"{self.column} == {shown(self.one_of[0])}"
        if self.one_of:
            return f"{self.column} in ({', '.join(map(shown, self.one_of))})"
        return self.column

    def of_array(self, array: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
        """A column's labels (float32; 0 where missing) and where each is missing; None
        where its type leaves the rows to decide (text for a 0/1 or a threshold, values
        that are no label: ``of_value`` names the row)."""
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        n = len(array)
        if pa.types.is_null(array.type):
            return np.zeros(n, np.float32), np.ones(n, bool)
        if self.one_of:
            return self._of_texts(array)
        is_bool = pa.types.is_boolean(array.type)
        if not (is_bool or pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
            return None
        if is_bool and self.at_least is not None:
            return None  # a threshold on a boolean: the rows refuse it
        x = array.cast(pa.float64(), safe=False).fill_null(np.nan).to_numpy(zero_copy_only=False)
        missing = np.isnan(x)
        given = x[~missing]
        if self.at_least is None:
            if not np.isin(given, (0.0, 1.0)).all():
                return None
        elif np.isinf(given).any():
            return None
        else:
            given = given >= self.at_least
        values = np.zeros(n, np.float32)
        values[~missing] = given
        return values, missing

    def _of_texts(self, array: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
        if pa.types.is_floating(array.type):  # as float64's text, as prepare reads it
            array = pc.if_else(pc.is_nan(array), None, array.cast(pa.float64()))
        elif not (
            pa.types.is_string(array.type)
            or pa.types.is_large_string(array.type)
            or pa.types.is_integer(array.type)
            or pa.types.is_boolean(array.type)
        ):
            return None
        text = pc.cast(array, pa.string())
        blank = pc.equal(pc.utf8_trim_whitespace(text), "")
        missing = np.asarray(pc.fill_null(blank, True), dtype=bool)
        found = pc.fill_null(pc.is_in(text, value_set=pa.array(self.one_of, pa.string())), False)
        values = np.asarray(found, dtype=np.float32)
        values[missing] = 0
        return values, missing

    def of_value(self, row: int, value: Any) -> float:
        """One raw value of the column (not empty) as the label, 1.0 or 0.0; a value that
        is no label raises ``RawInputError`` (``row``: its row's number)."""
        if self.at_least is not None or self.one_of:
            kind = "number" if self.at_least is not None else "string"
            try:
                read = convert(row, self.column, kind, value)
            except RawInputError as err:
                rule = f"the label {self.name!r}: {self}"
                raise RawInputError(row, self.column, f"{err.problem} ({rule})") from None
            return float(read >= self.at_least if kind == "number" else read in self.one_of)
        if isinstance(value, bool):
            return float(value)
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            number = float(str(value).strip())  # as prepare reads it: -0.0 and 1e0 too
            if number in (0.0, 1.0):
                return float(number == 1)
        raise RawInputError(
            row, self.column, f"must be 0 or 1 (the label {self.name!r}), got {shown(value)}"
        )


def column_value(rules: list[LabelRule], positive: list[bool]) -> int | float | str | None:
    """A value of one column that its ``rules`` (those of one column: they read it alike)
    read as the labels ``positive``, for an export's rows (the source's own value is not
    kept): a 0/1 label as itself; thresholds at the highest one met, else one below the
    lowest; values, one all the positive rules hold and no other, else ``not VALUE``, a
    value of none of them. None where no value reads so."""
    met = [rule for rule, yes in zip(rules, positive, strict=True) if yes]
    unmet = [rule for rule, yes in zip(rules, positive, strict=True) if not yes]
    first = rules[0]
    if first.at_least is not None:
        value = max(r.at_least for r in met) if met else min(r.at_least for r in unmet) - 1
        return value if all(value < r.at_least for r in unmet) else None
    if first.one_of:
        taken = {v for r in unmet for v in r.one_of}
        if met:
            held = [v for v in met[0].one_of if all(v in r.one_of for r in met)]
            return next((v for v in held if v not in taken), None)
        value = f"not {first.one_of[0]}"
        while value in taken:
            value = f"not {value}"
        return value
    return int(positive[0]) if len(set(positive)) == 1 else None


def common_values(array: pa.Array, most: int = 8) -> str:
    """A column's values as text, the most held first (``most`` of them), for a message
    that names a value none of the rows hold."""
    counts = pc.value_counts(pc.drop_null(pc.cast(array, pa.string()))).to_pylist()
    counts.sort(key=lambda c: -c["counts"])
    named = ", ".join(shown(c["values"]) for c in counts[:most])
    return named + (f" (and {len(counts) - most} more)" if len(counts) > most else "")


@dataclass(frozen=True)
class RawLabels:
    """Raw rows' labels as the dataset's prepare read them."""

    values: np.ndarray  # [R, K] float32; 0 where a row lacks the label
    lacking: tuple[int, str] | None  # the first row without a label: its number, the column
    carried: bool  # whether any row carries a label

    @classmethod
    def joined(cls, parts: list[RawLabels]) -> RawLabels:
        """The labels of consecutive batches of rows, as those of all of them."""
        return cls(
            np.concatenate([p.values for p in parts]),
            next((p.lacking for p in parts if p.lacking), None),
            any(p.carried for p in parts),
        )

    @property
    def unmeasured(self) -> str | None:
        """Why these rows cannot be measured though some carry labels (else None)."""
        if self.lacking is None or not self.carried:
            return None
        return f"row {self.lacking[0]} has no {self.lacking[1]!r}"


def raw_labels(rows: list[Mapping[str, Any]], rules: list[LabelRule], first: int = 1) -> RawLabels:
    """Each raw row's labels by ``rules``; a value that is there but not a label raises
    ``RawInputError``; ``first``: the first row's number."""
    out = np.zeros((len(rows), len(rules)), dtype=np.float32)
    lacking, carried = None, False
    for i, row in enumerate(rows):
        for j, rule in enumerate(rules):
            value = row.get(rule.column) if isinstance(row, Mapping) else None
            if is_missing(value) or (isinstance(value, str) and not value.strip()):
                lacking = lacking or (first + i, rule.column)
                continue
            carried = True
            out[i, j] = rule.of_value(first + i, value)
    return RawLabels(out, lacking, carried)


def table_labels(table: pa.Table, rules: list[LabelRule], first: int = 1) -> RawLabels | None:
    """``raw_labels(table.to_pylist(), rules, first)`` read by the table's columns; None
    where the rows must decide (``LabelRule.of_array``)."""
    n = table.num_rows
    values = np.zeros((n, len(rules)), dtype=np.float32)
    missing = np.ones((n, len(rules)), dtype=bool)
    for j, rule in enumerate(rules):
        if rule.column not in table.column_names:
            continue
        read = rule.of_array(table.column(rule.column).combine_chunks())
        if read is None:
            return None
        values[:, j], missing[:, j] = read
    lacking = None
    if missing.any():
        row = int(np.argmax(missing.any(axis=1)))
        lacking = (first + row, rules[int(np.argmax(missing[row]))].column)
    return RawLabels(values, lacking, bool((~missing).any()))
