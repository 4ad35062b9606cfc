"""Labels read from another log: a click log beside the impressions, a purchase log beside
the views. A schema file's label ``joined`` names that log (a source of its own, with its
own ``where``), the key its rows share with the source's (an impression's id; a user's,
an item's), and optionally the other log's time column and a span:

    labels:
      - name: click
        joined: {source: {format: parquet, path: clicks/*.parquet}, key: impression_id}
      - name: purchase
        joined:
          source: {format: delta, path: events, where: {event_name: {one_of: [purchase]}}}
          key: [user_id, item_id]        # or {this source's column: the other's}
          time: event_time               # its rows at or after this row's keys.timestamp
          within: 7d                     # ... and at most 7 days after it

A row's label is 1 where the other log holds a row of the same key (all of its columns
given, compared as text) that is, with ``time``, at or after the row's time and, with
``within``, at most that long after it; else 0 (a row whose key is empty: 0). A row of the
other log whose key (or time) is empty is passed by. The other log's keys (hashed, 8 bytes
each) and times are read once, before prepare's first pass, and held in memory sorted, so
a row's label is a binary search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nas.data.encoding import hashed
from nas.data.schema_file import Condition, Joined, SourceFiles
from nas.data.source_rows import ColumnsOf, Rows, with_last_resolved

MIXER = np.uint64(0x9E3779B97F4A7C15)  # (a key of several columns: their hashes mixed)
TIME_BITS = 34  # a time's place in an event's sort key: 2**34 s, some 544 years


def key_hashes(arrays: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's key of one or more text columns as a 64-bit hash, and where a column of
    it is empty."""
    missing = np.zeros(len(arrays[0]), dtype=bool)
    key = np.zeros(len(arrays[0]), dtype=np.uint64)
    for array in arrays:
        missing |= ~np.asarray(array.is_valid(), dtype=bool)
        key = key * MIXER + hashed(array).view(np.uint64)
    return key, missing


@dataclass(frozen=True)
class JoinedEvents:
    """The other log's rows of a joined label: their keys' hashes, sorted; with a time,
    each row's place among them as one sortable number (``_order``) and its time."""

    joined: Joined
    keys: np.ndarray  # uint64, sorted (with a time: by key, then time)
    rows: int  # the other log's rows read that can label one (a key and a time given)
    times: np.ndarray | None = None  # int64 unix seconds
    distinct: np.ndarray | None = None  # the keys, each once
    order: np.ndarray | None = None  # per row: its key's rank in distinct, then its time
    first: int = 0  # the earliest time

    @classmethod
    def read(cls, joined: Joined, files: SourceFiles, progress=None) -> JoinedEvents:
        """The rows of ``files`` (the other log's, its ``where`` applied), a pass over their
        key and time columns (``DataError`` naming a file that lacks one, or a value that
        is no time)."""
        others = [other for _, other in joined.pairs()]
        kinds = {other: "text" for other in others}
        kinds |= {joined.time: "timestamp"} if joined.time else {}
        source = with_last_resolved(joined.source, files)
        if joined.time and joined.time not in (source.where or {}):
            # a row without a time follows no row: passed by (as one whose key is empty)
            timed = Condition.model_construct(since=-(2**63))
            source = source.model_copy(
                update={"where": {**(source.where or {}), joined.time: timed}}
            )
        reader = Rows(
            ColumnsOf(source, kinds),
            files.files,
            files.partitions,
            None,
            files.views,
            files.passed_by,
        )
        reader.check_columns()
        keys, times, rows = [], [], 0
        for batch in reader.batches(list(kinds)):
            key, missing = key_hashes([batch.columns[c] for c in others])
            keys.append(key[~missing])
            if joined.time:
                times.append(batch.columns[joined.time].to_numpy(zero_copy_only=False)[~missing])
            rows += int((~missing).sum())
            if progress is not None:
                progress(f"0/3 reading {joined.source.path}", len(batch), None)
        key = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        if not joined.time or len(key) == 0:
            return cls(joined, np.unique(key), rows)
        time = np.concatenate(times)
        at = np.lexsort((time, key))
        key, time = key[at], time[at]
        distinct = np.unique(key)
        first = int(time.min())
        order = _order(np.searchsorted(distinct, key), time, first)
        return cls(joined, key, rows, time, distinct, order, first)

    def labels(self, keys: list[pa.Array], times: np.ndarray | None) -> np.ndarray:
        """Each row's label (0 or 1, int8): its key's columns ``keys`` (text), and with a
        ``time`` the rows' times (int64 unix seconds)."""
        key, missing = key_hashes(keys)
        if len(self.keys) == 0:
            return np.zeros(len(key), dtype=np.int8)
        at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        found = (self.keys[at] == key) & ~missing
        if self.order is None or times is None:
            return found.astype(np.int8)
        # the first of the key's rows at or after the row's time
        rank = np.searchsorted(self.distinct, key)
        j = np.searchsorted(self.order, _order(rank, np.asarray(times, np.int64), self.first))
        found &= j < len(self.order)
        j = np.minimum(j, len(self.order) - 1)
        found &= (self.order[j] >> TIME_BITS) == rank  # (the same key)
        if self.joined.within is not None:
            found &= self.times[j] - times <= self.joined.within
        return found.astype(np.int8)


def _order(rank: np.ndarray, times: np.ndarray, first: int) -> np.ndarray:
    """One sortable number per row: its key's rank, then its time since ``first`` (a time
    before it as ``first``'s: at or after it, every row of the other log follows)."""
    since = np.clip(times - first, 0, (1 << TIME_BITS) - 1)
    return (rank.astype(np.int64) << TIME_BITS) | since
