"""Avro object container files (``.avro``, as Kafka Connect, Spark and Hive write them) read
as Arrow, the way Parquet and ORC are: the header's schema as Arrow's types, the rows counted
by blocks, and the rows of some fields in record batches.

Arrow has no Avro reader; fastavro decodes the records (in C), only the fields asked for
(an Avro reader schema of those fields: the others are skipped, not built), and Arrow
builds the batches from them. Polars reads Avro faster, but is a 170 MB install, panics on
Avro's maps and reads none of the zstandard, bzip2 or xz codecs; fastavro reads every codec
(snappy through cramjam, zstandard through backports.zstd) and every type.

Each Avro type's Arrow type (``arrow_type``): the primitives as themselves (``int``
int32, ``long`` int64, ``float`` float32, ``bytes`` and ``fixed`` binary, an ``enum``
text); a ``record`` a struct; an ``array`` a list; a ``map`` a map of text keys; a union
with ``null`` its other type, nullable; a union of several other types text, each value as
JSON writes it (as a JSON lines column that mixes types is read). Logical types: ``date``
date32; ``time-millis``/``-micros`` time32/time64; ``timestamp-millis``/``-micros``/``-nanos``
timestamps in UTC; ``local-timestamp-*`` timestamps without a zone; ``decimal`` decimal128
(decimal256 past 38 digits); ``uuid`` text.

Decoding is fastavro's Python objects, one core's work (about 25,000 rows/s of a click log's
rows with a history), where Arrow reads Parquet on every core. So a read of many blocks is
cut into chunks of whole blocks (``CHUNK_ROWS`` rows or more) that processes of their own
decode on every core this process may use (``workers``): each reads the file's header and
its chunk's blocks as an Avro file of their own and sends back Arrow's table, in order. A
read of one chunk, or on one core, is decoded here, and so is every chunk once processes
cannot be started or have died.

A damaged file, a codec that is not installed, a schema of no records: ``pyarrow.ArrowInvalid``
naming what is wrong, as Arrow's readers of Parquet and ORC raise, so every reader of a
team's files handles them alike.
"""

from __future__ import annotations

import functools
import io
import json
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nas.core.processes import end_with_parent

MAGIC = b"Obj\x01"  # an object container file's first bytes
# The rows a process decodes at a time, in whole blocks: enough that sending a chunk's table
# back costs little beside its decoding (about 3 s of one core for a click log's rows).
CHUNK_ROWS = 65_536
# Avro's primitive types: Arrow's (by their name: pyarrow is imported when a file is read)
PRIMITIVES = {
    "null": "null",
    "boolean": "bool_",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "binary",
    "string": "string",
}
TIMESTAMPS = {
    "timestamp-millis": ("ms", "UTC"),
    "timestamp-micros": ("us", "UTC"),
    "timestamp-nanos": ("ns", "UTC"),
    "local-timestamp-millis": ("ms", None),
    "local-timestamp-micros": ("us", None),
    "local-timestamp-nanos": ("ns", None),
}


class AvroFile:
    """An Avro file's schema (``schema``: Arrow's), its rows and its number of blocks
    (``groups``), read block by block."""

    def __init__(self, path: Path):
        import fastavro
        import pyarrow as pa

        self.path = path
        with _as_arrow_errors(), path.open("rb") as file:
            if not is_avro(file.read(len(MAGIC))):
                raise pa.ArrowInvalid("its first bytes are not an Avro file's")
            file.seek(0)
            reader = fastavro.block_reader(file)  # (reads the header)
            self._header = file.tell()
            self._writer = reader.writer_schema
            self.schema = arrow_schema(self._writer)
            # each block's place in the file (its count, size and sync marker included)
            self._blocks = [(block.offset, block.size, block.num_records) for block in reader]
        self.rows, self.groups = sum(b[2] for b in self._blocks), len(self._blocks)

    def batches(self, size: int, columns: list[str] | None = None, blocks=None) -> Iterator[Any]:
        """Arrow record batches of up to ``size`` rows of ``columns`` (default: all), of the
        ``blocks`` (their numbers; default: all)."""
        names = [c for c in columns if c in self.schema.names] if columns else self.schema.names
        every = range(self.groups)
        chosen = every if blocks is None else sorted(set(blocks).intersection(every))
        spans = [self._blocks[i][:2] for i in chosen]
        chunks = list(_chunks(spans, [self._blocks[i][2] for i in chosen]))
        # (by its absolute path: the decoding processes keep the folder they started in)
        where = os.path.abspath(self.path)
        read = functools.partial(_decoded, where, self._header, self._writer, names)
        pool = _pool() if len(chunks) > 1 and workers() > 1 else None
        tables = map(read, chunks) if pool is None else _in_order(pool, read, chunks)
        yield from _rebatched(tables, size)


def workers() -> int:
    """The cores this process may use (its CPU affinity where the system says it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (macOS)
        return os.cpu_count() or 1


def _chunks(spans: list[tuple[int, int]], rows: list[int]) -> Iterator[list[tuple[int, int]]]:
    """Runs of consecutive blocks (by their spans in the file) of ``CHUNK_ROWS`` rows or more
    (the last: what is left), neighbours in the file joined into one span."""
    chunk: list[tuple[int, int]] = []
    held = 0
    for (start, length), count in zip(spans, rows, strict=True):
        if chunk and chunk[-1][0] + chunk[-1][1] == start:
            chunk[-1] = (chunk[-1][0], chunk[-1][1] + length)
        else:
            chunk.append((start, length))
        held += count
        if held >= CHUNK_ROWS:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def _decoded(path: str, header: int, writer: dict, names: list[str], spans) -> Any:
    """The rows of the blocks at ``spans`` of the Avro file at ``path`` (whose header is its
    first ``header`` bytes, its schema ``writer``), of the fields ``names``, as an Arrow
    table: the header and those blocks read as an Avro file of their own."""
    import fastavro
    import pyarrow as pa

    schema = arrow_schema(writer)
    schema = pa.schema([schema.field(c) for c in names])
    fields = {f["name"]: f for f in writer["fields"]}
    wanted = [fields[c] for c in names]
    named = _named(writer)
    converters = {f["name"]: c for f in wanted if (c := _converter(f["type"], named))}
    # every field: the writer's schema (resolving it against a reader's costs a third)
    every = names == [f["name"] for f in writer["fields"]]
    projected = None if every else _projected(writer, wanted)
    with _as_arrow_errors(), open(path, "rb") as file:
        parts = [file.read(header)]
        for start, length in spans:
            file.seek(start)
            parts.append(file.read(length))
        rows = [row for block in fastavro.block_reader(io.BytesIO(b"".join(parts)), projected)
                for row in block]  # fmt: skip
    arrays = []  # (by column: twice from_pylist's speed)
    for field in schema:
        values = [row[field.name] for row in rows]
        if convert := converters.get(field.name):
            values = [convert(value) for value in values]
        arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


# The processes that decode chunks, once started: [the pool], or [None] where none can be
# started or they died (the chunks are then decoded in the reading process)
_decoders: list = []


def _pool() -> Any:
    """Processes that decode chunks, one per core this process may use; started once, on
    the first read that needs them, and ended before this process ends (left to the
    interpreter's teardown, the pool's own clean-up prints a traceback). Spawned, not
    forked: a fork of a process that has started threads (torch's, Arrow's) may hang."""
    if not _decoders:
        import atexit
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # each ends with this process, however it ends (kill -9, the OOM killer): left
        # behind, they would wait for work for good, holding its stderr open
        ending = functools.partial(end_with_parent, os.getpid())
        try:
            spawn = multiprocessing.get_context("spawn")
            _decoders.append(ProcessPoolExecutor(workers(), spawn, initializer=ending))
        except (OSError, ImportError, NotImplementedError):  # (no semaphores in a sandbox)
            _decoders.append(None)
        else:
            atexit.register(_decoders[0].shutdown, cancel_futures=True)
    return _decoders[0]


def _in_order(pool: Any, read: Callable[[Any], Any], chunks: list) -> Iterator[Any]:
    """``read`` of each chunk in the ``pool``'s processes, the results in the chunks' order;
    twice as many chunks under way as there are processes (the memory of that many
    tables), and those not yet started cancelled if the reader stops early. Processes that
    cannot start (a limit on a user's processes) or that die (the OOM killer) leave the
    chunks not yet read to this process, from then on."""
    from concurrent.futures.process import BrokenProcessPool

    ahead = 2 * workers()
    pending: deque = deque()
    done = 0
    try:
        for chunk in chunks:
            pending.append(pool.submit(read, chunk))
            if len(pending) >= ahead:
                yield pending.popleft().result()
                done += 1
        while pending:
            yield pending.popleft().result()
            done += 1
    except (BrokenProcessPool, OSError):  # (a file's own error is the file's: ArrowInvalid)
        _decoders[0] = None
        pool.shutdown(wait=False, cancel_futures=True)
        pending.clear()
        yield from map(read, chunks[done:])
    finally:
        for future in pending:
            future.cancel()


def _rebatched(tables: Iterable[Any], size: int) -> Iterator[Any]:
    """Record batches of ``size`` rows (the last: what is left) of the tables' rows in
    order."""
    import pyarrow as pa

    held = None
    for table in tables:
        held = table if held is None else pa.concat_tables([held, table])
        while held.num_rows >= size:
            yield held.slice(0, size).combine_chunks().to_batches()[0]
            held = held.slice(size)
    if held is not None and held.num_rows:
        yield held.combine_chunks().to_batches()[0]


def is_avro(head: bytes) -> bool:
    """Whether a file's first bytes are an Avro object container file's."""
    return head[:4] == MAGIC


def arrow_schema(avro: dict) -> Any:
    """An Avro file's schema (fastavro's parsed form) as Arrow's: its records' fields as
    columns."""
    import pyarrow as pa

    if not isinstance(avro, dict) or avro.get("type") != "record":
        kind = avro.get("type") if isinstance(avro, dict) else avro
        raise pa.ArrowInvalid(f"its values are {json.dumps(kind)}, not records of fields")
    named = _named(avro)
    return pa.schema(
        [pa.field(f["name"], arrow_type(f["type"], named, ())) for f in avro["fields"]]
    )


def arrow_type(avro: Any, named: dict[str, dict], within: tuple[str, ...]) -> Any:
    """An Avro type's Arrow type (``named``: the file's named types, by their full names;
    ``within``: the records this one is inside, which a recursive record names)."""
    import pyarrow as pa

    if isinstance(avro, str):
        if avro in PRIMITIVES:
            return getattr(pa, PRIMITIVES[avro])()
        if avro in within:
            raise pa.ArrowInvalid(f"its record {avro} holds itself, which no table can")
        return arrow_type(named[avro], named, within)
    if isinstance(avro, list):  # a union
        kinds = [k for k in avro if k != "null"]
        if len(kinds) == 1:
            return arrow_type(kinds[0], named, within)
        return pa.null() if not kinds else pa.string()  # (several: each value's JSON text)
    kind, logical = avro["type"], avro.get("logicalType")
    if logical in TIMESTAMPS and kind == "long":
        return pa.timestamp(*TIMESTAMPS[logical])
    if (kind, logical) == ("int", "date"):
        return pa.date32()
    if (kind, logical) == ("int", "time-millis"):
        return pa.time32("ms")
    if (kind, logical) == ("long", "time-micros"):
        return pa.time64("us")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = avro["precision"], avro.get("scale", 0)
        return (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
    if kind == "record":
        inside = (*within, avro["name"])
        return pa.struct(
            [pa.field(f["name"], arrow_type(f["type"], named, inside)) for f in avro["fields"]]
        )
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(arrow_type(avro["items"], named, within))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(avro["values"], named, within))
    return arrow_type(kind, named, within)  # {"type": "long"}, a logical type not known


def _named(avro: Any, found: dict[str, dict] | None = None) -> dict[str, dict]:
    """The named types (records, enums, fixed) a schema defines, by their full names."""
    found = {} if found is None else found
    if isinstance(avro, list):
        for kind in avro:
            _named(kind, found)
    elif isinstance(avro, dict):
        if avro.get("type") in ("record", "enum", "fixed") and "name" in avro:
            found.setdefault(avro["name"], avro)
        for field in avro.get("fields", ()):
            _named(field["type"], found)
        for key in ("items", "values"):
            if key in avro:
                _named(avro[key], found)
    return found


def _projected(writer: dict, fields: list[dict]) -> dict:
    """A reader schema of only ``fields`` (fastavro skips the others' bytes): a named type
    they use, defined in a field left out, is defined where they first use it."""
    named = _named(writer)
    defined: set[str] = set()

    def defining(avro: Any) -> Any:
        if isinstance(avro, str):
            if avro in named and avro not in defined:
                return defining(named[avro])
            return avro
        if isinstance(avro, list):
            return [defining(kind) for kind in avro]
        if avro.get("type") in ("record", "enum", "fixed") and "name" in avro:
            defined.add(avro["name"])
        copy = dict(avro)
        if "fields" in avro:
            copy["fields"] = [{**f, "type": defining(f["type"])} for f in avro["fields"]]
        for key in ("items", "values"):
            if key in avro:
                copy[key] = defining(avro[key])
        return copy

    defined.add(writer["name"])
    kept = [{**f, "type": defining(f["type"])} for f in fields]
    return {"type": "record", "name": writer["name"], "fields": kept}


def _converter(avro: Any, named: dict[str, dict]) -> Callable[[Any], Any] | None:
    """What makes fastavro's value of an Avro type one Arrow takes as ``arrow_type`` says,
    or None where it takes it as it is: a UUID as its text, a union of several types'
    value as its JSON text (in a record, list or map, theirs likewise)."""
    return _converting(avro, named, ())


def _converting(avro: Any, named: dict[str, dict], within: tuple[str, ...]):
    if isinstance(avro, str):
        if avro in PRIMITIVES or avro in within:
            return None
        return _converting(named[avro], named, within)
    if isinstance(avro, list):
        kinds = [k for k in avro if k != "null"]
        if len(kinds) == 1:
            return _converting(kinds[0], named, within)
        return _json_text
    kind = avro["type"]
    if avro.get("logicalType") == "uuid":
        return lambda value: None if value is None else str(value)
    if kind == "record":
        inside = (*within, avro["name"])
        each = {
            f["name"]: c for f in avro["fields"] if (c := _converting(f["type"], named, inside))
        }
        if not each:
            return None

        def record(value):
            if value is not None:
                for name, convert in each.items():
                    value[name] = convert(value[name])
            return value

        return record
    if kind in ("array", "map"):
        item = _converting(avro["items" if kind == "array" else "values"], named, within)
        if item is None:
            return None
        if kind == "array":
            return lambda value: None if value is None else [item(v) for v in value]
        return lambda value: None if value is None else {k: item(v) for k, v in value.items()}
    return None


def _json_text(value: Any) -> str | None:
    """A value of a union of several types as text: text as it is, others as JSON writes
    them (bytes as Latin-1 text, as Avro's JSON encoding does)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return json.dumps(value, default=str)


@contextmanager
def _as_arrow_errors() -> Iterator[None]:
    """fastavro's errors on a damaged file, or a codec it lacks, as ``ArrowInvalid``."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError):
        raise
    # A damaged file fails fastavro's decoder in many ways (ValueError, EOFError, IndexError,
    # zlib.error, a length past the file's end...): each of them is the file's fault.
    except Exception as err:  # noqa: BLE001
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise pa.ArrowInvalid(f"{reason} (a damaged or cut-short Avro file)") from None
