"""Datasets declared by a schema file: Parquet, CSV and JSONL sources prepared in batches,
checked against an independent pandas computation of the same rules."""

from __future__ import annotations

import bz2
import csv
import datetime
import decimal
import gzip
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nas.cli import main
from nas.core.errors import ConfigError, DataError, NasError
from nas.data import check_dataset, load_dataset, prepare_dataset
from nas.data.row_files import HIVE_NULL
from nas.data.schema import Features

ROWS = 600
TIME_SPLIT = "method: time, valid: 0.1, test: 0.1"  # the schema's split, less its braces


def logs(rows: int = ROWS, seed: int = 0) -> pd.DataFrame:
    """Click logs with nulls, rare values, a list column, two labels and times."""
    rng = np.random.default_rng(seed)
    users = [f"u{i}" for i in rng.integers(0, 40, rows)]
    sites = rng.choice(
        ["a", "b", "c", "d", "e", "rare1", "rare2"], rows, p=[0.3, 0.25, 0.2, 0.1, 0.11, 0.02, 0.02]
    )
    sites = np.where(rng.random(rows) < 0.05, None, sites).tolist()
    count = np.floor(rng.lognormal(1, 1, rows))
    price = rng.normal(10, 3, rows)
    genres_pool = ["x", "y", "z", "w"]
    genres = [list(rng.choice(genres_pool, rng.integers(0, 4), replace=False)) for _ in range(rows)]
    history = [[f"i{j}" for j in rng.integers(0, 30, rng.integers(0, 7))] for _ in range(rows)]
    frame = pd.DataFrame(
        {
            "click": rng.integers(0, 2, rows),
            "like": rng.integers(0, 2, rows),
            "user_id": users,
            "ts": rng.integers(1_600_000_000, 1_600_100_000, rows),
            "site": sites,
            "item_id": [f"i{j}" for j in rng.integers(0, 30, rows)],
            "count": np.where(rng.random(rows) < 0.1, np.nan, count),
            "price": price,
            "genres": genres,
            "hist": history,
        }
    )
    return frame


def stored_as_read(dataset) -> Features:
    """A prepared dataset's stored rows as features, in the order prepare read them."""
    order = np.argsort(np.asarray(dataset.array("source_row")))
    return Features.from_arrays(dataset._row_arrays(order), dataset.event_arrays(), dataset.schema)


SCHEMA = """\
name: {name}
source: {source}
labels: [click, like]
keys: {{user: user_id, timestamp: ts}}
split: {split}
features:
  - {{name: count, type: dense, transform: log1p, fill: 0}}
  - {{name: price, type: dense, transform: standardize}}
  - {{name: site, type: categorical, min_freq: 20}}
  - {{name: [item_id], type: categorical, max_size: 20}}
  - {{name: user_id, type: categorical, hash: 50, side: request}}
  - {{name: genres, type: multi_hot, max_len: 3{sep}}}
  - {{name: hist, type: sequence, max_len: 4, vocab_of: item_id{sep}}}
"""


def write_source(folder: Path, frame: pd.DataFrame, fmt: str) -> str:
    """The frame as ``fmt`` files (two Parquet or Avro parts); the schema's source line."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt in ("parquet", "avro"):
        half = len(frame) // 2
        for i, part in enumerate((frame.iloc[:half], frame.iloc[half:])):
            table = pa.Table.from_pandas(part, preserve_index=False)
            if fmt == "avro":
                write_avro(folder / f"part-{i}.avro", table)
            else:
                pq.write_table(table, folder / f"part-{i}.parquet")
        return f"{{format: {fmt}, path: data/*.{fmt}}}"
    if fmt == "csv":
        text = frame.copy()
        text["genres"] = ["|".join(g) for g in frame["genres"]]
        text["hist"] = ["|".join(h) for h in frame["hist"]]
        text["count"] = [("" if math.isnan(c) else str(int(c))) for c in frame["count"]]
        text.to_csv(folder / "logs.tsv", sep="\t", index=False)
        return '{format: csv, path: data/logs.tsv, delimiter: "\\t"}'
    with open(folder / "logs.jsonl", "w") as f:
        for row in frame.to_dict("records"):
            row = {
                k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()
            }
            f.write(json.dumps(row, default=lambda v: v.item()) + "\n")
    return "{format: jsonl, path: data/logs.jsonl}"


def write_avro(path: Path, table: pa.Table, codec: str = "snappy", block: int = 16_000) -> None:
    """An Arrow table's rows as an Avro file, as Kafka Connect and Spark write one: each
    column of a null-able type (a union with null), blocks of about ``block`` bytes."""
    import fastavro

    def avro(kind):
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return {"type": "array", "items": avro(kind.value_type)}
        if pa.types.is_integer(kind):
            return "long"
        if pa.types.is_floating(kind):
            return "double"
        return "boolean" if pa.types.is_boolean(kind) else "string"

    fields = [{"name": f.name, "type": ["null", avro(f.type)]} for f in table.schema]
    schema = fastavro.parse_schema({"type": "record", "name": "Row", "fields": fields})
    with path.open("wb") as file:
        fastavro.writer(file, schema, table.to_pylist(), codec=codec, sync_interval=block)


def schema_file(
    folder: Path,
    fmt: str = "parquet",
    frame: pd.DataFrame | None = None,
    split: str = "{method: time, valid: 0.1, test: 0.1}",
    name: str = "my_ctr",
) -> Path:
    frame = logs() if frame is None else frame
    source = write_source(folder / "data", frame, fmt)
    sep = ', sep: "|"' if fmt == "csv" else ""
    path = folder / "my_ctr.yaml"
    path.write_text(SCHEMA.format(name=name, source=source, split=split, sep=sep))
    return path


def ceil_fraction(count, numerator: int, denominator: int):
    return (np.asarray(count) * numerator + denominator - 1) // denominator


def expected_split_by_position(position, count):
    """The 80/10/10 rule in integers."""
    return np.where(
        position < ceil_fraction(count, 8, 10),
        0,
        np.where(position < ceil_fraction(count, 9, 10), 1, 2),
    )


def by_source(dataset, name: str) -> np.ndarray:
    """A per-row array in the files' row order (the dataset stores rows split by split)."""
    stored = np.asarray(dataset.array(name))
    out = np.empty_like(stored)
    out[np.asarray(dataset.array("source_row"))] = stored
    return out


def expected_vocab(values: pd.Series, min_freq: int = 1, max_size: int | None = None) -> dict:
    counts = values.dropna().value_counts()
    counts = counts[counts >= min_freq]
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_size]
    return {value: i + 2 for i, (value, _) in enumerate(ordered)}


def test_a_parquet_source_is_encoded_as_pandas_computes_it(tmp_path: Path) -> None:
    frame = logs()
    dataset, reused = prepare_dataset(str(schema_file(tmp_path)), tmp_path / "cache")
    assert not reused and dataset.name == "my_ctr"
    split = by_source(dataset, "split")
    # time split: by ts, ties in file order, 80/10/10
    order = np.argsort(frame["ts"].to_numpy(), kind="stable")
    position = np.empty(ROWS, dtype=np.int64)
    position[order] = np.arange(ROWS)
    assert (split == expected_split_by_position(position, ROWS)).all()
    train = frame[split == 0]
    stored = dataset.array("split")  # stored split by split, each a contiguous range
    for code, (start, end) in enumerate(dataset.manifest["split_ranges"].values()):
        assert (stored[start:end] == code).all() and end - start == (split == code).sum()
    # labels
    assert (by_source(dataset, "label") == frame["click"]).all()
    assert (by_source(dataset, "labels") == frame[["click", "like"]].to_numpy()).all()
    assert dataset.manifest["label_columns"] == [  # how raw rows carry them, for predict
        {"name": name, "column": name, "at_least": None} for name in ("click", "like")
    ]
    # categorical: fitted on train only, 0 missing, 1 out of vocabulary
    fields = [f["name"] for f in dataset.manifest["schema"] if f["kind"] == "categorical"]
    assert fields == ["site", "item_id", "user_id"]
    categorical = by_source(dataset, "categorical")
    site = expected_vocab(train["site"], min_freq=20)
    assert "rare1" not in site and len(site) >= 3
    want = [0 if pd.isna(v) else site.get(v, 1) for v in frame["site"]]
    assert categorical[:, 0].tolist() == want
    items = expected_vocab(train["item_id"], max_size=20)
    assert categorical[:, 1].tolist() == [items.get(v, 1) for v in frame["item_id"]]
    hashed = categorical[:, 2]
    assert hashed.min() >= 1 and hashed.max() <= 50
    by_user = pd.Series(hashed).groupby(frame["user_id"]).nunique()
    assert (by_user == 1).all() and len(set(hashed)) > 10  # stable per user, spread out
    # dense: log1p with fill; standardize by train's mean and (population) std
    dense = by_source(dataset, "dense")
    assert np.allclose(dense[:, 0], np.log1p(frame["count"].fillna(0).clip(lower=0)), atol=1e-6)
    mean, std = train["price"].mean(), train["price"].std(ddof=0)
    assert np.allclose(dense[:, 1], (frame["price"] - mean) / std, atol=1e-5)
    # multi-hot: the first max_len values, vocab on train
    genres = expected_vocab(train["genres"].explode())
    multi_hot = by_source(dataset, "multi_hot")
    for i, values in enumerate(frame["genres"]):
        ids = [genres.get(v, 1) for v in values][:3]
        assert multi_hot[i, 0].tolist() == ids + [0] * (3 - len(ids))
    # sequence: the last max_len items, by item_id's vocabulary
    start, end = by_source(dataset, "history_start"), by_source(dataset, "history_end")
    event_item = dataset.array("event_item")
    for i, values in enumerate(frame["hist"]):
        want = [items.get(v, 1) for v in values][-4:]
        assert event_item[start[i] : end[i]].tolist() == want
    # the model's view of it
    train_features = dataset.features("train")
    assert len(train_features) == (split == 0).sum()
    assert train_features.history is not None and train_features.history.tensor().shape[1:] == (
        4,
        3,
    )
    schema = {f["name"]: f for f in dataset.manifest["schema"]}
    assert schema["site"]["cardinality"] == len(site) + 2
    assert schema["user_id"]["cardinality"] == 51 and schema["user_id"]["side"] == "request"
    assert schema["hist"]["kind"] == "sequence"


def test_a_label_reads_a_column_of_another_name(tmp_path: Path) -> None:
    """A 0/1 column whose name cannot name metrics, read under a name that can."""
    frame = logs().rename(columns={"click": "clicked?"})
    path = schema_file(tmp_path, frame=frame)
    path.write_text(
        path.read_text().replace(
            "labels: [click, like]", 'labels: [{name: click, column: "clicked?"}, like]'
        )
    )
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert dataset.schema.labels == ("click", "like")
    assert (by_source(dataset, "labels") == frame[["clicked?", "like"]].to_numpy()).all()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_labels_of_an_events_name_are_read_by_its_values(tmp_path: Path, fmt, capsys) -> None:
    """GA4's export: one row per event, event_name saying which (page_view, purchase); its
    labels 1 where the name is one of some values, two of the same column, one of a column
    of integers; drafted, prepared, written back as raw rows that read as the same labels."""
    from nas.data.export import export_raw_rows
    from nas.data.labels import LabelRule, raw_labels, table_labels

    frame = logs().drop(columns=["click", "like"])
    rng = np.random.default_rng(1)
    frame["event_name"] = rng.choice(["page_view", "add_to_cart", "purchase"], len(frame))
    frame["status"] = rng.choice([200, 404, 500], len(frame))
    write_source(tmp_path / "data", frame, fmt)
    source = tmp_path / "data" / ("*.parquet" if fmt == "parquet" else "logs.tsv")
    out = tmp_path / "events.yaml"
    assert main(["data", "schema", str(source), "--out", str(out)]) == 2  # no 0/1 label
    said = " ".join(capsys.readouterr().err.split())
    assert "--labels NAME=event_name==VALUE, its values the most held first: '" in said
    flags = ["--labels", "purchase=event_name==purchase", "--labels"]
    flags += ["cart=event_name==add_to_cart|purchase,ok=status==200"]
    assert main(["data", "schema", str(source), "--out", str(out), *flags]) == 0
    drafted = yaml.safe_load(out.read_text())
    assert drafted["labels"] == [
        {"name": "purchase", "column": "event_name", "one_of": ["purchase"]},
        {"name": "cart", "column": "event_name", "one_of": ["add_to_cart", "purchase"]},
        {"name": "ok", "column": "status", "one_of": ["200"]},  # (as its text is)
    ]
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    events = frame["event_name"]
    expected = np.stack(
        [events == "purchase", events.isin(["add_to_cart", "purchase"]), frame["status"] == 200],
        axis=1,
    )
    assert (by_source(dataset, "labels") == expected).all()
    assert dataset.manifest["label_rule"] == (
        "event_name == 'purchase', event_name in ('add_to_cart', 'purchase'), status == '200' "
        "(one head each)"
    )
    # raw rows written back: a value each column's labels read as they were prepared
    rules = [LabelRule.of(r) for r in dataset.manifest["label_columns"]]
    stored = np.asarray(dataset.label_array())[dataset.split_rows("test")]
    for name in ("rows.parquet", "rows.jsonl"):
        export_raw_rows(dataset, "test", tmp_path / name, None)
        if name.endswith(".parquet"):
            read = table_labels(pq.read_table(tmp_path / name), rules)
        else:
            lines = (tmp_path / name).read_text().splitlines()
            read = raw_labels([json.loads(line) for line in lines], rules)
        assert read.lacking is None and np.array_equal(read.values, stored)
    # a value no row holds (misspelt): refused, naming those the column holds
    bad = tmp_path / "bad.yaml"
    bad.write_text(out.read_text().replace("one_of: [purchase]", "one_of: [purchse]"))
    with pytest.raises(DataError, match="no row has event_name 'purchse' .label 'purchase'.; its"):
        prepare_dataset(str(bad), tmp_path / "bad_cache")
    assert not (tmp_path / "bad_cache").exists() or not any((tmp_path / "bad_cache").iterdir())
    # YAML's yes is a boolean, which no column's text equals
    bad.write_text(out.read_text().replace("one_of: [purchase]", "one_of: [yes]"))
    with pytest.raises(ConfigError, match="a boolean: YAML reads an unquoted yes"):
        prepare_dataset(str(bad), tmp_path / "bad_cache")
    # an event without a name is no label
    frame.loc[7, "event_name"] = None
    write_source(tmp_path / "data", frame, fmt)
    with pytest.raises(DataError, match="needs a value on every row"):
        prepare_dataset(str(out), tmp_path / "cache", force=True)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_csv_and_jsonl_give_the_same_arrays_as_parquet(tmp_path: Path, fmt: str) -> None:
    frame = logs(seed=3)
    parquet, _ = prepare_dataset(str(schema_file(tmp_path / "p", frame=frame)), tmp_path / "c1")
    other, _ = prepare_dataset(str(schema_file(tmp_path / "o", fmt, frame)), tmp_path / "c2")
    for name in (
        "categorical",
        "multi_hot",
        "dense",
        "label",
        "labels",
        "split",
        "event_item",
        "history_start",
        "history_end",
        "timestamp",
    ):
        assert np.array_equal(parquet.array(name), other.array(name)), name
    assert parquet.manifest["split_checksum"] == other.manifest["split_checksum"]


@pytest.mark.parametrize("method", ["random", "hash", "user_time", "order"])
def test_each_split_rule(tmp_path: Path, method: str) -> None:
    frame = logs(rows=2000, seed=1)
    split_text = f"{{method: {method}, valid: 0.2, test: 0.1, seed: 4}}"
    dataset, _ = prepare_dataset(
        str(schema_file(tmp_path, frame=frame, split=split_text)), tmp_path / "cache"
    )
    split = by_source(dataset, "split")
    shares = np.bincount(split, minlength=3) / len(split)
    if method == "order":
        position = np.arange(2000)
        want = np.where(position < 1400, 0, np.where(position < 1800, 1, 2))
        assert (split == want).all()
    elif method == "user_time":
        keyed = frame.assign(row=np.arange(2000)).sort_values(
            ["user_id", "ts", "row"], kind="stable"
        )
        keyed["position"] = keyed.groupby("user_id").cumcount()
        keyed["count"] = keyed.groupby("user_id")["row"].transform("size")
        want = np.where(
            keyed["position"] < ceil_fraction(keyed["count"], 7, 10),
            0,
            np.where(keyed["position"] < ceil_fraction(keyed["count"], 9, 10), 1, 2),
        )
        assert (split[keyed["row"].to_numpy()] == want).all()
    elif method == "hash":
        assert (pd.Series(split).groupby(frame["user_id"]).nunique() == 1).all()
        assert len(set(split)) == 3  # 40 users land in every split
    else:
        assert abs(shares[0] - 0.7) < 0.04 and abs(shares[1] - 0.2) < 0.04
        again, _ = prepare_dataset(
            str(
                schema_file(
                    tmp_path / "b", frame=frame, split=split_text.replace("seed: 4", "seed: 5")
                )
            ),
            tmp_path / "c2",
        )
        assert not np.array_equal(split, by_source(again, "split"))  # the seed decides


def test_a_time_split_at_moments_cuts_where_pandas_does(tmp_path: Path) -> None:
    """`valid_from`/`test_from`: unix seconds, or a date-time (one without a zone is UTC)."""
    frame = logs(rows=2000, seed=1)  # ts from 1,600,000,000 to 1,600,100,000
    split_text = "{method: time, valid_from: 1600070000, test_from: 2020-09-14 12:03:20}"
    dataset, _ = prepare_dataset(
        str(schema_file(tmp_path, frame=frame, split=split_text)), tmp_path / "cache"
    )
    ts = frame["ts"].to_numpy()
    want = np.where(ts >= 1_600_085_000, 2, np.where(ts >= 1_600_070_000, 1, 0))
    assert (by_source(dataset, "split") == want).all() and set(want) == {0, 1, 2}
    assert dataset.manifest["split_rule"] == (
        "by ts: valid from 2020-09-14T07:53:20+00:00, test from 2020-09-14T12:03:20+00:00"
    )


def test_a_prepared_schema_is_reused_then_found_by_name_and_by_path(tmp_path: Path) -> None:
    path = schema_file(tmp_path)
    cache = tmp_path / "cache"
    first, reused = prepare_dataset(str(path), cache)
    again, reused_again = prepare_dataset(str(path), cache)
    assert not reused and reused_again
    by_name = load_dataset("my_ctr", cache)
    assert by_name.root == first.root
    check_dataset(str(path))
    # a changed source file is read again
    pq.write_table(pa.Table.from_pandas(logs(seed=9).iloc[:300]), tmp_path / "data/part-0.parquet")
    changed, reused = prepare_dataset(str(path), cache)
    assert not reused and changed.manifest["split_checksum"] != first.manifest["split_checksum"]


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda m: m["label_rates"]["like"].update(train=0.0), "label 'like' is 0 on all 480"),
        (lambda m: m["split_sizes"].update(valid=0), "the valid split empty (train 480, valid 0"),
    ],
)
def test_a_cache_of_data_nothing_can_be_learnt_from_is_refused_when_loaded(
    tmp_path: Path, damage, words: str
) -> None:
    """What an older recnas prepared without refusing it: training it would fail in NE's
    base rate or on an empty validation set."""
    dataset, _ = prepare_dataset(str(schema_file(tmp_path)), tmp_path / "cache")
    manifest = json.loads((dataset.root / "manifest.json").read_text())
    damage(manifest)
    (dataset.root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(NasError) as err:
        load_dataset("my_ctr", tmp_path / "cache")
    assert "'my_ctr' cannot be trained on" in str(err.value) and words in str(err.value)


def test_a_cache_whose_manifest_is_unreadable_is_named_not_called_unknown(tmp_path: Path) -> None:
    dataset, _ = prepare_dataset(str(schema_file(tmp_path)), tmp_path / "cache")
    (dataset.root / "manifest.json").write_text('{"format_version": ')  # cut short
    for look_up in (load_dataset, check_dataset):
        with pytest.raises(NasError) as err:
            look_up("my_ctr", tmp_path / "cache")
        assert "the cache of dataset 'my_ctr'" in str(err.value), str(err.value)
        assert "is unreadable" in str(err.value) and "nas data prepare" in str(err.value)


def test_another_schema_file_of_the_same_name_does_not_replace_a_dataset_unasked(
    tmp_path: Path,
) -> None:
    """Two teams' files named alike in one cache: the second is refused, naming the first and
    --force; forced, it replaces it."""
    cache = tmp_path / "cache"
    first = schema_file(tmp_path / "a")
    second = schema_file(tmp_path / "b", frame=logs(seed=3))
    prepare_dataset(str(first), cache)
    with pytest.raises(ConfigError) as err:
        prepare_dataset(str(second), cache)
    said = str(err.value)
    assert "was prepared from another schema file" in said and str(first.resolve()) in said
    assert f"nas data prepare {second} --force" in said
    assert load_dataset("my_ctr", cache).manifest["source"]["file"] == str(first.resolve())
    replaced, reused = prepare_dataset(str(second), cache, force=True)
    assert not reused and replaced.manifest["source"]["file"] == str(second.resolve())


def test_doctor_checks_a_schema_files_dataset_as_a_built_in_one(tmp_path: Path, capsys) -> None:
    import shutil

    from nas.service.doctor import data_check

    cache = tmp_path / "cache"
    path = schema_file(tmp_path)
    dataset, _ = prepare_dataset(str(path), cache)
    left = cache / "my_ctr.tmp-elsewhere-1"  # a writer killed after its manifest was written
    shutil.copytree(dataset.root, left)
    check = data_check(cache)
    assert check.ok and check.found.endswith(": my_ctr"), check.found
    assert main(["data", "list", "--json", "--cache-dir", str(cache)]) == 0  # listed once
    assert [d["name"] for d in json.loads(capsys.readouterr().out)["datasets"]].count("my_ctr") == 1
    label = dataset.root / "label.npy"
    label.write_bytes(label.read_bytes()[:-1] + b"\x07")  # one byte changed
    check = data_check(cache)
    assert not check.ok and "damaged" in check.found and "my_ctr" in check.found
    assert check.fix == f"nas data prepare {path.resolve()}"
    (dataset.root / "manifest.json").write_text("{")  # its own path lost with it
    check = data_check(cache)
    assert not check.ok and "my_ctr" in check.found and check.fix == "nas data prepare FILE.yaml"


@pytest.mark.parametrize("hash_genres", [False, True])
def test_raw_rows_encode_back_to_the_same_features(tmp_path: Path, hash_genres) -> None:
    """`nas data rows`: a split's rows as a served model reads them, hashed fields too (a
    value seen with each id; they were left empty, so the rows scored other features)."""
    path = schema_file(tmp_path)
    if hash_genres:
        path.write_text(path.read_text().replace("multi_hot, max_len: 3", "multi_hot, hash: 3"))
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    raw = dataset.raw_rows("test", len(dataset.split_rows("test")))
    assert raw[0].keys() >= {"site", "item_id", "count", "price", "genres", "hist", "user_id"}
    again = dataset.raw_form().features(raw, dataset.schema)
    want = dataset.features("test")[slice(0, len(raw))]
    assert (again.categorical == want.categorical).all()
    assert (want.categorical[:, 2] > 1).sum() > 10, "hashed ids in the test rows"
    assert (again.multi_hot == want.multi_hot).all()
    assert np.allclose(again.dense.numpy(), want.dense.numpy(), atol=1e-4)
    assert (again.history.tensor() == want.history.tensor()).all()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s.replace("type: dense, transform: log1p", "type: numeric"), "features[0].type"),
        (lambda s: s.replace("hash: 50", "hash: 50, min_freq: 2"), "hash replaces the vocabulary"),
        (
            lambda s: s.replace("max_size: 20", "max_len: 20"),
            "max_len does not apply to type categorical",
        ),
        (
            lambda s: s.replace("keys: {user: user_id, timestamp: ts}", "keys: {user: user_id}"),
            "split method time needs keys.timestamp",
        ),
        (
            lambda s: s.replace("vocab_of: item_id", "vocab_of: price"),
            "vocab_of must name a categorical feature",
        ),
        (lambda s: s.replace("name: price,", "name: count,"), "'count' is declared twice"),
        (lambda s: s.replace("valid: 0.1, test: 0.1", "valid: 0.5, test: 0.5"), "valid + test"),
        (
            lambda s: s.replace("data/*.parquet", "nowhere/*.parquet"),
            "source.path: matches no file",
        ),
        (lambda s: s.replace("format: parquet", "format: xlsx"), "source.format"),
        (lambda s: s.replace("labels: [click, like]", "labels: []"), "labels"),
        (lambda s: s.replace("name: my_ctr", "name: movielens-1m"), "built-in dataset"),
        (lambda s: s + "colour: red\n", "colour: unknown field"),
        (lambda s: s.replace("max_size: 20", "min_freq: 1e30"), "min_freq: Input should be"),
        (lambda s: s.replace("fill: 0", "fill: .nan"), "fill: Input should be a finite number"),
        (lambda s: s.replace("fill: 0", "fill: 1e300"), "fill: Input should be less than"),
        (lambda s: s.replace("max_size: 20", f"min_freq: {10**30}"), "min_freq: Input should be"),
        (  # a list of names, one of them not a name: that item, not the list
            lambda s: s.replace("name: [item_id]", "name: [item_id, 5]"),
            "name[1]: Input should be a valid string (got 5)",
        ),
        (
            lambda s: s.replace("labels: [click, like]", "labels: click"),
            "labels: must be a list (got 'click')",
        ),
        (
            lambda s: s.replace("labels: [click, like]", "labels: [click, 'like it!']"),
            "labels[1].name: 'like it!' may hold only letters, digits, _, - and .",
        ),
        (
            lambda s: s.replace(TIME_SPLIT, "method: time, valid_from: 2020-09-13"),
            "split: a time split at moments needs both valid_from and test_from",
        ),
        (
            lambda s: s.replace("method: time,", "method: time, valid_from: 0, test_from: 9,"),
            "split: valid, test do not apply to a time split at valid_from and test_from",
        ),
        (
            lambda s: s.replace(TIME_SPLIT, "method: random, valid_from: 0, test_from: 9"),
            "split: valid_from applies to split method time, not random",
        ),
        (  # a moment in milliseconds: refused, whatever the rows' time_unit
            lambda s: s.replace(
                TIME_SPLIT, "method: time, valid_from: 1600070000000, test_from: 1600080000000"
            ),
            "split.valid_from: 1600070000000 is past the year 5000 as unix seconds",
        ),
        (
            lambda s: s.replace(
                TIME_SPLIT, "method: time, valid_from: 2020-09-14, test_from: 2020-09-13 23:00:00"
            ),
            "split: valid_from (2020-09-14T00:00:00+00:00) is after test_from "
            "(2020-09-13T23:00:00+00:00)",
        ),
        (
            lambda s: s.replace(TIME_SPLIT, "method: time, valid_from: today, test_from: 9"),
            "split.valid_from: must be a date (2024-05-01), a date-time (2024-05-01 12:00:00, "
            "UTC unless it names its zone) or unix seconds, got 'today'",
        ),
        (
            lambda s: s.replace(TIME_SPLIT, "method: time, valid_from: 0, test_from: true"),
            "split.test_from: must be a date",
        ),
        (
            lambda s: s.replace(TIME_SPLIT, "method: column"),
            "split: split method column needs column: the column naming each split",
        ),
        (
            lambda s: s.replace("method: time,", "method: column, column: site,"),
            "split: valid, test do not apply to split method column",
        ),
        (
            lambda s: s.replace("method: time,", "method: time, column: site,"),
            "split: column applies to split method column, not time",
        ),
        (
            lambda s: s.replace(TIME_SPLIT, "method: column, column: ts"),
            "column 'ts' is read as timestamp (keys.timestamp) and as text (split.column)",
        ),
    ],
)
def test_a_bad_schema_is_named_by_its_field(tmp_path: Path, change, words: str) -> None:
    path = schema_file(tmp_path)
    path.write_text(change(path.read_text()))
    with pytest.raises(ConfigError) as err:
        prepare_dataset(str(path), tmp_path / "cache")
    assert words in str(err.value) and str(path) in str(err.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.parametrize(
    ("fmt", "damage", "words"),
    [
        ("parquet", lambda f: f.drop(columns=["price"]), "has no column 'price'"),
        (
            "csv",
            lambda f: f.assign(price=["12.5"] * 300 + ["cheap"] + ["1"] * 299),
            "row 301: column 'price' must be a number, got 'cheap'",
        ),
        ("parquet", lambda f: f.assign(site=[["a"]] * 600), "column 'site' holds a list"),
        (
            "jsonl",
            lambda f: f.assign(click=[0] * 599 + [3]),
            "row 600: column 'click' must be 0 or 1",
        ),
        (
            "csv",
            lambda f: f.assign(click=[1] * 10 + [-1] * 590),
            "got '-1' (for another coding (-1/1, a rating), declare the label as "
            "{name: click, column: click, at_least: THRESHOLD})",
        ),
        ("parquet", lambda f: f.assign(genres=["x"] * 600), "holds text ('x') where a list"),
        # learnable: each split has rows, each label both values in train (the first 480)
        ("jsonl", lambda f: f.assign(like=0), "label 'like' is 0 on all 480 training rows"),
        (
            "parquet",
            lambda f: f.assign(click=(f["ts"].rank(method="first") <= 480).astype(int)),
            "label 'click' is 1 on all 480 training rows",
        ),
        ("jsonl", lambda f: f.iloc[:5], "leave the test split empty (train 4, valid 1, test 0)"),
        (
            "csv",
            lambda f: f.assign(
                ts=[*map(str, f["ts"][:300]), "yesterday", *map(str, f["ts"][301:])]
            ),
            "row 301: column 'ts' must be a unix time in seconds or a date-time, got 'yesterday'",
        ),
        (
            "csv",
            lambda f: f.assign(
                ts=[*pd.to_datetime(f["ts"][:300], unit="s").astype(str), *map(str, f["ts"][300:])]
            ),
            "row 301: column 'ts' is unix seconds ('1600",
        ),
        (
            "csv",
            lambda f: f.assign(ts=[*f["ts"][:300] * 1.0, math.inf, *f["ts"][301:] * 1.0]),
            "row 301: column 'ts' must be a unix time in seconds, got inf",
        ),
        (
            "parquet",
            lambda f: f.assign(price=[1e308, 1.0] * 300),
            "dense field 'price' (column 'price'): its training values are too large to "
            "standardize",
        ),
        (
            "csv",
            lambda f: f.assign(part=["train"] * 300 + ["validation"] * 300),
            "row 301: column 'part' is 'validation'; split.column's values are train, valid, test",
        ),
        (
            "parquet",
            lambda f: f.assign(part=["train"] * 599 + [None]),
            "row 300: column 'part' is empty; split.column's values are train, valid, test",
        ),
        ("jsonl", lambda f: f.assign(site_split="train"), "has no column 'part'"),
        (
            "parquet",
            lambda f: f.assign(part=["train"] * 590 + ["valid"] * 10),
            "leave the test split empty (train 590, valid 10, test 0): candidates are ranked "
            "on valid rows and retrains report on test rows, so each split needs rows (rows "
            "whose part is test)",
        ),
    ],
)
def test_data_that_disagrees_with_the_schema_fails_before_anything_is_written(
    tmp_path: Path, fmt: str, damage, words: str
) -> None:
    frame = damage(logs())
    if fmt == "csv":  # the damage is in the text itself
        frame = frame.astype({"price": str})
    by_column = "part" in frame or "site_split" in frame  # a split by a column of the files
    split = "{method: column, column: part}" if by_column else f"{{{TIME_SPLIT}}}"
    path = schema_file(tmp_path, fmt, frame, split=split)
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as err:
        prepare_dataset(str(path), cache)
    assert words in str(err.value), str(err.value)
    assert "data/" in str(err.value)  # names the file
    assert not cache.exists() or not any(cache.iterdir())


def test_a_parquet_file_damaged_mid_file_is_named_and_nothing_is_kept(tmp_path: Path) -> None:
    """Its footer intact, a page's bytes damaged: found only as the pages are read (pyarrow's
    OSError, "Couldn't deserialize thrift" or "Corrupt snappy compressed data"), which
    reached the user as a traceback."""
    path = schema_file(tmp_path, "parquet")
    part = tmp_path / "data" / "part-1.parquet"
    chunk = pq.ParquetFile(part).metadata.row_group(0).column(0)  # click
    with part.open("r+b") as file:
        file.seek(chunk.data_page_offset)
        file.write(b"\xff" * 64)  # its page header
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="part-1.parquet: could not be read as parquet"):
        prepare_dataset(str(path), cache)
    assert not cache.exists() or not any(cache.iterdir())


def test_a_parquet_footer_whose_column_names_are_not_utf8_is_named_by_every_reader(
    tmp_path: Path, capsys
) -> None:
    """A damaged footer (a column's name no longer UTF-8): pyarrow raises UnicodeDecodeError,
    which reached the user as a traceback from prepare, `nas data schema` and `nas predict`.
    Each names the file instead, and prepare keeps nothing."""
    from nas.data.row_files import RowFiles

    path = schema_file(tmp_path, "parquet")
    part = tmp_path / "data" / "part-1.parquet"
    data = part.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer
    # the name in the schema's element and its column chunk (and in pandas' metadata)
    assert data[start:].count(b"price") >= 2
    part.write_bytes(data[:start] + data[start:].replace(b"price", b"\xf2rice"))
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="part-1.parquet: is not readable as parquet: 'utf-8'"):
        prepare_dataset(str(path), cache)
    assert not cache.exists() or not any(cache.iterdir())
    with pytest.raises(ConfigError, match=r"part-1.parquet: not readable as Parquet \('utf-8'"):
        list(RowFiles(part).batches())
    argv = ["data", "schema", str(part), "--out", str(tmp_path / "draft.yaml")]
    assert main(argv) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "is not readable as parquet: 'utf-8' codec" in said, said  # (the path wraps)
    assert not (tmp_path / "draft.yaml").exists()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_text_that_is_not_utf8_is_named_with_its_column_and_row(
    tmp_path: Path, fmt: str, capsys
) -> None:
    """Parquet's reader and Arrow's JSON reader pass a writer's bytes on unchecked: a value
    that is not UTF-8 (a site's name cut mid-character) reached the user as a
    UnicodeDecodeError traceback from prepare, `nas data schema` and `nas predict`. Each
    names the file and the column (and, reading the file in order, the row); prepare keeps
    nothing."""
    from nas.data.row_files import RowFiles

    frame = logs()
    path = schema_file(tmp_path, fmt, frame)
    row = frame["site"].tolist().index("a") + 1
    source = tmp_path / "data" / ("part-0.parquet" if fmt == "parquet" else "logs.jsonl")
    if fmt == "parquet":
        assert row <= len(frame) // 2  # in the first part
        table = pq.read_table(source)
        sites = [
            None if v is None else b"s\xa8te" if v == "a" else v.encode()
            for v in table.column("site").to_pylist()
        ]
        binary = pa.array(sites, pa.binary())
        text = pa.Array.from_buffers(pa.string(), len(binary), binary.buffers(), binary.null_count)
        pq.write_table(table.set_column(table.column_names.index("site"), "site", text), source)
    else:
        source.write_bytes(source.read_bytes().replace(b'"site": "a"', b'"site": "s\xa8te"'))
    said = "column 'site' holds text that is not UTF-8"
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=re.escape(f"{source.name}: {said} (row {row})")):
        prepare_dataset(str(path), cache)
    assert not cache.exists() or not any(cache.iterdir())
    argv = ["data", "schema", str(source), "--out", str(tmp_path / "draft.yaml")]
    assert main(argv) == 2
    assert said in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "draft.yaml").exists()
    if fmt == "parquet":  # served: `nas predict`'s reader (JSON lines it reads as Python does)
        with pytest.raises(ConfigError, match=re.escape(f"{source.name}: {said} (row {row})")):
            list(RowFiles(source).batches())
        return
    # a key that is not UTF-8 (Arrow passes it on as a column's name)
    lines = source.read_bytes().replace(b"\xa8", b"").split(b"\n")
    lines[-2] = lines[-2].replace(b'"site"', b'"\xdeite"')
    source.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match="logs.jsonl: is not readable as jsonl: 'utf-8' codec"):
        prepare_dataset(str(path), cache)
    assert main(argv) == 2
    assert "a column's name is not UTF-8 text" in " ".join(capsys.readouterr().err.split())


def test_binary_columns_as_spark_writes_text_read_as_that_text(tmp_path: Path, capsys) -> None:
    """Spark and Hive write Parquet's text as binary unless told otherwise: prepare read such
    columns as text, but `nas data schema` left them out ("of type binary") and `nas predict`
    refused every row ("must be a string, got b'i1'"). Each reads the text now: the dataset
    byte for byte as from files of strings, the same draft, the same features served."""
    import yaml

    from nas.data.raw_table import table_features
    from nas.data.row_files import RowFiles

    frame = logs()
    prepared, drafts = {}, {}
    for form in ("text", "binary"):
        path = schema_file(tmp_path / form, "parquet", frame)
        if form == "binary":
            for part in (tmp_path / form / "data").glob("*.parquet"):
                table = pq.read_table(part)
                for column, kind in (("site", pa.binary()), ("genres", pa.list_(pa.binary()))):
                    at = table.column_names.index(column)
                    table = table.set_column(at, column, table.column(column).cast(kind))
                pq.write_table(table, part)
        prepared[form], _ = prepare_dataset(str(path), tmp_path / form / "cache")
        out = tmp_path / form / "draft.yaml"
        assert main(["data", "schema", str(tmp_path / form / "data"), "--out", str(out)]) == 0
        drafts[form] = yaml.safe_load(out.read_text())["features"]
    assert (
        pq.read_schema(tmp_path / "binary" / "data" / "part-0.parquet").field("site").type
        == "binary"
    )
    folders = [tmp_path / form / "cache" / "my_ctr" for form in ("text", "binary")]
    arrays = sorted(path.name for path in folders[0].glob("*.npy"))
    assert arrays and arrays == sorted(path.name for path in folders[1].glob("*.npy"))
    for name in arrays:
        assert np.array_equal(np.load(folders[0] / name), np.load(folders[1] / name)), name
    assert (folders[0] / "raw_form.json").read_text() == (folders[1] / "raw_form.json").read_text()
    assert drafts["binary"] == drafts["text"]
    assert {"name": "site", "type": "categorical", "min_freq": 2} in drafts["binary"]
    dataset = prepared["text"]
    served = {
        form: [
            table_features(dataset.raw_form(), batch.table, dataset.schema)
            for batch in RowFiles(tmp_path / form / "data").batches()
        ]
        for form in ("text", "binary")
    }
    for text, binary in zip(served["text"], served["binary"], strict=True):
        assert torch.equal(text.categorical, binary.categorical)
        assert torch.equal(text.multi_hot, binary.multi_hot)


def test_hive_partition_folders_are_columns_of_their_files_rows(tmp_path: Path, capsys) -> None:
    """A table as Spark and Hive write it, partitioned by day and country
    (``date=2020-09-14/country=US/part-00000.parquet``, Hive's null as
    ``__HIVE_DEFAULT_PARTITION__``, a ``_SUCCESS`` marker beside): the files hold no such
    column, so `nas data schema` drafted neither and a schema declaring them was refused.
    Each folder's value is now a column of its file's rows, drafted (a date beside the
    rows' own time left out), prepared (a null partition missing) and served by `nas
    predict` from the folder as prepare read it."""
    import yaml

    from nas.data.raw_table import table_features
    from nas.data.row_files import RowFiles

    frame = logs()
    days = ["2020-09-14", "2020-09-15"]
    countries = ["US", "IN", None]
    for i, day in enumerate(days):
        for j, country in enumerate(countries):
            rows = frame.iloc[[k for k in range(len(frame)) if k % 6 == 3 * i + j]]
            folder = tmp_path / "data" / f"date={day}" / f"country={country or HIVE_NULL}"
            folder.mkdir(parents=True)
            pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), folder / "p.parquet")
        (tmp_path / "data" / f"date={day}" / "_SUCCESS").write_text("")
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(tmp_path / "data"), "--out", str(out), "--json"]) == 0
    drafted = {f["name"]: f for f in yaml.safe_load(out.read_text())["features"]}
    assert drafted["country"]["type"] == "categorical"
    assert "date" not in drafted  # a day beside the rows' time (ts): said, left out
    said = {c["column"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert said["date"]["why"].startswith("a date or time beside keys.timestamp (ts)")
    path = tmp_path / "my_ctr.yaml"
    path.write_text(
        SCHEMA.format(
            name="my_ctr", source="{format: parquet, path: data/**/*.parquet}", sep="",
            split="{method: time, valid: 0.1, test: 0.1}",
        )
        + "  - {name: [date, country], type: categorical, min_freq: 1}\n"
    )  # fmt: skip
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    names = [f.name for f in dataset.schema.fields if f.kind == "categorical"]
    country = by_source(dataset, "categorical")[:, names.index("country")]
    files = sorted((tmp_path / "data").glob("**/*.parquet"))  # as prepare reads them
    held = [
        f.parent.name.removeprefix("country=")
        for f in files
        for _ in range(pq.read_metadata(f).num_rows)
    ]
    assert (country == 0).sum() == held.count(HIVE_NULL) > 0  # missing: the unknown id 0
    assert len(set(country[np.asarray(held) == "US"])) == 1 and len(set(country)) == 3
    # served: the folder's rows as `nas predict` reads them, encoded as prepare stored them
    stored = stored_as_read(dataset)
    batches = list(RowFiles(tmp_path / "data").batches())
    assert [b.table.column("country")[0].as_py() for b in batches] == [
        f.parent.name.removeprefix("country=").replace(HIVE_NULL, "") or None for f in files
    ]
    served = [table_features(dataset.raw_form(), b.table, dataset.schema) for b in batches]
    assert torch.equal(torch.cat([f.categorical for f in served]), stored.categorical)


def test_a_dense_value_float32_cannot_hold_is_refused_unless_transformed(tmp_path: Path) -> None:
    frame = logs().assign(count=[1.0] * 300 + [5e38] + [2.0] * 299)
    path = schema_file(tmp_path, "parquet", frame)
    path.write_text(path.read_text().replace("transform: log1p", "transform: none"))
    with pytest.raises(DataError, match=r"row \d+: column 'count' is 5e\+38, beyond the float32"):
        prepare_dataset(str(path), tmp_path / "cache")
    path.write_text(path.read_text().replace("transform: none", "transform: log1p"))
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert np.isfinite(np.asarray(dataset.array("dense"))).all()
    # a test row far beyond the training rows' spread: standardized, beyond float32 (it was
    # stored as inf, and a served row with it is refused)
    frame = logs()
    frame.loc[frame["ts"].idxmax(), "price"] = 1e308
    path = schema_file(tmp_path / "outlier", "parquet", frame)
    with pytest.raises(DataError, match=r"column 'price' is 1e\+308, [0-9.e+]+ after its transfo"):
        prepare_dataset(str(path), tmp_path / "outlier" / "cache")


def test_integers_past_2_to_the_53_are_dense_values_as_floats(tmp_path: Path, capsys) -> None:
    """A dense column of 64-bit integers, one past 2**53 (a byte count, a damaged value):
    Arrow's safe cast refused it, so prepare said "must be a number, got type int64" and
    `nas data schema` failed with a traceback. Now it is the nearest float64, as a served
    row's is."""
    frame = logs().assign(count=[2**62 + 1, *range(1, ROWS)])
    path = schema_file(tmp_path, "parquet", frame)
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    count = by_source(dataset, "dense")[:, 0]
    assert count[0] == np.float32(np.log1p(float(2**62))) and count[1] == np.float32(np.log1p(1))
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(tmp_path / "data"), "--out", str(out)]) in (0, None)
    assert "{name: count, type: dense, transform: log1p}" in out.read_text()


def test_standardizing_keeps_the_spread_of_values_far_from_zero(tmp_path: Path) -> None:
    """Prices of about 1e9 that differ in their last digits: E[x^2] - mean^2 cancels to
    nothing in float64 (a spread of 0, so no scaling); the merged deviations keep it."""
    rng = np.random.default_rng(0)
    frame = logs().assign(price=1e9 + rng.random(ROWS))
    dataset, _ = prepare_dataset(str(schema_file(tmp_path, "parquet", frame)), tmp_path / "cache")
    train = np.asarray(dataset.array("split")) == 0
    price = np.asarray(dataset.array("dense"))[train, 1]
    assert abs(price.mean()) < 1e-3 and abs(price.std() - 1) < 1e-3


def test_jsonl_whose_columns_mix_json_types_reads_as_their_text(tmp_path: Path, capsys) -> None:
    """Ids written as numbers on some rows and strings on others (Arrow's JSON reader
    refuses a column whose type changes), a count sometimes quoted, list items of both
    kinds: the same dataset as the file with every id and item a string; the slower
    reading it took is said, naming the file and the column."""
    frame = logs().assign(user_id=[str(i % 40) for i in range(ROWS)])
    frame["hist"] = [[str(i % 30), "i3"] for i in range(ROWS)]
    as_text = schema_file(tmp_path / "text", "jsonl", frame)
    mixed = schema_file(tmp_path / "mixed", "jsonl", frame)
    rows = [
        json.loads(line) for line in (mixed.parent / "data/logs.jsonl").read_text().splitlines()
    ]
    for i, row in enumerate(rows):
        if i % 3 == 1:  # past the first rows, so Arrow has typed each column already
            row["user_id"] = int(row["user_id"])
            row["hist"] = [int(row["hist"][0]), "i3"]
            row["count"] = None if row["count"] is None else str(row["count"])
    (mixed.parent / "data/logs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    want, _ = prepare_dataset(str(as_text), tmp_path / "text" / "cache")
    got, _ = prepare_dataset(str(mixed), tmp_path / "mixed" / "cache")
    data = mixed.parent / "data"  # compressed, as Arrow's reader would read it
    (data / "logs.jsonl.gz").write_bytes(gzip.compress((data / "logs.jsonl").read_bytes()))
    (data / "logs.jsonl").unlink()
    mixed.write_text(mixed.read_text().replace("logs.jsonl", "logs.jsonl.gz"))
    gzipped, _ = prepare_dataset(str(mixed), tmp_path / "gzipped" / "cache")
    for name in ("categorical", "multi_hot", "dense", "event_item", "split"):
        assert np.array_equal(np.asarray(got.array(name)), np.asarray(want.array(name))), name
        assert np.array_equal(np.asarray(gzipped.array(name)), np.asarray(want.array(name)))
    # said, so that the writer may be mended: the file, and the column whose type changed
    assert "read_by_line" not in want.manifest
    assert list(got.manifest["read_by_line"]) == ["logs.jsonl"]
    assert re.fullmatch(
        r"Column\(/\w+\) changed from \w+ to \w+", got.manifest["read_by_line"]["logs.jsonl"]
    )
    cache = str(tmp_path / "gzipped" / "cache")
    assert main(["data", "prepare", str(mixed), "--cache-dir", cache]) in (0, None)
    said = " ".join(capsys.readouterr().out.split())
    assert "logs.jsonl.gz read line by line" in said and "stopped at Column(/" in said


def test_a_file_whose_lists_are_all_empty_gives_empty_lists(tmp_path: Path) -> None:
    """JSON and CSV readers infer no value type for a column of empty lists (a day of logs
    with no genres): its rows get no ids, as an empty list in any other file would."""
    frame = logs().assign(genres=[[] for _ in range(ROWS)], hist=[None] * ROWS)
    dataset, _ = prepare_dataset(str(schema_file(tmp_path, "jsonl", frame)), tmp_path / "cache")
    assert dataset.manifest["rows"] == ROWS
    assert not np.asarray(dataset.array("multi_hot")).any()  # every slot padding
    assert not np.asarray(dataset.array("history_end") - dataset.array("history_start")).any()


def test_a_disk_without_room_fails_the_prepare_with_its_path_and_keeps_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A full disk under a memory-mapped write would kill the process with SIGBUS, leaving
    a half-written folder (measured on a 300 KB tmpfs): the files' blocks are reserved
    first, so it fails with ENOSPC, reported in one paragraph with exit 1."""
    import errno
    import os

    from nas.cli import main

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    monkeypatch.setenv("RECNAS_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["data", "prepare", str(schema_file(tmp_path))]) == 1
    said = " ".join(capsys.readouterr().err.split())
    assert "No space left on device. Free some space" in said, said  # the path: wrapped at 80
    assert "RECNAS_CACHE_DIR" in said and "Traceback" not in said
    assert not any((tmp_path / "cache").iterdir())


def test_an_avro_source_decoded_onto_a_disk_without_room_says_so(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Prepare decodes an Avro file once into a copy beside the dataset: a disk without room
    for it (a file size limit here) is said as the disk's fault, naming the data cache to
    move, exit 1, and nothing is left; it was "could not be read as avro: No space left"."""
    import resource

    from nas.cli import main

    path = schema_file(tmp_path / "parquet", "parquet")
    (tmp_path / "data").mkdir()
    for part in sorted((tmp_path / "parquet" / "data").glob("*.parquet")):
        write_avro(tmp_path / "data" / f"{part.stem}.avro", pq.read_table(part))
    schema = tmp_path / "my_ctr.yaml"
    schema.write_text(
        path.read_text().replace(
            "format: parquet, path: data/*.parquet", "format: avro, path: data/*.avro"
        )
    )
    cache = tmp_path / "cache"
    monkeypatch.setenv("RECNAS_CACHE_DIR", str(cache))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))  # below the decoded copy's size
    try:
        assert main(["data", "prepare", str(schema)]) == 1
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    said = " ".join(capsys.readouterr().err.split())
    assert "File too large" in said and "RECNAS_CACHE_DIR" in said, said
    assert "could not be read" not in said and "Traceback" not in said
    assert not any(cache.iterdir())


def test_a_prepare_removes_what_a_killed_prepare_left_on_this_host_only(tmp_path: Path) -> None:
    import socket
    import subprocess

    exited = subprocess.Popen(["true"])
    exited.wait()  # its pid: no process's now
    cache, host = tmp_path / "cache", socket.gethostname()
    killed = cache / f"my_ctr.tmp-{host}-{exited.pid}"
    running = cache / f"my_ctr.tmp-{host}-1"  # init's: alive
    elsewhere = cache / f"my_ctr.tmp-another-host-{exited.pid}"  # a shared disk's other writer
    for folder in (killed, running, elsewhere):
        folder.mkdir(parents=True)
        (folder / "label.npy").write_bytes(b"half")
    prepare_dataset(str(schema_file(tmp_path)), cache)
    assert not killed.exists() and running.exists() and elsewhere.exists()


def test_an_unknown_dataset_name_says_a_schema_file_will_do() -> None:
    with pytest.raises(NasError) as err:
        check_dataset("my_logs")
    assert "movielens-1m" in str(err.value) and "schema file" in str(err.value)


def test_the_cli_refuses_a_bad_schema_file_in_one_line(tmp_path: Path) -> None:
    from tests.test_search import nas_here

    path = schema_file(tmp_path)
    path.write_text(path.read_text().replace("min_freq: 20", "min_freq: 0"))
    cache = tmp_path / "cache"
    done = nas_here(tmp_path / "runs", "data", "prepare", str(path), "--cache-dir", str(cache))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "features[2].min_freq" in done.stderr
    assert str(path) in "".join(done.stderr.split())  # wrapped at the terminal's width
    path.write_text("name: x\nlabels: [y]\n")  # a field of the file, not a flag
    done = nas_here(tmp_path / "runs", "data", "prepare", str(path), "--cache-dir", str(cache))
    assert done.returncode == 2 and "source: is required" in done.stderr
    assert "--source" not in done.stderr
    done = nas_here(tmp_path / "runs", "data", "prepare", str(path), "--rows", "5")
    assert done.returncode == 2 and "rows: does not apply to a schema file" in done.stderr
    assert not cache.exists()


@pytest.mark.slow
def test_a_team_prepares_inspects_and_searches_its_own_parquet_with_no_code(
    tmp_path: Path,
) -> None:
    """`nas data prepare FILE`, `nas data inspect NAME --json`, then `nas submit` of a search
    whose `dataset:` is the schema file's path, relative to the search file."""
    import subprocess

    from nas.service.registry import Registry
    from tests import nas_process
    from tests.conftest import runs_with_store
    from tests.test_search import REPO, env_for

    frame = logs(rows=3000, seed=2)
    path = schema_file(tmp_path / "team", frame=frame)
    runs = runs_with_store(tmp_path)
    env = env_for(runs) | {"RECNAS_CACHE_DIR": str(tmp_path / "cache")}

    def nas(*args: str) -> subprocess.CompletedProcess:
        return nas_process.run(list(args), env, REPO, 600)

    done = nas("data", "prepare", str(path))
    assert done.returncode == 0, done.stderr
    assert "my_ctr" in done.stdout and "3,000" in done.stdout
    done = nas("data", "inspect", "my_ctr", "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    prepared = load_dataset("my_ctr", tmp_path / "cache")
    split = by_source(prepared, "split")
    for i, name in enumerate(("train", "valid", "test")):
        assert figures["split_sizes"][name] == (split == i).sum()
        rate = frame["like"][split == i].mean()
        assert figures["labels"]["like"][name] == pytest.approx(rate)
    site = next(f for f in figures["fields"] if f["name"] == "site")
    assert site["missing"] == pytest.approx(frame["site"].isna().mean())
    search = tmp_path / "searches" / "own.yaml"
    search.parent.mkdir()
    search.write_text(
        "name: own\ndataset: ../team/my_ctr.yaml\n"
        "space: {name: ctr_stack, options: {max_depth: 2, embedding_dims: [8]}}\n"
        "budget: {candidates: 2, steps: 30}\ntrain: {batch_size: 256}\n"
        "resources: {concurrency: 1, cpus_per_trial: 1}\ninclude_baselines: false\n"
    )
    done = nas("submit", str(search), "--json")
    assert done.returncode == 0, done.stderr
    registry = Registry(f"sqlite:///{runs / 'registry.db'}")
    (found,) = registry.list_searches()
    trials = registry.trials(found.id)
    assert [t.status for t in trials] == ["completed", "completed"]
    assert found.config["dataset"] == str(path.resolve())


@pytest.mark.parametrize("spec", ["dcnv2.json", "modern/hstu_seq.json"])
def test_training_from_the_mapped_files_matches_training_in_memory(
    tmp_path: Path, spec: str, request
) -> None:
    """A trial that maps the prepared files (nothing through the object store) trains to the
    same figures, to the bit, as one given the rows as arrays; train+valid maps both."""
    from nas.arch.spec import ArchSpec
    from tests.test_search import REPO
    from workers.train import TrainConfig
    from workers.trial import evaluate
    from workers.trial_data import TrialData

    text = SCHEMA.replace("max_len: 4, vocab_of", "max_len: 32, vocab_of")
    path = schema_file(tmp_path, frame=logs(rows=3000))
    path.write_text(
        text.format(
            name="my_ctr",
            source="{format: parquet, path: data/*.parquet}",
            split="{method: time}",
            sep="",
        )
    )
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    architecture = ArchSpec.load(REPO / "examples" / "specs" / spec)
    config = TrainConfig(steps=30, batch_size=128, eval_batch_size=500)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on more, HSTU differs from run to run in the last bits
    request.addfinalizer(lambda: torch.set_num_threads(threads))
    for train_on in (("train",), ("train", "valid")):
        arrays = TrialData.from_prepared(dataset, "test", train_on)
        mapped = TrialData.from_prepared(dataset, "test", train_on, mapped=True)
        assert mapped.root is not None and mapped.nbytes == 0 < arrays.nbytes
        assert mapped.train_rates == pytest.approx(arrays.train_rates)
        one = evaluate(architecture, arrays, config)
        other = evaluate(architecture, mapped, config)
        assert (one.ne, one.auc, one.gauc) == (other.ne, other.auc, other.gauc)
        assert one.gauc is not None  # keys.user: AUC per user


def test_mapped_reads_of_a_dataset_prepared_again_are_refused_until_it_is_as_it_was(
    tmp_path: Path,
) -> None:
    """A search's trials map the prepared files anew; the dataset prepared again under the
    search (its schema changed) would train later candidates on other data. Each read
    checks the manifest's version: another one raises ``DatasetChanged`` (the search stops);
    the same schema and files prepared again give the same version, and reads go on."""
    from workers.trial_data import DatasetChanged, TrialData

    path = schema_file(tmp_path)
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    data = TrialData.from_prepared(dataset, "valid", mapped=True)
    assert data.version == dataset.version
    before = data.features("train").categorical.clone()
    original = path.read_text()
    path.write_text(original.replace("min_freq: 20", "min_freq: 2"))
    changed, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert changed.version != dataset.version
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()] == ["my_ctr"]
    for read in (lambda: data.features("train"), data.groups):
        with pytest.raises(
            DatasetChanged, match="was prepared again after the training started"
        ) as err:
            read()
        assert data.unavailable(err.value) == str(err.value)
    path.write_text(original)
    again, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert again.version == dataset.version  # preparing is deterministic
    assert torch.equal(data.features("train").categorical, before)


@pytest.mark.parametrize(("objective", "key"), [("gauc", "user"), ("gauc_request", "request")])
def test_an_auc_per_group_needs_its_key_in_the_dataset(
    tmp_path: Path, objective: str, key: str
) -> None:
    from tests.test_search import nas_here

    path = schema_file(tmp_path, split="{method: order}")
    path.write_text(path.read_text().replace("keys: {user: user_id, timestamp: ts}", "keys: {}"))
    search = tmp_path / "s.yaml"
    search.write_text(
        f"name: g\ndataset: {path}\nspace: {{name: ctr_stack}}\nobjectives: [{objective}, flops]\n"
    )
    runs = tmp_path / "runs"
    done = nas_here(runs, "submit", str(search), RECNAS_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 2, done.stderr
    assert f"objectives[0]: {objective} needs each row's {key}" in " ".join(done.stderr.split())
    assert not (runs / "registry.db").exists()


def test_the_auc_per_request_groups_rows_by_the_request_key(tmp_path: Path) -> None:
    """keys.request: rows of one request id share a group, rows of two never do; the AUC
    per request is measured on those groups."""
    from workers.metrics import grouped_auc
    from workers.trial_data import TrialData

    frame = logs()
    frame["request_id"] = [f"r{i // 3}" for i in range(ROWS)]  # three candidates a request
    path = schema_file(tmp_path, frame=frame, split="{method: random}")
    path.write_text(
        path.read_text().replace("timestamp: ts}", "timestamp: ts, request: request_id}")
    )
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    valid = np.asarray(dataset.array("source_row"))[dataset.split_rows("valid")]
    groups = dataset.groups("valid", "request")
    pairs = pd.DataFrame({"group": groups, "request": frame["request_id"].to_numpy()[valid]})
    assert (pairs.groupby("request")["group"].nunique() == 1).all()
    assert (pairs.groupby("group")["request"].nunique() == 1).all()
    data = TrialData.from_prepared(dataset, "valid", mapped=True)
    assert set(data.groups()) == {"gauc", "gauc_request"}
    scores = np.arange(len(valid), dtype=float)
    labels = frame["click"].to_numpy()[valid]
    assert grouped_auc(labels, scores, data.groups()["gauc_request"]) == grouped_auc(
        labels, scores, pairs["request"].to_numpy()
    )


def test_the_profile_agrees_with_pandas(tmp_path: Path) -> None:
    """`nas data inspect`'s figures: label rates and first and last times per split, a
    field's missing and out-of-vocabulary rates, a list's empty share, lengths and its values
    out of vocabulary."""
    from nas.data.profile import profile

    frame = logs()
    dataset, _ = prepare_dataset(str(schema_file(tmp_path)), tmp_path / "cache")
    figures = profile(dataset)
    split = by_source(dataset, "split")
    train = frame[split == 0]
    for i, name in enumerate(("train", "valid", "test")):
        assert figures["labels"]["like"][name] == pytest.approx(frame["like"][split == i].mean())
        times = pd.to_datetime(frame["ts"][split == i], unit="s", utc=True)
        assert figures["times"][name] == {
            "first": times.min().isoformat(), "last": times.max().isoformat()
        }  # fmt: skip
    fields = {f["name"]: f for f in figures["fields"]}
    items = expected_vocab(train["item_id"], max_size=20)
    assert fields["item_id"]["out_of_vocabulary"] == pytest.approx(
        (~frame["item_id"].isin(list(items))).mean()
    )
    assert fields["site"]["missing"] == pytest.approx(frame["site"].isna().mean())
    lengths = frame["genres"].map(lambda g: min(len(g), 3))
    assert fields["genres"]["missing"] == pytest.approx((lengths == 0).mean())
    assert fields["genres"]["length"]["p50"] == pytest.approx(lengths.median())
    assert fields["genres"]["length"]["max"] == lengths.max()
    kept = frame["genres"].map(lambda g: g[:3]).explode().dropna()
    genres = expected_vocab(train["genres"].explode())
    assert fields["genres"]["out_of_vocabulary"] == pytest.approx((~kept.isin(list(genres))).mean())
    hist = frame["hist"].map(lambda h: min(len(h), 4))
    assert fields["hist"]["missing"] == pytest.approx((hist == 0).mean())


DAMAGE = st.sampled_from(
    [None, "", " ", "nan", "inf", 1e308, -1, 2**63, 2**64, 0.5, True, "x" * 5000, "é€😀",
     [], ["a", 1], {"a": 1}, "a|b|c|d|e", 3, "2024-01-01", [None, "a"], [1, 2], [1.5], " 5 ",
     -0.0, "NA", "\\N"]
)  # fmt: skip


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    fmt=st.sampled_from(["jsonl", "csv"]),
    damage=st.lists(
        st.tuples(
            st.integers(0, ROWS - 1),
            st.sampled_from(["click", "user_id", "ts", "site", "count", "price", "genres", "hist"]),
            DAMAGE,
        ),
        min_size=1,
        max_size=3,
    ),
)
@example(fmt="csv", damage=[(3, "price", " "), (4, "site", "NA")])  # and NaN written "nan"
@example(fmt="jsonl", damage=[(3, "genres", [None, "a"]), (5, "hist", [1, 2])])
@example(fmt="jsonl", damage=[(3, "count", True), (4, "site", 2.0)])
def test_damaged_rows_prepare_or_fail_naming_the_file(tmp_path_factory, fmt, damage) -> None:
    """Any value in any column of a few rows: the dataset prepares, or a ``DataError`` names
    the file; never another exception, and nothing is left in the cache. Prepared, the
    file's rows as a served model reads them encode to the features it stored, or a damaged
    row is refused (an undamaged one never is: the file's NaN written "nan", the integer ids
    of a JSON list, were)."""
    folder = tmp_path_factory.mktemp("damaged")
    rows = logs().to_dict("records")
    for row, column, value in damage:
        rows[row][column] = value
    (folder / "data").mkdir()
    if fmt == "jsonl":
        lines = [json.dumps(r, default=lambda v: v.item()) for r in rows]
        source, sep = "{format: jsonl, path: data/logs.jsonl}", ""
    else:  # lists as "|"-separated text, the rest as Python writes it

        def cell(value) -> str:
            text = "|".join(map(str, value)) if isinstance(value, list) else str(value)
            return '"' + ("" if value is None else text).replace('"', '""') + '"'

        lines = [",".join(rows[0])] + [",".join(cell(v) for v in r.values()) for r in rows]
        source, sep = "{format: csv, path: data/logs.csv}", ', sep: "|"'
    (folder / "data" / f"logs.{fmt}").write_text("\n".join(lines) + "\n")
    path = folder / "my_ctr.yaml"
    split = "{method: time, valid: 0.1, test: 0.1}"
    path.write_text(SCHEMA.format(name="damaged", source=source, split=split, sep=sep))
    try:
        dataset, _ = prepare_dataset(str(path), folder / "cache")
    except DataError as err:
        assert "data/" in str(err)
        assert not (folder / "cache").exists() or not any((folder / "cache").iterdir())
        return
    # prepared: the same rows, as a served model reads the file, are what it trained on
    from nas.data.raw import RawInputError
    from nas.data.row_files import RowFiles

    served_rows = [row for batch in RowFiles(folder / "data").batches() for row in batch.rows]
    form, schema = dataset.raw_form(), dataset.schema
    try:
        served = form.features(served_rows, schema)
    except RawInputError as err:  # no model scores other features than it learnt
        assert err.row - 1 in {row for row, _, _ in damage}, err
        return
    stored = stored_as_read(dataset)
    assert torch.equal(served.categorical, stored.categorical)
    assert torch.equal(served.multi_hot, stored.multi_hot)
    assert torch.allclose(served.dense, stored.dense, rtol=1e-6, atol=1e-6)
    assert torch.equal(served.history.tensor(), stored.history.tensor())


def _id_number(value: str | None) -> int | None:
    """A log's id as a number: "i12" as 12, "a" as 97."""
    if not isinstance(value, str):
        return None
    return int(value[1:]) if value[0] == "i" else ord(value[0])


def _typed_ids(values: list, kind: str) -> pa.Array:
    values = [v if isinstance(v, str) else None for v in values]
    numbers = [_id_number(v) for v in values]
    return {
        "string": lambda: pa.array(values, pa.string()),
        "large_string": lambda: pa.array(values, pa.large_string()),
        "dictionary": lambda: pa.array(values, pa.string()).dictionary_encode(),
        "int64": lambda: pa.array(numbers, pa.int64()),
        "float64": lambda: pa.array([math.nan if n is None else n for n in numbers], pa.float64()),
        "float32 fractions": lambda: pa.array(
            [None if n is None else n + 0.1 for n in numbers], pa.float32()
        ),
        "bool": lambda: pa.array([None if n is None else n % 2 == 0 for n in numbers], pa.bool_()),
    }[kind]()


def _typed_numbers(values: list, kind: str) -> pa.Array:
    values = [None if v is None or math.isnan(v) else float(v) for v in values]
    return {
        "float64": lambda: pa.array([math.nan if v is None else v for v in values], pa.float64()),
        "float32": lambda: pa.array(values, pa.float32()),
        "int64": lambda: pa.array([None if v is None else int(v) for v in values], pa.int64()),
        "bool": lambda: pa.array([None if v is None else v > 2 for v in values], pa.bool_()),
        "string": lambda: pa.array(["NA" if v is None else repr(v) for v in values], pa.string()),
        "decimal": lambda: pa.array(
            [None if v is None else decimal.Decimal(f"{v:.3f}") for v in values],
            pa.decimal128(12, 3),
        ),
    }[kind]()


def _typed_lists(values: list, kind: str, nulls: bool) -> pa.Array:
    values = [
        None if i % 11 == 0 else v + [None] * (nulls and i % 3 == 0) for i, v in enumerate(values)
    ]
    numbers = [None if v is None else [_id_number(x) for x in v] for v in values]
    return {
        "list<string>": lambda: pa.array(values, pa.list_(pa.string())),
        "large_list<string>": lambda: pa.array(values, pa.large_list(pa.string())),
        "list<large_string>": lambda: pa.array(values, pa.list_(pa.large_string())),
        "list<int64>": lambda: pa.array(numbers, pa.list_(pa.int64())),
        "list<int32>": lambda: pa.array(numbers, pa.list_(pa.int32())),
        "list<dictionary>": lambda: pa.array(values, pa.list_(pa.string())).cast(
            pa.list_(pa.dictionary(pa.int32(), pa.string()))
        ),
    }[kind]()


def _typed_times(values: list, kind: str) -> pa.Array:
    """Unix seconds as integers, a zoned timestamp, or text: naive date-times with a
    fraction, or each row's own zone (+02:00 on some, Z on others)."""
    utc = datetime.UTC
    moments = [datetime.datetime.fromtimestamp(int(v) + 0.25, utc) for v in values]
    two = datetime.timezone(datetime.timedelta(hours=2))
    return {
        "int64": lambda: pa.array([int(v) for v in values], pa.int64()),
        "timestamp": lambda: pa.array(moments, pa.timestamp("ms", tz="UTC")),
        "text": lambda: pa.array([m.replace(tzinfo=None).isoformat() for m in moments]),
        "zoned text": lambda: pa.array(
            [
                m.astimezone(two).isoformat() if i % 2 else m.isoformat().replace("+00:00", "Z")
                for i, m in enumerate(moments)
            ]  # fmt: skip
        ),
    }[kind]()


IDS = ["string", "large_string", "dictionary", "int64", "float64", "float32 fractions", "bool"]
NUMBERS = ["float64", "float32", "int64", "bool", "string", "decimal"]
LISTS = ["list<string>", "large_list<string>", "list<large_string>", "list<int64>", "list<int32>",
         "list<dictionary>"]  # fmt: skip
TIMES = ["int64", "timestamp", "text", "zoned text"]


@settings(max_examples=25, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    kinds=st.fixed_dictionaries(
        {
            "site": st.sampled_from(IDS),
            "item_id": st.sampled_from(IDS[:5]),
            "user_id": st.sampled_from(IDS[:5]),
            "count": st.sampled_from(NUMBERS),
            "price": st.sampled_from(NUMBERS[:3]),
            "genres": st.sampled_from(LISTS),
            "hist": st.sampled_from(LISTS),
            "ts": st.sampled_from(TIMES),
        }  # fmt: skip
    ),
    nulls=st.booleans(),
)
def test_a_parquet_file_of_any_column_types_serves_as_it_prepared(
    tmp_path_factory, kinds, nulls
) -> None:
    """Ids as integers, floats (a pandas column that held a null), booleans or dictionaries;
    numbers as floats, integers, booleans, decimals or text ("NA" missing); lists of texts,
    integers or categories with nulls; times as numbers, timestamps or text (zoned, with
    fractions): the file prepares, and its rows, served by rows and by columns, encode to the
    features stored. (Before, a float or integer list of ids prepared and every served row
    of it was refused; zoned text times and lists of categories were refused.)"""
    from nas.data.raw_table import table_features

    folder = tmp_path_factory.mktemp("types")
    frame = logs()
    columns = {name: pa.array(frame[name]) for name in ("click", "like")}
    columns["ts"] = _typed_times(list(frame["ts"]), kinds["ts"])
    for name in ("site", "item_id", "user_id"):
        columns[name] = _typed_ids(list(frame[name]), kinds[name])
    for name in ("count", "price"):
        columns[name] = _typed_numbers(list(frame[name]), kinds[name])
    for name in ("genres", "hist"):
        columns[name] = _typed_lists(list(frame[name]), kinds[name], nulls)
    (folder / "data").mkdir()
    pq.write_table(pa.table(columns), folder / "data" / "logs.parquet")
    path = folder / "my_ctr.yaml"
    source = "{format: parquet, path: data/logs.parquet}"
    path.write_text(SCHEMA.format(name="typed", source=source, split=TIME_SPLIT.join("{}"), sep=""))
    dataset, _ = prepare_dataset(str(path), folder / "cache")
    form, schema = dataset.raw_form(), dataset.schema
    source = pq.read_table(folder / "data" / "logs.parquet")
    stored = stored_as_read(dataset)
    by_columns = table_features(form, source, schema)
    assert by_columns is not None, "every column read by column"
    for served in (form.features(source.to_pylist(), schema), by_columns):
        assert torch.equal(served.categorical, stored.categorical)
        assert torch.equal(served.multi_hot, stored.multi_hot)
        assert torch.allclose(served.dense, stored.dense, rtol=1e-6, atol=1e-6)
        assert torch.equal(served.history.tensor(), stored.history.tensor())


def test_prepare_warns_of_a_field_that_keeps_no_value(tmp_path: Path, capsys) -> None:
    """min_freq above every value's count: the field's ids are all 1 (unknown)."""
    path = schema_file(tmp_path)
    path.write_text(path.read_text().replace("min_freq: 20", "min_freq: 100000"))
    assert main(["data", "prepare", str(path), "--cache-dir", str(tmp_path / "cache")]) in (0, None)
    shown = " ".join(capsys.readouterr().out.split())
    assert "warning │ site: no value kept from the training rows" in shown


def events_logs(rows: int = ROWS) -> pd.DataFrame:
    """``logs`` whose history is a list of {item, action, time} events (with an extra field)
    before the row's time; some rows without one, some events of an empty item."""
    frame = logs(rows)
    rng = np.random.default_rng(3)
    frame["hist"] = [
        None if i % 17 == 0 else [
            {"item": h if k or i % 5 else "", "action": int(rng.integers(0, 5)),
             "time": int(t) - 60 * (len(hs) - k), "dwell": 1.5}
            for k, h in enumerate(hs)
        ]
        for i, (hs, t) in enumerate(zip(frame["hist"], frame["ts"], strict=True))
    ]  # fmt: skip
    return frame


def test_a_history_column_of_events_keeps_each_events_action_and_time(tmp_path: Path) -> None:
    """A column of {item, action, time} structs (a team's precomputed histories): each row's
    last `max_len` events keep their actions and times, a row's age counted from its own
    time; a served row (by its rows, by its columns, and `nas data rows`' own) encodes to
    the very features prepare stored."""
    from nas.data.raw_table import table_features

    frame = events_logs()
    dataset, _ = prepare_dataset(str(schema_file(tmp_path, frame=frame)), tmp_path / "cache")
    form, schema = dataset.raw_form(), dataset.schema
    assert form.columns["hist"]["type"] == "events" and form.history["now"] == "ts"
    actions = max(e["action"] for h in frame["hist"] if h for e in h)
    assert schema.history.actions == actions + 1
    start, end = by_source(dataset, "history_start"), by_source(dataset, "history_end")
    event_action, event_time = dataset.array("event_action"), dataset.array("event_time")
    for i, events in enumerate(frame["hist"]):
        kept = (events or [])[-4:]
        assert end[i] - start[i] == len(kept)
        assert event_action[start[i] : end[i]].tolist() == [e["action"] for e in kept]
        assert event_time[start[i] : end[i]].tolist() == [e["time"] for e in kept]
    # the source's rows, as a served model reads them, are the stored features
    source = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "data").iterdir()))
    stored = stored_as_read(dataset)
    records = source.to_pandas().to_dict("records")  # lists as numpy arrays, as pandas has them
    assert isinstance(records[1]["hist"], np.ndarray)
    for encoded in (
        table_features(form, source, schema),
        form.features(source.to_pylist(), schema),
        form.features(records, schema),  # a pyfunc's frame the columns could not take
    ):
        assert torch.equal(encoded.history.tensor(), stored.history.tensor())
    raw = dataset.raw_rows("test", 40)
    assert torch.equal(
        form.features(raw, schema).history.tensor(),
        dataset.features("test")[slice(0, 40)].history.tensor(),
    )
    from nas.data.export import export_raw_rows  # `nas data rows --out NAME.parquet`

    export_raw_rows(dataset, "test", tmp_path / "rows.parquet", 40)
    table = pq.read_table(tmp_path / "rows.parquet")
    assert pa.types.is_struct(table.schema.field("hist").type.value_type)
    assert torch.equal(
        table_features(form, table, schema).history.tensor(),
        dataset.features("test")[slice(0, 40)].history.tensor(),
    )
    # JSON lines' objects: the same events
    jsonl, _ = prepare_dataset(
        str(schema_file(tmp_path / "jsonl", "jsonl", frame)), tmp_path / "jsonl" / "cache"
    )
    for name in ("event_item", "event_action", "event_time", "history_start", "history_end"):
        assert np.array_equal(np.asarray(jsonl.array(name)), np.asarray(dataset.array(name)))
    # times as Parquet's timestamps (a fraction floored), as a row's time is read
    utc = datetime.UTC
    frame["hist"] = [
        [{**e, "time": datetime.datetime.fromtimestamp(e["time"] + 0.5, utc)} for e in h]
        if h else h
        for h in frame["hist"]
    ]  # fmt: skip
    stamped, _ = prepare_dataset(
        str(schema_file(tmp_path / "stamped", frame=frame)), tmp_path / "stamped" / "cache"
    )
    for name in ("event_item", "event_action", "event_time", "history_start", "history_end"):
        assert np.array_equal(np.asarray(stamped.array(name)), np.asarray(dataset.array(name)))
    source = pa.concat_tables(
        pq.read_table(p) for p in sorted((tmp_path / "stamped" / "data").iterdir())
    )
    assert pa.types.is_timestamp(source.schema.field("hist").type.value_type.field("time").type)
    encoded = table_features(stamped.raw_form(), source, schema)
    assert torch.equal(encoded.history.tensor(), stored.history.tensor())


def test_a_history_of_events_without_a_time_key_reads_its_age_from_its_last_event(
    tmp_path: Path,
) -> None:
    frame = events_logs()
    path = schema_file(tmp_path, frame=frame, split="{method: random, valid: 0.1, test: 0.1}")
    path.write_text(path.read_text().replace("keys: {user: user_id, timestamp: ts}", "keys: {}"))
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    form = dataset.raw_form()
    assert "now" not in form.history and "ts" not in form.columns
    now = by_source(dataset, "history_now")
    for i, events in enumerate(frame["hist"]):
        assert now[i] == (events[-1]["time"] if events else 0)
    raw = dataset.raw_rows("valid", 40)
    assert torch.equal(
        form.features(raw, dataset.schema).history.tensor(),
        dataset.features("valid")[slice(0, 40)].history.tensor(),
    )


def test_a_history_of_events_reads_as_json_text_and_as_triples(tmp_path: Path) -> None:
    """A CSV's cells of JSON text (triples on some rows, objects on others) and JSON lines of
    triples (which Arrow's reader refuses: read line by line) prepare to the arrays Parquet's
    structs do; the CSV's own rows, served by rows and by columns, give the stored history.
    (A JSON-lines history whose types mix was read as lists of its events' text.)"""
    from nas.data.raw_table import rows_table, table_features

    frame = events_logs()
    parquet, _ = prepare_dataset(str(schema_file(tmp_path, frame=frame)), tmp_path / "cache")
    triples = [[[e["item"], e["action"], e["time"]] for e in h] if h else h for h in frame["hist"]]
    texts = [
        "" if h is None else json.dumps(t if i % 2 else h)
        for i, (h, t) in enumerate(zip(frame["hist"], triples, strict=True))
    ]
    path = schema_file(tmp_path / "csv", "csv", frame.assign(hist=[[]] * len(frame)))
    tsv = tmp_path / "csv" / "data" / "logs.tsv"
    table = pd.read_csv(tsv, sep="\t", dtype=str, keep_default_na=False).assign(hist=texts)
    table.to_csv(tsv, sep="\t", index=False)
    path.write_text(path.read_text().replace('vocab_of: item_id, sep: "|"', "vocab_of: item_id"))
    csv_, _ = prepare_dataset(str(path), tmp_path / "csv" / "cache")
    utc = datetime.UTC
    mixed = [  # times as numbers on some rows, as text on others
        [{**e, "time": datetime.datetime.fromtimestamp(e["time"], utc).isoformat()} for e in h]
        if h and i % 3 == 0 else h
        for i, h in enumerate(frame["hist"])
    ]  # fmt: skip
    jsonl = [
        prepare_dataset(
            str(schema_file(tmp_path / name, "jsonl", frame.assign(hist=hist))),
            tmp_path / name / "cache",
        )[0]
        for name, hist in (("triples", triples), ("mixed", mixed))
    ]
    for dataset in (csv_, *jsonl):
        assert dataset.raw_form().columns["hist"]["type"] == "events"
        for name in ("event_item", "event_action", "event_time", "history_start", "history_end"):
            assert np.array_equal(np.asarray(dataset.array(name)), np.asarray(parquet.array(name)))
    form, schema = csv_.raw_form(), csv_.schema
    with open(tsv, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))  # text, as `nas predict` reads a CSV
    stored = stored_as_read(csv_)
    for served in (
        form.features(rows, schema),
        table_features(form, rows_table(form, rows), schema),
    ):
        assert torch.equal(served.history.tensor(), stored.history.tensor())
    # text that is no list of events: named, with what would do
    table.assign(hist=["i1|i2"] * len(table)).to_csv(tsv, sep="\t", index=False)
    with pytest.raises(DataError, match=r"row 1: column 'hist' must be a list of \[item, action"):
        prepare_dataset(str(path), tmp_path / "csv" / "cache2")


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ({"item": "i1", "action": 1}, "holds an event without its time"),
        ({"item": "i1", "action": -1, "time": 5}, "holds an action of -1; actions are 0 to 127"),
        ({"item": None, "action": 1, "time": 5}, "holds an event without its item"),
        ({"item": "i1", "action": 1, "time": "soon"}, "must be a unix time in seconds or a"),
    ],
)
def test_a_bad_event_is_named_with_its_row(tmp_path: Path, event, words) -> None:
    frame = events_logs(60)
    fine = {"item": "i1", "action": 1, "time": "5" if isinstance(event.get("time"), str) else 5}
    frame["hist"] = [[event] if i == 7 else [{**event, **fine}] for i in range(60)]
    with pytest.raises(DataError) as caught:
        prepare_dataset(str(schema_file(tmp_path, frame=frame)), tmp_path / "cache")
    assert words in str(caught.value) and "column 'hist" in str(caught.value)
    assert "row 8:" in str(caught.value)
    frame["hist"] = [[{"item": "i1", "action": 1}]] * 60  # no event has a time
    with pytest.raises(DataError, match=r"needs the fields item, action and time \(it lacks time"):
        prepare_dataset(str(schema_file(tmp_path / "none", frame=frame)), tmp_path / "cache")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_an_empty_value_in_a_list_is_no_value_as_in_a_served_row(tmp_path: Path, fmt) -> None:
    """ "" in a list column ("a||b" split) was a value to prepare (the multi-hot vocabulary
    gave it an id; the history kept it) and no value to a served row: the same row scored
    other features than it trained on. Both now read it, and a null in a list, as none.
    Lists of integer ids (JSON lines' usual ones) prepared, and a served row of them was
    refused; both now read them as their text. Served by rows and by columns."""
    from nas.data.raw_table import rows_table, table_features

    frame = logs()
    if fmt == "jsonl":
        frame["genres"] = [[ord(g) for g in gs] for gs in frame["genres"]]
        frame["hist"] = [[int(h[1:]) for h in hs] for hs in frame["hist"]]
        frame["item_id"] = [int(i[1:]) for i in frame["item_id"]]
    empty = "" if fmt == "parquet" else None
    frame["genres"] = [g + [empty] if i % 3 == 0 else g for i, g in enumerate(frame["genres"])]
    frame["hist"] = [[empty] + h if i % 4 == 0 else h for i, h in enumerate(frame["hist"])]
    frame["hist"] = [h + [None] if i % 5 == 0 else h for i, h in enumerate(frame["hist"])]
    path = schema_file(tmp_path, fmt, frame=frame)
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    form, schema = dataset.raw_form(), dataset.schema
    assert "" not in form.multi_hot[0]["vocab"]
    if fmt == "parquet":
        rows = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "data").iterdir()))
        rows = rows.to_pylist()
    else:
        rows = [
            json.loads(line) for line in (tmp_path / "data" / "logs.jsonl").read_text().splitlines()
        ]
    stored = stored_as_read(dataset)
    by_columns = table_features(form, rows_table(form, rows), schema)
    for served in (form.features(rows, schema), by_columns):
        assert torch.equal(served.multi_hot, stored.multi_hot)
        assert torch.equal(served.history.tensor(), stored.history.tensor())


def test_a_history_of_events_reads_the_fields_its_schema_names(tmp_path: Path) -> None:
    """`event_fields` names a team's own struct fields; a served row sends them (or triples)."""
    from nas.data.raw import RawInputError
    from nas.data.raw_table import rows_table, table_features

    frame = events_logs()
    frame["hist"] = [
        [{"id": e["item"], "kind": e["action"], "at": e["time"]} for e in h] if h else h
        for h in frame["hist"]
    ]
    path = schema_file(tmp_path, frame=frame)
    path.write_text(
        path.read_text().replace(
            "vocab_of: item_id}", "vocab_of: item_id, event_fields: {item: id, action: kind, "
            "time: at}}"
        )
    )  # fmt: skip
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    form, schema = dataset.raw_form(), dataset.schema
    assert form.columns["hist"]["fields"] == ["id", "kind", "at"]
    source = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "data").iterdir()))
    stored = stored_as_read(dataset)
    rows = source.to_pylist()
    from_text = table_features(form, rows_table(form, rows), schema)  # JSON lines' objects
    for served in (table_features(form, source, schema), form.features(rows, schema), from_text):
        assert torch.equal(served.history.tensor(), stored.history.tensor())
    triples = [
        {**r, "hist": [[e["id"], e["kind"], e["at"]] for e in r["hist"] or []]} for r in rows
    ]
    assert torch.equal(form.features(triples, schema).history.tensor(), stored.history.tensor())
    with pytest.raises(
        RawInputError, match=r"row 1: 'hist' must be .*\{\"id\", \"kind\", \"at\"\} obj"
    ):
        form.features([{**rows[0], "hist": [{"item": "i1", "action": 1, "time": 5}]}], schema)
    # named where a history column is not read
    text = path.read_text()
    path.write_text(
        text.replace("vocab_of: item_id, event_fields", "vocab_of: item_id, sep: '|', event_fields")
    )
    with pytest.raises(ConfigError, match="event_fields name a history column's struct fields"):
        prepare_dataset(str(path), tmp_path / "cache2")
    path.write_text(text.replace("action: kind", "action: id"))
    with pytest.raises(ConfigError, match="item, action and time must be fields of their own"):
        prepare_dataset(str(path), tmp_path / "cache3")
    frame["hist"] = [[e["id"] for e in h] if h else h for h in frame["hist"]]  # items only
    path = schema_file(tmp_path / "items", frame=frame)
    path.write_text(text)
    with pytest.raises(DataError, match="holds lists of items, not of events: event_fields"):
        prepare_dataset(str(path), tmp_path / "cache4")


def test_a_history_of_events_without_an_action_is_one_kind_of_action(tmp_path: Path, capsys):
    """A history of viewed items and their times, ``{item, time}`` without an action, was
    refused ("it lacks action") and left out of a draft. ``event_fields: {action: null}``
    reads it (the draft writes it so; prepare, refusing such events undeclared, says it):
    each event one kind of action, as a history of items only; its times kept. A served row
    sends ``{item, time}`` objects or ``[item, time]`` pairs, by its rows and by its columns,
    from Parquet, JSON lines and a CSV cell's JSON text alike, and `nas data rows` writes
    them so: each encodes to the very features prepare stored."""
    import yaml

    from nas.data.export import export_raw_rows
    from nas.data.raw import RawInputError
    from nas.data.raw_table import rows_table, table_features

    frame = events_logs()
    frame["hist"] = [
        [{"item": e["item"], "time": e["time"]} for e in h] if h else h for h in frame["hist"]
    ]
    path = schema_file(tmp_path, frame=frame)
    with pytest.raises(DataError, match=r"it lacks action; .*event_fields: \{action: null\}"):
        prepare_dataset(str(path), tmp_path / "cache")
    path.write_text(
        path.read_text().replace(
            "vocab_of: item_id}", "vocab_of: item_id, event_fields: {action: null}}"
        )
    )
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    form, schema = dataset.raw_form(), dataset.schema
    assert form.columns["hist"]["fields"] == ["item", None, "time"]
    assert schema.history.actions == 2
    start, end = by_source(dataset, "history_start"), by_source(dataset, "history_end")
    event_action, event_time = dataset.array("event_action"), dataset.array("event_time")
    for i, events in enumerate(frame["hist"]):
        kept = (events or [])[-4:]
        assert event_action[start[i] : end[i]].tolist() == [1] * len(kept)
        assert event_time[start[i] : end[i]].tolist() == [e["time"] for e in kept]
    source = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "data").iterdir()))
    stored = stored_as_read(dataset)
    rows = source.to_pylist()
    pairs = [{**r, "hist": [[e["item"], e["time"]] for e in r["hist"] or []]} for r in rows]
    texts = [{**r, "hist": json.dumps(r["hist"])} for r in pairs]  # a CSV cell's JSON
    for served in (
        table_features(form, source, schema),
        form.features(rows, schema),
        form.features(pairs, schema),
        table_features(form, rows_table(form, pairs), schema),
        table_features(form, rows_table(form, texts), schema),
    ):
        assert torch.equal(served.history.tensor(), stored.history.tensor())
    with pytest.raises(RawInputError, match=r"\[item, time\] pairs or \{\"item\", \"time\"\}"):
        form.features([{**rows[0], "hist": [{"item": "i1", "when": 5}]}], schema)
    raw = dataset.raw_rows("test", 40)
    assert [len(e) for r in raw for e in r["hist"]] == [2] * sum(len(r["hist"]) for r in raw)
    export_raw_rows(dataset, "test", tmp_path / "rows.parquet", 40)
    table = pq.read_table(tmp_path / "rows.parquet")
    assert table.schema.field("hist").type.value_type.names == ["item", "time"]
    for served in (form.features(raw, schema), table_features(form, table, schema)):
        assert torch.equal(
            served.history.tensor(), dataset.features("test")[slice(0, 40)].history.tensor()
        )
    jsonl = write_source(tmp_path / "lines", frame, "jsonl").replace("data/", "lines/")
    path.write_text(path.read_text().replace("{format: parquet, path: data/*.parquet}", jsonl))
    jsonl, _ = prepare_dataset(str(path), tmp_path / "cache-jsonl")  # JSON lines' objects
    for name in ("event_item", "event_action", "event_time", "history_start", "history_end"):
        assert np.array_equal(np.asarray(jsonl.array(name)), np.asarray(dataset.array(name)))
    out = tmp_path / "draft.yaml"  # the draft declares it
    assert main(["data", "schema", str(tmp_path / "data"), "--out", str(out), "--json"]) == 0
    drafted = {f["name"]: f for f in yaml.safe_load(out.read_text())["features"]}
    assert drafted["hist"]["event_fields"] == {"action": None}
    why = {c["column"]: c["why"] for c in json.loads(capsys.readouterr().out)["columns"]}
    assert why["hist"].startswith("events (item, time) of")


@pytest.mark.parametrize(
    "unit, fmt, written", [("ms", "parquet", float), ("us", "jsonl", int), ("ns", "parquet", str)]
)
def test_times_in_a_finer_unit_prepare_and_serve_as_their_seconds(
    tmp_path: Path, capsys, unit, fmt, written
):
    """Rows' times (as numbers with a fraction, integers or text) and their history events'
    times in milliseconds, microseconds or nanoseconds (a fraction of a second on each,
    under half of one: text's float64 keeps it), with ``time_unit`` declared: every array
    prepared is the same logs' in whole seconds (the split, the hour derived, the events'
    times, the ages), and the rows, served by rows and by columns and as `nas data rows`
    writes them, encode to the features stored. Undeclared, the finer times are refused by
    prepare (exit 2) and in serving, naming the row and the time_unit to declare. (Before,
    milliseconds were read as seconds: the split kept, the hours and ages garbage.) Seconds
    declared in the finer unit prepare (they fall in 1970), with a warning naming the first
    time and time_unit."""
    from nas.data.export import export_raw_rows
    from nas.data.raw import PER_SECOND, RawInputError
    from nas.data.raw_table import table_features

    per = PER_SECOND[unit]
    hour = "  - {name: hour, type: categorical, from: ts, derive: hour}\n"
    frame = events_logs()
    seconds = schema_file(tmp_path / "s", fmt, frame)
    seconds.write_text(seconds.read_text() + hour)
    rng = np.random.default_rng(5)
    finer = frame.copy()
    finer["ts"] = [
        written(int(t) * per + int(rng.integers(0, per // 2)) + 0.5 * (written is float))
        for t in frame["ts"]
    ]
    finer["hist"] = [
        None if h is None else [{**e, "time": e["time"] * per + per // 2} for e in h]
        for h in frame["hist"]
    ]
    path = schema_file(tmp_path / unit, fmt, finer)
    plain = path.read_text() + hour
    path.write_text(plain.replace("path: data/", f"time_unit: {unit}, path: data/"))
    base, _ = prepare_dataset(str(seconds), tmp_path / "s" / "cache")
    dataset, _ = prepare_dataset(str(path), tmp_path / unit / "cache")
    arrays = sorted(p.name for p in base.root.glob("*.npy"))
    assert "event_time.npy" in arrays and "timestamp.npy" in arrays
    assert arrays == sorted(p.name for p in dataset.root.glob("*.npy"))
    for name in arrays:
        assert (base.root / name).read_bytes() == (dataset.root / name).read_bytes(), name
    form, schema = dataset.raw_form(), dataset.schema
    assert form.columns["ts"]["per_second"] == per == form.columns["hist"]["per_second"]
    assert "per_second" not in base.raw_form().columns["ts"]  # seconds: the form as before
    # served: the source's rows by rows and by columns, and `nas data rows`' own
    files = sorted((tmp_path / unit / "data").iterdir())
    if fmt == "parquet":
        source = pa.concat_tables(pq.read_table(p) for p in files)
    else:
        source = pa.Table.from_pylist([json.loads(x) for x in files[0].read_text().splitlines()])
    stored = stored_as_read(dataset)
    for served in (form.features(source.to_pylist(), schema), table_features(form, source, schema)):
        assert torch.equal(served.categorical, stored.categorical)
        assert torch.equal(served.history.tensor(), stored.history.tensor())
    export_raw_rows(dataset, "test", tmp_path / "rows.parquet", 40)
    rows = pq.read_table(tmp_path / "rows.parquet")
    assert rows["ts"][0].as_py() >= 10**8 * per  # written in the source's unit
    test = dataset.features("test")[slice(0, 40)]
    triples = dataset.raw_rows("test", 40)  # histories as [item, action, time] triples
    assert type(next(r["hist"][0] for r in triples if r["hist"])) is list
    for served in (
        form.features(rows.to_pylist(), schema),
        table_features(form, rows, schema),
        form.features(triples, schema),
    ):
        assert torch.equal(served.categorical, test.categorical)
        assert torch.equal(served.history.tensor(), test.history.tensor())
    # undeclared: refused, by prepare and by a served row alike
    path.write_text(plain)
    code = main(["data", "prepare", str(path), "--cache-dir", str(tmp_path / "refused")])
    assert code == 2 and not (tmp_path / "refused" / "my_ctr").exists()
    with pytest.raises(RawInputError, match="past the year 5000; a time in milliseconds or finer"):
        base.raw_form().features(source.to_pylist()[:3], base.schema)
    # the seconds' logs, then the same declared in the finer unit: their first time told
    capsys.readouterr()
    for text, first, warned in ((seconds.read_text(), "2020-09-13", False), (
        seconds.read_text().replace("path: data/", f"time_unit: {unit}, path: data/"),
        "1970-01-", True,
    )):  # fmt: skip
        seconds.write_text(text)
        code = main(["data", "prepare", str(seconds), "--cache-dir", str(tmp_path / unit / "s")])
        said = " ".join(capsys.readouterr().out.split())
        assert code in (0, None) and re.search(rf"times\W+{first}", said)
        assert ("the first time is 1970-01-" in said and "(source.time_unit" in said) == warned


@pytest.mark.parametrize("nulls", ["written", "omitted"])
def test_json_lines_keys_that_show_up_late_keep_arrows_reader(
    tmp_path: Path, monkeypatch, nulls: str
) -> None:
    """JSON lines in blocks of 4 KiB whose first half holds no site and no count (nulls
    written, or their keys omitted: a field the logs gained later) and whose second half
    holds a key the schema does not declare (a writer's new field): read by Arrow
    throughout, the site's and the count's types from rows spread over the file (before:
    from the first block that held either, line by line in Python, several times slower),
    every array as the same logs' as Parquet."""
    from nas.data import source_rows

    monkeypatch.setattr(source_rows, "BLOCK_BYTES", 1 << 12)
    by_line = []
    read_by_line = source_rows._json_by_line
    monkeypatch.setattr(
        source_rows,
        "_json_by_line",
        lambda path, columns, *rest, **named: (
            by_line.append(path) or read_by_line(path, columns, *rest, **named)
        ),
    )
    frame = logs()
    for column in ("site", "count"):
        frame[column] = frame[column].where(frame.index >= ROWS // 2)
    parquet, _ = prepare_dataset(str(schema_file(tmp_path / "pq", frame=frame)), tmp_path / "c")
    folder = tmp_path / "json"
    path = schema_file(folder, "jsonl", frame)
    rows = [json.loads(x) for x in (folder / "data" / "logs.jsonl").read_text().splitlines()]
    assert rows[0]["site"] is None and len(json.dumps(rows[: ROWS // 2])) > 4 * (1 << 12)
    if nulls == "omitted":
        rows = [{k: v for k, v in row.items() if v is not None} for row in rows]
    rows = [{**row, "promo": f"p{i % 4}"} if i > ROWS // 2 else row for i, row in enumerate(rows)]
    (folder / "data" / "logs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    read, _ = prepare_dataset(str(path), tmp_path / "c2")
    assert by_line == []
    for array in sorted(p.name for p in parquet.root.glob("*.npy")):
        assert (parquet.root / array).read_bytes() == (read.root / array).read_bytes(), array


def test_a_placeholder_date_past_the_year_5000_is_refused_as_one(tmp_path: Path) -> None:
    """A row whose time is 9999-12-31 (a placeholder for 'never'), as a Parquet timestamp or
    as text: refused by prepare and in serving alike, as a placeholder (not as a number in
    a finer unit: a date has none), naming the row."""
    from nas.data.raw import RawInputError

    frame = logs()
    good = schema_file(tmp_path / "good", frame=frame)  # served rows read ts: its hour
    hour = "  - {name: hour, type: categorical, from: ts, derive: hour}\n"
    good.write_text(good.read_text() + hour)
    dataset, _ = prepare_dataset(str(good), tmp_path / "c")
    for written in (pd.Timestamp("9999-12-31").to_pydatetime(), "9999-12-31"):
        late = frame.copy()
        times = [pd.Timestamp(t, unit="s").to_pydatetime() for t in frame["ts"]]
        times[7] = written
        late["ts"] = times if not isinstance(written, str) else [str(t) for t in times]
        path = schema_file(tmp_path / type(written).__name__, frame=late)
        with pytest.raises(DataError, match=r"row 8: column 'ts' is '9999-12-31(T00:00:00)?': "
                           r"past the year 5000 \(a placeholder"):  # fmt: skip
            prepare_dataset(str(path), tmp_path / "c2")
    row = {**dataset.raw_rows("test", 1)[0], "ts": "9999-12-31"}
    with pytest.raises(RawInputError, match="past the year 5000 \\(a placeholder such as"):
        dataset.raw_form().features([row], dataset.schema)


def test_a_csv_file_whose_quoted_text_breaks_lines_prepares_as_its_parquet_twin(
    tmp_path: Path, monkeypatch
) -> None:
    """A comment column whose quoted text breaks lines on some rows ("great\nmovie", a blank
    line inside one), read in blocks of 4 KiB, many of them ending inside a quoted text:
    every array prepared is the same logs' as Parquet (before: "CSV parser got out of sync
    with chunker" where a block ended in one); `nas data schema`'s sample keeps each
    sampled row whole."""
    from nas.data import source_rows
    from nas.data.infer import read_sample

    frame = logs()
    notes = ["fine", "great\nmovie", 'said "ok",\nthen left', "two\n\nparagraphs", None]
    frame["comment"] = [notes[i % 5] for i in range(len(frame))]
    frame["row"] = range(len(frame))
    feature = "  - {name: comment, type: categorical}\n"
    twin = schema_file(tmp_path / "parquet", frame=frame)
    twin.write_text(twin.read_text() + feature)
    path = schema_file(tmp_path / "csv", "csv", frame)
    path.write_text(path.read_text() + feature)
    monkeypatch.setattr(source_rows, "BLOCK_BYTES", 1 << 12)
    parquet, _ = prepare_dataset(str(twin), tmp_path / "c1")
    csv, _ = prepare_dataset(str(path), tmp_path / "c2")
    arrays = sorted(p.name for p in parquet.root.glob("*.npy"))
    for array in arrays:
        assert (parquet.root / array).read_bytes() == (csv.root / array).read_bytes(), array
    sample = read_sample([tmp_path / "csv" / "data" / "logs.tsv"], "csv", "\t", rows=400)
    rows = sample.table.column("row").to_pylist()
    assert len(rows) > 200 and len(set(rows)) == len(rows)
    expected = frame.set_index("row").loc[rows]
    assert sample.table.column("comment").to_pylist() == expected["comment"].fillna("").tolist()
    assert sample.table.column("price").to_pylist() == pytest.approx(expected["price"].tolist())


def test_a_feature_column_added_to_the_logs_later_is_missing_on_the_older_files(
    tmp_path: Path, monkeypatch
) -> None:
    """Parquet parts of which the first lacks a feature column (added to the logs later):
    prepared as if its rows held nulls there (every array byte for byte), with a warning
    naming the file; a label or key a file lacks, or a column no file holds, is refused
    naming it. JSON lines whose key first shows up past Arrow's first block (a writer that
    omits a null's key) keep its values (before: 'JSON parse error: unexpected field')."""
    from nas.data import source_rows

    frame = logs()
    frame["site"] = frame["site"].where(frame.index >= ROWS // 2)  # null in the first part
    nulls, _ = prepare_dataset(str(schema_file(tmp_path / "nulls", frame=frame)), tmp_path / "c1")
    path = schema_file(tmp_path / "lacks", frame=frame)
    first = tmp_path / "lacks" / "data" / "part-0.parquet"
    pq.write_table(pq.read_table(first).drop_columns(["site"]), first)
    code = main(["data", "prepare", str(path), "--cache-dir", str(tmp_path / "c2")])
    assert code in (0, None)
    lacking, _ = prepare_dataset(str(path), tmp_path / "c2")
    assert lacking.manifest["absent_columns"] == {"site": ["part-0.parquet"]}
    for array in sorted(p.name for p in nulls.root.glob("*.npy")):
        assert (nulls.root / array).read_bytes() == (lacking.root / array).read_bytes(), array
    for column, words in (("click", "has no column 'click'"), ("ts", "has no column 'ts'")):
        pq.write_table(pq.read_table(first).drop_columns([column]), first)
        with pytest.raises(DataError, match=words) as err:
            prepare_dataset(str(path), tmp_path / "c3")
        assert "part-0.parquet" in str(err.value)
        schema_file(tmp_path / "lacks", frame=frame)  # whole again
    for part in (tmp_path / "lacks" / "data").iterdir():
        pq.write_table(pq.read_table(part).drop_columns(["site"]), part)
    with pytest.raises(DataError, match="has no column 'site'"):
        prepare_dataset(str(path), tmp_path / "c4")
    # JSON lines: the first rows omit the null sites' key, past Arrow's first block
    monkeypatch.setattr(source_rows, "BLOCK_BYTES", 1 << 12)
    folder = tmp_path / "json"
    schema_file(folder, "jsonl", frame)
    lines = (folder / "data" / "logs.jsonl").read_text().splitlines()
    objects = [{k: v for k, v in json.loads(x).items() if v is not None} for x in lines]
    assert "site" not in objects[0] and len("\n".join(lines[: ROWS // 2])) > 4 * (1 << 12)
    (folder / "data" / "logs.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objects))
    omitted, _ = prepare_dataset(str(folder / "my_ctr.yaml"), tmp_path / "c5")
    assert "absent_columns" not in omitted.manifest
    column = [f.name for f in nulls.schema.of_kind("categorical")].index("site")
    assert np.array_equal(
        by_source(omitted, "categorical")[:, column], by_source(nulls, "categorical")[:, column]
    )
    # ... and a file none of whose rows holds the key (by Arrow's reader, and line by line
    # where counts mix numbers and text): absent there, told as a Parquet part's is
    (folder / "data" / "logs.jsonl").unlink()
    yaml = folder / "my_ctr.yaml"
    yaml.write_text(yaml.read_text().replace("data/logs.jsonl", "data/*.jsonl"))
    for mixed in (False, True):
        for name, part in (("a.jsonl", objects[: ROWS // 2]), ("b.jsonl", objects[ROWS // 2 :])):
            if mixed:
                part = [
                    {**o, "count": str(o["count"])} if i % 2 and "count" in o else o
                    for i, o in enumerate(part)
                ]
            (folder / "data" / name).write_text("".join(json.dumps(o) + "\n" for o in part))
        cache = tmp_path / f"c6-{mixed}"
        assert main(["data", "prepare", str(yaml), "--cache-dir", str(cache)]) in (0, None)
        later, _ = prepare_dataset(str(yaml), cache)
        assert later.manifest["absent_columns"] == {"site": ["a.jsonl"]}
        assert np.array_equal(
            by_source(later, "categorical")[:, column], by_source(nulls, "categorical")[:, column]
        )
    # a key no row of any file holds: refused, naming it (a misspelt column, most likely)
    yaml.write_text(yaml.read_text().replace("name: site,", "name: site, from: siet,"))
    with pytest.raises(DataError, match="has no row with the key 'siet'"):
        prepare_dataset(str(yaml), tmp_path / "c7")
    assert not (tmp_path / "c7" / "my_ctr").exists()


def _bad_lines(fmt: str, lines: list[str]) -> tuple[list[str], list[int]]:
    """A text source's lines with lines that are not rows put among them (two within its
    first half, and last a copy of the last row cut off, as a writer killed mid-write leaves
    it); the 1-based numbers of the lines put in."""
    header = 1 if fmt == "csv" else 0
    rows = lines[header:]
    if fmt == "csv":  # a row of a field too many, one of a field too few, one cut off
        extra, short = rows[5] + "\tx", "\t".join(rows[7].split("\t")[:-1])
        cut = "\t".join(rows[-1].split("\t")[:3])
    else:  # not an object, not JSON, cut off
        extra, short, cut = "[1, 2]", '{"click": 1, "like"', rows[-1][: len(rows[-1]) // 2]
    damaged = [*lines[:header], *rows[:100], extra, *rows[100:300], short, *rows[300:], cut]
    numbers = [header + 101, header + 302, len(damaged)]
    return damaged, numbers


def assert_same_dataset(reference, dataset, exact: bool = False, form_as=lambda text: text) -> None:
    """Every prepared array of ``dataset`` byte for byte ``reference``'s, and their raw
    forms alike (``exact``: as text; else numbers to 12 digits, as statistics summed over
    batches of other sizes round otherwise; ``dataset``'s as ``form_as`` rewrites it)."""
    arrays = sorted(p.name for p in reference.root.glob("*.npy"))
    assert arrays and arrays == sorted(p.name for p in dataset.root.glob("*.npy"))
    for array in arrays:
        assert np.array_equal(np.load(reference.root / array), np.load(dataset.root / array))
    forms = [(d.root / "raw_form.json").read_text() for d in (reference, dataset)]
    forms[1] = form_as(forms[1])
    if exact:
        assert forms[0] == forms[1]
    else:
        assert _rounded(json.loads(forms[0])) == _rounded(json.loads(forms[1]))


def _rounded(found):
    """JSON with its numbers to 12 digits."""
    if isinstance(found, dict):
        return {k: _rounded(v) for k, v in found.items()}
    if isinstance(found, list):
        return [_rounded(v) for v in found]
    return float(f"{found:.12g}") if isinstance(found, float) else found


@pytest.mark.parametrize("block", [None, 4096], ids=["one-block", "many-blocks"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_lines_that_are_not_rows_are_refused_or_passed_by_as_on_bad_lines_says(
    tmp_path: Path, capsys, monkeypatch, fmt: str, block: int | None
) -> None:
    """A log with lines that are not rows (a CSV row of a field too many or too few, a JSON
    line that does not parse or holds no object, the last line cut off mid-write) refused
    the whole source, the JSON lines' errors naming a block's row ("in row 23"), never the
    line. Now the source's first such line is named (a JSON line by its number) with what
    would pass it by, and under ``on_bad_lines: skip`` the lines are passed by: the dataset
    byte for byte the one prepared from the file without them, the lines counted in its
    manifest and told by prepare. `nas data schema` drafts ``on_bad_lines: skip`` where its
    sample holds such lines, and says so."""
    import yaml

    from nas.data import source_rows

    if block:  # lines that are not rows in other blocks than the first (else all in one)
        monkeypatch.setattr(source_rows, "BLOCK_BYTES", block)
    clean = schema_file(tmp_path / "clean", fmt)
    name = "logs.tsv" if fmt == "csv" else "logs.jsonl"
    text = (tmp_path / "clean" / "data" / name).read_text().splitlines()
    damaged, numbers = _bad_lines(fmt, text)
    folder = tmp_path / "damaged"
    path = schema_file(folder, fmt, name="damaged")
    source = folder / "data" / name
    source.write_text("\n".join(damaged))  # (no line end after the cut-off line)
    cache = tmp_path / "cache"
    first = damaged[numbers[0] - 1]
    with pytest.raises(DataError) as refused:
        prepare_dataset(str(path), cache)
    said = str(refused.value)
    assert said.startswith(f"{source}") and "on_bad_lines: skip" in said, said
    if fmt == "jsonl":
        assert f", line {numbers[0]}: holds [1, 2], not an object" in said, said
    else:
        assert f"Expected {len(text[0].split())} columns, got" in said and first in said, said
    assert not cache.exists() or not any(cache.iterdir())

    skipping = path.read_text().replace(
        f"path: data/{name}", f"path: data/{name}, on_bad_lines: skip"
    )
    assert skipping != path.read_text()
    path.write_text(skipping)
    dataset, _ = prepare_dataset(str(path), cache)
    reference, _ = prepare_dataset(str(clean), tmp_path / "reference")
    assert dataset.manifest["rows"] == reference.manifest["rows"] == len(text) - (fmt == "csv")
    assert_same_dataset(reference, dataset)
    skipped = dataset.manifest["skipped_lines"]
    assert list(skipped) == [name] and skipped[name]["lines"] == len(numbers)
    if fmt == "jsonl":
        assert skipped[name]["first"].startswith(f"line {numbers[0]} holds [1, 2]")
    else:
        assert skipped[name]["first"].startswith("a row of 11 fields, not 10")
    assert main(["data", "prepare", str(path), "--cache-dir", str(cache)]) == 0
    shown_ = " ".join(capsys.readouterr().out.split())
    assert "3 lines passed by as not rows (source.on_bad_lines: skip;" in shown_, shown_

    if fmt == "jsonl":  # compressed: read from its start, by line from the first such line
        zipped = source.with_name("logs.jsonl.gz")
        zipped.write_bytes(gzip.compress(source.read_bytes()))
        path.write_text(path.read_text().replace("logs.jsonl", "logs.jsonl.gz"))
        again, _ = prepare_dataset(str(path), tmp_path / "gz")
        assert again.manifest["skipped_lines"]["logs.jsonl.gz"] == skipped[name]
        assert_same_dataset(reference, again)

    # the draft: lines that are not rows in its sample (the first one, at the file's start)
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(source), "--out", str(out)]) == 0
    told = " ".join(capsys.readouterr().out.split())
    assert "the draft says on_bad_lines: skip" in told, told
    assert yaml.safe_load(out.read_text())["source"]["on_bad_lines"] == "skip"
    assert main(["data", "prepare", str(out), "--cache-dir", str(cache)]) == 0
    capsys.readouterr()


def test_on_bad_lines_is_checked_and_its_default_keeps_caches_current(tmp_path: Path) -> None:
    """Parquet has no lines to pass by: ``on_bad_lines`` there is refused, naming the field.
    Said as its default (``error``), it keeps a dataset prepared before it existed current."""
    path = schema_file(tmp_path, "parquet")
    cache = tmp_path / "cache"
    prepare_dataset(str(path), cache)
    plain = path.read_text()
    path.write_text(
        plain.replace("path: data/*.parquet", "path: data/*.parquet, on_bad_lines: error")
    )
    _, reused = prepare_dataset(str(path), cache)
    assert reused
    path.write_text(
        plain.replace("path: data/*.parquet", "path: data/*.parquet, on_bad_lines: skip")
    )
    with pytest.raises(ConfigError, match=r"source: on_bad_lines applies to formats csv and jsonl"):
        prepare_dataset(str(path), cache)


def test_inspect_shows_a_dataset_without_times(tmp_path: Path, capsys) -> None:
    """`nas data inspect` of a dataset with no ``keys.timestamp`` ended in a traceback (it
    read each split's first and last time from a profile that holds none)."""
    path = schema_file(tmp_path, "parquet", split="{method: random, valid: 0.1, test: 0.1}")
    path.write_text(path.read_text().replace(", timestamp: ts}", "}"))
    cache = str(tmp_path / "cache")
    assert main(["data", "inspect", str(path), "--cache-dir", cache]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "my_ctr: 600 rows" in said and "first time" not in said, said


def test_csv_rows_no_reader_passes_by_are_named_without_arrows_noise(
    tmp_path: Path, capfd, monkeypatch
) -> None:
    """Two CSV faults that ``on_bad_lines: skip`` cannot pass by, each refused saying what it
    is: a row of the wrong width whose bytes are not UTF-8 (Arrow decodes it before its
    handler sees it, and printed "Exception ignored in ... UnicodeDecodeError" with a
    traceback), and a quoted text that never ends (Arrow said "straddling object straddles
    two block boundaries (try to increase block size?)")."""
    from nas.data import source_rows

    monkeypatch.setattr(source_rows, "BLOCK_BYTES", 4096)
    path = schema_file(tmp_path, "csv")
    source = tmp_path / "data" / "logs.tsv"
    plain = path.read_text()
    path.write_text(plain.replace("delimiter:", "on_bad_lines: skip, delimiter:"))
    lines = source.read_bytes().split(b"\n")
    for damage, said in (
        (b"\xff\xfe\tx", "a row whose bytes are not UTF-8 text"),
        (b'"never closed\tx', 'a quoted text that never ends (a " that opens a text no " closes)'),
    ):
        source.write_bytes(b"\n".join([*lines[:50], damage, *lines[50:]]))
        with pytest.raises(DataError) as refused:
            prepare_dataset(str(path), tmp_path / "cache")
        assert said in str(refused.value), refused.value
        assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
        printed = capfd.readouterr()
        assert "Exception ignored" not in printed.err and "Traceback" not in printed.err


@pytest.mark.parametrize("header", [True, False], ids=["header", "no-header"])
def test_csv_rows_that_end_with_the_delimiter_read_as_rows_without_it(
    tmp_path: Path, header: bool
) -> None:
    """Some exporters end every line with the delimiter (``a,b,c`` over ``1,2,3,``): Arrow's
    reader refused every row ("Expected 10 columns, got 11"), and under ``on_bad_lines:
    skip`` passed every one by ("has no rows"). Such a file now reads as pandas reads it
    with ``index_col=False``: the empty field past the header's (or the declared columns')
    left out, in prepare (byte for byte the dataset of the file without it), the draft and
    `nas predict`'s reader."""
    import yaml

    from nas.data.row_files import RowFiles

    clean = schema_file(tmp_path / "clean", "csv")
    lines = (tmp_path / "clean" / "data" / "logs.tsv").read_text().splitlines()
    path = schema_file(tmp_path / "trailing", "csv", name="trailing")
    source = tmp_path / "trailing" / "data" / "logs.tsv"
    names = lines[0].split("\t")
    source.write_text("\n".join([*lines[:1] * header, *(line + "\t" for line in lines[1:])]))
    if not header:
        declared = f"header: false, columns: [{', '.join(names)}], delimiter:"
        path.write_text(path.read_text().replace("delimiter:", declared))
    reference, _ = prepare_dataset(str(clean), tmp_path / "reference")
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert_same_dataset(reference, dataset)

    def draft(read_from: Path, *labels: str) -> dict:
        out = tmp_path / f"{read_from.parent.parent.name}.yaml"
        assert main(["data", "schema", str(read_from), "--out", str(out), *labels]) == 0
        return yaml.safe_load(out.read_text())

    if header:
        assert (
            draft(source)["features"] == draft(tmp_path / "clean" / "data" / "logs.tsv")["features"]
        )
        read = [row for batch in RowFiles(source).batches() for row in batch.rows]
        expected = [row for b in RowFiles(tmp_path / "clean" / "data").batches() for row in b.rows]
        assert read == expected and len(read) == ROWS
    else:  # drafted as headerless, its columns named c1..c10: none of them the empty field
        drafted = draft(source, "--labels", "c1,c2")  # (two 0/1 columns, unnamed)
        assert drafted["source"]["columns"] == [f"c{i}" for i in range(1, 11)]
        prepared, _ = prepare_dataset(str(tmp_path / "trailing.yaml"), tmp_path / "drafted")
        assert prepared.manifest["rows"] == ROWS


@pytest.mark.parametrize("trailing", [False, True], ids=["plain", "trailing-delimiter"])
def test_a_csv_header_naming_a_column_twice_reads_it_numbered_as_pandas_does(
    tmp_path: Path, trailing: bool
) -> None:
    """A header naming a column twice (``site`` over a site and an item): the draft failed
    with a traceback (Arrow's "Field exists 2 times"), prepare read one of the two and `nas
    predict` the other. Every reader now numbers the second as pandas does, ``site.1``:
    prepare byte for byte the dataset of the file whose header says ``site.1``, the same
    draft, the same rows served."""
    import yaml

    from nas.data.row_files import RowFiles

    frame = logs().rename(columns={"item_id": "site.1"})
    named = schema_file(tmp_path / "named", "csv", frame=frame)
    named.write_text(named.read_text().replace("item_id", "site.1"))
    text = (tmp_path / "named" / "data" / "logs.tsv").read_text()
    if trailing:  # (and every line ends with the delimiter)
        text = "".join(line + ("\t\n" if i else "\n") for i, line in enumerate(text.splitlines()))
    twice = tmp_path / "twice" / "data" / "logs.tsv"
    twice.parent.mkdir(parents=True)
    twice.write_text(text.replace("\tsite.1\t", "\tsite\t", 1))
    assert twice.read_text().splitlines()[0].split("\t").count("site") == 2
    (tmp_path / "twice" / "my_ctr.yaml").write_text(named.read_text())
    assert_same_dataset(
        prepare_dataset(str(named), tmp_path / "reference")[0],
        prepare_dataset(str(tmp_path / "twice" / "my_ctr.yaml"), tmp_path / "cache")[0],
        exact=True,
    )
    drafts = []
    for folder in ("named", "twice"):
        out = tmp_path / f"{folder}.yaml"
        assert main(["data", "schema", str(tmp_path / folder / "data"), "--out", str(out)]) == 0
        drafts.append(yaml.safe_load(out.read_text())["features"])
    assert drafts[0] == drafts[1] and any(f["name"] == "site.1" for f in drafts[1])
    read = [row for batch in RowFiles(twice).batches() for row in batch.rows]
    expected = [row for b in RowFiles(tmp_path / "named" / "data").batches() for row in b.rows]
    assert read == expected and len(read) == ROWS


def test_a_source_whose_every_line_is_passed_by_says_so(tmp_path: Path) -> None:
    """Under ``on_bad_lines: skip``, a file none of whose lines is a row (the wrong delimiter
    declared, most likely) said only "has no rows"."""
    path = schema_file(tmp_path, "csv")
    path.write_text(path.read_text().replace("delimiter:", "on_bad_lines: skip, delimiter:"))
    lines = (tmp_path / "data" / "logs.tsv").read_text().splitlines()
    (tmp_path / "data" / "logs.tsv").write_text("\n".join([lines[0], "a\tb", "c"]) + "\n")
    said = (
        "logs.tsv: has no rows: its 2 lines were passed by as not rows (on_bad_lines: skip), "
        "the first a row of 2 fields, not 10"
    )
    with pytest.raises(DataError, match=re.escape(said)):
        prepare_dataset(str(path), tmp_path / "cache")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_source_of_no_rows_split_by_time_says_so(tmp_path: Path, fmt: str) -> None:
    """A CSV file of its header alone, or a JSON-lines file of blank lines, under a split
    by time: prepare ended in a traceback (numpy's "shape mismatch" while splitting no
    times), not "has no rows"."""
    path = schema_file(tmp_path, fmt)
    source = tmp_path / "data" / ("logs.tsv" if fmt == "csv" else "logs.jsonl")
    source.write_text(source.read_text().splitlines()[0] + "\n" if fmt == "csv" else "\n\n")
    with pytest.raises(DataError, match=r"has no rows$"):
        prepare_dataset(str(path), tmp_path / "cache")


def test_a_csv_file_in_another_encoding_reads_as_its_source_encoding_says(tmp_path: Path) -> None:
    """CSV that Excel wrote on Windows (cp1252: "café", "Köln", "€") was refused ("In CSV
    column #4: CSV conversion error to string: invalid UTF8 data"), and the draft left the
    column out ("of type binary"). The source's ``encoding`` now reads it: the dataset byte
    for byte the UTF-8 file's, the draft declaring cp1252 where the text is not UTF-8, and
    `nas predict`'s reader reading the file as the model's source was read. Without it,
    the refusal names the column and what to say."""
    import yaml

    from nas.data.row_files import RowFiles

    frame = logs()
    names = {"a": "café", "b": "Köln", "c": "€uro", "d": "Ærø"}
    frame["site"] = [names.get(s, s) for s in frame["site"]]
    utf8 = schema_file(tmp_path / "utf8", "csv", frame=frame)
    path = schema_file(tmp_path / "cp1252", "csv", frame=frame, name="excel")
    source = tmp_path / "cp1252" / "data" / "logs.tsv"
    source.write_bytes((tmp_path / "utf8" / "data" / "logs.tsv").read_text().encode("cp1252"))
    with pytest.raises(DataError) as refused:
        prepare_dataset(str(path), tmp_path / "cache")
    said = str(refused.value)
    assert (
        "column 'site' holds text that is not UTF-8" in said and "say the file's encoding" in said
    )
    assert "encoding: cp1252" in said
    path.write_text(path.read_text().replace("delimiter:", "encoding: CP1252, delimiter:"))
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    reference, _ = prepare_dataset(str(utf8), tmp_path / "reference")
    assert dataset.manifest["csv_encoding"] == "cp1252" and "csv_encoding" not in reference.manifest
    assert_same_dataset(reference, dataset, exact=True)
    form = json.loads((dataset.root / "raw_form.json").read_text())
    assert {"Köln", "€uro"} <= set(form["categorical"][0]["vocab"])  # (its vocabulary's text)

    drafts = {}
    for form, read_from in (("utf8", tmp_path / "utf8" / "data"), ("cp1252", source)):
        out = tmp_path / f"{form}.yaml"
        assert main(["data", "schema", str(read_from), "--out", str(out)]) == 0
        drafts[form] = yaml.safe_load(out.read_text())
    assert drafts["cp1252"]["source"]["encoding"] == "cp1252"
    assert "encoding" not in drafts["utf8"]["source"]
    assert drafts["cp1252"]["features"] == drafts["utf8"]["features"]

    rows = RowFiles(source)
    rows.read_as({"csv_encoding": "cp1252"})
    read = [row for batch in rows.batches() for row in batch.rows]
    expected = [row for b in RowFiles(tmp_path / "utf8" / "data").batches() for row in b.rows]
    assert read == expected and any(row["site"] == "€uro" for row in read)
    rows = RowFiles(tmp_path / "utf8" / "data")  # UTF-8 rows to score: UTF-8 they stay
    rows.read_as({"csv_encoding": "cp1252"})
    assert [row for batch in rows.batches() for row in batch.rows] == expected

    for wrong, said in (
        ("encoding: klingon, delimiter:", "unknown encoding 'klingon'"),
        ("encoding: latin-1, delimiter:", None),  # (Python's name for it: iso8859-1)
    ):
        path.write_text(re.sub(r"encoding: \S+, delimiter:", wrong, path.read_text()))
        if said:
            with pytest.raises(ConfigError, match=said):
                prepare_dataset(str(path), tmp_path / "cache")
        else:
            assert prepare_dataset(str(path), tmp_path / "c2")[0].manifest["csv_encoding"] == (
                "iso8859-1"
            )


@pytest.mark.parametrize(
    "delimiter, decimal, thousands",
    [(",", ".", ","), (";", ",", "."), (";", ",", "\u202f"), ("\t", ".", "'")],
    ids=["us-excel", "german-excel", "french-excel", "swiss"],
)
def test_numbers_with_thousands_separators_read_as_their_plain_twin(
    tmp_path: Path, capsys, delimiter: str, decimal: str, thousands: str
) -> None:
    """Excel writes an amount formatted with thousands separators as such (1,234.56 quoted
    in US CSV; 1.234,56 in German; 1 234,56 with a narrow no-break space in French; 1'234.56
    Swiss): prepare refused each ("must be a number"). ``source.thousands`` (pandas' name)
    passes them by: the dataset is byte for byte the plain TSV twin's; undeclared, prepare
    says what to declare; `nas data schema` tells the separator from the first lines; and
    `nas predict`'s reader reads such a file's numbers as the model's source was read."""
    import csv

    import yaml

    from nas.data.row_files import RowFiles

    frame = logs()
    frame["price"] = (frame["price"] * 1000).round(2)  # thousands and more
    frame["count"] = frame["count"] * 1000
    reference = schema_file(tmp_path / "tsv", "csv", frame=frame)
    tsv = (tmp_path / "tsv" / "data" / "logs.tsv").read_text()
    rows = list(csv.reader(tsv.splitlines(), delimiter="\t"))
    names = rows[0]
    numbers = [names.index("price"), names.index("count")]

    def grouped(text: str) -> str:
        if not text:
            return text
        whole, _, fraction = text.partition(".")
        sign, digits = ("-", whole[1:]) if whole.startswith("-") else ("", whole)
        groups = []
        while len(digits) > 3:
            digits, groups = digits[:-3], [digits[-3:], *groups]
        written = sign + thousands.join([digits, *groups])
        return written + (decimal + fraction if fraction else "")

    written = [rows[0]] + [
        [grouped(v) if i in numbers else v for i, v in enumerate(row)] for row in rows[1:]
    ]
    assert any(thousands in row[numbers[0]] for row in written[1:])
    source = tmp_path / "excel" / "logs.csv"
    source.parent.mkdir()
    with source.open("w", newline="") as file:
        csv.writer(file, delimiter=delimiter).writerows(written)
    tsv_source = '{format: csv, path: data/logs.tsv, delimiter: "\\t"}'
    declared = f"format: csv, path: excel/logs.csv, delimiter: {json.dumps(delimiter)}"
    if decimal != ".":
        declared += f', decimal: "{decimal}"'
    path = tmp_path / "excel.yaml"
    path.write_text(reference.read_text().replace(tsv_source, f"{{{declared}}}"))
    with pytest.raises(DataError, match="must be a number|must be a number with a decimal"):
        prepare_dataset(str(path), tmp_path / "undeclared")
    if thousands in (",", "."):  # the hint names the separator to declare
        with pytest.raises(DataError, match=f'say thousands: "{re.escape(thousands)}"'):
            prepare_dataset(str(path), tmp_path / "undeclared")
    path.write_text(
        reference.read_text().replace(
            tsv_source, f"{{{declared}, thousands: {json.dumps(thousands)}}}"
        )
    )
    expected, _ = prepare_dataset(str(reference), tmp_path / "reference")
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert_same_dataset(expected, dataset)

    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(source), "--out", str(out), "--json"]) == 0
    told = json.loads(capsys.readouterr().out)
    assert told["thousands"] == thousands and told["decimal"] == decimal
    drafted = yaml.safe_load(out.read_text())
    assert drafted["source"]["thousands"] == thousands
    assert {f["name"]: f["type"] for f in drafted["features"]}["price"] == "dense"

    served = RowFiles(source)
    served.read_as(
        {
            "raw_form": dataset.raw_form().to_dict(),
            "csv_delimiter": delimiter if delimiter != "," else None,
            "csv_decimal": decimal if decimal != "." else None,
            "csv_thousands": thousands,
        }
    )
    read = [row for batch in served.batches() for row in batch.rows]
    for i in numbers:
        plain = [float(row[i]) if row[i] else None for row in rows[1:]]
        assert [float(r[names[i]]) if r[names[i]] else None for r in read] == plain


def test_excel_csv_of_decimal_commas_and_hive_text_tables_read_as_their_tsv_twin(
    tmp_path: Path, capsys
) -> None:
    """Excel writes CSV split by ";" where a comma is the decimal mark (3,14), and Hive
    writes its text tables as files without a suffix (000000_0), without a header, fields
    split by Ctrl-A (\\x01), an array's items by Ctrl-B (\\x02) and null as \\N. The draft
    read a ";" file as one column and said "the files read have no rows"; a folder of
    Hive's text files failed with a traceback; 3,14 was no number. Now `nas data schema`
    tells the delimiter, the decimal mark and Hive's lists from the first lines, prepare
    reads both byte for byte as the same rows in TSV, and `nas predict`'s reader reads them
    as the model's source was read."""
    import yaml

    from nas.data.row_files import RowFiles

    frame = logs()
    frame["site"] = frame["site"].fillna("none")  # (Hive writes a null text as \\N too)
    reference = schema_file(tmp_path / "tsv", "csv", frame=frame)
    tsv = (tmp_path / "tsv" / "data" / "logs.tsv").read_text()
    header, *lines = tsv.splitlines(keepends=True)
    names = header.strip().split("\t")
    price = names.index("price")
    excel = [line.split("\t") for line in [header, *lines]]
    excel = [[v.replace(".", ",") if i == price else v for i, v in enumerate(f)] for f in excel]
    semicolons = tmp_path / "excel" / "logs.csv"
    semicolons.parent.mkdir()
    semicolons.write_text("".join(";".join(fields) for fields in excel))
    days = tmp_path / "days"  # the same as text files of no format's name, compressed
    days.mkdir()
    (days / "day_0.txt.bz2").write_bytes(bz2.compress(semicolons.read_bytes()))
    hive = tmp_path / "hive" / "clicks"
    hive.mkdir(parents=True)
    null = names.index("count")
    for part, chunk in enumerate((lines[: ROWS // 2], lines[ROWS // 2 :])):
        fields = [line.rstrip("\n").split("\t") for line in chunk]
        text = [
            "\x01".join(
                "\\N" if i == null and not v else v.replace("|", "\x02") for i, v in enumerate(f)
            )
            for f in fields
        ]
        (hive / f"00000{part}_0").write_text("\n".join(text) + "\n")
    (hive / "_SUCCESS").write_bytes(b"")

    schema = reference.read_text()
    tsv_source = '{format: csv, path: data/logs.tsv, delimiter: "\\t"}'
    for path, source in (
        (
            tmp_path / "excel.yaml",
            '{format: csv, path: excel/logs.csv, delimiter: ";", decimal: ","}',
        ),
        (
            tmp_path / "hive.yaml",
            '{format: csv, path: hive/clicks/*, delimiter: "\\u0001", header: false, '
            f"columns: [{', '.join(names)}]}}",
        ),
    ):
        text = schema.replace(tsv_source, source)
        if path.stem == "hive":
            text = text.replace('sep: "|"', 'sep: "\\u0002"')
        path.write_text(text)
        twin, _ = prepare_dataset(str(reference), tmp_path / "reference")
        assert_same_dataset(
            twin,
            prepare_dataset(str(path), tmp_path / path.stem)[0],
            exact=path.stem == "excel",  # (Hive's two files: statistics summed in two)
            form_as=lambda form: form.replace('"sep":"\\u0002"', '"sep":"|"'),  # (its lists')
        )

    drafts = {}
    for form, read_from, labels in (
        ("tsv", tmp_path / "tsv" / "data", "click,like"),
        ("excel", semicolons, "click,like"),
        ("days", days, "click,like"),
        ("hive", hive, "c1,c2"),
    ):
        out = tmp_path / f"{form}_draft.yaml"
        assert main(["data", "schema", str(read_from), "--labels", labels, "--out", str(out)]) == 0
        drafts[form] = yaml.safe_load(out.read_text())
    said = " ".join(capsys.readouterr().out.split())
    assert "split by ';'" in said and "split by Ctrl-A" in said
    assert "decimal mark is a comma" in said
    assert drafts["excel"]["source"]["delimiter"] == ";"
    assert drafts["excel"]["source"]["decimal"] == ","
    assert drafts["excel"]["features"] == drafts["tsv"]["features"]
    assert drafts["days"]["source"] == {**drafts["excel"]["source"], "path": "days/**/*"}
    assert drafts["days"]["features"] == drafts["excel"]["features"]
    source = drafts["hive"]["source"]
    assert source["delimiter"] == "\x01" and source["header"] is False
    assert source["columns"] == [f"c{i}" for i in range(1, len(names) + 1)]
    by_name = {f"c{i}": name for i, name in enumerate(names, start=1)}
    hive_features = [{**f, "name": by_name[f["name"]]} for f in drafts["hive"]["features"]]
    lists = {f["name"]: f.get("sep") for f in hive_features if f["type"] == "multi_hot"}
    assert lists == {"genres": "\x02", "hist": "\x02"}
    drafted, _ = prepare_dataset(str(tmp_path / "hive_draft.yaml"), tmp_path / "drafted")
    assert drafted.manifest["rows"] == ROWS  # (its path: both parts, but _SUCCESS)

    expected = [row for b in RowFiles(tmp_path / "tsv" / "data").batches() for row in b.rows]
    served = {"csv_decimal": ",", "raw_form": twin.raw_form().to_dict()}
    for files, info in (
        (semicolons, served),
        (days, served),  # (`nas predict` too: by their bytes, decompressed)
        (tmp_path / "tsv" / "data", served),  # (a file that writes its numbers 3.14 still)
        (hive, {"csv_columns": names, "csv_delimiter": "\x01"}),
    ):
        rows = RowFiles(files)
        rows.read_as(info)
        read = [row for batch in rows.batches() for row in batch.rows]
        if files == hive:
            read = [
                {k: "" if v == "\\N" else v.replace("\x02", "|") for k, v in row.items()}
                for row in read
            ]
        assert read == expected

    loose = tmp_path / "loose"  # files of no format's name, not a job's parts: by a glob
    loose.mkdir()
    (loose / "day_0").write_bytes(semicolons.read_bytes())
    with pytest.raises(ConfigError, match="name them with a quoted glob"):
        RowFiles(loose)
    rows = RowFiles(loose / "day_*")
    rows.read_as(served)
    assert len([row for batch in rows.batches() for row in batch.rows]) == ROWS
    out = tmp_path / "loose.yaml"
    assert (
        main(["data", "schema", str(loose / "day_*"), "--labels", "click,like", "--out", str(out)])
        == 0
    )
    assert yaml.safe_load(out.read_text())["source"]["delimiter"] == ";"

    labelled = {  # a label by a threshold on a column no feature reads: measured on it
        "csv_decimal": ",",
        "raw_form": {"columns": {}},
        "labels": [{"name": "dear", "column": "price", "at_least": 10.0}],
    }
    rows = RowFiles(semicolons)
    rows.read_as(labelled)
    assert [row["price"] for b in rows.batches() for row in b.rows] == [
        row["price"] for row in expected
    ]

    # 1.234,5: a thousand and more, or a number a point too many: refused, named
    excel[7][price] = "1.234,5"
    semicolons.write_text("".join(";".join(fields) for fields in excel))
    with pytest.raises(DataError, match=r"row 7: column 'price' must be a number with a decimal"):
        prepare_dataset(str(tmp_path / "excel.yaml"), tmp_path / "excel")
    rows = RowFiles(semicolons)
    rows.read_as(served)
    with pytest.raises(ConfigError, match=r"line 8: column 'price' must be a number with a"):
        [row for batch in rows.batches() for row in batch.rows]
    (tmp_path / "excel.yaml").write_text(
        schema.replace(tsv_source, '{format: csv, path: excel/logs.csv, decimal: ","}')
    )
    with pytest.raises(ConfigError, match='decimal and delimiter are both ","'):
        prepare_dataset(str(tmp_path / "excel.yaml"), tmp_path / "excel")

    (tmp_path / "notes").mkdir()  # text files, but not named as a job names its parts
    (tmp_path / "notes" / "README").write_text("what this folder holds\n")
    assert main(["data", "schema", str(tmp_path / "notes"), "--out", str(tmp_path / "n.yaml")]) == 2
    assert "holds no file of a known format" in " ".join(capsys.readouterr().err.split())


def assert_served_as_stored(dataset, folder: Path, objects: list[dict]) -> None:
    """The rows of ``folder``'s one file, served by its columns and by its rows (as Arrow
    gives them), and ``objects`` (the same rows as JSON's objects), as `nas predict` reads
    them (``serving._with_fields``), encode to the features prepare stored."""
    from nas.data.raw_table import table_features
    from nas.data.row_files import RowFiles, with_fields, with_fields_of, with_list_fields_of

    form, schema = dataset.raw_form(), dataset.schema
    stored = stored_as_read(dataset)
    (batch,) = list(RowFiles(folder).batches())

    def read(rows: list[dict]) -> list[dict]:
        return [with_list_fields_of(with_fields_of(row), form.columns) for row in rows]

    for served in (
        table_features(form, with_fields(batch.table, form.columns), schema),
        form.features(read(batch.rows), schema),
        form.features(read(objects), schema),
    ):
        assert torch.equal(served.categorical, stored.categorical)
        assert torch.equal(served.multi_hot, stored.multi_hot)
        assert torch.allclose(served.dense, stored.dense, rtol=1e-6, atol=1e-6, equal_nan=True)


def logs_avro_fields(frame: pd.DataFrame) -> list[dict]:
    """Avro's fields of ``logs()``'s columns: its numbers and text nullable, its lists of
    text."""
    lists = ("genres", "hist")
    kinds = {"click": "long", "like": "long", "ts": "long", "count": "double", "price": "double"}
    return [
        *({"name": c, "type": ["null", kinds.get(c, "string")]} for c in frame if c not in lists),
        *({"name": c, "type": {"type": "array", "items": "string"}} for c in lists),
    ]


def prepared_twins(tmp_path: Path, draft: Path, drafted: str, twins: dict[str, str]) -> dict:
    """The draft ``draft`` of the folder ``drafted``'s Parquet files prepared from each twin
    folder (its name: its files' format), each its own dataset ``x`` in a cache of its own."""
    prepared = {}
    for name, fmt in twins.items():
        path = tmp_path / f"{name}.schema.yaml"
        path.write_text(
            draft.read_text()
            .replace("format: parquet", f"format: {fmt}")
            .replace(f"{drafted}/**/*.parquet", f"{name}/*.{fmt}")
            .replace(f"name: {drafted}", "name: x")
        )
        prepared[name], _ = prepare_dataset(str(path), tmp_path / f"cache-{name}")
    return prepared


def test_a_maps_keys_are_columns_of_their_own(tmp_path: Path, capsys) -> None:
    """Ranking logs keep features by name in a map column (Parquet's, ORC's and Avro's
    ``map``: ``{"country": "DE", "os": "ios"}``, ``{"ctr_7d": 0.12}``), each row its own
    keys: the draft left the map out ("of type map<...>") and prepare could not read one.
    Now a declared ``column.key`` is the key's value (missing where a row lacks the key):
    the draft declares the keys in 1% of its rows or more; prepared, the dataset is byte for
    byte the one of the same values in columns of their own, from Parquet or Avro; served,
    by rows and by columns, from Parquet or JSON lines' objects, its rows encode to the
    very features prepare stored."""
    import yaml

    frame = logs()
    rng = np.random.default_rng(5)
    attrs = [
        {
            "country": str(rng.choice(["DE", "US", "FR"])),
            **({"os": "ios" if i % 2 else "web"} if i % 3 else {}),
        }
        for i in range(ROWS)
    ]
    scores = [
        {"ctr_7d": float(rng.random()), **({"rare": 1.0} if i == 7 else {})} for i in range(ROWS)
    ]
    maps = pa.table(
        {
            "attrs": pa.array([list(a.items()) for a in attrs], pa.map_(pa.string(), pa.string())),
            "scores": pa.array(
                [list(x.items()) for x in scores], pa.map_(pa.string(), pa.float64())
            ),
        }
    )
    flat = pd.DataFrame(
        {
            "attrs.country": [a["country"] for a in attrs],
            "attrs.os": [a.get("os") for a in attrs],
            "scores.ctr_7d": [x["ctr_7d"] for x in scores],
        }
    )
    base = pa.Table.from_pandas(frame, preserve_index=False)
    for name, table in (
        (
            "maps",
            pa.Table.from_arrays(
                [*base.columns, *maps.columns], [*base.column_names, "attrs", "scores"]
            ),
        ),
        ("flat", pa.Table.from_pandas(pd.concat([frame, flat], axis=1), preserve_index=False)),
    ):
        (tmp_path / name).mkdir()
        pq.write_table(table, tmp_path / name / "part-0.parquet")
    out = tmp_path / "maps.yaml"
    assert main(["data", "schema", str(tmp_path / "maps"), "--out", str(out), "--json"]) == 0
    why = {c["column"]: c["why"] for c in json.loads(capsys.readouterr().out)["columns"]}
    assert why["attrs"] == "a map: its keys in 1% of the rows or more are columns of their own"
    drafted = {f["name"]: f for f in yaml.safe_load(out.read_text())["features"]}
    assert drafted["attrs.country"]["type"] == "categorical" and "attrs.os" in drafted
    assert drafted["scores.ctr_7d"]["type"] == "dense" and "scores.rare" not in drafted
    from nas.data.infer import _keyed_names  # (a sample's rows: a slice of what was read)

    sliced = pa.table({"m": pa.array([[("a", 1)], [("b", 2)], [("c", 3)]], maps["scores"].type)})
    assert _keyed_names([sliced.slice(1, 1)]) == {"m.b": "m.b"}
    prepared = {}
    for name in ("maps", "flat"):
        path = tmp_path / f"{name}.schema.yaml"
        path.write_text(
            out.read_text().replace("maps/", f"{name}/").replace("name: maps", "name: x")
        )
        prepared[name], _ = prepare_dataset(str(path), tmp_path / f"cache-{name}")
    assert_same_dataset(prepared["flat"], prepared["maps"])
    (tmp_path / "avro").mkdir()
    import fastavro

    avro = {"type": "record", "name": "Row", "fields": [
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "double"}},
        *logs_avro_fields(frame),
    ]}  # fmt: skip
    records = [
        {**r, "attrs": a, "scores": x}
        for r, a, x in zip(base.to_pylist(), attrs, scores, strict=True)
    ]
    with (tmp_path / "avro" / "part-0.avro").open("wb") as file:
        fastavro.writer(file, fastavro.parse_schema(avro), records)
    from_avro = prepared_twins(tmp_path, out, "maps", {"avro": "avro"})["avro"]
    assert_same_dataset(prepared["maps"], from_avro)

    objects = [  # JSON's objects (Arrow gives a map as pairs)
        {**r, "attrs": a, "scores": x}
        for r, a, x in zip(base.to_pylist(), attrs, scores, strict=True)
    ]
    assert_served_as_stored(prepared["maps"], tmp_path / "maps", objects)


def test_lists_of_key_value_objects_are_read_as_google_analytics_exports_write_them(
    tmp_path: Path, capsys
) -> None:
    """BigQuery writes Google Analytics' and Firebase's events with their features in lists
    of ``{key, value}`` objects, each value an object of typed fields (``event_params``:
    ``[{"key": "page", "value": {"string_value": "/a", "int_value": null}}]``), and AWS
    its tags as ``{Key, Value}``. The draft left them out ("a list of structs without item,
    action and time") and prepare could not read them. Now ``column.key.field`` (and
    ``column.key`` for plain values) is the key's value: the draft declares each key and
    field 1% of its rows or more hold; the dataset prepared from Parquet, from BigQuery's
    JSON lines (nulls left out, integers as text) and from Avro is byte for byte that of
    the same values in columns of their own; served rows encode to the stored features."""
    import fastavro
    import yaml

    from nas.data.infer import _keyed_names

    frame = logs()
    rng = np.random.default_rng(9)
    typed = pa.struct(
        [("string_value", pa.string()), ("int_value", pa.int64()), ("double_value", pa.float64())]
    )
    params, tiers, flat = [], [], {}
    for i in range(ROWS):
        values = {"page": {"string_value": str(rng.choice(["/a", "/b", "/c"]))}}
        if i % 3:
            values["engagement_ms"] = {"int_value": int(rng.integers(0, 5000))}
        values["score"] = {"double_value": float(rng.random())}
        if i == 11:
            values["rare"] = {"string_value": "x"}
        params.append(
            [{"key": k, "value": {f: v.get(f) for f in typed.names}} for k, v in values.items()]
        )
        tiers.append([{"Key": "tier", "Value": "gold" if i % 4 else "free"}] if i % 5 else None)
        for name, field in (
            ("page", "string_value"), ("engagement_ms", "int_value"), ("score", "double_value")
        ):  # fmt: skip
            flat.setdefault(f"event_params.{name}.{field}", []).append(
                values.get(name, {}).get(field)
            )
        flat.setdefault("tags.tier", []).append(tiers[-1][0]["Value"] if tiers[-1] else None)
    pair = pa.struct([("key", pa.string()), ("value", typed)])
    tag = pa.struct([("Key", pa.string()), ("Value", pa.string())])
    keyed = pa.table(
        {"event_params": pa.array(params, pa.list_(pair)), "tags": pa.array(tiers, pa.list_(tag))}
    )
    base = pa.Table.from_pandas(frame, preserve_index=False)
    both = pd.concat([frame, pd.DataFrame(flat)], axis=1)
    ga4 = pa.Table.from_arrays(
        [*base.columns, *keyed.columns], [*base.column_names, *keyed.column_names]
    )
    for name, table in (("ga4", ga4), ("flat", pa.Table.from_pandas(both, preserve_index=False))):
        (tmp_path / name).mkdir()
        pq.write_table(table, tmp_path / name / "part-0.parquet")
    out = tmp_path / "ga4.yaml"
    assert main(["data", "schema", str(tmp_path / "ga4"), "--out", str(out), "--json"]) == 0
    why = {c["column"]: c["why"] for c in json.loads(capsys.readouterr().out)["columns"]}
    assert why["event_params"] == (
        "a list of {key, value} objects: its keys in 1% of the rows or more are columns of "
        "their own"
    )
    drafted = {f["name"]: f for f in yaml.safe_load(out.read_text())["features"]}
    assert (
        set(drafted) >= set(flat) and drafted["event_params.score.double_value"]["type"] == "dense"
    )
    assert not any("rare" in name or ".page.int_value" in name for name in drafted)
    sliced = pa.table({"m": keyed["tags"]}).slice(5, 2)  # (a sample: a slice of what was read)
    assert _keyed_names([sliced]) == {"m.tier": "m.tier"}

    # BigQuery's JSON lines: a null's key left out, an INT64 written as text (a time, a
    # label, a count): drafted as the Parquet file is
    (tmp_path / "json").mkdir()
    objects = [
        {**row, "ts": str(row["ts"]), "click": str(row["click"]), "event_params": [
            {"key": p["key"], "value": {f: str(v) if f == "int_value" else v
                                        for f, v in p["value"].items() if v is not None}}
            for p in params[i]], **({"tags": tiers[i]} if tiers[i] else {})}
        for i, row in enumerate(base.to_pylist())
    ]  # fmt: skip
    with (tmp_path / "json" / "part-0.jsonl").open("w") as file:
        file.writelines(json.dumps(row) + "\n" for row in objects)
    from_json = tmp_path / "json.yaml"
    assert main(["data", "schema", str(tmp_path / "json"), "--out", str(from_json)]) == 0
    capsys.readouterr()
    for key in ("labels", "keys", "split", "features"):
        assert yaml.safe_load(from_json.read_text())[key] == yaml.safe_load(out.read_text())[key]
    (tmp_path / "avro").mkdir()
    nullable = {"string_value": "string", "int_value": "long", "double_value": "double"}
    avro = {"type": "record", "name": "Row", "fields": [
        {"name": "event_params", "type": {"type": "array", "items": {
            "type": "record", "name": "Param", "fields": [
                {"name": "key", "type": "string"},
                {"name": "value", "type": {"type": "record", "name": "Value", "fields": [
                    {"name": f, "type": ["null", t]} for f, t in nullable.items()]}}]}}},
        {"name": "tags", "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "Tag", "fields": [
                {"name": "Key", "type": "string"}, {"name": "Value", "type": "string"}]}}]},
        *logs_avro_fields(frame),
    ]}  # fmt: skip
    with (tmp_path / "avro" / "part-0.avro").open("wb") as file:
        rows = [
            {**r, "event_params": p, "tags": t}
            for r, p, t in zip(base.to_pylist(), params, tiers, strict=True)
        ]
        fastavro.writer(file, fastavro.parse_schema(avro), rows)  # fmt: skip
    twins = {"ga4": "parquet", "flat": "parquet", "json": "jsonl", "avro": "avro"}
    prepared = prepared_twins(tmp_path, out, "ga4", twins)
    for name in ("ga4", "json", "avro"):
        assert_same_dataset(prepared["flat"], prepared[name])
    for wrong in ("event_params.pages.string_value", "event_params.page.int_value"):
        path = tmp_path / "wrong.schema.yaml"  # a key misspelt, a field no value holds
        path.write_text((tmp_path / "ga4.schema.yaml").read_text().replace(
            "event_params.page.string_value", wrong))  # fmt: skip
        with pytest.raises(
            DataError,
            match=(
                rf"no row with a value of '{wrong}' .* the keys the rows of event_params hold, "
                r"the most held first: (page, score|score, page), engagement_ms, rare; each value "
                r"an object of string_value, int_value, double_value: event_params.KEY.FIELD"
            ),
        ):
            prepare_dataset(str(path), tmp_path / "cache-wrong")  # fmt: skip
        assert not (tmp_path / "cache-wrong" / "x").exists()

    assert_served_as_stored(prepared["ga4"], tmp_path / "ga4", objects)  # BigQuery's JSON


def test_a_list_of_objects_fields_are_lists_of_their_own(tmp_path: Path, capsys) -> None:
    """An event's products or a request's impressions are kept as a list of objects
    (Google Analytics' ``items``: ``[{"item_id": "SKU1", "item_category": "shoes", "price":
    40.0}]``): the draft left it out ("a list of structs without item and time"). Now
    ``items.item_id`` is each row's list of its objects' ``item_id`` (as Spark names it),
    deeper fields likewise (``items.brand.name``): the draft declares the lists of ids; the
    dataset prepared from Parquet (read in slices), JSON lines (by Arrow, and by line where
    a key mixes JSON types) and Avro is byte for byte that of the same lists in columns of
    their own; served rows encode to the stored features."""
    import fastavro
    import yaml

    frame = logs()
    rng = np.random.default_rng(4)
    brand = pa.struct([("name", pa.string())])
    item = pa.struct(
        [("item_id", pa.string()), ("item_category", pa.string()), ("price", pa.float64()),
         ("brand", brand)]
    )  # fmt: skip
    items = []
    for i in range(ROWS):
        items.append(None if i % 7 == 0 else [
            {"item_id": f"SKU{rng.integers(0, 40)}", "item_category": str(rng.choice(["a", "b"])),
             "price": float(rng.random()), "brand": None if j == 1 else {"name": f"b{j}"}}
            for j in range(int(rng.integers(0, 4)))
        ])  # fmt: skip
    fields = {
        f"items.{f}": [None if x is None else [o[f] for o in x] for x in items]
        for f in ("item_id", "item_category")
    }
    fields["items.brand.name"] = [
        None if x is None else [o["brand"] and o["brand"]["name"] for o in x] for x in items
    ]
    base = pa.Table.from_pandas(frame, preserve_index=False)
    nested = base.append_column("items", pa.array(items, pa.list_(item)))
    flat = base
    for name, values in fields.items():
        flat = flat.append_column(name, pa.array(values, pa.list_(pa.string())))
    for name, table in (("nested", nested), ("flat", flat)):
        (tmp_path / name).mkdir()
        pq.write_table(table, tmp_path / name / "part-0.parquet", row_group_size=97)
    out = tmp_path / "nested.yaml"
    assert main(["data", "schema", str(tmp_path / "nested"), "--out", str(out), "--json"]) == 0
    why = {c["column"]: c["why"] for c in json.loads(capsys.readouterr().out)["columns"]}
    assert why["items"] == "a list of objects: their fields are lists of their own"
    assert why["items.price"] == "a list of double, not of ids"
    drafted = {f["name"]: f for f in yaml.safe_load(out.read_text())["features"]}
    assert all(drafted[name]["type"] == "multi_hot" for name in fields)

    rows = [{**r, "items": x} for r, x in zip(base.to_pylist(), items, strict=True)]
    (tmp_path / "json").mkdir()
    with (tmp_path / "json" / "part-0.jsonl").open("w") as file:
        file.writelines(json.dumps(row) + "\n" for row in rows)
    (tmp_path / "mixed").mkdir()  # a key of two JSON types: read by line
    with (tmp_path / "mixed" / "part-0.jsonl").open("w") as file:
        file.writelines(json.dumps({**row, "odd": i if i % 2 else str(i)}) + "\n"
                        for i, row in enumerate(rows))  # fmt: skip
    (tmp_path / "avro").mkdir()
    avro = {"type": "record", "name": "Row", "fields": [
        {"name": "items", "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "Item", "fields": [
                {"name": "item_id", "type": "string"}, {"name": "item_category", "type": "string"},
                {"name": "price", "type": "double"},
                {"name": "brand", "type": ["null", {"type": "record", "name": "Brand", "fields": [
                    {"name": "name", "type": "string"}]}]}]}}]},
        *logs_avro_fields(frame),
    ]}  # fmt: skip
    with (tmp_path / "avro" / "part-0.avro").open("wb") as file:
        fastavro.writer(file, fastavro.parse_schema(avro), rows)
    twins = {"nested": "parquet", "flat": "parquet", "json": "jsonl", "mixed": "jsonl"}
    prepared = prepared_twins(tmp_path, out, "nested", {**twins, "avro": "avro"})
    for name in ("nested", "json", "mixed", "avro"):
        assert_same_dataset(prepared["flat"], prepared[name])

    assert_served_as_stored(prepared["nested"], tmp_path / "nested", rows)


def test_a_json_array_is_refused_saying_to_write_it_as_json_lines(tmp_path: Path, capsys) -> None:
    """Rows written as one JSON array (pandas' ``to_json(orient="records")``, an API's dump,
    pretty-printed or not) where JSON lines are read: prepare said "line 1: is not JSON"
    or "holds [...], not an object" and advised on_bad_lines: skip, which passes every row
    by. Now prepare, and `nas data schema` of such a file or a folder of them, say it is a
    JSON array and how to write it as JSON lines; nothing is written."""
    rows = logs(40)[["click", "like", "user_id", "ts"]].to_dict("records")
    text = json.dumps(rows, default=lambda v: v.item())
    (tmp_path / "data").mkdir()
    for name, data in (
        ("flat.json", text.encode()),
        ("pretty.json", ("\ufeff" + json.dumps(json.loads(text), indent=2)).encode()),
        ("packed.json.gz", gzip.compress(text.encode())),
    ):
        (tmp_path / "data" / name).write_bytes(data)
        source = f"{{format: jsonl, path: data/{name}}}"
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            SCHEMA.format(name="arrays", source=source, split="{method: random}", sep="")
        )
        with pytest.raises(DataError, match=re.escape(f"{name}: holds a JSON array")) as caught:
            prepare_dataset(str(path), tmp_path / "cache")
        assert "jq -c '.[]'" in str(caught.value) and "on_bad_lines" not in str(caught.value)
        out = tmp_path / "draft.yaml"
        assert main(["data", "schema", str(tmp_path / "data" / name), "--out", str(out)]) == 2
        said = " ".join(capsys.readouterr().err.split())
        assert f"{name} holds a JSON array" in said and "write it so, e.g. jq -c" in said, said
    assert main(["data", "schema", str(tmp_path / "data"), "--out", str(out)]) == 2
    assert "holds a JSON array" in " ".join(capsys.readouterr().err.split())
    assert not out.exists() and not list((tmp_path / "cache").iterdir())


def test_an_objects_fields_are_columns_named_by_their_path(tmp_path: Path) -> None:
    """Event logs nest objects (``{"user": {"id": ..., "geo": {"country": ...}}}``), in JSON
    lines and as Parquet's groups: the draft left such a column out ("of type struct") yet
    took it for keys.user, which prepare then refused. An object's fields are now columns
    of their own, named by their path (``user.geo.country``, as Spark and pandas'
    json_normalize name them), in the draft, prepare (JSON lines read by Arrow or, a key's
    type mixed, by line: byte for byte the dataset of a CSV file of those columns) and
    serving (rows, JSON lines and Parquet files to score: the same probabilities)."""
    import random

    import yaml

    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.data.row_files import RowFiles
    from nas.service.serving import LoadedModel
    from tests.test_search import REPO

    rng = random.Random(0)
    rows = []
    for _ in range(1500):
        row = {
            "click": rng.randint(0, 1),
            "user": {"id": f"u{rng.randint(0, 80)}", "geo": {"country": rng.choice("ABC")}},
            "ctx": {"price": round(rng.random() * 10, 2), "tags": rng.sample("wxyz", 2)},
            "item": f"i{rng.randint(0, 40)}",
        }
        if rng.random() < 0.05:
            row["user"] = None  # (its fields missing)
        rows.append(row)
    (tmp_path / "nested.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    odd = next(i for i in range(1400, 1500) if rows[i]["user"])  # (an id written as a number)
    mixed = [{**r, "user": {**r["user"], "id": 7}} if i == odd else r for i, r in enumerate(rows)]
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mixed))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "nested.parquet")
    flat = pd.DataFrame({
        "click": [r["click"] for r in rows],
        "user.id": [(r["user"] or {}).get("id") for r in rows],
        "user.geo.country": [((r["user"] or {}).get("geo") or {}).get("country") for r in rows],
        "ctx.price": [r["ctx"]["price"] for r in rows],
        "ctx.tags": ["|".join(r["ctx"]["tags"]) for r in rows],
        "item": [r["item"] for r in rows],
    })  # fmt: skip
    flat.to_csv(tmp_path / "flat.csv", index=False)
    schema = """\
name: {name}
source: {source}
labels: [click]
keys: {{user: user.id}}
split: {{method: hash, valid: 0.1, test: 0.1}}
features:
  - {{name: user.id, type: categorical, side: request}}
  - {{name: user.geo.country, type: categorical}}
  - {{name: ctx.price, type: dense, transform: log1p}}
  - {{name: ctx.tags, type: multi_hot, max_len: 2{sep}}}
  - {{name: item, type: categorical}}
"""
    datasets = {}
    for name, source in (
        ("flat", "{format: csv, path: flat.csv}"),
        ("nested", "{format: jsonl, path: nested.jsonl}"),
        ("mixed", "{format: jsonl, path: mixed.jsonl}"),
        ("groups", "{format: parquet, path: nested.parquet}"),
    ):
        sep = ', sep: "|"' if name == "flat" else ""
        path = tmp_path / f"{name}.yaml"
        path.write_text(schema.format(name=name, source=source, sep=sep))
        datasets[name], _ = prepare_dataset(str(path), tmp_path / "cache")
    assert "read_by_line" in datasets["mixed"].manifest  # (by Python's json: its fields too)
    assert datasets["mixed"].manifest["rows"] == len(rows)
    for name in ("nested", "groups"):
        assert_same_dataset(datasets["flat"], datasets[name], exact=True)

    drafts = {}
    for name in ("nested.jsonl", "nested.parquet"):
        out = tmp_path / f"draft_{name.replace('.', '_')}.yaml"
        assert main(["data", "schema", str(tmp_path / name), "--out", str(out)]) == 0
        drafts[name] = yaml.safe_load(out.read_text())
    for draft in drafts.values():
        assert draft["keys"] == {"user": "user.id"}
        assert {f["name"] for f in draft["features"]} == {
            "user.id", "user.geo.country", "ctx.price", "ctx.tags", "item"
        }  # fmt: skip

    dataset = datasets["nested"]
    info = {
        "spec": ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json").to_dict(),
        "schema": dataset.schema.to_list(),
        "raw_form": dataset.raw_form().to_dict(),
    }
    (tmp_path / "model.json").write_text(json.dumps(info))
    torch.manual_seed(0)
    spec = ArchSpec.from_dict(info["spec"])
    torch.save(build_model(spec, dataset.schema).state_dict(), tmp_path / "w.pt")
    model = LoadedModel.from_files(tmp_path / "model.json", tmp_path / "w.pt")
    want = model.probabilities(flat.astype(object).where(flat.notna(), None).to_dict("records"))
    assert model.probabilities(rows)["probability"] == pytest.approx(want["probability"])
    for scored_file in ("nested.jsonl", "nested.parquet"):
        scored = [
            p
            for b in RowFiles(tmp_path / scored_file).batches(500)
            for p in model.scored(model.features_of(b))["probability"]
        ]
        assert scored == pytest.approx(want["probability"], abs=1e-6)


def test_hive_text_of_quotes_and_escaped_delimiters_reads_as_its_parquet_twin(
    tmp_path: Path,
) -> None:
    """Hive's text tables never quote a field, and under ESCAPED BY '\\\\' write a Ctrl-A
    in a value as \\^A (a backslash as \\\\). Read as CSV, a title opening with '"' lost
    its quotes (`"Weird Al" Yankovic`) or ran on to the next '"' lines later, and an
    escaped Ctrl-A split its value in two, the row refused. Now `nas data schema` drafts
    such files `quoting: false, escape: "\\\\"`; prepare reads them byte for byte as the
    same values in Parquet, and `nas predict`'s reader reads them as prepare did."""
    import yaml

    from nas.data.row_files import RowFiles

    rng = np.random.default_rng(3)
    titles = ['"Weird Al" Yankovic', '"an open quote', '12" vinyl', "plain", "C:\\dir"]
    notes = ["a\x01b", "plain", "back\\slash", "x"]
    rows = [
        {"click": int(rng.integers(0, 2)), "title": str(rng.choice(titles)),
         "note": str(rng.choice(notes)), "ts": 1_600_000_000 + i}
        for i in range(ROWS)
    ]  # fmt: skip
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pq" / "part-0.parquet")
    hive = tmp_path / "hive"
    hive.mkdir()

    def escaped(value) -> str:
        return str(value).replace("\\", "\\\\").replace("\x01", "\\\x01")

    text = "".join("\x01".join(escaped(v) for v in row.values()) + "\n" for row in rows)
    (hive / "000000_0").write_text(text)
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(hive), "--labels", "c1", "--out", str(out)]) == 0
    source = yaml.safe_load(out.read_text())["source"]
    assert source["quoting"] is False and source["escape"] == "\\"
    assert source["delimiter"] == "\x01" and source["columns"] == ["c1", "c2", "c3", "c4"]
    body = """\
name: x
source: {source}
labels: [click]
split: {{method: random, valid: 0.1, test: 0.1}}
features:
  - {{name: title, type: categorical, min_freq: 1}}
  - {{name: note, type: categorical, min_freq: 1}}
"""
    hive_source = (
        '{format: csv, path: hive/*, delimiter: "\\u0001", header: false, '
        'columns: [click, title, note, ts], quoting: false, escape: "\\\\"}'
    )
    prepared = {}
    for name, declared in (("pq", "{format: parquet, path: pq/*.parquet}"), ("hive", hive_source)):
        (tmp_path / f"{name}.yaml").write_text(body.format(source=declared))
        prepared[name], _ = prepare_dataset(str(tmp_path / f"{name}.yaml"), tmp_path / f"c-{name}")
    assert_same_dataset(prepared["pq"], prepared["hive"], exact=True)
    unescaped = tmp_path / "unescaped.yaml"  # undeclared, the escape is told
    unescaped.write_text(body.format(source=hive_source.replace(', escape: "\\\\"', "")))
    with pytest.raises(DataError, match=re.escape('say escape: "\\\\" in the source')):
        prepare_dataset(str(unescaped), tmp_path / "c-unescaped")
    served = RowFiles(hive)
    served.read_as(
        {"csv_columns": ["click", "title", "note", "ts"], "csv_delimiter": "\x01",
         "csv_quoting": False, "csv_escape": "\\"}
    )  # fmt: skip
    read = [row for batch in served.batches() for row in batch.rows]
    assert read == [{k: str(v) for k, v in row.items()} for row in rows]


def test_orc_files_as_hive_writes_them_read_as_their_parquet_twins(tmp_path: Path) -> None:
    """Hive and Spark write ORC as often as Parquet (Hive names its files 000000_0): recnas
    read neither ("use .parquet, .csv, .tsv or .jsonl files"). An ORC source (``format:
    orc``; several stripes a file) now prepares byte for byte as the same rows in Parquet,
    drafts the same schema, and serves the same rows to `nas predict`'s reader, as the same
    encoded features."""
    import yaml
    from pyarrow import orc

    from nas.data.raw_table import table_features
    from nas.data.row_files import RowFiles

    parquet = schema_file(tmp_path / "parquet", "parquet")
    folder = tmp_path / "orc" / "data"
    folder.mkdir(parents=True)
    for i, part in enumerate(sorted((tmp_path / "parquet" / "data").glob("*.parquet"))):
        orc.write_table(
            pq.read_table(part), folder / f"00000{i}_0", batch_size=64, stripe_size=1024
        )
    assert orc.ORCFile(folder / "000000_0").nstripes > 1
    (folder / "_SUCCESS").write_bytes(b"")  # (Spark's marker: no data)
    path = tmp_path / "orc" / "my_ctr.yaml"
    path.write_text(
        parquet.read_text().replace(
            "{format: parquet, path: data/*.parquet}", "{format: orc, path: data/*}"
        )
    )
    reference, _ = prepare_dataset(str(parquet), tmp_path / "reference")
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert_same_dataset(reference, dataset)

    drafts = []  # `nas data schema` knows Hive's files by their first bytes
    for read_from in (tmp_path / "parquet" / "data", folder):
        out = tmp_path / f"{read_from.parent.name}.yaml"
        assert main(["data", "schema", str(read_from), "--out", str(out)]) == 0
        drafts.append(yaml.safe_load(out.read_text()))
    assert drafts[0]["features"] == drafts[1]["features"] and drafts[1]["source"]["format"] == "orc"
    drafted, _ = prepare_dataset(str(tmp_path / "orc.yaml"), tmp_path / "drafted")
    assert drafted.manifest["rows"] == ROWS  # (its path: every file, but _SUCCESS)
    served = [
        [
            table_features(reference.raw_form(), b.table, reference.schema)
            for b in RowFiles(d).batches()
        ]
        for d in (tmp_path / "parquet" / "data", folder)  # (`nas predict` too, by their bytes)
    ]
    for part in ("categorical", "multi_hot", "dense"):  # (in batches of other sizes)
        want, got = (torch.cat([getattr(f, part) for f in found]) for found in served)
        assert len(got) == ROWS and torch.allclose(want.double(), got.double(), equal_nan=True)


def test_avro_files_as_kafka_connect_and_spark_write_them_read_as_their_parquet_twins(
    tmp_path: Path,
) -> None:
    """Kafka Connect's sinks, Spark and Hive write a team's logs as Avro as often as Parquet;
    recnas read none ("use .parquet, .orc, .csv, .tsv or .jsonl files"). An Avro source
    (``format: avro``; each column a union with null, as those writers make it; parts of
    many blocks, compressed by snappy and by deflate) now prepares byte for byte as the same
    rows in Parquet, drafts the same schema, and serves the same rows to `nas predict`'s
    reader (a part Hive named 000000_0 too, known by its first bytes) as the same features."""
    import shutil
    import socket

    import yaml

    from nas.data.avro_file import AvroFile
    from nas.data.raw_table import table_features
    from nas.data.row_files import RowFiles

    parquet = schema_file(tmp_path / "parquet", "parquet")
    folder = tmp_path / "avro" / "data"
    folder.mkdir(parents=True)
    parts = sorted((tmp_path / "parquet" / "data").glob("*.parquet"))
    for part, codec in zip(parts, ("snappy", "deflate"), strict=True):
        write_avro(folder / f"{part.stem}.avro", pq.read_table(part), codec, block=2048)
    assert all(AvroFile(p).groups > 4 for p in folder.glob("*.avro"))
    path = tmp_path / "avro" / "my_ctr.yaml"
    path.write_text(
        parquet.read_text().replace(
            "{format: parquet, path: data/*.parquet}", "{format: avro, path: data/*.avro}"
        )
    )
    reference, _ = prepare_dataset(str(parquet), tmp_path / "reference")
    # (its records decoded once, beside the dataset, for the three passes; a folder of such a
    # prepare killed on this host removed)
    abandoned = tmp_path / "cache" / f"my_ctr.decoded-{socket.gethostname()}-{2**22 + 1}"
    abandoned.mkdir(parents=True)
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert_same_dataset(reference, dataset)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["my_ctr"]
    cut = folder / "part-2.avro"  # a part cut short: refused, naming it, nothing left behind
    cut.write_bytes((folder / "part-1.avro").read_bytes()[:-300])
    with pytest.raises(DataError, match=r"part-2\.avro.*a damaged or cut-short Avro file"):
        prepare_dataset(str(path), tmp_path / "cache", force=True)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["my_ctr"]
    cut.unlink()

    drafts = []
    for read_from in (tmp_path / "parquet" / "data", folder):
        out = tmp_path / f"{read_from.parent.name}.yaml"
        assert main(["data", "schema", str(read_from), "--out", str(out)]) == 0
        drafts.append(yaml.safe_load(out.read_text()))
    assert drafts[0]["features"] == drafts[1]["features"]
    assert drafts[1]["source"]["format"] == "avro"
    drafted, _ = prepare_dataset(str(tmp_path / "avro.yaml"), tmp_path / "drafted")
    assert drafted.manifest["rows"] == ROWS

    hive = tmp_path / "hive"
    hive.mkdir()
    for i, part in enumerate(sorted(folder.glob("*.avro"))):
        shutil.copyfile(part, hive / f"00000{i}_0")
    served = [
        [
            table_features(reference.raw_form(), b.table, reference.schema)
            for b in RowFiles(d).batches(size=256)
        ]
        for d in (tmp_path / "parquet" / "data", folder, hive)
    ]
    for part in ("categorical", "multi_hot", "dense"):
        want = torch.cat([getattr(f, part) for f in served[0]]).double()
        for found in served[1:]:
            got = torch.cat([getattr(f, part) for f in found]).double()
            assert len(got) == ROWS and torch.allclose(want, got, equal_nan=True)


def test_mysql_and_hive_null_in_a_number_column_is_missing(tmp_path: Path, capsys) -> None:
    """MySQL's and Hive's text files write a null as \\N: a number column holding one was
    refused ("must be a number, got '\\\\N'"). It is missing now, as a blank is, in prepare
    and in a served row."""
    from nas.data.row_files import RowFiles

    frames = {}
    for form, null in (("blank", ""), ("hive", "\\N")):
        path = schema_file(tmp_path / form, "csv")
        source = tmp_path / form / "data" / "logs.tsv"
        lines = source.read_text().splitlines()
        at = lines[0].split("\t").index("price")
        for i in range(1, len(lines), 7):
            cells = lines[i].split("\t")
            cells[at] = null
            lines[i] = "\t".join(cells)
        source.write_text("\n".join(lines) + "\n")
        frames[form], _ = prepare_dataset(str(path), tmp_path / f"cache-{form}")
    dense = [np.load(d.root / "dense.npy") for d in frames.values()]
    assert np.array_equal(dense[0], dense[1])
    dataset = frames["hive"]
    rows = [row for batch in RowFiles(tmp_path / "hive" / "data").batches() for row in batch.rows]
    assert sum(row["price"] == "\\N" for row in rows) == len(range(1, ROWS + 1, 7))
    served = dataset.raw_form().features(rows, dataset.schema)
    stored = stored_as_read(dataset)
    assert torch.allclose(served.dense, stored.dense, rtol=1e-6, atol=1e-6)
    drafts = []  # `nas data schema`: a column of numbers, some \\N, drafted as numbers
    for form in ("blank", "hive"):
        out = tmp_path / f"{form}.yaml"
        assert main(["data", "schema", str(tmp_path / form / "data"), "--out", str(out)]) == 0
        drafts.append(out.read_text().replace("hive", "blank"))
    assert drafts[0] == drafts[1] and "{name: price, type: dense" in drafts[1]
