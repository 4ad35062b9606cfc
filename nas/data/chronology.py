"""A history made of the log's own rows: a schema file's sequence ``from: rows``.

Each row's history is its user's earlier rows, by ``keys.timestamp``, rows of the same time
excluded (they are one request: the user saw them together). The events are the rows
themselves, ordered by (user, time, the files' order), users in the order they first appear;
a row's history is the range of events from its user's first to its request's first.

A request is a user's rows at one time; it is also what ``gauc_request`` groups by when the
schema declares no ``keys.request``.

Memory: a few int64 per row (about 50 bytes a row while preparing), as the split by user and
time needs every row's user and time anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Chronology:
    order: np.ndarray  # [R] event k is row order[k]
    event_of_row: np.ndarray  # [R] the inverse: row r is event event_of_row[r]
    user_offsets: np.ndarray  # [U + 1] user u's events: user_offsets[u]:user_offsets[u + 1]
    history_start: np.ndarray  # [R] by event: its user's first event
    history_end: np.ndarray  # [R] by event: its request's first event
    request: np.ndarray  # [R] by event: its request's number, from 0
    time: np.ndarray  # [R] by event: its time

    @classmethod
    def of(cls, users: np.ndarray, times: np.ndarray) -> Chronology:
        """From every row's user (any integer key, e.g. a hash) and time."""
        rows = len(users)
        index = np.arange(rows, dtype=np.int64)
        _, first, inverse = np.unique(users, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        user = rank[inverse.reshape(-1)]
        order = np.lexsort((index, times, user))
        user, stamps = user[order], times[order]
        new_user = np.r_[True, user[1:] != user[:-1]]
        new_request = new_user | np.r_[True, stamps[1:] != stamps[:-1]]
        user_starts = np.flatnonzero(new_user)
        request = np.cumsum(new_request) - 1
        event_of_row = np.empty(rows, dtype=np.int64)
        event_of_row[order] = index
        return cls(
            order=order,
            event_of_row=event_of_row,
            user_offsets=np.append(user_starts, rows).astype(np.int64),
            history_start=user_starts[np.cumsum(new_user) - 1],
            history_end=np.flatnonzero(new_request)[request],
            request=request,
            time=stamps,
        )

    @property
    def users(self) -> int:
        return len(self.user_offsets) - 1

    @property
    def requests(self) -> int:
        return int(self.request[-1]) + 1 if len(self.request) else 0

    def positions(self, split: np.ndarray) -> np.ndarray:
        """Where each row is stored: split by split (train, valid, test), each in event
        order, so a user's rows of one split are together and in time order."""
        codes = split[self.order]
        at = np.empty(len(split), dtype=np.int64)
        base = 0
        for code in range(3):
            events = np.flatnonzero(codes == code)
            at[self.order[events]] = base + np.arange(len(events))
            base += len(events)
        return at
