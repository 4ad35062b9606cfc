"""Fields made from other columns (``from``, ``derive``, ``prefix``), labels by a threshold,
and a history made of the log's own rows: what MovieLens's schema file needs, checked
against an independent pandas computation on a small log with ties, nulls and unseen
values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nas.core.errors import ConfigError, DataError
from nas.data import prepare_dataset

SCHEMA = """\
name: rated
source: {format: parquet, path: log.parquet}
labels: [{name: like, column: rating, at_least: 4}]
keys: {user: user, timestamp: ts}
split: {method: user_time, valid: 0.2, test: 0.2}
features:
  - {name: item, type: categorical, from: item_id, side: candidate}
  - {name: zip, type: categorical, from: zip_code, side: request}
  - {name: zip3, type: categorical, from: zip_code, prefix: 3, side: request}
  - {name: year, type: categorical, from: release, derive: year}
  - {name: hour, type: categorical, from: ts, derive: hour, side: request}
  - {name: weekday, type: categorical, from: ts, derive: weekday, side: request}
  - {name: history, type: sequence, from: rows, vocab_of: item, action: rating, max_len: 5}
"""


def ratings(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    zips = rng.choice(["12345", "12399", "98765", "5", None], rows).tolist()
    return pd.DataFrame(
        {
            "user": [f"u{i}" for i in rng.integers(0, 12, rows)],
            "item_id": [f"m{i}" for i in rng.integers(0, 25, rows)],
            "rating": rng.integers(1, 6, rows),
            # few distinct times, so many rows share one (a request)
            "ts": 1_000_000_000 + 3_600 * rng.integers(0, 60, rows),
            "zip_code": zips,
            "release": rng.choice(["1995", "1995.0", "2001.0", ""], rows).tolist(),
        }
    )


def prepare(tmp_path: Path, frame: pd.DataFrame, schema: str = SCHEMA):
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "log.parquet")
    (tmp_path / "rated.yaml").write_text(schema)
    return prepare_dataset(str(tmp_path / "rated.yaml"), tmp_path / "cache")[0]


def values(dataset, field: str) -> list[str | None]:
    """Each stored row's value of a categorical field, read back through its vocabulary."""
    recipe = next(r for r in dataset.raw_form().categorical if r["field"] == field)
    names = {i: v for v, i in recipe["vocab"].items()}
    column = [f.name for f in dataset.schema.of_kind("categorical")].index(field)
    return [names.get(int(i)) for i in dataset.array("categorical")[:, column]]


def test_fields_from_other_columns_are_derived_as_pandas_derives_them(tmp_path: Path) -> None:
    frame = ratings()
    dataset = prepare(tmp_path, frame)
    rows = frame.iloc[np.asarray(dataset.array("source_row"))]
    assert np.array_equal(dataset.array("label"), (rows["rating"] >= 4).to_numpy(np.int8))
    assert dataset.manifest["label_rule"] == "rating >= 4"
    hour = (rows["ts"] // 3600) % 24 + 1
    weekday = (rows["ts"] // 86400 + 3) % 7 + 1
    year = [str(int(float(y))) if y else None for y in rows["release"]]
    zips = [z if isinstance(z, str) else None for z in rows["zip_code"]]
    zip3 = [z[:3] if z else None for z in zips]
    # values in train are in the vocabulary; an unseen one is out of vocabulary (None here)
    for field, want in (
        ("hour", hour.astype(str).tolist()),
        ("weekday", weekday.astype(str).tolist()),
        ("year", year),
        ("zip3", zip3),
        ("zip", zips),
        ("item", rows["item_id"].tolist()),
    ):
        got = values(dataset, field)
        train = set(np.asarray(want, dtype=object)[dataset.split_rows("train")].tolist())
        expected = [w if w in train else None for w in want]
        assert got == expected, field
    cards = {f.name: f.cardinality for f in dataset.schema.fields}
    assert cards["zip3"] == 2 + 3 and cards["year"] == 2 + 2  # 123, 987, 5; 1995, 2001


def test_a_history_from_rows_is_the_users_earlier_rows(tmp_path: Path) -> None:
    frame = ratings()
    dataset = prepare(tmp_path, frame)
    history = dataset.schema.history
    assert history.actions == 6 and history.max_len == 5  # ratings 1-5, 0 unknown
    source = np.asarray(dataset.array("source_row"))
    items = dict(zip(values(dataset, "item"), dataset.array("categorical")[:, 0], strict=False))
    for split in ("train", "valid", "test"):
        rows = dataset.split_rows(split)
        got = dataset.features(split).history.tensor().numpy()  # [B, L, (item, action, age)]
        for out, row in zip(got, rows, strict=True):
            mine = frame.iloc[source[row]]
            earlier = frame[(frame["user"] == mine["user"]) & (frame["ts"] < mine["ts"])]
            earlier = earlier.assign(row=earlier.index).sort_values(["ts", "row"]).tail(5)
            n = len(earlier)
            want_items = [items.get(i, 1) for i in earlier["item_id"]]  # 1: out of vocabulary
            assert out[:n, 0].tolist() == want_items
            assert out[:n, 1].tolist() == earlier["rating"].tolist()
            assert out[:n, 2].tolist() == (mine["ts"] - earlier["ts"]).tolist()
            assert (out[n:] == 0).all()


def test_requests_and_users_follow_the_keys(tmp_path: Path) -> None:
    frame = ratings()
    dataset = prepare(tmp_path, frame)
    rows = frame.iloc[np.asarray(dataset.array("source_row"))]
    pairs = rows["user"] + "@" + rows["ts"].astype(str)
    requests = np.asarray(dataset.array("request_key"))
    assert pd.Series(requests).groupby(pairs.to_numpy()).nunique().eq(1).all()
    assert len(np.unique(requests)) == pairs.nunique() == dataset.manifest["requests"]
    assert dataset.manifest["users"] == frame["user"].nunique()
    assert dataset.manifest["items"] == frame["item_id"].nunique()
    # each user's events are together and in time order
    offsets, times = dataset.array("user_offsets"), dataset.array("event_time")
    for a, b in zip(offsets[:-1], offsets[1:], strict=True):
        assert (np.diff(times[a:b]) >= 0).all()


def test_served_rows_encode_to_the_prepared_features(tmp_path: Path) -> None:
    dataset = prepare(tmp_path, ratings())
    rows = dataset.raw_rows("test", 30)
    assert {"ts", "zip_code", "release", "item_id", "history"} <= set(rows[0])
    assert "hour" not in rows[0], "a client sends the time, not the derived hour"
    again = dataset.raw_form().features(rows, dataset.schema)
    want = dataset.features("test")[torch.arange(30)]
    assert torch.equal(again.categorical, want.categorical)
    assert torch.equal(again.history.tensor(), want.history.tensor())


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (  # a 0/1 column, then: the rating is also each event's action, a number
            lambda s: s.replace(", at_least: 4", ""),
            "column 'rating' is read as label (label like) and as number",
        ),
        (lambda s: s.replace("from: release, derive", "derive"), "need from:"),
        (lambda s: s.replace("from: ts, derive: hour", "from: zip_code, derive: hour"), "from: ts"),
        (lambda s: s.replace("from: item_id,", "from: rating,"), "reads the label column"),
        (lambda s: s.replace("prefix: 3", "prefix: 3, derive: year"), "not both"),
        (
            lambda s: s.replace("from: release, derive: year}", "from: ts}"),
            "column 'ts' is read as timestamp",
        ),
        (lambda s: s.replace("keys: {user: user, timestamp: ts}", "keys: {}"), "needs keys"),
        (
            lambda s: s.replace("action: rating", "action: rating, sep: '|'"),
            "drop sep",
        ),
        (lambda s: s.replace("from: item_id,", "action: rating, from: item_id,"), "action"),
        (lambda s: s.replace("derive: hour", "derive: hour, tz: Mars/Olympus"), "not a time zone"),
        (lambda s: s.replace("derive: hour", "derive: hour, tz: ''"), "not a time zone"),
        (lambda s: s.replace("derive: year", "derive: year, tz: UTC"), "tz applies to derive"),
    ],
)
def test_a_bad_derived_field_is_named(tmp_path: Path, change, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        prepare(tmp_path, ratings(40), change(SCHEMA))
    assert words in str(err.value) and "rated.yaml" in str(err.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (
            lambda f: f.assign(rating=f["rating"].where(f.index != 7)),
            "row 8: column 'rating' is empty",
        ),
        (lambda f: f.assign(rating=f["rating"].where(f.index != 3, 400)), "row 4: column 'rating'"),
        (lambda f: f.assign(rating=f["rating"] + 0.5), "integer action"),
    ],
)
def test_bad_values_fail_before_anything_is_written(tmp_path: Path, damage, words: str) -> None:
    with pytest.raises(DataError) as err:
        prepare(tmp_path, damage(ratings(40)))
    assert words in str(err.value) and "log.parquet" in str(err.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_the_mapped_rows_are_the_rows_in_memory(tmp_path: Path) -> None:
    dataset = prepare(tmp_path, ratings())
    mapped, loaded = dataset.mapped_features(("train", "valid")), dataset.features("train")
    rows = torch.arange(len(loaded))
    assert torch.equal(mapped[rows].categorical, loaded.categorical)
    assert torch.equal(mapped[rows].history.tensor(), loaded.history.tensor())


TEXTS = st.one_of(
    st.none(),
    st.sampled_from(["", " ", "12345", "1995", "1995.0", "1995.5", "-3", "19950", "2001.0x"]),
    st.text(max_size=6),
)


@settings(max_examples=30, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    zips=st.lists(TEXTS, min_size=40, max_size=40),
    releases=st.lists(TEXTS, min_size=40, max_size=40),
    # any time up to the year 5000 (a later one is refused: a finer unit's, read as seconds)
    times=st.lists(st.integers(-(2**40), 10**11 - 1), min_size=40, max_size=40),
    tz=st.sampled_from([None, "America/New_York", "Asia/Kolkata"]),
)
def test_a_logs_own_rows_served_give_the_fields_it_derived_for_training(
    tmp_path_factory, zips, releases, times, tz
) -> None:
    """Prefixes, release years and hours and weekdays (in UTC or a zone) of any text and
    time: the file's rows, as a served model reads them, by rows and by columns, give the
    ids prepare stored, or are refused."""
    from nas.data.raw import RawInputError
    from nas.data.raw_table import table_features
    from nas.data.schema import Features

    frame = ratings(40).assign(zip_code=zips, release=releases, ts=times)
    schema = SCHEMA
    for part in ("hour", "weekday") if tz else ():
        schema = schema.replace(f"derive: {part}", f"derive: {part}, tz: {tz}")
    try:
        dataset = prepare(tmp_path_factory.mktemp("derived"), frame, schema)
    except DataError:
        return
    form, schema = dataset.raw_form(), dataset.schema
    rows = pa.Table.from_pandas(frame, preserve_index=False).to_pylist()
    try:
        served = form.features(rows, schema)
    except RawInputError:
        return
    order = np.argsort(np.asarray(dataset.array("source_row")))  # stored rows, as read
    stored = Features.from_arrays(dataset._row_arrays(order), dataset.event_arrays(), schema)
    assert torch.equal(served.categorical, stored.categorical)
    by_columns = table_features(form, pa.Table.from_pandas(frame, preserve_index=False), schema)
    assert by_columns is not None and torch.equal(by_columns.categorical, stored.categorical)


@pytest.mark.parametrize("tz", ["America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"])
def test_hours_and_weekdays_in_a_time_zone_are_its_local_ones(tmp_path: Path, tz: str) -> None:
    """derive hour and weekday with tz: each row's local hour and weekday over a year, summer
    time included (Kolkata's half-hour offset, Lord Howe's half-hour summer shift), as
    pandas computes them; the served rows give the ids stored."""
    frame = ratings()
    rng = np.random.default_rng(1)
    frame["ts"] = rng.integers(1_704_067_200, 1_735_689_600, len(frame))  # 2024
    schema = SCHEMA.replace("derive: hour", f"derive: hour, tz: {tz}")
    schema = schema.replace("derive: weekday", f"derive: weekday, tz: {tz}")
    dataset = prepare(tmp_path, frame, schema)
    rows = frame.iloc[np.asarray(dataset.array("source_row"))]
    local = pd.to_datetime(rows["ts"], unit="s", utc=True).dt.tz_convert(tz)
    for field, want in (
        ("hour", (local.dt.hour + 1).astype(str).tolist()),
        ("weekday", (local.dt.day_of_week + 1).astype(str).tolist()),
    ):
        train = set(np.asarray(want, dtype=object)[dataset.split_rows("train")].tolist())
        assert values(dataset, field) == [w if w in train else None for w in want], field
    utc = (rows["ts"] // 3600) % 24 + 1
    assert (utc.to_numpy() != local.dt.hour.to_numpy() + 1).all()  # not UTC's hours
    served = dataset.raw_form().features(dataset.raw_rows("test", 30), dataset.schema)
    assert torch.equal(served.categorical, dataset.features("test")[torch.arange(30)].categorical)
