"""An Apache Iceberg table as a source (`format: iceberg`), read from its folder without a
catalog, as Spark, Trino and PyIceberg write one: the rows of the files its current (or a
named) snapshot holds, never those of the files later snapshots removed; columns by field
id (a renamed column by its new name, a dropped one not at all); a table copied from where
it was written reads the same. Real tables, written by `pyiceberg` into a SQLite catalog."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from nas.cli import main
from nas.core.errors import ConfigError
from nas.data import prepare_dataset
from nas.data.iceberg_table import current_metadata
from nas.data.row_files import RowFiles
from tests.data.test_delta_table import events

SCHEMA = """\
name: {name}
source: {{format: iceberg, path: {path}{version}}}
labels: [click]
keys: {{user: user_id, timestamp: ts}}
split: {{method: time, valid: 0.1, test: 0.1}}
features:
  - {{name: item, type: categorical}}
  - {{name: country, type: categorical}}
"""


@pytest.fixture
def table(tmp_path: Path):
    """Two appends, a DELETE (copy-on-write: files rewritten), item_id renamed to item and
    price dropped; the table's folder, its first snapshot's id, and its rows now."""
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("local", uri=f"sqlite:///{warehouse}/catalog.db",
                         warehouse=warehouse.as_uri())  # fmt: skip
    catalog.create_namespace("db")
    first, second = events(300, 1_700_000_000, 0), events(300, 1_700_000_300, 1)
    created = catalog.create_table("db.events", schema=first.schema)
    created.append(first)
    snapshot = created.metadata.current_snapshot_id
    time.sleep(1.1)  # (as_of: a moment between the two appends, to the second)
    created.append(second)
    created.delete("item_id == 'i3' or item_id == 'i7'")
    with created.update_schema() as update:
        update.rename_column("item_id", "item")
        update.delete_column("price")
    now = catalog.load_table("db.events").scan().to_arrow()
    folder = Path(created.metadata.location.removeprefix("file://"))
    return folder, snapshot, now


def schema(folder: Path, table: Path, name: str = "clicks", version: int | None = None) -> Path:
    path = folder / f"{name}.yaml"
    pinned = "" if version is None else f", version: {version}"
    path.write_text(SCHEMA.format(name=name, path=table, version=pinned))
    return path


def by_time(rows: list[dict]) -> dict[int, tuple]:
    return {row["ts"]: (row["item"], row["country"]) for row in rows}


def test_an_iceberg_table_reads_the_rows_of_its_snapshot_by_its_names(tmp_path, table) -> None:
    folder, snapshot, now = table
    assert len(list(folder.rglob("*.parquet"))) > 2  # (the files the DELETE rewrote, kept)
    dataset, _ = prepare_dataset(str(schema(tmp_path, folder)), tmp_path / "cache")
    assert dataset.manifest["split_ranges"]["test"][1] == now.num_rows < 600
    served = [row for batch in RowFiles(folder).batches() for row in batch.rows]
    assert "price" not in served[0] and "item_id" not in served[0]
    assert by_time(served) == by_time(now.to_pylist())
    assert dataset.manifest["source"]["iceberg_snapshot"] != snapshot
    # its first snapshot: the first append's rows, read by today's names
    first, _ = prepare_dataset(str(schema(tmp_path, folder, "first", snapshot)), tmp_path / "cache")
    assert first.manifest["split_ranges"]["test"][1] == 300
    # as it was a moment after its first snapshot: that snapshot's rows
    from pyiceberg.table import StaticTable

    assert first.manifest["source"]["iceberg_snapshot"] == snapshot
    log = StaticTable.from_metadata(str(current_metadata(folder))).metadata.snapshot_log
    moment = next(e.timestamp_ms for e in log if e.snapshot_id == snapshot) // 1000 + 1
    path = schema(tmp_path, folder, "then")
    path.write_text(path.read_text().replace("}", f", as_of: {moment}}}", 1))
    then, _ = prepare_dataset(str(path), tmp_path / "cache")
    assert then.manifest["source"]["iceberg_snapshot"] == snapshot
    path.write_text(path.read_text().replace(f"as_of: {moment}", "as_of: 2001-01-01"))
    with pytest.raises(ConfigError, match="has no snapshot as of 2001-01-01"):
        prepare_dataset(str(path), tmp_path / "cache")
    with pytest.raises(ConfigError, match="has no snapshot 12345"):
        prepare_dataset(str(schema(tmp_path, folder, "none", 12345)), tmp_path / "cache")
    # copied from where it was written (as from object storage): the same table
    copy = tmp_path / "copy" / "events"
    shutil.copytree(folder, copy)
    moved = [row for batch in RowFiles(copy).batches() for row in batch.rows]
    assert by_time(moved) == by_time(served)


def test_files_in_an_iceberg_table_are_refused_and_its_folder_is_drafted(
    tmp_path, table, capsys
) -> None:
    folder, _, now = table
    path = schema(tmp_path, folder)
    path.write_text(
        path.read_text().replace(f"{{format: iceberg, path: {folder}}}",
                                 f'{{format: parquet, path: "{folder}/data/*.parquet"}}')
    )  # fmt: skip
    with pytest.raises(ConfigError, match="is in the Iceberg table .* declare format: iceberg"):
        prepare_dataset(str(path), tmp_path / "cache")
    assert main(["predict", "models:/m/1", "--input", str(folder / "data")]) == 2
    assert "is in the Iceberg table" in " ".join(capsys.readouterr().err.split())
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(folder), "--out", str(out)]) == 0
    drafted = yaml.safe_load(out.read_text())
    assert drafted["source"]["format"] == "iceberg" and "price" not in out.read_text()
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.manifest["split_ranges"]["test"][1] == now.num_rows


def commit_deletes(table, deletes: pa.Table, content) -> None:
    """Delete files committed as Spark's merge-on-read writes them: a Parquet file of
    position deletes (``file_path``, ``pos``) or of equality deletes, in a manifest of
    deletes. (PyIceberg writes none itself: its own writer of manifests, made to say
    ``deletes``.)"""
    from unittest import mock

    from pyiceberg.manifest import DataFile, FileFormat, ManifestContent, ManifestWriterV2
    from pyiceberg.typedef import Record

    path = (
        Path(table.metadata.location.removeprefix("file://"))
        / "data"
        / f"deletes-{content}.parquet"
    )
    pq.write_table(deletes, path)
    ids = [1] if "equality" in str(content).lower() else None
    file = DataFile.from_args(
        content=content, file_path=path.as_uri(), file_format=FileFormat.PARQUET,
        partition=Record(), record_count=deletes.num_rows,
        file_size_in_bytes=path.stat().st_size, equality_ids=ids,
    )  # fmt: skip
    file.spec_id = 0
    with (
        mock.patch.object(ManifestWriterV2, "content", lambda self: ManifestContent.DELETES),
        table.transaction() as transaction,
        transaction.update_snapshot().fast_append() as append,
    ):
        append.append_data_file(file)


def test_rows_a_merge_on_read_delete_marked_gone_are_passed_by(tmp_path, table, capsys) -> None:
    """Position delete files (a merge-on-read DELETE's, Spark's): the rows they mark in
    each data file, some past its end, are passed by in prepare and in `nas predict`'s
    reading of the table, as pyiceberg's own scan passes them by; equality delete files
    are refused, naming what to do."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import DataFileContent

    folder, _, before = table
    catalog = SqlCatalog("local", uri=f"sqlite:///{folder.parent.parent}/catalog.db",
                         warehouse=folder.parent.parent.as_uri())  # fmt: skip
    events = catalog.load_table("db.events")
    files = sorted(task.file.file_path for task in events.scan().plan_files())
    rng = np.random.default_rng(3)
    marked = [(f, int(p)) for f in files[:2] for p in rng.choice(400, 40, replace=False)]
    fields = [
        pa.field("file_path", pa.string(), False, {"PARQUET:field_id": "2147483546"}),
        pa.field("pos", pa.int64(), False, {"PARQUET:field_id": "2147483545"}),
    ]
    deletes = pa.table([[f for f, _ in marked], [p for _, p in marked]], schema=pa.schema(fields))
    commit_deletes(events, deletes, DataFileContent.POSITION_DELETES)
    now = catalog.load_table("db.events").scan().to_arrow()
    assert 0 < before.num_rows - now.num_rows < len(marked)  # (some marked past a file's end)
    dataset, _ = prepare_dataset(str(schema(tmp_path, folder, "kept")), tmp_path / "cache")
    assert dataset.manifest["split_ranges"]["test"][1] == now.num_rows
    served = [row for batch in RowFiles(folder).batches() for row in batch.rows]
    assert by_time(served) == by_time(now.to_pylist())
    equal = pa.table({"user_id": pa.array(["u3"])})
    commit_deletes(catalog.load_table("db.events"), equal, DataFileContent.EQUALITY_DELETES)
    with pytest.raises(ConfigError, match="equality delete files, as Flink's upserts"):
        prepare_dataset(str(schema(tmp_path, folder, "equal")), tmp_path / "cache")
