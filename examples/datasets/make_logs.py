"""Write synthetic click logs as Parquet, in the form examples/datasets/my_ctr.yaml declares.

    python examples/datasets/make_logs.py                     # 200,000 rows into data/
    python examples/datasets/make_logs.py --rows 10000000 --out /big/disk/logs

Labels follow a hidden logistic model of the features (so a model can learn them); ids are
Zipf-distributed as in real logs; a few values are missing. Written one part of at most
1,000,000 rows at a time, so memory stays flat whatever ``--rows`` is.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PART_ROWS = 1_000_000
SITES, APPS, DEVICES, ITEMS, USERS, GENRES = 300, 50, 200_000, 20_000, 100_000, 20


def _ids(prefix: str, count: int) -> pa.Array:
    return pa.array([f"{prefix}{i}" for i in range(count)], pa.string())


def _zipf(rng: np.random.Generator, count: int, rows: int) -> np.ndarray:
    return (np.minimum(rng.zipf(1.2, rows), count) - 1).astype(np.int32)


def _lists(rng: np.random.Generator, rows: int, longest: int, count: int) -> pa.Array:
    """A list column of dictionary ids: each row 0..longest values."""
    lengths = rng.integers(0, longest + 1, rows)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = _zipf(rng, count, int(offsets[-1]))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def part(rows: int, seed: int, first_request: int, weights: dict) -> pa.Table:
    rng = np.random.default_rng(seed)
    site, app = _zipf(rng, SITES, rows), _zipf(rng, APPS, rows)
    item, user = _zipf(rng, ITEMS, rows), _zipf(rng, USERS, rows)
    device = _zipf(rng, DEVICES, rows)
    count = np.floor(rng.lognormal(1.0, 1.2, rows))
    dwell = rng.exponential(30.0, rows)
    price = rng.normal(20.0, 6.0, rows)
    genres = _lists(rng, rows, 4, GENRES)
    history = _lists(rng, rows, 40, ITEMS)
    logit = (
        -1.0
        + weights["site"][site]
        + weights["item"][item]
        + weights["user"][user]
        + 0.3 * np.log1p(count)
        - 0.02 * (price - 20.0)
    )
    click = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.int8)
    like = (click & (rng.random(rows) < 1 / (1 + np.exp(-weights["item"][item])))).astype(np.int8)
    missing = rng.random(rows) < 0.03

    def strings(prefix: str, ids: np.ndarray, count_: int) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(ids), _ids(prefix, count_))

    genre_names = _ids("g", GENRES)
    item_names = _ids("i", ITEMS)
    return pa.table(
        {
            "click": click,
            "like": like,
            "request_id": np.arange(first_request, first_request + rows) // 5,
            "ts": 1_700_000_000 + np.sort(rng.integers(0, 86_400 * 30, rows)),
            "user_id": strings("u", user, USERS),
            "item_id": strings("i", item, ITEMS),
            "site": pa.array(np.where(missing, None, site.astype(str)).tolist(), pa.string()),
            "app": strings("a", app, APPS),
            "device_id": strings("d", device, DEVICES),
            "count": pa.array(count, mask=missing),
            "dwell": dwell,
            "price": price,
            "genres": pa.ListArray.from_arrays(genres.offsets, genre_names.take(genres.values)),
            "hist_items": pa.ListArray.from_arrays(
                history.offsets, item_names.take(history.values)
            ),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    weights = {
        "site": rng.normal(0, 0.8, SITES),
        "item": rng.normal(0, 0.8, ITEMS),
        "user": rng.normal(0, 0.5, USERS),
    }
    done = 0
    for number, start in enumerate(range(0, args.rows, PART_ROWS)):
        rows = min(PART_ROWS, args.rows - start)
        table = part(rows, args.seed * 100_003 + number, start, weights)
        pq.write_table(table, args.out / f"part-{number:05d}.parquet")
        done += rows
    print(f"wrote {done:,} rows to {args.out}")


if __name__ == "__main__":
    main()
