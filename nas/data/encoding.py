"""A schema file's fields fitted on the training rows and encoded: vocabularies (value
counts kept by ``min_freq`` and ``max_size``) or hashes for ids, dense statistics for
numbers (``Encoder``, one a field), and each field's recipe for serving (its entry in the
raw form).

Ids: 0 is padding and a missing value (null or ""); 1 is out of vocabulary (a value seen
fewer than ``min_freq`` times in train, past ``max_size``, or unseen); the vocabulary starts
at 2, most frequent first. A hashed field maps a value to ``1 + blake2b(value) mod hash``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.data.raw import (
    DERIVED,
    FLOAT32_MAX,
    derived,
    normalise_year,
    stable_hash,
)
from nas.data.schema_file import Feature
from nas.data.source_rows import Batch, first_row

PAD, OOV, FIRST_ID = 0, 1, 2
COMPACT_AT = 1 << 20  # value-count rows kept before merging them


def hashed(array: pa.Array, salt: str = "") -> np.ndarray:
    """``stable_hash`` of each value of a string array, computing each distinct value once;
    a null hashes as the empty string."""
    encoded = pc.dictionary_encode(pc.fill_null(array, ""))
    return stable_hash(encoded.dictionary.to_pylist(), salt)[
        encoded.indices.to_numpy(zero_copy_only=False)
    ]


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


def stored_dense(batch: Batch, encoder: Encoder) -> np.ndarray:
    """A dense field's values after its fill and transform, refused where float32 cannot
    hold one (a row standardized by the training rows' spread, far beyond them), as a served
    row's value is."""
    x = encoder.dense(encoder.values(batch))
    beyond = np.abs(x) > FLOAT32_MAX
    if beyond.any():
        i = first_row(beyond)
        raise batch.bad(
            encoder.column,
            i,
            f"is {encoder.values(batch)[i].as_py():g}, {x[i]:g} after its transform "
            f"({encoder.feature.transform}, by the training rows): beyond the float32 a dense "
            f"feature is stored as (at most {FLOAT32_MAX:.3g}); drop or cap the value",
        )
    return x


def check_dense(batch: Batch, encoder: Encoder, values: np.ndarray) -> None:
    """A dense field read as it is (transform none) must fit the float32 it is stored as."""
    if (encoder.feature.transform or "none") != "none":
        return
    beyond = np.abs(values) > FLOAT32_MAX  # NaN (missing) compares False
    if beyond.any():
        i = first_row(beyond)
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
            return pc.cast(pa.array(derived(derive, seconds, self.feature.tz)), pa.string())
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
        return x  # float64: stored as float32 once checked (``stored_dense``)

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
            if self.feature.tz is not None:
                entry["tz"] = self.feature.tz
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


def last_entries(lists: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's last ``width`` entries: where they are among the lists' entries laid end
    to end (``pc.list_flatten``), and how many each row keeps."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    lengths = lengths.astype(np.int64)
    ends = np.cumsum(lengths)
    first_kept = np.repeat(ends - np.minimum(lengths, width), lengths)
    return np.flatnonzero(np.arange(len(first_kept)) >= first_kept), np.minimum(lengths, width)


def padded(lists: pa.Array, encoder: Encoder, width: int) -> np.ndarray:
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
