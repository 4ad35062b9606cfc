"""``nas data export``: a prepared dataset's splits as one Parquet file, the rows exactly as
the models read them, checked against the prepared features and against the source rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from nas.cli import main
from nas.data import load_dataset
from nas.data.export import export_splits, read_metadata
from nas.data.prepared import SPLITS
from tests.data.test_schema_file import expected_vocab, logs, schema_file


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[pd.DataFrame, Path]:
    """The test logs (two labels, dense, multi-hot, a hashed field, a history) prepared."""
    folder = tmp_path_factory.mktemp("export")
    frame = logs()
    path = schema_file(folder, frame=frame)
    assert main(["data", "prepare", str(path), "--cache-dir", str(folder / "cache")]) in (0, None)
    return frame, folder / "cache"


def _lists(column) -> list[list[int]]:
    return [list(v) for v in column]


def test_the_file_holds_each_splits_rows_as_the_models_read_them(source, tmp_path, capsys):
    frame, cache = source
    out = tmp_path / "new" / "my_ctr.parquet"
    assert main(["data", "export", "my_ctr", "--out", str(out), "--cache-dir", str(cache)]) in (
        0,
        None,
    )
    said = " ".join(capsys.readouterr().out.split())
    assert f"wrote {out}" in said and "rows train 480, valid 60, test 60" in said
    table = pq.read_table(out).to_pandas()
    dataset = load_dataset("my_ctr", cache)
    assert list(table["split"].astype(str).unique()) == list(SPLITS)
    for split in SPLITS:
        rows = table[table["split"] == split]
        features = dataset.features(split)
        assert len(rows) == len(features) == dataset.manifest["split_sizes"][split]
        names = [f.name for f in dataset.schema.of_kind("categorical")]
        for j, name in enumerate(names):
            assert (rows[name].to_numpy() == features.categorical[:, j].numpy()).all(), name
        (genres,) = range(len(dataset.schema.of_kind("multi_hot")))
        bags = [[int(v) for v in bag if v] for bag in features.multi_hot[:, genres].tolist()]
        assert _lists(rows["genres"]) == bags
        dense = features.dense.numpy()
        assert np.array_equal(rows["count"].to_numpy(), dense[:, 0])
        assert np.array_equal(rows["price"].to_numpy(), dense[:, 1])
        labels = features.label.numpy().reshape(len(rows), -1)
        assert np.array_equal(rows[["click", "like"]].to_numpy(), labels)
        history = features.history
        for i in range(len(rows)):
            end = int(history.end[i])
            events = range(max(int(history.start[i]), end - history.max_len), end)
            assert list(rows["hist"].iloc[i]) == [int(history.item[e]) for e in events]
            assert list(rows["hist.time"].iloc[i]) == [int(history.time[e]) for e in events]
    # against the source rows, joined by source_row (independent of the prepared arrays)
    joined = frame.iloc[table["source_row"].to_numpy()].reset_index(drop=True)
    assert (table["click"].to_numpy() == joined["click"].to_numpy()).all()
    assert (table["timestamp"].to_numpy() == joined["ts"].to_numpy()).all()
    train = frame.iloc[table["source_row"][table["split"] == "train"].to_numpy()]
    site = expected_vocab(train["site"], min_freq=20)  # 0 missing, 1 out of vocabulary
    assert table["site"].tolist() == [0 if pd.isna(v) else site.get(v, 1) for v in joined["site"]]
    genres = expected_vocab(train["genres"].explode())
    assert _lists(table["genres"]) == [[genres.get(v, 1) for v in g][:3] for g in joined["genres"]]
    about = read_metadata(out)
    assert about["dataset"] == "my_ctr" and about["version"] == dataset.version
    assert about["labels"] == ["click", "like"]
    cardinality = {f["name"]: f["cardinality"] for f in about["schema"]}
    assert table["site"].max() < cardinality["site"] and table["user_id"].max() < 51


def test_chunks_of_rows_write_the_same_file_as_one(source, tmp_path):
    _, cache = source
    dataset = load_dataset("my_ctr", cache)
    whole = export_splits(dataset, tmp_path / "whole.parquet")
    parts = export_splits(dataset, tmp_path / "parts.parquet", chunk_rows=7)
    assert whole.rows == parts.rows and whole.columns == parts.columns
    assert pq.read_table(whole.path).equals(pq.read_table(parts.path))


def test_some_splits_only_in_the_datas_order(source, tmp_path, capsys):
    _, cache = source
    out = tmp_path / "t.parquet"
    argv = ["data", "export", "my_ctr", "--out", str(out), "--split", "test,train", "--json"]
    assert main([*argv, "--cache-dir", str(cache)]) in (0, None)
    said = json.loads(capsys.readouterr().out)
    assert list(said["rows"]) == ["train", "test"] and said["rows"]["test"] == 60
    table = pq.read_table(out)
    assert table.num_rows == 540 and said["bytes"] == out.stat().st_size


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--out", "{tmp}/x.csv"], "is not a .parquet file's name"),
        (["--out", "{tmp}/there.parquet"], "exists; give a new file name"),
        (["--out", "{tmp}/x.parquet", "--split", "tset"], "unknown split 'tset'; valid: train"),
        (["--out", "{tmp}/file/x.parquet"], "is not a folder"),
    ],
)
def test_a_bad_flag_exits_2_naming_it_and_writes_nothing(source, tmp_path, capsys, flags, words):
    _, cache = source
    (tmp_path / "there.parquet").write_text("mine")
    (tmp_path / "file").write_text("")
    flags = [f.format(tmp=tmp_path) for f in flags]
    with pytest.raises(SystemExit) as exited:
        main(["data", "export", "my_ctr", *flags, "--cache-dir", str(cache)])
    assert exited.value.code == 2
    assert words in " ".join(capsys.readouterr().err.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "there.parquet"]
    assert (tmp_path / "there.parquet").read_text() == "mine"


def test_an_unknown_dataset_exits_2_and_an_interrupted_export_leaves_nothing(
    source, tmp_path, capsys
):
    _, cache = source
    out = tmp_path / "x.parquet"
    assert main(["data", "export", "my_ctx", "--out", str(out), "--cache-dir", str(cache)]) == 2
    assert "unknown dataset 'my_ctx'" in capsys.readouterr().err
    dataset = load_dataset("my_ctr", cache)

    def interrupt(rows: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_splits(dataset, out, progress=interrupt, chunk_rows=100)
    assert list(tmp_path.iterdir()) == []


def test_movielens_exports_its_history_of_rated_items_and_its_groups(ml100k, tmp_path):
    """A built-in dataset: one label under its manifest's name, the keys for GAUC, and each
    row's history (the user's earlier ratings) as the model reads it."""
    out = export_splits(ml100k, tmp_path / "ml.parquet", splits=("valid",)).path
    table = pq.read_table(out).to_pandas()
    features = ml100k.features("valid")
    assert (table["like"].to_numpy() == features.label.numpy()).all()
    assert (table["user_key"].to_numpy() == ml100k.groups("valid", "user")).all()
    assert (table["request_key"].to_numpy() == ml100k.groups("valid", "request")).all()
    history = features.history
    lengths = (history.end - history.start).clamp(max=history.max_len).numpy()
    assert (table["history"].map(len).to_numpy() == lengths).all() and lengths.max() > 0
    assert table["history.action"].map(len).equals(table["history"].map(len))


def test_a_field_named_as_a_column_export_adds_is_named_not_overwritten(tmp_path, capsys):
    frame = logs().rename(columns={"price": "source_row"})
    path = schema_file(tmp_path, frame=frame)
    path.write_text(path.read_text().replace("name: price", "name: source_row"))
    cache, out = tmp_path / "cache", tmp_path / "x.parquet"
    assert main(["data", "export", str(path), "--out", str(out), "--cache-dir", str(cache)]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "has a field named like a column export adds (source_row)" in said, said
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_an_exported_file_prepares_again_with_the_same_split_by_its_column(source, tmp_path, fmt):
    """`split: {method: column, column: split}` keeps each row where the file puts it: an
    export (or a split made elsewhere) prepares to the same rows per split."""
    _, cache = source
    dataset = load_dataset("my_ctr", cache)
    exported = export_splits(dataset, tmp_path / "my_ctr.parquet")
    if fmt == "csv":
        table = pq.read_table(exported.path).to_pandas()[["split", "click", "like", "site"]]
        table.to_csv(tmp_path / "my_ctr.csv", index=False)
    path = tmp_path / "again.yaml"
    path.write_text(
        f"name: again\nsource: {{format: {fmt}, path: my_ctr.{fmt}}}\nlabels: [click, like]\n"
        "split: {method: column, column: split}\n"
        "features: [{name: site, type: categorical}]\n"
    )
    again = load_dataset(str(path), tmp_path / "cache")
    assert again.manifest["split_sizes"] == dataset.manifest["split_sizes"]
    assert again.manifest["split_rule"] == "as the column split says (train, valid, test)"
    first = pq.read_table(exported.path)["source_row"].to_numpy()  # a file row -> the logs'
    for split in SPLITS:  # the same rows of the logs, in the same order
        rows = slice(*again.manifest["split_ranges"][split])
        original = slice(*dataset.manifest["split_ranges"][split])
        assert np.array_equal(
            first[again.array("source_row")[rows]], dataset.array("source_row")[original]
        )
        assert np.array_equal(again.features(split).label, dataset.features(split).label)


def test_a_splits_raw_rows_carry_their_labels_and_encode_back(source, tmp_path, capsys) -> None:
    """`nas data rows`: the raw form a registered model scores, each row with its labels;
    encoded again they give the prepared ids, the hashed field's too (a value seen with each
    id; a dataset prepared before those were kept: written empty, and said)."""
    _, cache = source
    out = tmp_path / "rows" / "test.jsonl"
    argv = ["data", "rows", "my_ctr", "--out", str(out), "--rows", "50", "--cache-dir", str(cache)]
    assert main(argv) in (0, None)
    said = " ".join(capsys.readouterr().out.split())
    assert "50 test rows of my_ctr in the raw form" in said
    assert "written empty" not in said
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    dataset = load_dataset("my_ctr", cache)
    order = dataset.split_rows("test")[:50]
    labels = np.asarray(dataset.label_array()[order])
    assert [[r["click"], r["like"]] for r in rows] == labels.astype(int).tolist()
    assert all(r["user_id"] for r in rows)
    again = dataset.raw_form().features(rows, dataset.schema)
    want = dataset.features("test")[slice(0, 50)]
    assert (again.categorical == want.categorical).all()
    assert (again.multi_hot == want.multi_hot).all()
    assert (again.history.tensor() == want.history.tensor()).all()
    # as Parquet: the same rows, typed; served by rows and by columns
    from nas.data.raw_table import table_features

    parquet = tmp_path / "rows" / "test.parquet"
    argv = ["data", "rows", "my_ctr", "--out", str(parquet), "--rows", "50"]
    assert main([*argv, "--cache-dir", str(cache)]) in (0, None)
    capsys.readouterr()
    table = pq.read_table(parquet)
    assert table.column("click").to_pylist() == labels[:, 0].astype(int).tolist()
    assert str(table.schema.field("hist").type) == "list<element: string>"
    form = dataset.raw_form()
    by_columns = table_features(form, table, dataset.schema)
    for served in (form.features(table.to_pylist(), dataset.schema), by_columns):
        assert (served.categorical == want.categorical).all()
        assert (served.multi_hot == want.multi_hot).all()
        assert np.allclose(served.dense.numpy(), want.dense.numpy(), atol=1e-4)
        assert (served.history.tensor() == want.history.tensor()).all()
    # a dataset prepared before the hashed ids' values were kept: the column written empty
    folder = tmp_path / "older"
    shutil.copytree(cache / "my_ctr", folder / "my_ctr")
    (folder / "my_ctr" / "hashed_values.json").unlink()
    manifest = json.loads((folder / "my_ctr" / "manifest.json").read_text())
    for entries in (manifest["files"], manifest["sizes"], manifest["mtimes"]):
        del entries["hashed_values.json"]
    (folder / "my_ctr" / "manifest.json").write_text(json.dumps(manifest))
    older = tmp_path / "rows" / "older.jsonl"
    argv = ["data", "rows", "my_ctr", "--out", str(older), "--rows", "5"]
    assert main([*argv, "--cache-dir", str(folder)]) in (0, None)
    said = " ".join(capsys.readouterr().out.split())
    assert "written empty: user_id (hashed, and my_ctr was prepared before" in said
    assert all(json.loads(line)["user_id"] == "" for line in older.read_text().splitlines())
    shutil.rmtree(folder)
    for flags, words in [
        (["--out", str(out)], "exists; give a new file name"),
        (["--out", str(tmp_path / "x.csv")], "is not a .jsonl or .parquet file's name"),
        (["--out", str(tmp_path / "y.jsonl"), "--rows", "0"], "expected an integer >= 1"),
        (["--out", str(tmp_path / "y.jsonl"), "--split", "tset"], "invalid choice: 'tset'"),
    ]:
        with pytest.raises(SystemExit) as exited:
            main(["data", "rows", "my_ctr", *flags, "--cache-dir", str(cache)])
        assert exited.value.code == 2
        assert words in " ".join(capsys.readouterr().err.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows"]
