"""Each row's split (train, validation, test) by a schema file's method: ``order``,
``time`` (a fraction, or from moments), ``user_time`` (each user's rows by time),
``random`` (seeded) and ``hash`` (of the user key)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from nas.data.prepared import row_chunks
from nas.data.schema_file import SchemaFile


def _cut_points(count, valid: float, test: float):
    """Of ``count`` ordered rows, the first ceil((1 - valid - test) count) train, up to
    ceil((1 - test) count) validate, the rest test. In exact fractions: 0.1/0.1 gives
    today's 80/10/10 rule row for row."""
    train, before_test = 1 - Fraction(str(valid)) - Fraction(str(test)), 1 - Fraction(str(test))
    count = np.asarray(count, dtype=np.int64)
    train_end = (count * train.numerator + train.denominator - 1) // train.denominator
    valid_end = (count * before_test.numerator + before_test.denominator - 1) // (
        before_test.denominator
    )
    return train_end, valid_end


def _cut(position: np.ndarray, count: np.ndarray | int, valid: float, test: float) -> np.ndarray:
    """The split code of the row at ``position`` of ``count`` (``_cut_points``)."""
    train_end, valid_end = _cut_points(count, valid, test)
    return np.where(position < train_end, 0, np.where(position < valid_end, 1, 2)).astype(np.int8)


def _by_fraction(h: np.ndarray, valid: float, test: float) -> np.ndarray:
    """Split codes from uniform uint64 hashes."""
    scale = 2**64
    train_top = int(scale * (1 - Fraction(str(valid)) - Fraction(str(test))))
    valid_top = int(scale * (1 - Fraction(str(test))))
    train_top, valid_top = min(train_top, scale - 1), min(valid_top, scale - 1)
    return np.where(h < np.uint64(train_top), 0, np.where(h < np.uint64(valid_top), 1, 2)).astype(
        np.int8
    )


def _mix(rows: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of each row number: a uniform, seeded and order-free hash."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def split_codes(sizes: tuple[int, int, int]) -> np.ndarray:
    return np.repeat(np.arange(3, dtype=np.int8), sizes)


def assign_split(
    schema: SchemaFile, rows: int, times: np.ndarray | None, users: np.ndarray | None
) -> np.ndarray:
    """Each row's split code (0 train, 1 valid, 2 test) by the schema's method. Memory: the
    keys it is given, and for ``time`` one int64 per row more (the sort)."""
    split = schema.split
    method, valid, test = split.method, split.valid, split.test
    if method == "time" and split.at_moments:
        return np.where(
            times >= split.test_from, 2, np.where(times >= split.valid_from, 1, 0)
        ).astype(np.int8)
    if method in ("order", "time"):
        train_end, valid_end = (int(x) for x in _cut_points(rows, valid, test))
        sizes = (train_end, valid_end - train_end, rows - valid_end)
        if method == "order":
            return split_codes(sizes)
        out = np.empty(rows, dtype=np.int8)  # by time; ties keep the files' order
        out[np.argsort(times, kind="stable")] = split_codes(sizes)
        return out
    if method == "random":  # chunk by chunk: no per-row int64 temporaries
        out = np.empty(rows, dtype=np.int8)
        for part in row_chunks(rows):
            index = np.arange(part.start, part.stop, dtype=np.int64)
            out[part] = _by_fraction(_mix(index, split.seed), valid, test)
        return out
    if method == "hash":
        return _by_fraction(users, valid, test)
    # user_time: per user, by time, ties in the files' order
    index = np.arange(rows, dtype=np.int64)
    order = np.lexsort((index, times, users))
    sorted_users = users[order]
    starts = np.flatnonzero(np.r_[True, sorted_users[1:] != sorted_users[:-1]])
    counts = np.diff(np.r_[starts, rows])
    group_start = np.repeat(starts, counts)
    out = np.empty(rows, dtype=np.int8)
    out[order] = _cut(index - group_start, np.repeat(counts, counts), valid, test)
    return out
