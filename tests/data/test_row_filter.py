"""A schema file's ``source.where``: the rows read are those pandas keeps by the same
conditions, files whose partition folders fail one are never opened, and what cannot be
read so is refused naming the condition, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nas.cli import main
from nas.core.errors import ConfigError, DataError
from nas.data import prepare_dataset
from nas.data.row_files import HIVE_NULL

DAYS = ["2024-05-01", "2024-05-02", "2024-05-03", "2024-05-04"]
COUNTRIES = ["US", "DE", None]
SITES = ["a", "b", "c", None]
MIDNIGHT = 1_714_521_600  # 2024-05-01, UTC
GROUP = 8  # rows a Parquet row group holds


def logs(rows: int, seed: int) -> pd.DataFrame:
    """Rows of four days and three countries (one of them missing), each with its time
    within its day, a site (sometimes missing), a price and a click."""
    rng = np.random.default_rng(seed)
    day = rng.integers(0, len(DAYS), rows)
    return pd.DataFrame(
        {
            "date": [DAYS[d] for d in day],
            "country": [COUNTRIES[c] for c in rng.integers(0, len(COUNTRIES), rows)],
            "site": [SITES[s] for s in rng.integers(0, len(SITES), rows)],
            "price": np.round(rng.uniform(0, 100, rows), 2),
            "ts": MIDNIGHT + day * 86_400 + rng.integers(0, 86_400, rows),
            "user_id": [f"u{u}" for u in rng.integers(0, 30, rows)],
            "click": rng.integers(0, 2, rows),
        }
    )


def write_source(folder: Path, frame: pd.DataFrame, layout: str) -> tuple[str, list[pd.DataFrame]]:
    """The rows as Hive-style folders of Parquet (``date=.../country=.../``, the folders'
    values not in the files) or one CSV file; the source line, and each file's rows in the
    order prepare reads the files, with their partition columns."""
    if layout == "csv":
        folder.mkdir(parents=True)
        frame.to_csv(folder / "logs.csv", index=False)
        return "{format: csv, path: data/logs.csv}", [frame]
    parts = []
    for day in DAYS:
        for country in COUNTRIES:
            mine = frame[
                (frame.date == day) & (frame.country.fillna(HIVE_NULL) == (country or HIVE_NULL))
            ].sort_values("ts", kind="stable")  # (row groups of GROUP rows, each its own times)
            if mine.empty:
                continue
            place = folder / f"date={day}" / f"country={country or HIVE_NULL}"
            place.mkdir(parents=True)
            table = pa.Table.from_pandas(
                mine.drop(columns=["date", "country"]), preserve_index=False
            )
            pq.write_table(table, place / "part-0.parquet", row_group_size=GROUP)
            parts.append((place / "part-0.parquet", mine))
    parts.sort(key=lambda p: p[0])
    return "{format: parquet, path: data/**/*.parquet}", [rows for _, rows in parts]


def schema(folder: Path, source: str, where: dict) -> Path:
    path = folder / "logs.yaml"
    path.write_text(
        f"name: logs\nsource: {source[:-1]}, where: {json.dumps(where)}}}\nlabels: [click]\n"
        "keys: {user: user_id, timestamp: ts}\nsplit: {method: random, valid: 0.1, test: 0.1}\n"
        "features:\n  - {name: [user_id, site, country], type: categorical}\n"
        "  - {name: price, type: dense}\n"
    )
    return path


# conditions as pandas reads them: (the schema's, on the frame a mask)
def kept_by(column: str, condition: dict, frame: pd.DataFrame) -> np.ndarray:
    values = frame[column]
    if "one_of" in condition:
        return values.isin(condition["one_of"]).to_numpy()
    if "none_of" in condition:
        return (~values.isin(condition["none_of"])).to_numpy()  # an empty value is none
    if "at_least" in condition or "below" in condition:
        low, high = condition.get("at_least", -np.inf), condition.get("below", np.inf)
        return ((values >= low) & (values < high)).to_numpy()
    times = (
        (pd.to_datetime(values, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta("1s")
        if column == "date"
        else values
    ).to_numpy()
    low, high = (
        seconds(condition.get(k, when)) for k, when in (("from", "1970"), ("until", "2100"))
    )
    return (times >= low) & (times < high)


def overlaps(values: pd.Series, condition: dict) -> bool:
    """Whether a range condition leaves room between a file's least and greatest value
    (as its Parquet statistics give them to prepare)."""
    low, high = values.min(), values.max()
    if "at_least" in condition or "below" in condition:
        bounds = condition.get("at_least", -np.inf), condition.get("below", np.inf)
    else:
        bounds = (
            seconds(condition.get(k, when)) for k, when in (("from", "1970"), ("until", "2100"))
        )
    at_least, below = bounds
    return high >= at_least and low < below


def seconds(text: str) -> float:
    """A moment's unix seconds, UTC unless it names its zone."""
    moment = pd.Timestamp(text)
    return (moment if moment.tzinfo else moment.tz_localize("UTC")).timestamp()


def moment() -> st.SearchStrategy:
    return st.sampled_from(
        ["2024-05-02", "2024-05-03T12:00:00", "2024-05-04", "2024-05-02T06:30:00Z"]
    )


def value_set(values: list) -> st.SearchStrategy:
    return st.lists(st.sampled_from([v for v in values if v]), min_size=1, max_size=2, unique=True)


def conditions() -> st.SearchStrategy:
    ranges = st.fixed_dictionaries({}, optional={"from": moment(), "until": moment()}).filter(
        lambda c: c and (len(c) < 2 or seconds(c["from"]) < seconds(c["until"]))
    )
    prices = st.fixed_dictionaries(
        {}, optional={"at_least": st.sampled_from([10, 40.5]), "below": st.sampled_from([60, 95])}
    ).filter(bool)
    values = {c: st.one_of(
        st.builds(lambda v: {"one_of": v}, value_set(vals)),
        st.builds(lambda v: {"none_of": v}, value_set(vals)),
    ) for c, vals in (("country", COUNTRIES), ("site", SITES))}  # fmt: skip
    return st.fixed_dictionaries(
        {},
        optional={"date": ranges, "ts": ranges, "price": prices, **values},
    ).filter(bool)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(where=conditions(), layout=st.sampled_from(["hive", "csv"]), seed=st.integers(0, 3))
def test_the_rows_read_are_those_pandas_keeps(tmp_path_factory, where, layout, seed) -> None:
    """Random conditions on partition folders (a date as text, a country with Hive's
    null), on the files' own columns (text with missing values, numbers, unix times), in
    Parquet folders or one CSV file: the dataset holds exactly the rows pandas keeps, each
    with its label, and ``source_row`` places them among the rows of the files read;
    files whose folders fail a condition are counted as passed by, not read."""
    folder = tmp_path_factory.mktemp("where")
    source, files = write_source(folder / "data", logs(400, seed), layout)
    path = schema(folder, source, where)
    partitioned = {"date", "country"} if layout == "hive" else set()
    read, pruned = [], 0
    for rows in files:  # passed by: a folder's value fails its condition, or a range out
        first = rows.iloc[:1]  # of each of a Parquet file's row groups' least and greatest
        folders = all(kept_by(c, where[c], first)[0] for c in where if c in partitioned)
        ranges = [c for c in ("ts", "price") if c in where] if layout == "hive" else []
        groups = [rows.iloc[i : i + GROUP] for i in range(0, len(rows), GROUP)]
        if folders and any(all(overlaps(g[c], where[c]) for c in ranges) for g in groups):
            read.append(rows)
        else:
            pruned += 1
    frame = pd.concat(read, ignore_index=True) if read else logs(0, 0)
    mask = np.ones(len(frame), dtype=bool)
    for column, condition in where.items():
        mask &= kept_by(column, condition, frame)
    try:
        dataset, _ = prepare_dataset(str(path), folder / "cache")
    except DataError as err:  # no rows, or none of a label's values among the training rows
        assert mask.sum() < 60, err  # too few rows for three splits and both labels
        if mask.sum() == 0:
            assert "has no rows where" in str(err)
        else:
            assert "split empty" in str(err) or "nothing to learn" in str(err), err
        assert not (folder / "cache" / "logs").exists()
        return
    stored = np.asarray(dataset.array("source_row"))
    assert sorted(stored) == np.flatnonzero(mask).tolist()
    labels = np.asarray(dataset.array("label"))
    assert (labels == frame.click.to_numpy()[stored]).all()
    said = dataset.manifest["where"]
    assert said["files_passed_by"] == pruned
    assert said["rows_passed_by"] == len(frame) - mask.sum()


def test_an_iceberg_tables_files_its_metadata_rules_out_are_not_read(tmp_path: Path) -> None:
    """An Iceberg table partitioned by country, a day appended at a time: a range of
    times, a country and a number's bound rule out files by the partitions and the column
    bounds its manifests record (pyiceberg's planning), and the rows read are those pandas
    keeps of the whole table."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import IdentityTransform

    catalog = SqlCatalog(
        "local", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=tmp_path.as_uri()
    )
    catalog.create_namespace("db")
    frame = logs(800, 3).assign(
        country=lambda f: f.country.fillna("FR"),
        ts=lambda f: pd.to_datetime(f.ts, unit="s").astype("datetime64[us]"),
        count=lambda f: (f.price * 10).astype("int64"),
    )
    table = pa.Table.from_pandas(frame, preserve_index=False)
    created = catalog.create_table("db.events", schema=table.schema)
    with created.update_spec() as spec:
        spec.add_field("country", IdentityTransform(), "country")
    for day in DAYS:  # a file per day and country
        created.append(pa.Table.from_pandas(frame[frame.date == day], preserve_index=False))
    folder = Path(created.metadata.location.removeprefix("file://"))
    where = {
        "ts": {"from": DAYS[1], "until": DAYS[3]},
        "country": {"one_of": ["US", "DE"]},
        "count": {"at_least": 99.5},  # (an integer column: count >= 100)
    }
    path = schema(tmp_path, f"{{format: iceberg, path: {folder}}}", where)
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    mask = np.ones(len(frame), dtype=bool)
    for column, condition in where.items():
        mask &= kept_by(column, condition, frame.assign(ts=frame.ts.astype("int64") // 10**6))
    assert dataset.manifest["rows"] == mask.sum() > 0
    passed = dataset.manifest["where"]
    assert passed["files_passed_by"] == 4 * 3 - 2 * 2  # the other days and country
    opened = frame.date.isin(DAYS[1:3]) & frame.country.isin(["US", "DE"])
    assert passed["rows_passed_by"] == opened.sum() - mask.sum()


def test_a_tables_renamed_time_is_weighed_by_the_statistics_of_the_files_storing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Iceberg table whose time column was renamed after its files were written (they
    store it under its old name): ``last`` finds the newest time in their footers'
    statistics, with no pass over the column, and in each file read the row groups whose
    times all fall before the window are passed by; the rows read are those pandas keeps."""
    from pyiceberg.catalog.sql import SqlCatalog

    from nas.data import source_rows

    catalog = SqlCatalog(
        "local", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=tmp_path.as_uri()
    )
    catalog.create_namespace("db")
    frame = logs(800, 5).sort_values("ts", kind="stable")
    table = pa.Table.from_pandas(
        frame.assign(ts=pd.to_datetime(frame.ts, unit="s").astype("datetime64[us]")),
        preserve_index=False,
    )
    created = catalog.create_table(
        "db.events", schema=table.schema, properties={"write.parquet.row-group-limit": "16"}
    )
    for day in DAYS:
        created.append(table.filter(pa.compute.equal(table["date"], day)))
    with created.update_schema() as update:
        update.rename_column("ts", "seen_at")
    folder = Path(created.metadata.location.removeprefix("file://"))
    path = tmp_path / "logs.yaml"
    path.write_text(
        f"name: logs\nsource: {{format: iceberg, path: {folder}, "
        "where: {seen_at: {last: 36h}}}\nlabels: [click]\n"
        "keys: {user: user_id, timestamp: seen_at}\n"
        "split: {method: random, valid: 0.1, test: 0.1}\n"
        "features:\n  - {name: [user_id, site, country], type: categorical}\n"
    )

    def no_pass(*args, **kwargs):
        raise AssertionError("a pass over the column to find its newest time")

    read, groups_of = [], {}
    reading = source_rows.Rows._read

    def recorded(self, file, columns, groups=None, start=0):
        total = groups_of.setdefault(file, pq.read_metadata(file).num_row_groups)
        read.append((total, total if groups is None else len(groups)))
        return reading(self, file, columns, groups, start)

    monkeypatch.setattr(source_rows, "ColumnsOf", no_pass)
    monkeypatch.setattr(source_rows.Rows, "_read", recorded)
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    kept = frame.ts >= frame.ts.max() - 36 * 3600 + 1
    stored = np.asarray(dataset.array("label"))
    assert len(stored) == kept.sum() and stored.sum() == frame.click[kept].sum()
    assert "(the last 36h)" in dataset.manifest["where"]["rule"]
    assert any(some < total for total, some in read), "no row group was passed by"


def test_a_delta_tables_partitions_out_of_range_are_not_read(tmp_path: Path, capsys) -> None:
    """A Delta table partitioned by day, read from one day until another: the files of the
    other days are passed by by their partition values as the log records them, and
    `nas data prepare` and `nas data inspect` say what was read."""
    from deltalake import write_deltalake

    frame = logs(600, 1)
    for day in DAYS:
        write_deltalake(
            tmp_path / "events", frame[frame.date == day], mode="append", partition_by=["date"]
        )
    path = schema(
        tmp_path, "{format: delta, path: events}", {"date": {"from": DAYS[1], "until": DAYS[3]}}
    )
    assert (
        main(["data", "prepare", str(path), "--cache-dir", str(tmp_path / "cache"), "--json"]) == 0
    )
    said = json.loads(capsys.readouterr().out)
    assert said["where"] == {
        "rule": "2024-05-02 <= date < 2024-05-04",
        "rows_passed_by": 0,
        "files_passed_by": 2,
    }
    assert said["rows"] == frame.date.isin(DAYS[1:3]).sum()
    assert main(["data", "inspect", "logs", "--cache-dir", str(tmp_path / "cache")]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "rows read where 2024-05-02 <= date < 2024-05-04 (2 whole files passed by)" in shown


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ({"site": {}}, "source.where.site: give one_of or none_of"),
        ({"site": {"one_of": ["a"], "at_least": 1}}, "not one_of and at_least/below"),
        ({"price": {"at_least": 50, "below": 10}}, r"leave no value between them \(50 and 10\)"),
        (
            {"ts": {"from": "2024-05-02", "until": "2024-05-01T12:00:00"}},
            r"leave no moment between them \(2024-05-02T00:00:00\+00:00 and 2024-05-01T12",
        ),
        ({"date": {"from": "yesterday"}}, "source.where.date.from: must be a date"),
        ({"site": {"one_of": [True]}}, "a boolean: YAML reads an unquoted yes"),
        ({}, "where names no column"),
    ],
)
def test_a_condition_that_cannot_hold_is_refused_by_its_field(tmp_path: Path, where, words) -> None:
    path = schema(tmp_path, write_source(tmp_path / "data", logs(50, 0), "csv")[0], where)
    with pytest.raises(ConfigError, match=words):
        prepare_dataset(str(path), tmp_path / "cache")


def test_rows_a_condition_cannot_read_or_that_none_meet_are_refused_naming_it(
    tmp_path: Path,
) -> None:
    """A value a condition cannot read names its row, its column and the condition; a
    value no row holds names the values the column holds; a column no file holds is
    named with the files' columns; a bad value in a row read is named by its row in the
    file, the rows passed by before it counted. Nothing is written."""
    frame = logs(200, 2)
    frame["price"] = frame.price.astype(object)
    frame.loc[150, ["price", "ts"]] = "abc", MIDNIGHT + 3 * 86_400  # read by the last case
    source = write_source(tmp_path / "data", frame, "csv")[0]
    site = frame.site.first_valid_index()
    cases = [
        (
            {"site": {"at_least": 3}},
            f"row {site + 1}: column 'site' must be a number, got {frame.site[site]!r} "
            "(source.where: site >= 3)",
        ),
        (
            {"country": {"one_of": ["UK"]}},
            "has no rows where country == 'UK' (source.where): 200 rows by their values passed "
            "by; country == 'UK' holds on none (its values in the first 200 rows read, the most "
            "held first: ",
        ),
        ({"contry": {"one_of": ["US"]}}, "has no column 'contry' (the schema declares it)"),
        ({"ts": {"from": DAYS[2]}}, "row 151: column 'price' must be a number, got 'abc'"),
    ]  # fmt: skip
    assert (frame.ts[:150] < MIDNIGHT + 2 * 86_400).any()  # rows before it passed by
    for where, words in cases:
        path = schema(tmp_path, source, where)
        with pytest.raises(DataError) as caught:
            prepare_dataset(str(path), tmp_path / "cache")
        assert words in " ".join(str(caught.value).split())
        assert not (tmp_path / "cache" / "logs").exists()


@pytest.mark.parametrize("layout", ["hive", "csv", "parquet without statistics"])
def test_the_last_span_of_times_moves_with_the_newest_time(tmp_path: Path, layout) -> None:
    """``{last: 36h}`` reads the rows of the 36 hours before the newest time the source
    holds, whichever way that time is found (Parquet footers' statistics, partition folders'
    dates, a pass over a CSV file or over Parquet written without statistics); a day of
    logs added moves the window, and a prepare reads it."""
    frame = logs(400, 5)
    place = tmp_path / "data"
    if layout == "parquet without statistics":
        place.mkdir()
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table, place / "part-0.parquet", write_statistics=False)
        source = "{format: parquet, path: data/*.parquet}"
    else:
        source = write_source(place, frame, layout)[0]
    for column, span in (("ts", 36 * 3600), ("date", 2 * 86_400)):
        path = schema(tmp_path, source, {column: {"last": "36h" if column == "ts" else "2d"}})
        dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
        times = frame.ts if column == "ts" else frame.date.map(seconds)
        kept = times >= times.max() - span + 1
        stored = np.asarray(dataset.array("label"))
        assert len(stored) == kept.sum() and stored.sum() == frame.click[kept].sum()
        assert (
            f"(the last {'36h' if column == 'ts' else '2d'})" in dataset.manifest["where"]["rule"]
        )
    if layout == "csv":  # a later day's rows: the window moves to them
        later = frame.assign(ts=frame.ts + 86_400, date="2024-05-05")
        pd.concat([frame, later]).to_csv(place / "logs.csv", index=False)
        path = schema(tmp_path, source, {"ts": {"last": "36h"}})
        dataset, reused = prepare_dataset(str(path), tmp_path / "cache")
        assert (
            not reused
            and dataset.manifest["rows"]
            == (later.ts >= later.ts.max() - 36 * 3600 + 1).sum()
            + (frame.ts >= later.ts.max() - 36 * 3600 + 1).sum()
        )


def test_the_last_span_of_a_column_without_times_is_refused(tmp_path: Path) -> None:
    frame = logs(50, 0).assign(seen="")
    path = schema(
        tmp_path, write_source(tmp_path / "data", frame, "csv")[0], {"seen": {"last": "1d"}}
    )
    with pytest.raises(
        DataError, match=r"has no row with a time in 'seen' \(source.where: seen in the last 1d\)"
    ):
        prepare_dataset(str(path), tmp_path / "cache")
