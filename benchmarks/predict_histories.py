"""`nas predict` on rows with an events history: encoded row by row and by column.

MovieLens-1M's test rows in the raw form, each with its [item, rating, time] events (what
``nas data rows`` writes), read as ``nas predict`` reads them (``RowFiles``, a batch of
65,536 rows at a time) from three forms: JSON lines (triples), Parquet (a list of
``{item, action, time}`` structs) and MLflow's frame (the history as JSON text, what
``mlflow models serve`` hands the pyfunc). Each form is encoded for an HSTU model (it reads
the history) by rows (``RawForm.features``, the reference) and by columns
(``table_features``), one thread, the arrays checked equal. The seconds include reading
the file (JSON's parser: the same for both ways), not the model.

    .venv/bin/python benchmarks/predict_histories.py [--rows 20000]
        [--folder /tmp/recnas-histories]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from rich.console import Console
from rich.table import Table

from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from nas.data.export import export_raw_rows
from nas.data.raw_table import events_array, table_features
from nas.data.row_files import RowFiles
from nas.service.serving import LoadedModel, as_frame

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "examples" / "specs" / "modern" / "hstu_seq.json"


def encoded(loaded: LoadedModel, files: RowFiles, by_columns: bool) -> tuple[float, list]:
    start = time.perf_counter()
    out = [
        loaded.features_of(batch) if by_columns else loaded.features(batch.rows, batch.first)
        for batch in files.batches()
    ]
    return time.perf_counter() - start, out


def framed(loaded: LoadedModel, frame, by_columns: bool) -> tuple[float, list]:
    start = time.perf_counter()
    if by_columns:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        out = [table_features(loaded.raw_form, table, loaded.schema)]
    else:
        out = [loaded.features(frame.to_dict("records"))]
    return time.perf_counter() - start, out


def same(a: list, b: list) -> bool:
    names = ("categorical", "multi_hot", "dense")
    history = ("item", "action", "time", "start", "end", "now")
    for x, y in zip(a, b, strict=True):
        pairs = [(getattr(x, n), getattr(y, n)) for n in names]
        pairs += [(getattr(x.history, n), getattr(y.history, n)) for n in history]
        if not all(torch.equal(p, q) for p, q in pairs):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/recnas-histories"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = load_dataset("movielens-1m")
    model = build_model(ArchSpec.load(SPEC), dataset.schema).eval()
    loaded = LoadedModel(model, dataset.schema, dataset.raw_form(), {})
    assert model.reads_history, SPEC
    args.folder.mkdir(parents=True, exist_ok=True)
    jsonl = args.folder / f"rows-{args.rows}.jsonl"
    if not jsonl.exists():
        export_raw_rows(dataset, "test", jsonl, args.rows)
    rows = [row for batch in RowFiles(jsonl).batches() for row in batch.rows]
    events = sum(len(row["history"]) for row in rows)
    parquet = args.folder / f"rows-{args.rows}.parquet"
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k != "history"} for r in rows])
    pq.write_table(table.append_column("history", events_array([r["history"] for r in rows])),
                   parquet)  # fmt: skip
    frame = as_frame(rows, loaded.raw_form)
    loaded.features_of(next(RowFiles(parquet).batches(100)))  # Arrow's first use: once
    report = Table(
        title=f"encoding {len(rows):,} MovieLens-1M test rows with {events:,} history events "
        f"for {SPEC.name}, one thread",
        title_justify="left",
    )
    report.add_column("form", no_wrap=True)
    for column in ("by rows s", "by columns s", "rows/s by columns", "speed-up", "same arrays"):
        report.add_column(column, justify="right")
    for form, run in (
        ("JSON lines (triples)", lambda c: encoded(loaded, RowFiles(jsonl), c)),
        ("Parquet (structs)", lambda c: encoded(loaded, RowFiles(parquet), c)),
        ("MLflow frame (JSON text)", lambda c: framed(loaded, frame, c)),
    ):
        (rows_s, reference), (columns_s, fast) = run(False), run(True)
        report.add_row(
            form,
            f"{rows_s:.2f}",
            f"{columns_s:.2f}",
            f"{len(rows) / columns_s:,.0f}",
            f"{rows_s / columns_s:.1f}x",
            "yes" if same(fast, reference) else "NO",
        )
    Console().print(report)


if __name__ == "__main__":
    main()
