"""`nas predict`'s text inputs as teams write them: what each way of writing the same rows
costs against plain CSV.

The same synthetic click rows (a label, ids Zipf-distributed, prices and counts) written as
plain CSV (the reference), the same gzip-compressed, as Excel writes CSV where a comma is
the decimal mark (split by ";", 3,14, cp1252), as JSON lines of flat keys (``ctx.price``)
and as JSON lines of nested objects (``{"ctx": {"price": ...}}``). A DCNv2 (untrained: the
speed is the point) on the dataset prepared from the flat JSON lines scores each file as
`nas predict` does (``RowFiles`` batches, ``LoadedModel.features_of``), on one thread; each
way's rows/s, its cost against plain CSV, and whether its probabilities are the
reference's (the better of two runs each).

    .venv/bin/python benchmarks/text_inputs.py [--rows 200000] [--folder /tmp/recnas-text]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
SCHEMA = """\
name: text_inputs
source: {format: jsonl, path: flat.jsonl}
labels: [click]
keys: {user: user.id}
split: {method: random, valid: 0.1, test: 0.1}
features:
  - {name: user.id, type: categorical, side: request, min_freq: 2}
  - {name: [ctx.site, ctx.app], type: categorical, min_freq: 2}
  - {name: ctx.price, type: dense, transform: standardize}
  - {name: ctx.count, type: dense, transform: log1p, fill: 0}
"""
COLUMNS = ("click", "user.id", "ctx.site", "ctx.app", "ctx.price", "ctx.count")


def rows_of(count: int) -> list[dict]:
    """Flat rows (keys ``ctx.price``): ids Zipf-distributed, a few counts missing."""
    rng = np.random.default_rng(0)
    users = np.minimum(rng.zipf(1.2, count), 50_000)
    sites, apps = np.minimum(rng.zipf(1.3, count), 300), np.minimum(rng.zipf(1.3, count), 50)
    prices = np.round(rng.lognormal(2, 0.7, count), 2)
    counts = rng.poisson(3, count)
    clicks = rng.random(count) < 1 / (1 + np.exp(-(0.3 * np.log1p(prices) - 1)))
    return [
        {
            "click": int(clicks[i]),
            "user.id": f"u{users[i]}",
            "ctx.site": f"s{sites[i]}",
            "ctx.app": f"a{apps[i]}",
            "ctx.price": float(prices[i]),
            "ctx.count": None if i % 17 == 0 else int(counts[i]),
        }
        for i in range(count)
    ]


def nested(row: dict) -> dict:
    """A flat row's dotted keys as nested objects."""
    found: dict = {}
    for key, value in row.items():
        *path, last = key.split(".")
        place = found
        for part in path:
            place = place.setdefault(part, {})
        place[last] = value
    return found


def text(value, decimal: str = ".") -> str:
    if value is None:
        return ""
    return str(value).replace(".", decimal) if isinstance(value, float) else str(value)


def write(folder: Path, rows: list[dict]) -> dict[str, tuple[Path, dict]]:
    """Each way's file, and what the model's info says of its source (``read_as``)."""
    lines = [",".join(COLUMNS)] + [",".join(text(r[c]) for c in COLUMNS) for r in rows]
    plain = "\n".join(lines) + "\n"
    (folder / "plain.csv").write_text(plain)
    (folder / "plain.csv.gz").write_bytes(gzip.compress(plain.encode(), compresslevel=6))
    excel = [";".join(COLUMNS)] + [";".join(text(r[c], ",") for c in COLUMNS) for r in rows]
    (folder / "excel.csv").write_bytes(("\r\n".join(excel) + "\r\n").encode("cp1252"))
    with open(folder / "flat.jsonl", "w") as out:
        out.writelines(json.dumps(r) + "\n" for r in rows)
    with open(folder / "nested.jsonl", "w") as out:
        out.writelines(json.dumps(nested(r)) + "\n" for r in rows)
    return {
        "CSV (reference)": (folder / "plain.csv", {}),
        "CSV, gzip": (folder / "plain.csv.gz", {}),
        'Excel: ";", 3,14, cp1252': (
            folder / "excel.csv",
            {"csv_decimal": ",", "csv_encoding": "cp1252"},
        ),
        "JSON lines, flat keys": (folder / "flat.jsonl", {}),
        "JSON lines, nested objects": (folder / "nested.jsonl", {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-text"))
    args = parser.parse_args()

    import torch

    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.data import prepare_dataset
    from nas.data.row_files import RowFiles
    from nas.service.serving import LoadedModel

    torch.set_num_threads(1)
    shutil.rmtree(args.folder, ignore_errors=True)
    args.folder.mkdir(parents=True)
    ways = write(args.folder, rows_of(args.rows))
    (args.folder / "schema.yaml").write_text(SCHEMA)
    dataset, _ = prepare_dataset(str(args.folder / "schema.yaml"), args.folder / "cache")
    torch.manual_seed(0)
    spec = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
    model = build_model(spec, dataset.schema).eval()
    loaded = LoadedModel(model, dataset.schema, dataset.raw_form(), {})
    form = dataset.raw_form().to_dict()

    table = Table(title=f"{args.rows:,} rows scored as `nas predict` reads them, one thread")
    for column in ("written as", "size MiB", "seconds", "rows/s", "vs CSV", "same scores"):
        table.add_column(column, justify="left" if column == "written as" else "right")
    reference, base = None, None
    for way, (path, info) in ways.items():
        seconds = float("inf")
        for _ in range(2):  # the better of two: the first run warms caches and allocators
            files = RowFiles(path)
            files.read_as({**info, "raw_form": form})
            start = time.perf_counter()
            scores = np.concatenate(
                [loaded.scored(loaded.features_of(b))["probability"] for b in files.batches()]
            )
            seconds = min(seconds, time.perf_counter() - start)
        reference = scores if reference is None else reference
        base = base or seconds
        same = "reference" if scores is reference else (
            "yes" if np.allclose(scores, reference, atol=1e-6) else "NO"
        )  # fmt: skip
        table.add_row(way, f"{path.stat().st_size / 2**20:.1f}", f"{seconds:.2f}",
                      f"{args.rows / seconds:,.0f}", f"{seconds / base:.2f}x", same)  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
