"""A label read from another log (``joined``): impressions labelled by a click log, views by
the purchases of the same log; each row's label is what a brute-force search of the other
log gives, a change to the other log prepares again, and what cannot be joined is refused
naming it, nothing written."""

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

START = 1_714_521_600  # 2024-05-01, UTC
SPANS = {"90s": 90, "1h": 3600, "2d": 172_800}


def impressions(rows: int, seed: int, users: int = 12) -> pd.DataFrame:
    """Rows of a user, an item (some users' empty) and a time over three days."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "impression_id": [f"imp{i}" for i in range(rows)],
            "user_id": [None if u == 0 else f"u{u}" for u in rng.integers(0, users, rows)],
            "item_id": rng.integers(0, 6, rows),
            "ts": START + rng.integers(0, 3 * 86_400, rows),
        }
    )


def expected(rows: pd.DataFrame, other: pd.DataFrame, pairs, time, within) -> np.ndarray:
    """Each row's label by a search of every row of the other log."""
    out = np.zeros(len(rows), dtype=np.int8)
    for i, row in enumerate(rows.itertuples(index=False)):
        mine = row._asdict()
        if any(pd.isna(mine[ours]) for ours, _ in pairs):
            continue
        same = np.ones(len(other), dtype=bool)
        for ours, theirs in pairs:
            same &= (other[theirs].astype(str) == str(mine[ours])).to_numpy()
        if time:
            after = other[time].to_numpy() - mine["ts"]
            same &= after >= 0
            if within is not None:
                same &= after <= within
        out[i] = same.any()
    return out


def stored_labels(dataset) -> np.ndarray:
    """The prepared labels in the source's row order."""
    order = np.argsort(np.asarray(dataset.array("source_row")))
    labels = dataset.array("labels") if dataset.has("labels") else dataset.array("label")
    return np.asarray(labels)[order]


def schema(folder: Path, labels: str, source: str = "{format: parquet, path: rows.parquet}"):
    path = folder / "logs.yaml"
    path.write_text(
        f"name: logs\nsource: {source}\nlabels:\n{labels}\n"
        "keys: {timestamp: ts}\nsplit: {method: random, valid: 0.1, test: 0.1}\n"
        "features:\n  - {name: [user_id, item_id], type: categorical}\n"
    )
    return path


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 1000),
    composite=st.booleans(),
    timed=st.booleans(),
    span=st.sampled_from([None, *SPANS]),
    renamed=st.booleans(),
    fmt=st.sampled_from(["parquet", "csv"]),
)
def test_each_rows_label_is_what_a_search_of_the_other_log_gives(
    tmp_path_factory, seed, composite, timed, span, renamed, fmt
) -> None:
    """Random rows and another log of the same users and items (some keys and times empty,
    times before and after), a key of one column or two, named alike or not, with or
    without a time and a span, in Parquet or CSV: each stored label equals a brute-force
    search."""
    folder = tmp_path_factory.mktemp("joined")
    rng = np.random.default_rng(seed)
    rows = impressions(300, seed)
    other = rows.sample(120, replace=True, random_state=seed)[["user_id", "item_id", "ts"]]
    other = other.assign(ts=other.ts + rng.integers(-3_600, 3 * 86_400, len(other)))
    other["ts"] = other.ts.where(rng.random(len(other)) > 0.05)  # a row without a time
    name = {"user_id": "uid", "item_id": "iid", "ts": "event_ts"} if renamed else {}
    other = other.rename(columns={"ts": "event_ts", **name})
    columns = ["user_id", "item_id"] if composite else ["user_id"]
    pairs = [(c, name.get(c, c)) for c in columns]
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), folder / "rows.parquet")
    if fmt == "csv":
        other.to_csv(folder / "other.csv", index=False)
    else:
        pq.write_table(pa.Table.from_pandas(other, preserve_index=False), folder / "other.parquet")
    key = json.dumps(dict(pairs)) if renamed else json.dumps(columns if composite else columns[0])
    told = ", time: event_ts" if timed or span else ""
    told += f", within: {span}" if span else ""
    path = schema(
        folder,
        f"  - {{name: bought, joined: {{source: {{format: {fmt}, path: other.{fmt}}}, "
        f"key: {key}{told}}}}}",
    )
    want = expected(rows, other, pairs, "event_ts" if told else None, SPANS.get(span))
    try:
        dataset, _ = prepare_dataset(str(path), folder / "cache")
    except DataError as err:  # a label of no 1 (or no 0) among the training rows
        assert "nothing to learn" in str(err) and want.sum() < 30, err
        return
    assert (stored_labels(dataset) == want).all()
    usable = other[[theirs for _, theirs in pairs] + (["event_ts"] if told else [])].notna()
    assert dataset.manifest["joined"]["bought"]["rows"] == usable.all(axis=1).sum()


def test_views_labelled_by_purchases_of_the_same_log_and_prepared_again_when_it_changes(
    tmp_path: Path, capsys
) -> None:
    """One log of events (GA4's: views and purchases): the rows read are the views
    (source.where), each labelled 1 where the same user bought the same item within a day
    after it, from the same log read for its purchases only; a click log beside labels a
    second head by the impression's id. `nas data rows` writes both labels back as columns
    of their names. A purchase appended to the log prepares the dataset again."""
    rng = np.random.default_rng(7)
    views = impressions(600, 7).assign(event_name="view_item")
    bought = views.sample(150, random_state=7).assign(
        event_name="purchase", ts=lambda f: f.ts + rng.integers(-600, 2 * 86_400, len(f))
    )
    log = pd.concat([views, bought], ignore_index=True)
    log.to_csv(tmp_path / "events.csv", index=False)
    clicks = views.sample(100, random_state=8)[["impression_id"]]
    clicks.to_json(tmp_path / "clicks.jsonl", orient="records", lines=True)
    source = "{format: csv, path: events.csv, where: {event_name: {one_of: [view_item]}}}"
    path = schema(
        tmp_path,
        "  - name: purchase\n    joined:\n      source: {format: csv, path: events.csv, where: "
        "{event_name: {one_of: [purchase]}}}\n      key: [user_id, item_id]\n"
        "      time: ts\n      within: 1d\n"
        "  - {name: click, joined: {source: {format: jsonl, path: clicks.jsonl}, "
        "key: impression_id}}",
        source,
    )
    cache = tmp_path / "cache"
    assert main(["data", "prepare", str(path), "--cache-dir", str(cache), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["rows"] == len(views) and not said["reused_cache"]
    assert said["joined"]["purchase"]["rows"] == bought.user_id.notna().sum()  # (a key each)
    assert main(["data", "inspect", str(path), "--cache-dir", str(cache)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "label click from 100 rows of impression_id in clicks.jsonl" in shown
    dataset, _ = prepare_dataset(str(path), cache)
    purchases = bought.rename(columns={"ts": "bought_at"})
    pairs = [("user_id", "user_id"), ("item_id", "item_id")]
    want = expected(views, purchases, pairs, "bought_at", 86_400)
    clicked = views.impression_id.isin(clicks.impression_id).to_numpy().astype(np.int8)
    assert (stored_labels(dataset) == np.stack([want, clicked], axis=1)).all()
    out = tmp_path / "rows.jsonl"
    assert main(["data", "rows", str(path), "--out", str(out), "--cache-dir", str(cache)]) == 0
    written = pd.read_json(out, lines=True)
    test = slice(*dataset.manifest["split_ranges"]["test"])
    labels = np.asarray(dataset.array("labels"))[test]
    assert (written[["purchase", "click"]].to_numpy() == labels).all()
    capsys.readouterr()
    more = bought.iloc[:1].assign(item_id=5, ts=views.ts.iloc[0] + 10, user_id=views.user_id[0])
    more.to_csv(tmp_path / "events.csv", mode="a", header=False, index=False)
    assert main(["data", "prepare", str(path), "--cache-dir", str(cache), "--json"]) == 0
    assert not json.loads(capsys.readouterr().out)["reused_cache"]


@pytest.mark.parametrize(
    ("joined", "error", "words"),
    [
        (
            "{source: {format: csv, path: clickz.csv}, key: impression_id}",
            ConfigError,
            "labels[0].joined.source.path: matches no file",
        ),
        (
            "{source: {format: csv, path: clicks.csv}, key: impresion_id}",
            DataError,
            "rows.parquet: has no column 'impresion_id'",
        ),
        (
            "{source: {format: csv, path: clicks.csv}, key: {impression_id: imp}}",
            DataError,
            "clicks.csv: has no column 'imp' (the schema declares it); its columns: "
            "impression_id, click_ts",
        ),
        (
            "{source: {format: csv, path: clicks.csv}, key: impression_id, within: 1h}",
            ConfigError,
            "within needs time (the other log's time column)",
        ),
        (
            "{source: {format: csv, path: clicks.csv}, key: impression_id, time: click_ts, "
            "within: an hour}",
            ConfigError,
            "labels[0].joined.within: must be a span of time",
        ),
        (
            "{source: {format: csv, path: clicks.csv}, key: impression_id, time: impression_id}",
            ConfigError,
            "time names 'impression_id', a column of the key",
        ),
        (
            "{source: {format: csv, path: clicks.csv}, key: impression_id, time: user_id}",
            DataError,
            "clicks.csv: has no column 'user_id'",
        ),
    ],
)
def test_a_join_that_cannot_be_made_is_refused_naming_it(
    tmp_path: Path, joined: str, error, words: str
) -> None:
    rows = impressions(50, 0)
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), tmp_path / "rows.parquet")
    rows.iloc[:10][["impression_id"]].assign(click_ts=START).to_csv(
        tmp_path / "clicks.csv", index=False
    )
    path = schema(tmp_path, f"  - {{name: click, joined: {joined}}}")
    with pytest.raises(error) as caught:
        prepare_dataset(str(path), tmp_path / "cache")
    assert words in " ".join(str(caught.value).split())
    assert not (tmp_path / "cache" / "logs").exists()


def test_a_joined_label_with_a_column_of_its_own_is_refused(tmp_path: Path) -> None:
    path = schema(
        tmp_path,
        "  - {name: click, column: clicked, joined: {source: {format: csv, path: c.csv}, "
        "key: impression_id}}",
    )
    with pytest.raises(ConfigError, match="give joined .* or column, at_least and one_of"):
        prepare_dataset(str(path), tmp_path / "cache")


def test_a_draft_takes_a_label_from_another_log(tmp_path: Path, capsys) -> None:
    """Impressions without a label column, and a click log beside them: `nas data schema
    --labels "click=impression_id in clicks/"` drafts the joined label (the click log's
    format and path as its own draft would declare them), which prepares to the
    impressions the log holds; a key either log lacks, and a log that is not there, are
    refused naming them, nothing written."""
    rows = impressions(300, 4)
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), tmp_path / "rows.parquet")
    (tmp_path / "clicks").mkdir()
    clicked = rows.sample(60, random_state=4)[["impression_id"]].assign(at=START)
    clicked.to_csv(tmp_path / "clicks" / "part-0.csv.gz", index=False)
    out = tmp_path / "drafts" / "logs.yaml"
    source = str(tmp_path / "rows.parquet")
    flag = f"click=impression_id in {tmp_path / 'clicks'}"
    assert main(["data", "schema", source, "--labels", flag, "--out", str(out)]) == 0
    drafted = out.read_text()
    told = "{format: csv, path: ../clicks/**/*.csv.gz}, key: impression_id"
    assert f"{{name: click, joined: {{source: {told}}}}}" in drafted
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    want = rows.impression_id.isin(clicked.impression_id).to_numpy().astype(np.int8)
    assert (stored_labels(dataset) == want).all()
    capsys.readouterr()
    clicks, nowhere = tmp_path / "clicks", tmp_path / "nowhere"
    for flag, words in (
        (f"click=impresion_id in {clicks}", "'impresion_id' is not a column of the source"),
        (f"click=user_id in {clicks}", "its columns: impression_id, at"),
        (f"click=impression_id in {nowhere}", f"{nowhere} matches no file"),
    ):
        again = tmp_path / "again.yaml"
        assert main(["data", "schema", source, "--labels", flag, "--out", str(again)]) == 2
        assert words in " ".join(capsys.readouterr().err.split()) and not again.exists()
