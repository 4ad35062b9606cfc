"""`nas data schema`: a first schema file from a sample of a team's own rows, each column's
kind said with its reason; the file it writes prepares."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from nas.cli import main
from nas.data import prepare_dataset
from tests.data.test_schema_file import events_logs, logs, write_avro, write_source


def drafted(tmp_path: Path, frame, fmt: str, *flags: str) -> dict:
    write_source(tmp_path / "data", frame, fmt)
    out = tmp_path / "drafts" / "team_logs.yaml"
    assert main(["data", "schema", str(tmp_path / "data"), "--out", str(out), *flags]) in (0, None)
    return yaml.safe_load(out.read_text())


def kinds(schema: dict) -> dict[str, dict]:
    return {f["name"]: f for f in schema["features"]}


@pytest.mark.parametrize("fmt", ["parquet", "avro", "csv", "jsonl"])
def test_a_draft_of_each_format_names_labels_keys_and_features_and_prepares(
    tmp_path: Path, fmt: str
) -> None:
    frame = logs(2000)
    frame["device"] = [f"d{i}" for i in range(len(frame))]  # most values distinct: hashed
    schema = drafted(tmp_path, frame, fmt)
    assert schema["name"] == "team_logs" and schema["labels"] == ["click", "like"]
    assert schema["keys"] == {"timestamp": "ts", "user": "user_id"}
    assert schema["split"]["method"] == "time"
    fields = kinds(schema)
    assert {n: f["type"] for n, f in fields.items()} == {
        "user_id": "categorical", "site": "categorical", "item_id": "categorical",
        "count": "dense", "price": "dense", "genres": "multi_hot", "hist": "sequence",
        "device": "categorical", "hour": "categorical", "weekday": "categorical",
    }  # fmt: skip
    assert fields["hour"] == {"name": "hour", "type": "categorical", "from": "ts", "derive": "hour"}
    assert fields["device"]["hash"] > 0 and fields["user_id"]["side"] == "request"
    assert fields["hist"]["vocab_of"] == "item_id"
    assert fields["genres"]["max_len"] == 3  # the lists hold up to 3
    if fmt == "csv":
        assert fields["genres"]["sep"] == "|" and schema["source"]["delimiter"] == "\t"
    dataset, _ = prepare_dataset(str(tmp_path / "drafts" / "team_logs.yaml"), tmp_path / "cache")
    assert dataset.schema.history is not None
    assert np.asarray(dataset.label_array()).shape == (len(frame), 2)


def test_a_history_of_events_is_a_sequence_of_the_item_column(tmp_path: Path, capsys) -> None:
    write_source(tmp_path / "data", events_logs(), "parquet")
    out = tmp_path / "events.yaml"
    argv = ["data", "schema", str(tmp_path / "data" / "*.parquet"), "--out", str(out), "--json"]
    assert main(argv) in (0, None)
    said = json.loads(capsys.readouterr().out)
    assert said["out"] == str(out)
    hist = next(c for c in said["columns"] if c["column"] == "hist")
    assert hist["as"] == "sequence" and "events" in hist["why"]
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.raw_form().columns["hist"]["type"] == "events"


def test_labels_named_otherwise_are_given_and_bad_ones_are_refused(tmp_path: Path, capsys):
    frame = logs(300).rename(columns={"click": "clk", "like": "fav"})
    write_source(tmp_path / "data", frame, "parquet")
    out = tmp_path / "x.yaml"

    def schema(*flags: str, source: Path = tmp_path / "data") -> int | None:
        return main(["data", "schema", str(source), "--out", str(out), *flags])

    for flags, words in [
        ([], "name the label column(s) (0/1 columns: clk, fav; a label from a number:"),
        (["--labels", "nope"], "'nope' is not a column"),
        (["--labels", "price"], "'price' holds values other than 0 and 1"),
        (["--name", "a b"], "is not a dataset name"),
        (["--labels", "x=site>=1"], "a threshold is a number on a numeric column"),
        (["--labels", "x=price>=soon"], "a threshold is a number on a numeric column"),
        (["--labels", "a=b=c"], "is not COLUMN, NAME=COLUMN>=NUMBER, NAME=COLUMN==VALUE|VALUE..."),
        (["--labels", "x=site==nowhere"], "no row of the sample has site 'nowhere'; its values"),
        (["--labels", "x=site=="], "'x=site==' names no value after == (VALUE|VALUE...)"),
        (["--labels", "x=price==3"], "are of a column of text or integers; 'price' is of double"),
        (["--labels", "clk", "--tz", "Mars/Olympus"], "--tz: 'Mars/Olympus' is not a time zone"),
    ]:
        assert schema(*flags) == 2
        assert words in " ".join(capsys.readouterr().err.split())
        assert not out.exists()
    assert schema(source=tmp_path / "none" / "*.csv") == 2
    assert "matches no file" in " ".join(capsys.readouterr().err.split())  # wrapped at 80
    assert schema("--labels", "clk,fav") in (0, None)
    assert yaml.safe_load(out.read_text())["labels"] == ["clk", "fav"]
    out.unlink()
    assert schema("--labels", "fav,dear=price>=10") in (0, None)  # 1 where price >= 10
    drafted_ = yaml.safe_load(out.read_text())
    assert drafted_["labels"] == ["fav", {"name": "dear", "column": "price", "at_least": 10}]
    assert "price" not in kinds(drafted_)
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.label_names == ("fav", "dear")
    expected = (frame["price"] >= 10).mean()
    assert np.asarray(dataset.label_array())[:, 1].mean() == pytest.approx(expected)
    # headers that hold "=" and ">=": each read as the column it names
    signs = tmp_path / "signs"
    write_source(signs, frame.rename(columns={"clk": "clk=1", "price": "price>=usd"}), "parquet")
    out.unlink()
    assert schema("--labels", "clk=1,dear=price>=usd>=10", source=signs) in (0, None)
    drafted_ = yaml.safe_load(out.read_text())
    assert drafted_["labels"] == [
        {"name": "clk_1", "column": "clk=1"},
        {"name": "dear", "column": "price>=usd", "at_least": 10},
    ]
    signed, _ = prepare_dataset(str(out), tmp_path / "cache-signs")
    means = np.asarray(signed.label_array()).mean(axis=0)
    assert means == pytest.approx([frame["clk"].mean(), expected])


def test_columns_of_odd_types_are_left_out_with_their_reason(tmp_path: Path, capsys) -> None:
    """Half floats, bytes that are not text, nulls, lists of nothing, a time in milliseconds
    beside the key's seconds: said and left out (a half-float column stopped the command
    with Arrow's traceback). A column named as no schema names a field ("my col") is read by
    a field of a name made of it (``from: "my col"``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 40
    table = pa.table({
        "click": [i % 2 for i in range(n)], "my col": ["x", "y"] * (n // 2),
        "f16": pa.array([i / 4 for i in range(n)], pa.float16()),
        "blob": [bytes([0x80 + i]) for i in range(n)], "nul": pa.nulls(n),
        "empty_lists": [[] for _ in range(n)], "site": ["a", "b"] * (n // 2),
        "ts": [1_600_000_000 + i for i in range(n)],
        "ts_ms": [1_600_000_000_000 + 1000 * i for i in range(n)],
    })  # fmt: skip
    pq.write_table(table, tmp_path / "odd.parquet")
    out = tmp_path / "odd.yaml"
    argv = ["data", "schema", str(tmp_path / "odd.parquet"), "--out", str(out), "--json"]
    assert main(argv) in (0, None)
    said = {c["column"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert said["f16"]["as"] == "dense"
    assert {said[c]["as"] for c in ("blob", "nul", "empty_lists")} == {"left out"}
    assert said["my col"]["as"] == "categorical" and "as the field my_col" in said["my col"]["why"]
    assert said["ts_ms"]["as"] == "left out" and "milliseconds" in said["ts_ms"]["why"]
    fields = kinds(yaml.safe_load(out.read_text()))
    assert set(fields) == {"f16", "site", "hour", "weekday", "my_col"}
    assert fields["my_col"]["from"] == "my col"
    prepare_dataset(str(out), tmp_path / "cache")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_draft_reads_rows_of_files_spread_over_the_source(tmp_path: Path, capsys, fmt) -> None:
    """Twelve daily files: a coupon column empty on the first day, a shop id written as
    integers on some days and as text on others, a column one day lacks. The draft reads
    rows of eight files from the first to the last (before, the first file's
    only: the coupon was left out as a column of nulls): the coupon and the shop are
    categories, the column a file lacks is a feature missing on that file's rows (said,
    naming the file), and it prepares; a blank file (a day of no rows written as nothing) is
    passed by, by both commands."""
    folder = tmp_path / "days"
    folder.mkdir()
    frame = logs(1200)
    for day in range(12):
        part = frame.iloc[day * 100 : (day + 1) * 100].copy()
        part["coupon"] = None if day == 0 else [f"c{i % 3}" for i in range(100)]
        part["shop"] = [i % 7 if day % 2 else f"s{i % 7}" for i in range(100)]
        if day != 5:
            part["promo"] = [i / 4 for i in range(100)]
        path = folder / f"day{day:02d}.{fmt}"
        if fmt == "csv":
            part = part.drop(columns=["genres", "hist"])
            part.to_csv(path, index=False)
        else:
            part = part.drop(columns=["genres", "hist"])
            part.to_json(path, orient="records", lines=True)
    (folder / f"day12.{fmt}").write_text("\n")
    out = tmp_path / "days.yaml"
    assert main(["data", "schema", str(folder), "--out", str(out), "--json"]) in (0, None)
    said = {c["column"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    fields = kinds(yaml.safe_load(out.read_text()))
    assert fields["coupon"]["type"] == "categorical" and fields["shop"]["type"] == "categorical"
    assert said["promo"]["as"] == "dense" and f"not in day05.{fmt}" in said["promo"]["why"]
    assert fields["promo"]["type"] == "dense"
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.manifest["rows"] == len(frame)
    assert dataset.manifest["absent_columns"] == {"promo": [f"day05.{fmt}"]}
    assert main(["data", "schema", str(folder), "--out", str(tmp_path / "again.yaml")]) in (0, None)
    title = " ".join(capsys.readouterr().out.split())
    assert f"from rows of 8 of its 13 files (day00.{fmt} to day11.{fmt})" in title


@pytest.mark.parametrize("fmt", ["parquet", "avro", "csv", "jsonl", "jsonl-mixed"])
def test_a_sample_reads_rows_spread_within_a_large_file(tmp_path: Path, fmt: str) -> None:
    """One file of 8,000 rows whose coupon column holds values only in its last 30% (a
    column added to the logs later; JSON lines omit its key before), sampled 800 rows:
    read from four places spread over the file (Parquet's eight row groups, Avro's blocks of
    about 60 rows, the CSV or JSON lines' bytes; by Arrow, or where a shop id mixes numbers
    and text, by Python's json), the
    coupon is text (before, its first rows only: a column of nulls), and the rows sampled
    are the file's rows, each once, from its first to its last quarter."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nas.data.infer import read_sample

    frame = logs(8000)[["click", "ts", "user_id", "price"]].copy()
    frame["coupon"] = [None if i < 5600 else f"c{i % 3}" for i in range(8000)]
    frame["shop"] = [i % 7 if fmt == "jsonl-mixed" and i % 2 else f"s{i % 7}" for i in range(8000)]
    frame["row"] = range(8000)
    kind = fmt.removesuffix("-mixed")
    path = tmp_path / f"logs.{kind}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(frame), path, row_group_size=1000)
    elif fmt == "avro":
        write_avro(path, pa.Table.from_pandas(frame, preserve_index=False), block=2048)
    elif fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        records = [{k: v for k, v in r.items() if v is not None} for r in frame.to_dict("records")]
        path.write_text("".join(json.dumps(r, default=lambda v: v.item()) + "\n" for r in records))
    table = read_sample([path], kind, rows=800).table
    coupon, shop = table.column("coupon"), table.column("shop")
    text = (pa.string(), pa.large_string())
    assert coupon.type in text and shop.type in text and coupon.null_count < len(table)
    rows = table.column("row").to_pylist()
    assert 600 <= len(rows) <= 800 and len(set(rows)) == len(rows)
    assert min(rows) == 0 and max(rows) >= 6000
    expected = frame.set_index("row").loc[rows]
    assert table.column("price").to_pylist() == pytest.approx(expected["price"].tolist())
    assert shop.to_pylist() == [str(v) for v in expected["shop"]]  # a number's JSON text


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_a_sample_of_a_small_file_holds_each_of_its_rows_once(tmp_path: Path, end: str) -> None:
    """A CSV file of 30 rows, its lines ended as Unix, Windows or classic Mac OS end them:
    sampled whole, each row once (lines ended by carriage returns alone are read from the
    file's start: a line is found by line feeds)."""
    from nas.data.infer import read_sample

    path = tmp_path / "small.csv"
    path.write_bytes(
        end.join(["click,ts", *(f"{i % 2},{1700000000 + i}" for i in range(30))]).encode()
    )
    table = read_sample([path], "csv", rows=800).table
    assert table.column("ts").to_pylist() == [1700000000 + i for i in range(30)]


def criteo_like_day(rng, rows: int = 400) -> list[str]:
    """Lines of a Criteo-like TSV day without a header: a 0/1 label, three counts with gaps,
    two 8-digit hex ids."""
    return [
        "\t".join([str(rng.randint(0, 1)), *(str(rng.randint(0, 99)) if rng.random() > 0.2
                   else "" for _ in range(3)), *(f"{rng.choice([7, 9, 11]) * 0x1000001:08x}"
                   for _ in range(2))])
        for _ in range(rows)
    ]  # fmt: skip


def test_a_csv_file_without_a_header_is_drafted_with_columns_named(tmp_path: Path, capsys):
    """A Criteo-like day as TSV without a header (a 0/1 label, counts with gaps, 8-digit hex
    ids): drafted with ``header: false`` and columns c1 to cN, said in the title; with
    ``--labels c1`` it prepares every row. A file whose first line is a header of names
    keeps it, as does one whose first line holds no number (a header, as before, where the
    judge finds its cells like the values below: text of one length)."""
    import random

    import torch

    from nas.data.row_files import RowFiles
    from nas.data.schema import Features

    rng = random.Random(0)
    lines = criteo_like_day(rng)
    (tmp_path / "day_0.tsv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "day.yaml"
    argv = ["data", "schema", str(tmp_path / "day_0.tsv"), "--out", str(out)]
    assert main(argv) == 2  # no label named: the columns' names said with the 0/1 ones
    said = " ".join(capsys.readouterr().err.split())
    assert "(0/1 columns: c1;" in said and "its columns are named c1 to c6" in said
    assert not out.exists()
    assert main([*argv, "--labels", "c1"]) in (0, None)
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "no header (its first line holds values like the lines below it): columns named c1 to "
        "c6 (rename them in source.columns)"
    ) in said
    schema = yaml.safe_load(out.read_text())
    assert schema["source"]["header"] is False
    assert schema["source"]["columns"] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert schema["labels"] == ["c1"] and {"c2", "c5"} <= set(kinds(schema))
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.manifest["rows"] == 400
    # served: the file as `nas predict` reads it (by the source's columns, with the header
    # line or without it) encodes to the features stored
    columns = dataset.manifest["csv_columns"]
    assert columns == schema["source"]["columns"]
    order = np.argsort(np.asarray(dataset.array("source_row")))
    stored = Features.from_arrays(
        dataset._row_arrays(order), dataset.event_arrays(), dataset.schema
    )
    for header in ([], ["\t".join(columns)]):
        (tmp_path / "served.tsv").write_text("\n".join([*header, *lines]) + "\n")
        files = RowFiles(tmp_path / "served.tsv", columns=columns)
        read = [row for batch in files.batches() for row in batch.rows]
        assert [row["c1"] for row in read] == [line.split("\t")[0] for line in lines]
        served = dataset.raw_form().features(read, dataset.schema)
        assert torch.equal(served.categorical, stored.categorical)
        assert torch.equal(served.dense, stored.dense)
    # headers kept: of names, and a first line of text like the values below it
    texts = [f"{c}{c}\t{rng.randint(0, 1)}" for c in rng.choices("abcdef", k=100)]
    for header, rows in (("click\tn1\tn2\tn3\tid1\tid2", lines), ("ab\tcd", texts)):
        (tmp_path / "day_0.tsv").write_text("\n".join([header, *rows]) + "\n")
        out.unlink()
        label = header.split("\t")[0 if rows is lines else 1]
        assert main([*argv, "--labels", label, "--json"]) in (0, None)
        assert json.loads(capsys.readouterr().out)["header"] is True
        assert "header" not in yaml.safe_load(out.read_text())["source"]


def test_a_csv_file_of_text_without_a_header_is_drafted_so(tmp_path: Path) -> None:
    """A TSV day of text only (countries, platforms, a true/false label) without a header:
    its first line holds no number, but its values stand again below it, as names would
    not: drafted ``header: false``. Where they do not (a header of names), a header."""
    import random

    rng = random.Random(3)
    lines = [
        "\t".join([rng.choice(["US", "IN", "BR"]), rng.choice(["android", "ios", "web"]),
                   rng.choice(["true", "false"])])
        for _ in range(300)
    ]  # fmt: skip
    (tmp_path / "day.tsv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "day.yaml"
    argv = ["data", "schema", str(tmp_path / "day.tsv"), "--out", str(out), "--labels", "c3"]
    assert main(argv) in (0, None)
    schema = yaml.safe_load(out.read_text())
    assert schema["source"]["header"] is False and schema["labels"] == ["c3"]
    assert {"c1", "c2"} <= set(kinds(schema))
    (tmp_path / "day.tsv").write_text("\n".join(["country\tplatform\tclicked", *lines]) + "\n")
    out.unlink()
    assert main([*argv[:-1], "clicked"]) in (0, None)
    assert "header" not in yaml.safe_load(out.read_text())["source"]


def test_nas_predict_and_compare_read_a_csv_without_a_header_by_the_models_columns(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Models of a Criteo-like day without a header (their info names its columns, c1 to c6,
    as a registered model's does) score another such day in `nas predict` and `nas models
    compare`: every line a row, none taken for a header, each scored and measured as its
    values read by those names. One whose source was cp1252 text of decimal commas scores
    such a day compressed (gzip) into a Parquet file (whose column types are read in a
    pass of their own: in the model's encoding too, which was refused)."""
    import csv
    import gzip
    import random

    import mlflow
    import pyarrow.parquet
    import torch

    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.service.serving import LoadedModel
    from tests.conftest import runs_with_store
    from tests.test_search import REPO
    from workers.metrics import binary_metrics

    rng = random.Random(1)
    (tmp_path / "day_0.tsv").write_text("\n".join(criteo_like_day(rng)) + "\n")
    out = tmp_path / "day.yaml"
    argv = ["data", "schema", str(tmp_path / "day_0.tsv"), "--out", str(out), "--labels", "c1"]
    assert main(argv) in (0, None)
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    spec = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
    info = {
        "spec": spec.to_dict(),
        "schema": dataset.schema.to_list(),
        "raw_form": dataset.raw_form().to_dict(),
        "labels": dataset.manifest["label_columns"],
        "csv_columns": dataset.manifest["csv_columns"],
        "train_rates": {"c1": dataset.positive_rates("train")[0]},
    }
    (tmp_path / "model.json").write_text(json.dumps(info))
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        torch.save(build_model(spec, dataset.schema).state_dict(), tmp_path / f"w{seed}.pt")
        models.append(str(tmp_path / f"model{seed}"))
        mlflow.pyfunc.save_model(
            models[-1],
            python_model=str(REPO / "nas" / "service" / "pyfunc_entry.py"),
            pip_requirements=[],  # not inferred: a model only read here
            artifacts={
                "model": str(tmp_path / "model.json"),
                "weights": str(tmp_path / f"w{seed}.pt"),
            },
        )
    lines = criteo_like_day(rng, 300)
    (tmp_path / "served.tsv").write_text("\n".join(lines) + "\n")
    rows = list(csv.DictReader(lines, fieldnames=info["csv_columns"], delimiter="\t"))
    expected = [
        LoadedModel.from_files(tmp_path / "model.json", tmp_path / f"w{seed}.pt").probabilities(
            rows
        )
        for seed in (0, 1)
    ]
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(runs_with_store(tmp_path)))
    capsys.readouterr()
    assert main(["predict", models[0], "--input", str(tmp_path / "served.tsv"), "--json"]) in (
        0,
        None,
    )
    scored = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["row"]["c5"] for line in scored] == [row["c5"] for row in rows]
    assert [line["probability"] for line in scored] == pytest.approx(
        expected[0]["probability"], abs=1e-6
    )
    argv = ["models", "compare", *models, "--input", str(tmp_path / "served.tsv"), "--json"]
    assert main(argv) in (0, None)
    compared = json.loads(capsys.readouterr().out)
    assert compared["rows"] == 300
    labels = torch.tensor([float(row["c1"]) for row in rows])
    for model, probabilities in zip(compared["labels"]["c1"], expected, strict=True):
        logits = torch.logit(torch.from_numpy(probabilities["probability"]).double())
        want = binary_metrics(labels, logits, info["train_rates"]["c1"])
        assert model["ne"] == pytest.approx(want["ne"], abs=1e-6)

    info |= {"csv_encoding": "cp1252", "csv_decimal": ","}  # as Excel wrote its source
    (tmp_path / "model.json").write_text(json.dumps(info))
    mlflow.pyfunc.save_model(
        str(tmp_path / "excel_model"),
        python_model=str(REPO / "nas" / "service" / "pyfunc_entry.py"),
        pip_requirements=[],
        artifacts={"model": str(tmp_path / "model.json"), "weights": str(tmp_path / "w0.pt")},
    )
    rows[0]["c6"] = "café"  # (an id never seen: the unknown id's score)
    excel = [
        "\t".join(f"{v},0" if k in ("c2", "c3", "c4") and v else v for k, v in row.items())
        for row in rows
    ]
    (tmp_path / "served.tsv.gz").write_bytes(
        gzip.compress(("\n".join(excel) + "\n").encode("cp1252"))
    )
    argv = ["predict", str(tmp_path / "excel_model"), "--input", str(tmp_path / "served.tsv.gz")]
    assert main([*argv, "--out", str(tmp_path / "scored.parquet")]) in (0, None)
    scored = pyarrow.parquet.read_table(tmp_path / "scored.parquet").to_pylist()
    counted = next(i for i, row in enumerate(rows) if row["c2"])
    assert scored[0]["c6"] == "café" and scored[counted]["c2"] == f"{rows[counted]['c2']}.0"
    want = LoadedModel.from_files(tmp_path / "model.json", tmp_path / "w0.pt").probabilities(rows)
    assert [row["probability"] for row in scored] == pytest.approx(want["probability"], abs=1e-6)


def test_integers_named_as_a_category_are_categorical_and_amounts_dense(tmp_path: Path, capsys):
    """Integer columns of hundreds of values: a site code, an app's number and a campaign
    (named as categories of ad logs), a movie and an item (named as items) and a SKU are
    drafted categorical; a count and a price in cents (amounts) dense, their reason saying
    how to make ids of them."""
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = 2000
    frame = pd.DataFrame({
        "click": rng.integers(0, 2, rows),
        "site": rng.integers(0, 300, rows), "app_id": rng.integers(0, 200, rows),
        "Campaign": rng.integers(0, 100, rows), "count": rng.integers(0, 300, rows),
        "price_cents": rng.integers(0, 5000, rows), "movie": rng.integers(0, 900, rows),
        "item": rng.integers(0, 900, rows), "sku": rng.integers(0, 900, rows),
    })  # fmt: skip
    frame.to_parquet(tmp_path / "ads.parquet")
    out = tmp_path / "ads.yaml"
    argv = ["data", "schema", str(tmp_path / "ads.parquet"), "--out", str(out), "--json"]
    assert main(argv) in (0, None)
    fields = kinds(yaml.safe_load(out.read_text()))
    expected = {"site": "categorical", "app_id": "categorical", "Campaign": "categorical",
                "movie": "categorical", "item": "categorical", "sku": "categorical",
                "count": "dense", "price_cents": "dense"}  # fmt: skip
    assert {column: fields[column]["type"] for column in expected} == expected
    said = {c["column"]: c["why"] for c in json.loads(capsys.readouterr().out)["columns"]}
    assert "if they are ids, type: categorical" in said["count"]


@pytest.mark.parametrize("written", ["date", "text", "seconds"])
def test_times_of_whole_days_derive_a_weekday_and_no_hour(tmp_path: Path, written: str) -> None:
    """A key of dates (a day's date as a date, as text, or as the seconds of its midnight):
    its hour is 0 on every row, so the draft derives only its weekday."""
    import datetime

    frame = logs(300).drop(columns=["ts"])
    days = [datetime.date(2020, 9, 1) + datetime.timedelta(days=i % 20) for i in range(300)]
    frame["date"] = {
        "date": days,
        "text": [d.isoformat() for d in days],
        "seconds": [int(datetime.datetime(d.year, d.month, d.day, tzinfo=datetime.UTC)
                        .timestamp()) for d in days],
    }[written]  # fmt: skip
    schema = drafted(tmp_path, frame, "parquet")
    assert schema["keys"]["timestamp"] == "date"
    fields = kinds(schema)
    assert "weekday" in fields and "hour" not in fields


def test_a_draft_declares_the_unit_of_its_times(tmp_path: Path, capsys) -> None:
    """Times in milliseconds (a JavaScript or Kafka log's) are the key, with the source's
    time_unit: ms; prepared, they are the rows' unix seconds. --tz: the hours derived are
    the zone's."""
    frame = logs(300)
    seconds = frame["ts"].to_numpy()
    frame["ts"] = seconds * 1000 + 999
    schema = drafted(tmp_path, frame, "parquet", "--json", "--tz", "Asia/Kolkata")
    assert schema["keys"]["timestamp"] == "ts" and schema["source"]["time_unit"] == "ms"
    assert kinds(schema)["hour"]["tz"] == "Asia/Kolkata" == kinds(schema)["weekday"]["tz"]
    said = {c["column"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert "(in milliseconds)" in said["ts"]["why"]
    dataset, _ = prepare_dataset(str(tmp_path / "drafts" / "team_logs.yaml"), tmp_path / "cache")
    stored = np.empty(len(frame), dtype=np.int64)
    stored[np.asarray(dataset.array("source_row"))] = np.asarray(dataset.array("timestamp"))
    assert np.array_equal(stored, seconds)


def test_headers_no_schema_name_holds_are_read_by_fields_named_after_them(tmp_path: Path) -> None:
    """An export's headers with spaces and signs ("Clicked?", "Event Time", "User ID",
    "Country/Region"): the draft's keys name the columns themselves, its label and fields
    take names made of them (``column:``, ``from:`` the column), and it prepares; a row
    served as `nas data rows` writes it (under the headers) encodes to the stored
    features."""
    import torch

    frame = logs(300)
    frame = frame[["click", "ts", "user_id", "item_id", "site"]].rename(
        columns={
            "click": "Clicked?",
            "ts": "Event Time",
            "user_id": "User ID",
            "site": "Country/Region",
        }  # fmt: skip
    )
    (tmp_path / "data").mkdir()
    frame.to_csv(tmp_path / "data" / "export.csv", index=False)
    out = tmp_path / "export.yaml"
    assert main(["data", "schema", str(tmp_path / "data"), "--out", str(out)]) in (0, None)
    schema = yaml.safe_load(out.read_text())
    assert schema["keys"] == {"timestamp": "Event Time", "user": "User ID"}
    assert schema["labels"] == [{"name": "Clicked", "column": "Clicked?"}]
    fields = kinds(schema)
    assert fields["User_ID"] == {"name": "User_ID", "from": "User ID", "type": "categorical",
                                 "min_freq": 2, "side": "request"}  # fmt: skip
    assert fields["Country_Region"]["from"] == "Country/Region"
    assert fields["hour"]["from"] == "Event Time"
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.label_names == ("Clicked",)
    rows = dataset.raw_rows("test", 20)
    assert {"Event Time", "User ID", "Country/Region"} <= set(rows[0])
    served = dataset.raw_form().features(rows, dataset.schema)
    assert torch.equal(served.categorical, dataset.features("test")[torch.arange(20)].categorical)


def test_codes_grouped_like_thousands_are_ids_not_numbers(tmp_path: Path, capsys) -> None:
    """Codes of one width written in groups (a phone number's 555 123, a customer number's
    1,234,567 quoted) are ids: the draft declares no thousands separator for them, as it
    does for amounts, whose widths vary (1 234, 56 789, 12)."""
    rng = np.random.default_rng(0)
    lines = ["click,phone,amount"]
    for i in range(300):
        amount = f"{int(rng.integers(1, 10**6)):,}".replace(",", " ") if i % 3 else "12"
        lines.append(f"{i % 2},{rng.integers(100, 999)} {rng.integers(100, 999)},{amount}")
    (tmp_path / "logs.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "x.yaml"
    assert main(["data", "schema", str(tmp_path / "logs.csv"), "--out", str(out), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    taken = {c["column"]: c["as"] for c in said["columns"]}
    assert said["thousands"] == " " and taken["phone"] == "categorical"
    assert taken["amount"] == "dense"
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.raw_form().columns["phone"]["type"] == "string"  # (its text, an id)
