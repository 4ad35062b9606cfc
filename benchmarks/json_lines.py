"""JSON lines at scale: `nas data prepare` of a JSON-lines source whose writer gained keys
partway through the file (new fields in a team's logs), or left lines that are not rows.

It writes synthetic click logs (``examples/datasets/make_logs.py``, the columns
``examples/datasets/my_ctr.yaml`` declares) as one JSON-lines file, three times: as
written; with late keys: ``dwell`` (declared) omitted on every row of the first half, a
``promo`` key (undeclared) on every row of the second; and with two lines that are not rows
(one a tenth of the way in, one cut off at the end, as a writer killed mid-write leaves it),
under ``on_bad_lines: skip``. Then, in alternating rounds, it times the prepare of each
(``--force``, in this process):

- the plain file: Arrow's reader throughout (the reference);
- the file with late keys: the columns asked for read as the types of the file's first
  block, or, for a key it lacks, of rows spread over the file; other keys passed by
  (Arrow's reader throughout);
- the same file read as prepare read it before: Arrow's reader inferring every key's type
  until the block holding the late key's first row, then line by line with Python's json
  (the path a column asked for that changes JSON type still takes);
- the file with lines that are not rows: each one's block of lines read by line in Python,
  Arrow's reader throughout the rest.

    .venv/bin/python benchmarks/json_lines.py [--rows 500000] [--rounds 2]
        [--folder /tmp/recnas-jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "examples" / "datasets" / "my_ctr.yaml"


def write_sources(folder: Path, rows: int) -> dict[str, Path]:
    """The logs as JSON lines: ``plain``, ``late`` (``dwell`` only on the second half, a
    ``promo`` key added there), and ``bad`` (two lines that are not rows)."""
    import pyarrow.parquet as pq

    parquet = folder / "parquet"
    if not parquet.exists():
        tmp = folder / "parquet.tmp"
        subprocess.run(
            [sys.executable, "examples/datasets/make_logs.py", "--rows", str(rows), "--out",
             str(tmp)],
            check=True, cwd=REPO, capture_output=True,
        )  # fmt: skip
        tmp.rename(parquet)
    schemas = {}
    for kind in ("plain", "late", "bad"):
        data = folder / kind / "data"
        data.mkdir(parents=True, exist_ok=True)
        out = data / "logs.jsonl"
        if not out.exists():
            written = 0
            with open(out.with_suffix(".tmp"), "w") as lines:
                for part in sorted(parquet.glob("*.parquet")):
                    for row in pq.read_table(part).to_pylist():
                        if kind == "late" and written >= rows // 2:
                            row["promo"] = f"p{written % 7}"
                        elif kind == "late":
                            del row["dwell"]
                        elif kind == "bad" and written == rows // 10:
                            lines.write(json.dumps(row)[:40] + "\n")
                        lines.write(json.dumps(row) + "\n")
                        written += 1
                if kind == "bad":
                    lines.write(json.dumps(row)[:40])
            out.with_suffix(".tmp").rename(out)
        schema = folder / kind / "my_ctr.yaml"
        text = SCHEMA.read_text().replace("name: my_ctr", f"name: jsonl_{kind}")
        source = "format: jsonl, path: data/logs.jsonl" + ", on_bad_lines: skip" * (kind == "bad")
        schema.write_text(text.replace("format: parquet, path: data/*.parquet", source))
        schemas[kind] = schema
    return schemas


def prepare_seconds(schema: Path, cache: Path, before: bool) -> float:
    """One prepare, ``--force``; ``before``: as before, Arrow's reader given no types (it
    stops at a key its first block lacked, and the rest is read line by line), and no file's
    types read from rows spread over it."""
    from nas.data import prepare_dataset, source_rows

    opened, typed = source_rows.Rows._open_json, source_rows.json_types

    def untyped(path, types=None, offset=0):
        return opened(path, None, offset)

    if before:
        source_rows.Rows._open_json = staticmethod(untyped)
        source_rows.json_types = lambda path, first, wanted: first
    try:
        start = time.perf_counter()
        prepare_dataset(str(schema), cache, force=True)
        return time.perf_counter() - start
    finally:
        source_rows.Rows._open_json, source_rows.json_types = staticmethod(opened), typed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-jsonl"))
    args = parser.parse_args()
    folder = args.folder / f"rows-{args.rows}"
    schemas = write_sources(folder, args.rows)
    cache = args.folder / "cache"
    os.environ.setdefault("RECNAS_CACHE_DIR", str(cache))
    runs = {
        "plain file, Arrow's reader (reference)": (schemas["plain"], False),
        "late keys, Arrow's reader (now)": (schemas["late"], False),
        "late keys, as before (then line by line)": (schemas["late"], True),
        "2 lines that are not rows, passed by": (schemas["bad"], False),
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (schema, before) in runs.items():
            seconds[name].append(prepare_seconds(schema, cache, before))
    reference = statistics.median(seconds[next(iter(runs))])
    table = Table(
        title=f"nas data prepare of {args.rows:,} rows of JSON lines (median of {args.rounds})",
        title_justify="left",
    )
    table.add_column("source, reader")
    for column in ("prepare s", "rows/s", "x the reference's time"):
        table.add_column(column, justify="right")
    for name, found in seconds.items():
        median = statistics.median(found)
        table.add_row(name, f"{median:.1f}", f"{args.rows / median:,.0f}",
                      f"{median / reference:.2f}")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
