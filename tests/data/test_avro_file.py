"""Avro files read as Arrow (``nas.data.avro_file``): each Avro type as its Arrow type, the
fields asked for only, every codec, and a file that cannot be read said so."""

from __future__ import annotations

import datetime
import decimal
import io
import subprocess
import sys
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import fastavro
import psutil
import pyarrow as pa
import pytest

from nas.core.errors import ConfigError
from nas.data.row_files import ColumnarFile, RowFiles

UTC = datetime.UTC
GEO = {
    "type": "record",
    "name": "Geo",
    "fields": [{"name": "country", "type": "string"}, {"name": "zip", "type": ["null", "int"]}],
}
# (field, its Avro type, a value fastavro writes, the Arrow type, the value Arrow reads)
TYPES = [
    ("flag", "boolean", True, pa.bool_(), True),
    ("small", "int", -3, pa.int32(), -3),
    ("big", "long", 2**40, pa.int64(), 2**40),
    ("ratio", "float", 0.5, pa.float32(), 0.5),
    ("price", ["null", "double"], None, pa.float64(), None),
    ("blob", "bytes", b"\x00\xff", pa.binary(), b"\x00\xff"),
    ("site", ["null", "string"], "a.com", pa.string(), "a.com"),
    ("device", {"type": "enum", "name": "Device", "symbols": ["ios", "web"]}, "web",
     pa.string(), "web"),
    ("hash", {"type": "fixed", "name": "Hash", "size": 2}, b"ab", pa.binary(), b"ab"),
    ("geo", GEO, {"country": "DE", "zip": None},
     pa.struct([("country", pa.string()), ("zip", pa.int32())]), {"country": "DE", "zip": None}),
    ("home", ["null", "Geo"], {"country": "FR", "zip": 75001},
     pa.struct([("country", pa.string()), ("zip", pa.int32())]),
     {"country": "FR", "zip": 75001}),
    ("tags", {"type": "array", "items": "string"}, ["x", "y"], pa.list_(pa.string()), ["x", "y"]),
    ("counts", {"type": "map", "values": "long"}, {"a": 1}, pa.map_(pa.string(), pa.int64()),
     [("a", 1)]),
    ("mixed", ["null", "string", "long", "boolean"], 7, pa.string(), "7"),
    ("day", {"type": "int", "logicalType": "date"}, datetime.date(2024, 5, 7), pa.date32(),
     datetime.date(2024, 5, 7)),
    ("at", {"type": "long", "logicalType": "timestamp-millis"},
     datetime.datetime(2024, 5, 7, 12, 30, tzinfo=UTC), pa.timestamp("ms", "UTC"),
     datetime.datetime(2024, 5, 7, 12, 30, tzinfo=UTC)),
    ("at_us", {"type": "long", "logicalType": "timestamp-micros"},
     datetime.datetime(2024, 5, 7, 12, 30, 0, 5, tzinfo=UTC), pa.timestamp("us", "UTC"),
     datetime.datetime(2024, 5, 7, 12, 30, 0, 5, tzinfo=UTC)),
    ("local", {"type": "long", "logicalType": "local-timestamp-millis"},
     datetime.datetime(2024, 5, 7, 14, 30), pa.timestamp("ms"),
     datetime.datetime(2024, 5, 7, 14, 30)),
    ("clock", {"type": "int", "logicalType": "time-millis"}, datetime.time(9, 15), pa.time32("ms"),
     datetime.time(9, 15)),
    ("amount", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
     decimal.Decimal("3.14"), pa.decimal128(10, 2), decimal.Decimal("3.14")),
    ("request", {"type": "string", "logicalType": "uuid"},
     uuid.UUID("12345678-1234-5678-1234-567812345678"), pa.string(),
     "12345678-1234-5678-1234-567812345678"),
]  # fmt: skip


def write(path: Path, fields: list, rows: list[dict], codec: str = "null", block: int = 16_000):
    schema = {"type": "record", "name": "Row", "namespace": "team", "fields": fields}
    with path.open("wb") as file:
        fastavro.writer(file, fastavro.parse_schema(schema), rows, codec=codec, sync_interval=block)


def test_each_avro_type_reads_as_its_arrow_type_and_value(tmp_path: Path) -> None:
    """Every Avro type a team's writer uses, named types used again included, read as the
    Arrow type and value ``avro_file`` documents; the fields asked for only (``home`` uses
    the record ``Geo`` that the field left out defines), in batches across blocks."""
    path = tmp_path / "all.avro"
    fields = [{"name": name, "type": kind} for name, kind, *_ in TYPES]
    rows = [{name: value for name, _, value, *_ in TYPES} for _ in range(300)]
    write(path, fields, rows, block=512)
    file = ColumnarFile(path)
    assert file.rows == 300 and file.groups > 3
    assert [(f.name, f.type) for f in file.schema] == [(n, kind) for n, _, _, kind, _ in TYPES]
    (batch,) = list(file.batches(1000))
    assert batch.schema == file.schema
    for name, *_, want in TYPES:
        assert batch.column(name).to_pylist() == [want] * 300, name
    asked = ["request", "home", "mixed"]
    read = list(file.batches(128, asked))
    assert [b.num_rows for b in read] == [128, 128, 44]
    assert all(b.schema.names == asked for b in read)
    table = pa.Table.from_batches(read)
    assert table.column("home").to_pylist() == [{"country": "FR", "zip": 75001}] * 300
    assert table.column("request").to_pylist()[0] == "12345678-1234-5678-1234-567812345678"


def test_chunks_decoded_in_other_processes_are_the_rows_decoded_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of many blocks is decoded in chunks by processes of their own: the same rows
    in the same order and batches as one process decodes, for every column or a few, every
    block or some (apart in the file); a damaged block is named from there as here, and
    where those processes die or cannot start, the chunks are decoded here."""
    from nas.data import avro_file

    path = tmp_path / "logs.avro"
    fields = [{"name": name, "type": kind} for name, kind, *_ in TYPES]
    rows = [{**{name: value for name, _, value, *_ in TYPES}, "big": i} for i in range(3000)]
    write(path, fields, rows, "deflate", block=2048)
    file = avro_file.AvroFile(path)
    assert file.groups > 20
    monkeypatch.setattr(avro_file, "CHUNK_ROWS", 97)  # blocks of about 40 rows: 3 a chunk
    reads = [(1000, None, None), (128, ["mixed", "big", "home"], None)]
    reads.append((50, ["big", "request"], [0, 1, 2, 7, 8, 15, 16, 17, file.groups - 1]))
    monkeypatch.setattr(avro_file, "_decoders", [])  # (processes of its own)
    seen = {}
    for processes in (1, 2):
        monkeypatch.setattr(avro_file, "workers", lambda processes=processes: processes)
        seen[processes] = [list(file.batches(*read)) for read in reads]
    assert avro_file._pool()._processes, "the chunks were decoded in other processes"
    monkeypatch.chdir(tmp_path)  # a file named relative to a folder changed to since
    named = avro_file.AvroFile(Path("logs.avro"))
    assert pa.Table.from_batches(named.batches(1000)).equals(pa.Table.from_batches(seen[2][0]))
    assert avro_file._pool() is not None, "the processes found the file"
    for one, two in zip(seen[1], seen[2], strict=True):
        assert [b.num_rows for b in one] == [b.num_rows for b in two]
        assert all(a.equals(b) for a, b in zip(one, two, strict=True))
    whole, _, some = seen[2]
    assert [b.num_rows for b in whole] == [1000, 1000, 1000]
    assert pa.Table.from_batches(whole).column("big").to_pylist() == list(range(3000))
    blocks = [b[2] for b in file._blocks]
    starts = [sum(blocks[:i]) for i in range(len(blocks) + 1)]
    wanted = [n for i in reads[2][2] for n in range(starts[i], starts[i + 1])]
    assert pa.Table.from_batches(some).column("big").to_pylist() == wanted
    data = path.read_bytes()  # a block past the first chunk, damaged
    offset, size, _ = file._blocks[10]
    bad = data[: offset + 8] + bytes(b ^ 0x5A for b in data[offset + 8 : offset + size - 16])
    (tmp_path / "bad.avro").write_bytes(bad + data[offset + size - 16 :])
    with pytest.raises(pa.ArrowInvalid, match="a damaged or cut-short Avro file"):
        list(avro_file.AvroFile(tmp_path / "bad.avro").batches(1000))
    # decoding processes killed mid-read (the kernel's OOM killer): the rest of the read is
    # decoded here, the same rows, and so are later reads
    reading = file.batches(40)
    first = next(reading)
    for process in list(avro_file._pool()._processes.values()):
        process.kill()
    rest = pa.Table.from_batches([first, *reading])
    assert rest.equals(pa.Table.from_batches(whole)) and avro_file._pool() is None
    # processes that cannot be started (a limit on the user's processes): the same
    monkeypatch.setattr(avro_file, "_decoders", [])
    monkeypatch.setattr(ProcessPoolExecutor, "submit", refused)
    assert pa.Table.from_batches(file.batches(1000)).equals(rest)
    assert avro_file._pool() is None
    # a command that read so ends quietly (the processes ended before the interpreter is)
    done = subprocess.run(
        [sys.executable, "-c", ENDS_QUIETLY, str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == "3000\n" and not done.stderr, done.stderr
    # and one killed mid-read leaves none of them behind
    command = [sys.executable, "-c", KILLED_READING, str(path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as reader:
        decoding = [psutil.Process(int(pid)) for pid in reader.stdout.readline().split()]
        assert len(decoding) == 2
        reader.kill()
    _, alive = psutil.wait_procs(decoding, timeout=10)
    assert not alive, [p.cmdline() for p in alive]


KILLED_READING = """
import sys, time
from pathlib import Path
from nas.data import avro_file
avro_file.CHUNK_ROWS, avro_file.workers = 97, lambda: 2
next(avro_file.AvroFile(Path(sys.argv[1])).batches(40))
print(*avro_file._pool()._processes, flush=True)
time.sleep(600)
"""
ENDS_QUIETLY = """
import sys
from pathlib import Path
from nas.data import avro_file
avro_file.CHUNK_ROWS, avro_file.workers = 97, lambda: 2
print(sum(b.num_rows for b in avro_file.AvroFile(Path(sys.argv[1])).batches(1000)))
"""


def refused(*args, **kwargs):
    raise BlockingIOError(11, "Resource temporarily unavailable")


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard", "bzip2", "xz"])
def test_every_codec_reads_the_same_rows(tmp_path: Path, codec: str) -> None:
    path = tmp_path / f"{codec}.avro"
    rows = [{"site": f"s{i % 7}", "n": i} for i in range(1000)]
    write(path, [{"name": "site", "type": "string"}, {"name": "n", "type": "long"}], rows, codec)
    assert [row for b in RowFiles(path).batches() for row in b.rows] == rows


def test_a_file_that_cannot_be_read_as_a_table_is_refused_naming_why(tmp_path: Path) -> None:
    """A record that holds itself (a linked list), values that are not records, a damaged
    block, a file cut short, bytes that are not Avro's: ``ConfigError`` naming the file and
    what is wrong, never a traceback of fastavro's."""
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "id", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
    }
    write(tmp_path / "list.avro", [{"name": "head", "type": node}], [{"head": {"id": 1}}])
    with io.BytesIO() as buffer:
        fastavro.writer(buffer, fastavro.parse_schema("string"), ["a", "b"])
        (tmp_path / "strings.avro").write_bytes(buffer.getvalue())
    rows = [{"site": f"s{i}", "n": i} for i in range(2000)]
    fields = [{"name": "site", "type": "string"}, {"name": "n", "type": "long"}]
    write(tmp_path / "good.avro", fields, rows, "deflate")
    data = (tmp_path / "good.avro").read_bytes()
    middle = len(data) // 2
    damaged = data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 64])
    (tmp_path / "damaged.avro").write_bytes(damaged + data[middle + 64 :])
    (tmp_path / "cut.avro").write_bytes(data[: len(data) - 100])
    (tmp_path / "header.avro").write_bytes(data[:20])
    (tmp_path / "text.avro").write_text("site,n\na,1\n")  # (a CSV file misnamed)
    for name, words in [
        ("list.avro", "its record team.Node holds itself"),
        ("strings.avro", 'its values are "string", not records of fields'),
        ("damaged.avro", "a damaged or cut-short Avro file"),
        ("cut.avro", "a damaged or cut-short Avro file"),
        ("header.avro", "a damaged or cut-short Avro file"),
        ("text.avro", "its first bytes are not an Avro file's"),
    ]:
        with pytest.raises(ConfigError) as caught:
            list(RowFiles(tmp_path / name).batches())
        assert f"{name}: not readable as Avro" in str(caught.value), name
        assert words in str(caught.value), (name, str(caught.value))


def test_a_draft_reads_any_avro_columns_and_is_written_where_its_files_are(tmp_path: Path):
    """`nas data schema` of Avro files of odd columns (a map of nulls, which Arrow's cast
    to its own type broke: "array slice would exceed array length"), its draft written in
    the files' own folder, whose path, ``**/*.avro``, YAML took for an alias: the draft is
    valid YAML, and it prepares."""
    from nas.cli import main
    from nas.data import prepare_dataset

    fields = [
        {"name": "click", "type": "int"},
        {"name": "site", "type": ["null", "string"]},
        {"name": "nothing", "type": {"type": "map", "values": "null"}},
    ]
    rows = [{"click": i % 2, "site": f"s{i % 5}", "nothing": {"k": None}} for i in range(400)]
    write(tmp_path / "part-0.avro", fields, rows)
    write(tmp_path / "part-1.avro", fields, rows)
    out = tmp_path / "draft.yaml"
    assert main(["data", "schema", str(tmp_path), "--out", str(out)]) == 0
    assert 'path: "**/*.avro"' in out.read_text()
    dataset, _ = prepare_dataset(str(out), tmp_path / "cache")
    assert dataset.manifest["rows"] == 800
