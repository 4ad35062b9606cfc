"""A Delta Lake table as a source (`format: delta`), as Databricks, Spark and delta-rs write
one: the rows of the files its log names at a version, each with its partition columns'
values, never those of the files later commits removed (which stay in its folder until a
VACUUM); tables recnas would read wrongly refused. Real tables, written by `deltalake`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from nas.cli import main
from nas.core.errors import ConfigError
from nas.data import prepare_dataset
from nas.data.row_files import RowFiles

SCHEMA = """\
name: {name}
source: {{format: delta, path: {path}{version}}}
labels: [click]
keys: {{user: user_id, timestamp: ts}}
split: {{method: time, valid: 0.1, test: 0.1}}
features:
  - {{name: item_id, type: categorical}}
  - {{name: country, type: categorical}}
  - {{name: price, type: dense}}
"""


def events(rows: int, start: int, seed: int) -> pa.Table:
    """Click logs, each row's time its own (``ts``: ``start`` on), partitioned by country
    (a null country: Hive's default partition; one holding a space and a slash)."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "ts": np.arange(start, start + rows, dtype=np.int64),
            "click": rng.integers(0, 2, rows),
            "user_id": [f"u{i}" for i in rng.integers(0, 30, rows)],
            "item_id": [f"i{i}" for i in rng.integers(0, 20, rows)],
            "price": rng.gamma(2.0, 10.0, rows),
            "country": rng.choice(np.array(["US", "DE", "a b/c", None], dtype=object), rows),
        }
    )


def schema(folder: Path, name: str = "clicks", version: int | None = None) -> Path:
    path = folder / f"{name}.yaml"
    pinned = "" if version is None else f", version: {version}"
    path.write_text(SCHEMA.format(name=name, path="table", version=pinned))
    return path


def rows_of(dataset) -> dict[int, tuple[int, str | None]]:
    """Each prepared row's time, with its label and its country as prepared (raw rows)."""
    out = {}
    labels, times = np.asarray(dataset.label_array()), np.asarray(dataset.array("timestamp"))
    for split in ("train", "valid", "test"):
        order = dataset.split_rows(split)
        rows = dataset.raw_rows(split, len(order))
        for row, label, ts in zip(rows, labels[order], times[order], strict=True):
            out[int(ts)] = (int(label), row["country"] or None)
    return out


def count(dataset) -> int:
    return dataset.manifest["split_ranges"]["test"][1]


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, pa.Table]:
    """A table of two writes, then a DELETE and a compaction: its folder holds the files
    of every version; the rows it holds now, as a table."""
    from deltalake import DeltaTable, write_deltalake

    folder = tmp_path / "table"
    first, second = events(300, 1_700_000_000, 0), events(300, 1_700_000_300, 1)
    write_deltalake(folder, first, partition_by=["country"])
    write_deltalake(folder, second, partition_by=["country"], mode="append")
    DeltaTable(folder).delete("item_id = 'i3' OR item_id = 'i7'")
    DeltaTable(folder).optimize.compact()
    both = pa.concat_tables([first, second])
    kept = [i not in ("i3", "i7") for i in both.column("item_id").to_pylist()]
    return folder, both.filter(pa.array(kept))


def test_a_delta_table_prepares_the_rows_its_log_holds_not_its_folders(tmp_path, table) -> None:
    folder, now = table
    on_disk = list(folder.rglob("*.parquet"))
    dataset, _ = prepare_dataset(str(schema(tmp_path)), tmp_path / "cache")
    assert count(dataset) == now.num_rows < 600
    assert len(on_disk) > dataset.manifest["source"]["files"]  # (removed files kept)
    expected = {
        ts: (click, country)
        for ts, click, country in zip(
            *(now.column(c).to_pylist() for c in ("ts", "click", "country")), strict=True
        )
    }
    assert rows_of(dataset) == expected  # the partition column as the log records it
    from deltalake import DeltaTable

    latest = DeltaTable(folder).version()
    assert dataset.manifest["source"]["delta_version"] == latest > 1
    # a version of the table: its first write's rows
    first, _ = prepare_dataset(str(schema(tmp_path, "first", version=0)), tmp_path / "cache")
    assert sorted(rows_of(first)) == list(range(1_700_000_000, 1_700_000_300))
    with pytest.raises(ConfigError, match=f"has no version 9; its latest is {latest}"):
        prepare_dataset(str(schema(tmp_path, "later", version=9)), tmp_path / "cache")


def test_a_delta_table_as_it_was_at_a_moment(tmp_path) -> None:
    """``as_of``: its last version then (a date-time, UTC unless it names its zone)."""
    import datetime
    import time

    from deltalake import write_deltalake

    folder = tmp_path / "table"
    write_deltalake(folder, events(50, 1_700_000_000, 4))
    time.sleep(1.1)
    between = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    time.sleep(1.1)
    write_deltalake(folder, events(70, 1_700_000_050, 5), mode="append")
    path = schema(tmp_path)
    path.write_text(path.read_text().replace("path: table}", f'path: table, as_of: "{between}"}}'))
    then, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert count(then) == 50 and then.manifest["source"]["delta_version"] == 0
    path.write_text(path.read_text().replace(str(between), "2001-01-01"))
    with pytest.raises(ConfigError, match="has no version as of 2001-01-01T00:00:00"):
        prepare_dataset(str(path), tmp_path / "cache")
    path.write_text(path.read_text().replace('as_of: "2001-01-01"', "as_of: 5, version: 0"))
    with pytest.raises(ConfigError, match="give version or as_of"):
        prepare_dataset(str(path), tmp_path / "cache")


def test_files_named_inside_a_delta_table_are_refused_by_every_reader(tmp_path, table, capsys):
    folder, now = table
    path = schema(tmp_path)
    globbed = '{format: parquet, path: "table/**/*.parquet"}'
    path.write_text(path.read_text().replace("{format: delta, path: table}", globbed))
    with pytest.raises(ConfigError, match='declare format: delta, path: "table"'):
        prepare_dataset(str(path), tmp_path / "cache")
    for argv in (
        ["data", "schema", str(folder / "country=US"), "--out", str(tmp_path / "x.yaml")],
        ["predict", "models:/m/1", "--input", str(folder / "country=US")],
    ):
        assert main(argv) == 2
        said = " ".join(capsys.readouterr().err.split())
        assert f"is in the Delta table {folder}" in said and "name its folder" in said
    # the table itself, served: its current rows, partitions and all
    served = [row for batch in RowFiles(folder).batches() for row in batch.rows]
    assert sorted((r["ts"], r["country"]) for r in served) == sorted(
        zip(now.column("ts").to_pylist(), now.column("country").to_pylist(), strict=True)
    )


def test_a_delta_table_is_drafted_as_one(tmp_path, table) -> None:
    folder, now = table
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(folder), "--out", str(out)]) == 0
    drafted = yaml.safe_load(out.read_text())
    assert drafted["source"] == {"format": "delta", "path": "table"}
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert count(dataset) == now.num_rows


Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def mark_deleted(folder: Path, gone: list[int]) -> None:
    """A commit marking rows (by their place) of the table's one file deleted with an inline
    deletion vector, as Databricks' DELETE writes one (delta-rs reads them, writes none):
    the Delta protocol's RoaringBitmapArray (its magic number, one 32-bit portable Roaring
    bitmap of one array container), Z85-encoded."""
    import struct
    import time

    gone = sorted(gone)
    roaring = struct.pack("<IIHHI", 12346, 1, 0, len(gone) - 1, 16)
    roaring += struct.pack(f"<{len(gone)}H", *gone)
    data = struct.pack("<iqi", 1681511377, 1, 0) + roaring
    padded = data + b"\0" * (-len(data) % 4)
    words = [int.from_bytes(padded[i : i + 4], "big") for i in range(0, len(padded), 4)]
    encoded = "".join(Z85[(w // 85**k) % 85] for w in words for k in range(4, -1, -1))
    log = folder / "_delta_log"
    commits = sorted(log.glob("*.json"))
    lines = commits[0].read_text().splitlines()
    (add,) = [json.loads(line)["add"] for line in lines if '"add"' in line]
    now = int(time.time() * 1000)
    vector = {"storageType": "i", "pathOrInlineDv": encoded, "sizeInBytes": len(data),
              "cardinality": len(gone)}  # fmt: skip
    actions = [
        {"remove": {"path": add["path"], "deletionTimestamp": now, "dataChange": True}},
        {"add": {**add, "deletionVector": vector, "modificationTime": now}},
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}},
    ]
    name = f"{len(commits):020d}.json"
    (log / name).write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_rows_a_delete_marked_gone_in_a_file_that_stays_are_not_read(tmp_path, capsys) -> None:
    """Deletion vectors (Databricks' default): a DELETE marks rows gone inside the file.
    Read from a moment on (``source.where``), the row groups whose times are all before it
    are passed by, and each row read keeps its place among the rows the vector keeps."""
    from deltalake import DeltaTable, WriterProperties, write_deltalake

    rows = events(100, 1_700_000_000, 2)
    folder = tmp_path / "table"
    groups = WriterProperties(max_row_group_size=10)  # (each group its own times)
    write_deltalake(
        folder,
        rows,
        configuration={"delta.enableDeletionVectors": "true"},
        writer_properties=groups,
    )
    gone = [0, 5, 17, 64, 99]
    mark_deleted(folder, gone)
    assert DeltaTable(folder).version() == 1
    kept = [t for i, t in enumerate(rows.column("ts").to_pylist()) if i not in gone]
    dataset, _ = prepare_dataset(str(schema(tmp_path)), tmp_path / "cache")
    assert sorted(rows_of(dataset)) == kept
    served = [row["ts"] for batch in RowFiles(folder).batches(7) for row in batch.rows]
    assert served == kept  # (batches of 7 rows: a vector's slices)
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(folder), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(out)
    drafted, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert count(drafted) == len(kept)
    late = schema(tmp_path, "late")
    late.write_text(
        late.read_text().replace("path: table}", "path: table, where: {ts: {from: 1700000045}}}")
    )
    dataset, _ = prepare_dataset(str(late), tmp_path / "cache")
    places = sorted(np.asarray(dataset.array("source_row")).tolist())
    assert places == [i for i, t in enumerate(kept) if t >= 1_700_000_045]


def rename_columns(folder: Path, renamed: dict[str, str], dropped: str) -> None:
    """A commit renaming columns and dropping one, as Spark's ALTER TABLE writes one on a
    table with column mapping: a new schema whose fields keep their physical names (the
    files stay as they are)."""
    import time

    log = folder / "_delta_log"
    commits = sorted(log.glob("*.json"))
    actions = [json.loads(line) for line in commits[-1].read_text().splitlines()]
    (meta,) = [a["metaData"] for a in actions if "metaData" in a]
    schema = json.loads(meta["schemaString"])
    schema["fields"] = [
        {**f, "name": renamed.get(f["name"], f["name"])}
        for f in schema["fields"]
        if f["name"] != dropped
    ]
    meta = {**meta, "schemaString": json.dumps(schema)}
    now = int(time.time() * 1000)
    lines = [{"metaData": meta}, {"commitInfo": {"timestamp": now, "operation": "RENAME"}}]
    (log / f"{len(commits):020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def test_a_table_whose_columns_are_stored_under_other_names_reads_by_its_own(tmp_path) -> None:
    """Column mapping (Databricks turns it on to rename or drop a column): the files hold
    physical names (col-5f2a...), their objects' fields too; read by the table's names,
    a column renamed since by its new name, a dropped one not at all."""
    from deltalake import write_deltalake

    rows = events(200, 1_700_000_000, 3)
    device = [{"os": os, "model": f"m{i % 3}"} for i, os in enumerate(["ios", "android"] * 100)]
    rows = rows.append_column("device", pa.array(device))
    folder = tmp_path / "table"
    config = {"delta.columnMapping.mode": "name"}
    write_deltalake(folder, rows, partition_by=["country"], configuration=config)
    rename_columns(folder, {"item_id": "item"}, dropped="price")
    path = schema(tmp_path)
    path.write_text(
        path.read_text()
        .replace("{name: item_id,", "{name: item,")
        .replace("{name: price, type: dense}", "{name: device.os, type: categorical}")
    )
    dataset, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert count(dataset) == 200
    served = [row for batch in RowFiles(folder).batches() for row in batch.rows]
    assert "price" not in served[0] and not any(c.startswith("col-") for c in served[0])
    by_time = {row["ts"]: row for row in served}
    for ts, item, country, os in zip(
        *(rows.column(c).to_pylist() for c in ("ts", "item_id", "country")),
        (d["os"] for d in device),
        strict=True,
    ):
        assert (by_time[ts]["item"], by_time[ts]["country"], by_time[ts]["device"]["os"]) == (
            item, country, os
        )  # fmt: skip
    assert {"item", "country", "device.os"} <= set(dataset.raw_rows("train", 1)[0])
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(folder), "--out", str(out)]) == 0
    drafted = out.read_text()
    assert "device.os" in drafted and "item" in drafted and "col-" not in drafted
    # a writer that kept the table's own names in the files (delta-rs with table features)
    both = {**config, "delta.enableDeletionVectors": "true"}
    write_deltalake(tmp_path / "own", rows, configuration=both)
    served = [row for batch in RowFiles(tmp_path / "own").batches() for row in batch.rows]
    assert [row["ts"] for row in served] == rows.column("ts").to_pylist()


def test_tables_allowing_deletion_vectors_read_and_others_are_refused(tmp_path) -> None:
    from deltalake import DeltaTable, write_deltalake

    rows = events(100, 1_700_000_000, 2)
    # deletion vectors allowed (Databricks' default) but none in use: read
    other = tmp_path / "dv"
    other.mkdir()
    write_deltalake(other / "table", rows, configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable(other / "table").delete("item_id = 'i3'")
    dataset, _ = prepare_dataset(str(schema(other)), other / "cache")
    assert count(dataset) == sum(i != "i3" for i in rows.column("item_id").to_pylist())
    # a file outside the table's folder (a shallow clone's): refused, nothing written
    elsewhere = tmp_path / "elsewhere"
    write_deltalake(elsewhere, rows)
    write_deltalake(tmp_path / "table", rows)
    log = tmp_path / "table" / "_delta_log"
    (add,) = [
        json.loads(line)["add"]
        for line in (elsewhere / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
        if '"add"' in line
    ]
    add["path"] = (elsewhere / add["path"]).as_uri()
    (log / f"{1:020d}.json").write_text(json.dumps({"add": add}) + "\n")
    with pytest.raises(ConfigError, match="holds a file outside its folder"):
        prepare_dataset(str(schema(tmp_path)), tmp_path / "cache")
    assert not (tmp_path / "cache" / "clicks").exists()
    # not a table
    (tmp_path / "plain" / "table").mkdir(parents=True)
    with pytest.raises(ConfigError, match="is not a Delta table"):
        prepare_dataset(str(schema(tmp_path / "plain")), tmp_path / "cache")
