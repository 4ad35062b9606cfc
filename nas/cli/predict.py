"""``nas predict MODEL_URI --input ROWS [--out FILE] [--json]``: raw rows scored by a
registered model, a batch at a time (``nas.data.row_files``), so a day of logs is scored in
the memory of one batch; the rows' own labels, if they carry them, measure the model."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table

from nas.cli.flags import new_file, tracking_flag, tracking_uri
from nas.cli.render import console, counted, emit_json, json_text, out, progress_bar
from nas.core.errors import ConfigError, NasError

if TYPE_CHECKING:  # the command line starts without numpy and torch (``nas.data`` loads it)
    import numpy as np

    from nas.data.row_files import RowBatch, RowFiles

TABLE_ROWS = 20  # rows a predict's table shows
SPOOL_BYTES = 64 << 20  # --json's lines held in memory before a temporary file takes them
SCORED_SUFFIXES = (".parquet", ".jsonl", ".csv", ".tsv")  # what predict --out writes


def add_command(commands) -> None:
    predict = commands.add_parser("predict", help="score raw rows with a registered model")
    predict.add_argument("model_uri", help="e.g. models:/recnas-ml1m@champion, or runs:/ID/model")
    predict.add_argument(
        "--input",
        required=True,
        metavar="ROWS",
        help="rows as JSON lines (.jsonl), a JSON array or an MLflow request body (.json), "
        "CSV (.csv; its delimiter by its first lines), TSV (.tsv), any of these compressed "
        "(.gz, .bz2, .zst), Parquet, ORC or Avro (.orc, .avro; without a suffix, Hive's "
        "000000_0, by its bytes): a file, a folder of files of one format (a day's parts; "
        "partition folders, date=2024-05-07/, are columns), a Delta Lake or Iceberg table's "
        "folder (its current rows) or a quoted glob pattern ('logs/2024-05-07/*.parquet')",
    )
    predict.add_argument(
        "--out",
        type=new_file(*SCORED_SUFFIXES),
        metavar="FILE",
        help="write every row with its probabilities to a new .parquet, .jsonl, .csv or .tsv file",
    )
    tracking_flag(predict)
    predict.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per row, printed as the rows are scored; with --out, one "
        "object of what was written and what the rows' labels measure",
    )
    predict.set_defaults(run=cmd_predict)


def add_compare_command(verbs) -> None:
    compare = verbs.add_parser(
        "compare", help="measure two or more models on the same labelled rows, side by side"
    )
    compare.add_argument(
        "model_uris", nargs="+", metavar="MODEL_URI", help="the first is the one to beat"
    )
    compare.add_argument(
        "--input",
        required=True,
        metavar="ROWS",
        help="rows that carry their labels, as nas predict reads them (a file, a folder, a "
        "glob; nas data rows writes a split's)",
    )
    compare.add_argument(
        "--by",
        metavar="COLUMN",
        help="a column naming each row's group (user_id): a group's rows go together, so the "
        "intervals take the groups, not the rows, as independent draws (default: the rows)",
    )
    tracking_flag(compare)
    compare.add_argument(
        "--json", action="store_true", help="the figures and intervals as one JSON object"
    )
    compare.set_defaults(run=cmd_models_compare)


def cmd_models_compare(args: argparse.Namespace) -> None:
    from nas.data.row_files import COLUMNAR, RowFiles
    from nas.service.scoring import RowGroups, Scoring, compare

    if len(args.model_uris) < 2:
        raise ConfigError("MODEL_URI", "name two or more models to compare, the first to beat")
    rows = RowFiles(args.input)
    if rows.total == 0:
        raise ConfigError("--input", f"{args.input} has no rows")
    scorings = []
    for uri in args.model_uris:
        with console.status(f"Loading {uri} ..."):
            scorings.append(Scoring(tracking_uri(args), uri))
    rows.read_as(scorings[0].loaded.info)  # CSV as the first's source
    groups = None if args.by is None else RowGroups(args.by)
    # without --by: the users the rows hold, by the dataset's user column, to suggest it
    user = None if groups else scorings[0].loaded.info.get("keys", {}).get("user")
    users = RowGroups(user) if user else None
    count = 0
    with progress_bar(eta=True, counts=rows.suffix in COLUMNAR) as bar:
        task = bar.add_task(
            f"Scoring with {counted(len(scorings), 'model')}", total=rows.total, note=""
        )
        for batch in rows.batches():
            for scoring in scorings:  # first: they name a row that is not one
                scoring.score(batch)
            if groups is not None:
                groups.add(batch)
            if users is not None:
                try:
                    users.add(batch)
                except ConfigError:  # a row without the column: nothing to suggest
                    users = None
            count += len(batch)
            bar.update(task, completed=rows.done, note=counted(count, "row"))
    compared = compare(scorings, None if groups is None else groups.ids)
    drawn = {"by": args.by, "groups": groups.count} if groups is not None else {"by": None}
    if users is not None and users.count < count:  # a user's rows are not independent
        drawn["suggested_by"] = {"column": user, "groups": users.count}
    if args.json:
        emit_json({"input": str(args.input), "rows": count, **drawn, "labels": compared})
        return
    for name, models in compared.items():
        _print_compared(name, models, count, drawn)
    if "suggested_by" in drawn:
        out.print(
            f"these {count:,} rows are {users.count:,} users' ({user}): the intervals take "
            f"each row as an independent draw, but a user's rows go together; --by {user} "
            "takes each user's rows as one draw",
            highlight=False,
        )


def _print_compared(label: str, models: list[dict], rows: int, drawn: dict) -> None:
    first = models[0]
    within = f" in {counted(drawn['groups'], 'group')} by {drawn['by']}" if drawn["by"] else ""
    table = Table(
        box=box.SIMPLE_HEAD,
        title=f"label {label} ({first['rule']}) on {rows:,} rows{within}: against "
        f"{first['model_uri']}",
        title_justify="left",
    )
    for column in ("model", "NE", "NE - first (95% CI)", "AUC", "AUC - first (95% CI)"):
        table.add_column(column, justify="left" if column == "model" else "right")
    table.add_column("logloss", justify="right")
    for m in models:
        table.add_row(
            m["model_uri"],
            f"{m['ne']:.4f}",
            _difference(m.get("ne_difference")),
            "n/a" if m["auc"] != m["auc"] else f"{m['auc']:.4f}",
            _difference(m.get("auc_difference")),
            f"{m['logloss']:.4f}",
        )
    out.print(table)
    for m in models[1:]:
        verdict = _verdict(
            m["ne_difference"], m["auc_difference"], "groups" if drawn["by"] else "rows"
        )
        out.print(f"{m['model_uri']} against the first, at 95%: {verdict}", highlight=False)


def _difference(d: dict | None) -> str:
    if d is None:
        return "-"
    if d["mean"] != d["mean"]:
        return "n/a"
    if d["low"] != d["low"]:  # no spread to go on
        return f"{d['mean']:+.4f}"
    return f"{d['mean']:+.4f} ({d['low']:+.4f}, {d['high']:+.4f})"


def _verdict(ne: dict, auc: dict, draws: str = "rows") -> str:
    """What the intervals say, in words (a lower NE is better, a higher AUC)."""

    def said(d: dict, better_below: bool, what: str) -> str:
        if d["mean"] != d["mean"]:
            return f"{what} unknown (the rows hold one class)"
        if d["low"] != d["low"]:
            return f"{what} unknown (too few {draws})"
        if d["low"] <= 0 <= d["high"]:
            return f"{what} within noise"
        better = (d["high"] < 0) == better_below
        return f"{what} {'better' if better else 'worse'}"

    return f"{said(ne, True, 'NE')}, {said(auc, False, 'AUC')}"


def cmd_predict(args: argparse.Namespace) -> None:
    from nas.data.row_files import COLUMNAR, RowFiles
    from nas.service.scoring import Scoring

    rows = RowFiles(args.input)
    if rows.total == 0:
        raise ConfigError("--input", f"{args.input} has no rows")
    with console.status(f"Loading {args.model_uri} ..."):
        scoring = Scoring(tracking_uri(args), args.model_uri)
    rows.read_as(scoring.loaded.info)  # CSV as the model's source
    head: list[tuple[dict, dict]] = []  # the table's rows and their probabilities
    count = 0
    # --json's lines, printed once every row is scored: a bad row leaves stdout empty
    with (
        tempfile.SpooledTemporaryFile(SPOOL_BYTES, "w+", encoding="utf-8") as spool,
        ExitStack() as stack,
    ):
        bar = stack.enter_context(progress_bar(eta=True, counts=rows.suffix in COLUMNAR))
        writer = None
        if args.out:
            plan = None
            if args.out.suffix.lower() != ".jsonl" and rows.suffix not in COLUMNAR:
                plan = column_types(rows.anew(), bar)
            writer = stack.enter_context(scored_file(args.out, plan))
        task = bar.add_task("Scoring", total=rows.total, note="")
        start = time.perf_counter()
        for batch in rows.batches():
            scores = scoring.score(batch)
            if writer:
                writer(batch, scores)
            if args.json and not args.out:
                spool.writelines(scored_lines(batch, scores))
            if len(head) < TABLE_ROWS:
                taken = batch.head(TABLE_ROWS - len(head))
                head += [(r, {k: v[i] for k, v in scores.items()}) for i, r in enumerate(taken)]
            count += len(batch)
            rate = count / (time.perf_counter() - start)
            note = f"{counted(count, 'row')}, {rate:,.0f} a second"
            bar.update(task, completed=rows.done, note=note)
        if not count:  # inside: nothing is written
            raise ConfigError("--input", f"{args.input} has no rows")
        stack.close()  # the progress bar gone
        spool.seek(0)
        shutil.copyfileobj(spool, sys.stdout)
        sys.stdout.flush()
    measured = scoring.measured()
    if args.json:
        if args.out:
            emit_json(_summary(args, count, scoring.outputs, measured))
        return
    _print_head(args.model_uri, head, scoring.outputs)
    if count > TABLE_ROWS:
        every = f"every row is in {args.out}" if args.out else "--out FILE or --json: every row"
        out.print(f"the first {TABLE_ROWS} of {count:,} rows; {every}", highlight=False)
    elif args.out:
        out.print(f"wrote {args.out}", highlight=False)
    print_measured(measured, count)


def _summary(args: argparse.Namespace, count: int, outputs: list[str], measured) -> dict:
    """``--json --out``'s object: the rows written, and what their labels say."""
    return {
        "model_uri": args.model_uri,
        "input": str(args.input),
        "out": str(args.out),
        "rows": count,
        "outputs": outputs,
        "measured": measured.figures,
        "unmeasured": measured.unmeasured,
    }


def _print_head(model_uri: str, head: list[tuple[dict, dict]], outputs: list[str]) -> None:
    table = Table(box=box.SIMPLE_HEAD, title=f"{model_uri}: probabilities")
    table.add_column("row", justify="right")
    first = head[0][0] if isinstance(head[0][0], dict) else {}
    shown = [c for c in list(first)[:4] if c != "history"]
    for column in shown:
        table.add_column(str(column), overflow="ellipsis", max_width=24)
    for name in outputs:
        table.add_column(name, justify="right")
    for i, (row, scores) in enumerate(head):
        table.add_row(
            str(i + 1),
            *(str(row.get(c, "")) for c in shown),
            *(f"{scores[name]:.4f}" for name in outputs),
        )
    out.print(table)


def print_measured(measured, rows: int) -> None:
    """What the rows' own labels say of the model's probabilities, if they carry them."""
    if measured.unmeasured:
        out.print(f"not measured: {measured.unmeasured} (every row needs its label)")
    for name, m in (measured.figures or {}).items():
        auc = "n/a (one class)" if m["auc"] != m["auc"] else f"{m['auc']:.4f}"
        out.print(
            f"label {name} ({m['rule']}) on these {rows:,} rows: NE {m['ne']:.4f} (against "
            f"the training rate {m['train_rate']:.4f}), AUC {auc}, logloss {m['logloss']:.4f}",
            highlight=False,
        )


# --- the scored rows, written as they are scored ----------------------------------------------


def scored_lines(batch: RowBatch, scores: dict[str, np.ndarray]) -> Iterator[str]:
    """A JSON line per row: the row as read, then its probabilities."""
    for i, row in enumerate(batch.rows):
        scored = {"row": row, **{k: float(v[i]) for k, v in scores.items()}}
        yield json_text(scored) + "\n"


@contextmanager
def scored_file(path: Path, plan: dict[str, Any] | None = None) -> Iterator[Any]:
    """A function writing each scored batch to ``path``, a new file (``new_file``) named
    only when every batch is written: Parquet or CSV/TSV (the input's columns, then the
    probabilities under names no input column has) or JSON lines (as ``--json`` prints
    them). Text rows go by their columns' ``plan`` (``column_types``); a Parquet input's
    batches keep their columns as they were read."""
    from nas.core.disk import new_file as new_path
    from nas.data.row_files import DELIMITERS

    suffix = path.suffix.lower()
    with new_path(path) as tmp:
        if suffix == ".jsonl":
            with open(tmp, "w") as file:
                yield lambda batch, scores: file.writelines(scored_lines(batch, scores))
            return
        if suffix in DELIMITERS:
            with open(tmp, "w", newline="") as file:
                yield _csv_writer(file, DELIMITERS[suffix], plan)
            return
        import pyarrow.parquet as pq

        writer = None
        try:

            def write(batch: RowBatch, scores: dict[str, np.ndarray]) -> None:
                nonlocal writer
                table = _scored_table(batch, scores, plan)
                writer = writer or pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)

            yield write
        finally:
            if writer:
                writer.close()


def _csv_writer(file, delimiter: str, plan: dict[str, Any] | None):
    """Writes scored batches as CSV: a header of the input's columns (the ``plan``'s, or a
    Parquet input's first batch's) and the probabilities, then a line per row, a missing
    value empty, a list or an object as its JSON text, and a date-time, a date or a decimal
    as its text."""
    import csv

    writer = csv.writer(file, delimiter=delimiter)
    names: list[str] = []

    def write(batch: RowBatch, scores: dict[str, np.ndarray]) -> None:
        if not names:
            names.extend(plan if plan is not None else batch.table.column_names)
            writer.writerow(names + _output_names(names, scores))
        for i, row in enumerate(batch.rows):
            cells = [_cell(row.get(name)) if isinstance(row, dict) else "" for name in names]
            writer.writerow(cells + [repr(float(v[i])) for v in scores.values()])

    return write


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):  # NaN: missing
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | dict):
        return json_text(value)  # (a map's pairs, from Arrow: a list of [key, value])
    return str(value)  # 2024-05-07 12:30:00+00:00 (as Arrow's CSV reader reads it), 3.14


def _output_names(columns, scores: dict[str, np.ndarray]) -> list[str]:
    """The probabilities' column names: each output's, "_" before it while an input column
    has that name."""
    taken, names = set(columns), []
    for name in scores:
        while name in taken:
            name = f"_{name}"
        taken.add(name)
        names.append(name)
    return names


JSON_TEXT = "json text"  # a column whose values mix types: written as their JSON text


def column_types(rows: RowFiles, bar=None) -> dict[str, Any]:
    """Each column of a text file's rows (in the order rows first name them) and the Arrow
    type that holds all its values, or ``JSON_TEXT``: a Parquet file has one type per column,
    and a JSON lines file may name a column first, or change its values' type, on any row.
    Read in a pass of its own before any row is scored: the rows are never all in memory
    (``bar``: a progress bar to show it on)."""
    import pyarrow as pa

    task = bar.add_task("Reading columns", total=rows.total, note="") if bar else None
    types: dict[str, Any] = {}
    for batch in rows.batches():
        if bar:
            bar.update(task, completed=rows.done)
        mappings = [row for row in batch.rows if isinstance(row, dict)]
        for name in dict.fromkeys(name for row in mappings for name in row):
            if types.get(name) == JSON_TEXT:
                continue
            try:
                found = pa.array([row.get(name) for row in mappings]).type
                known = types.get(name, pa.null())
                types[name] = (
                    pa.unify_schemas(
                        [pa.schema([(name, known)]), pa.schema([(name, found)])],
                        promote_options="permissive",
                    )
                    .field(name)
                    .type
                )
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                types[name] = JSON_TEXT
    return {name: pa.string() if t == pa.null() else t for name, t in types.items()}


def _scored_table(batch: RowBatch, scores: dict[str, np.ndarray], plan: dict | None):
    """A batch's rows and probabilities as one Arrow table: a Parquet batch's columns as
    they were read, text rows' by the ``plan`` of ``column_types``."""
    import pyarrow as pa

    if plan is None:
        columns = dict(zip(batch.table.column_names, batch.table.columns, strict=True))
    else:
        columns = {}
        for name, kind in plan.items():
            values = [row.get(name) if isinstance(row, dict) else None for row in batch.rows]
            if kind == JSON_TEXT:
                values = [None if v is None else json_text(v) for v in values]
                kind = pa.string()
            try:
                columns[name] = pa.array(values, type=kind)
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as err:
                raise NasError(f"column {name!r} changed while it was scored ({err})") from None
    for name, values in zip(_output_names(columns, scores), scores.values(), strict=True):
        columns[name] = pa.array(values)
    return pa.table(columns)
