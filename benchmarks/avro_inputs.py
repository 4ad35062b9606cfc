"""Avro sources against Parquet: the same click logs prepared and read for scoring from each.

Synthetic click logs (``examples/datasets/make_logs.py``: the columns
``examples/datasets/my_ctr.yaml`` declares, with a list and a 32-event history) are written
as Parquet (the reference), then the same rows as Avro as Spark writes it (snappy, blocks of
about 64 KB, each column a union with null). Each is then, in a fresh process:

- prepared by ``nas data prepare`` of the same schema file, its format and path aside:
  seconds, rows/s, peak RSS (GNU time's ``%M``), and whether the two datasets are the
  same (every array byte for byte);
- read as `nas predict` reads its input (``RowFiles`` batches, every column): rows/s.

Avro is decoded by fastavro record by record (Arrow has no reader of it), so it is expected
to be slower than Parquet; the point is by how much, and that it is the same data.

    .venv/bin/python benchmarks/avro_inputs.py [--rows 1000000] [--folder /tmp/recnas-avro]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "examples" / "datasets" / "my_ctr.yaml"
READ = """
import json, sys, time
from nas.data.row_files import RowFiles
start = time.perf_counter()
rows = sum(len(batch) for batch in RowFiles(sys.argv[1]).batches())
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - start}))
"""


def run(command: list[str], env: dict[str, str]) -> tuple[str, float, float]:
    """stdout, seconds and the peak RSS (GB) of a command, read from GNU time's ``%M``."""
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "RSS_KB %M", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    kb = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("RSS"))
    return done.stdout, seconds, kb / 2**20


def avro_type(kind) -> object:
    """An Arrow type's Avro type, null-able as Spark writes every column."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_list(kind):
        return ["null", {"type": "array", "items": avro_type(kind.value_type)[1]}]
    if pa.types.is_integer(kind):
        return ["null", "long" if kind.bit_width > 32 else "int"]
    if pa.types.is_floating(kind):
        return ["null", "double"]
    return ["null", "string"]


def write_avro(parquet: Path, avro: Path) -> None:
    """A Parquet file's rows as an Avro file, a batch at a time."""
    import fastavro
    import pyarrow.parquet as pq

    file = pq.ParquetFile(parquet)
    fields = [{"name": f.name, "type": avro_type(f.type)} for f in file.schema_arrow]
    schema = fastavro.parse_schema({"type": "record", "name": "Row", "fields": fields})
    records = (row for batch in file.iter_batches(65_536) for row in batch.to_pylist())
    with avro.open("wb") as out:
        fastavro.writer(out, schema, records, codec="snappy", sync_interval=64_000)


def same_arrays(left: Path, right: Path) -> bool:
    import numpy as np

    names = sorted(p.name for p in left.glob("*.npy"))
    return names == sorted(p.name for p in right.glob("*.npy")) and all(
        np.array_equal(np.load(left / n, mmap_mode="r"), np.load(right / n, mmap_mode="r"))
        for n in names
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-avro"))
    args = parser.parse_args()
    python, console = sys.executable, Console()
    parquet = args.folder / "parquet"
    if not parquet.exists():
        tmp = args.folder / "parquet.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        make = [python, "examples/datasets/make_logs.py", "--rows", str(args.rows), "--out"]
        run([*make, str(tmp)], dict(os.environ))
        tmp.rename(parquet)
    avro = args.folder / "avro"
    written = float("nan")
    if not avro.exists():
        tmp = args.folder / "avro.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        start = time.perf_counter()
        for part in sorted(parquet.glob("*.parquet")):
            write_avro(part, tmp / f"{part.stem}.avro")
        written = time.perf_counter() - start
        tmp.rename(avro)
    env = dict(os.environ, RECNAS_CACHE_DIR=str(args.folder / "cache"))
    table = Table(title=f"{args.rows:,} click rows, Parquet against Avro", title_justify="left")
    for column in ("format", "files MB", "prepare s", "rows/s", "peak RSS GB", "read rows/s"):
        table.add_column(column, justify="right")
    caches = {}
    for fmt, folder in (("parquet", parquet), ("avro", avro)):
        schema = args.folder / f"{fmt}.yaml"
        text = SCHEMA.read_text().replace("name: my_ctr", f"name: avro_inputs_{fmt}")
        source = "{format: parquet, path: data/*.parquet}"
        schema.write_text(text.replace(source, f"{{format: {fmt}, path: {fmt}/*.{fmt}}}"))
        prepare = [python, "-m", "nas.cli", "data", "prepare", str(schema), "--force", "--json"]
        _, seconds, rss = run(prepare, env)
        caches[fmt] = args.folder / "cache" / f"avro_inputs_{fmt}"
        out, _, _ = run([python, "-c", READ, str(folder)], env)
        read = json.loads(out)
        assert read["rows"] == args.rows, read
        size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
        table.add_row(
            fmt,
            f"{size:,.0f}",
            f"{seconds:.1f}",
            f"{args.rows / seconds:,.0f}",
            f"{rss:.2f}",
            f"{args.rows / read['seconds']:,.0f}",
        )
    console.print(table)
    if written == written:  # (not reused)
        console.print(f"Avro written from the Parquet parts (fastavro, snappy) in {written:.0f} s")
    same = same_arrays(caches["parquet"], caches["avro"])
    console.print(f"the two prepared datasets are the same, array for array: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
