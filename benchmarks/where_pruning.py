"""`source.where` on a month of daily Parquet files: the last week read by its times.

A month of synthetic click logs (``examples/datasets/make_logs.py``'s rows, the columns
``examples/datasets/my_ctr.yaml`` declares), a file a day, named by nothing but a number
(``part-00017.parquet``: no partition folders), each file's times within its day. Each
prepare below runs in a fresh process (seconds, peak RSS by GNU time's ``%M``):

- the reference: a folder of links to the last week's files, read whole (no ``where``);
- ``where: {ts: {from: DAY}}`` over every file: the files whose Parquet statistics put
  their times before DAY are passed by whole, the others read;
- the same ``where`` on the month written as one file in time order: the row groups whose
  statistics put their times before DAY passed by, the others read;
- the whole month, for scale.

The first two must prepare the same dataset (every array byte for byte: the same rows,
vocabularies and split), and the second should take about the reference's time, not the
month's.

    .venv/bin/python benchmarks/where_pruning.py [--days 30] [--rows-per-day 50000] [--last 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from avro_inputs import run, same_arrays  # (a fresh process timed; two caches compared)
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "examples" / "datasets" / "my_ctr.yaml"
START = 1_700_000_000 - 1_700_000_000 % 86_400  # a midnight, UTC


def make_logs():
    """``examples/datasets/make_logs.py`` as a module (its ``part``: a table of rows)."""
    spec = importlib.util.spec_from_file_location("make_logs", SCHEMA.parent / "make_logs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_month(folder: Path, days: int, rows: int) -> None:
    """A file a day, each day's times within it."""
    logs = make_logs()
    rng = np.random.default_rng(0)
    weights = {
        "site": rng.normal(0, 0.8, logs.SITES),
        "item": rng.normal(0, 0.8, logs.ITEMS),
        "user": rng.normal(0, 0.5, logs.USERS),
    }
    tmp = folder.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for day in range(days):
        table = logs.part(rows, day, day * rows, weights)
        times = START + day * 86_400 + np.sort(rng.integers(0, 86_400, rows))
        table = table.set_column(table.schema.get_field_index("ts"), "ts", pa.array(times))
        pq.write_table(table, tmp / f"part-{day:05d}.parquet", row_group_size=16_384)
    tmp.rename(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rows-per-day", type=int, default=50_000)
    parser.add_argument("--last", type=int, default=7, help="the days read (default 7)")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-where"))
    args = parser.parse_args()
    data = args.folder / f"month-{args.days}x{args.rows_per_day}"
    if not data.exists():
        write_month(data, args.days, args.rows_per_day)
    whole = data.with_name(f"{data.name}-one-file.parquet")
    if not whole.exists():  # the month as one file, its row groups in time order
        parts = [pq.read_table(p) for p in sorted(data.glob("*.parquet"))]
        pq.write_table(pa.concat_tables(parts), whole, row_group_size=16_384)
    first = args.days - args.last
    day = time.strftime("%Y-%m-%d", time.gmtime(START + first * 86_400))
    week = args.folder / f"last-{args.last}"  # the reference: links to the week's files
    shutil.rmtree(week, ignore_errors=True)
    week.mkdir()
    for d in range(first, args.days):
        (week / f"part-{d:05d}.parquet").symlink_to(data / f"part-{d:05d}.parquet")
    sources = {  # (name, the source line)
        "last week, named": f"{{format: parquet, path: {week}/*.parquet}}",
        "last week, where": f"{{format: parquet, path: {data}/*.parquet, where: "
        f"{{ts: {{from: {day}}}}}}}",
        "one file, where": f"{{format: parquet, path: {whole}, where: {{ts: {{from: {day}}}}}}}",
        "the month": f"{{format: parquet, path: {data}/*.parquet}}",
    }
    env = dict(os.environ, RECNAS_CACHE_DIR=str(args.folder / "cache"))
    table = Table(
        title=f"{args.days} daily files of {args.rows_per_day:,} rows; the last {args.last} days",
        title_justify="left",
    )
    for column in ("source", "files read", "rows", "prepare s", "peak RSS GB"):
        table.add_column(column, justify="right")
    caches = {}
    for number, (name, source) in enumerate(sources.items()):
        text = SCHEMA.read_text().replace("name: my_ctr", f"name: where_{number}")
        text = text.replace("{format: parquet, path: data/*.parquet}", source)
        schema = args.folder / f"where_{number}.yaml"
        schema.write_text(text)
        command = [sys.executable, "-m", "nas.cli", "data", "prepare", str(schema), "--force"]
        out, seconds, rss = run([*command, "--json"], env)
        said = json.loads(out)
        passed = said.get("where", {}).get("files_passed_by", 0)
        read = f"{said['source']['files'] - passed}"
        caches[name] = args.folder / "cache" / f"where_{number}"
        table.add_row(
            name,
            read,
            f"{said['rows']:,}",
            f"{seconds:.1f}",
            f"{rss:.2f}",
        )
    Console().print(table)
    same = same_arrays(caches["last week, named"], caches["last week, where"])
    Console().print(f"the week named and the week by where prepare the same arrays: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
