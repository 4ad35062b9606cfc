"""``nas data prepare``, ``schema``, ``list``, ``inspect``, ``export`` and ``rows``."""

from __future__ import annotations

import argparse
import json
import re
import time
from contextlib import nullcontext
from pathlib import Path

from rich.table import Table

from nas.cli.flags import as_flags, common_flags, new_file, seed_number, whole_number
from nas.cli.render import console, emit_json, out, preparing_under, progress_bar, styled
from nas.core.errors import ConfigError, shown

EARLY_TIMES = 10**8  # 1973-03-03: a log's first time before it, most likely read in a wrong unit


def add_commands(commands) -> None:
    data = commands.add_parser("data", help="prepare and list datasets")
    data.set_defaults(group=data)
    data_commands = data.add_subparsers(title="data commands", metavar="COMMAND")
    prepare = data_commands.add_parser(
        "prepare", help="build (or reuse) a dataset's cache: a built-in one, or a schema file's"
    )
    prepare.add_argument(
        "name",
        help="a built-in dataset (movielens-1m, movielens-100k, criteo, synthetic-criteo) or "
        "a dataset schema file (FILE.yaml; docs/models-and-data.md)",
    )
    prepare.add_argument(
        "--source", help="movielens-1m: folder of GroupLens .dat files; criteo: a TSV file"
    )
    prepare.add_argument(
        "--rows", type=whole_number(1), help="synthetic-criteo: rows to generate (default 100000)"
    )
    prepare.add_argument(
        "--seed", type=seed_number, help="synthetic-criteo: generator seed (default 0)"
    )
    prepare.add_argument(
        "--min-count",
        type=whole_number(1),
        help="criteo: keep categorical values seen this often in train",
    )
    prepare.add_argument(
        "--force", action="store_true", help="rebuild even if a matching cache exists"
    )
    common_flags(prepare)
    prepare.set_defaults(run=cmd_data_prepare)
    schema = data_commands.add_parser(
        "schema",
        help="a first schema file for your own logs, from a sample of their rows: labels, "
        "keys and features guessed, each with its reason, to read before preparing",
    )
    schema.add_argument(
        "source",
        metavar="SOURCE",
        help="a .parquet, .orc, .avro, .csv, .tsv or .jsonl file (text compressed: .gz, .bz2, "
        ".zst), a folder of them (its partition folders, date=2024-05-07/, are columns), a "
        "Delta Lake or Iceberg table's folder (its current files) or a quoted glob "
        "('logs/*.parquet'); files whose names say no format (Hive's 000000_0, Spark's "
        "part-00000, .txt, .dat) by their bytes, a CSV file's delimiter (, ; tab | Ctrl-A) and "
        "decimal comma by its first lines",
    )
    schema.add_argument(
        "--out", required=True, type=new_file(".yaml"), metavar="FILE.yaml", help="the new file"
    )
    schema.add_argument("--name", help="the dataset's name (default: the file's name)")
    schema.add_argument(
        "--labels",
        action="append",
        help="the labels, joined by commas or each its own --labels: a 0/1 column (click), "
        "NAME=COLUMN>=NUMBER (like=rating>=4), or NAME=COLUMN==VALUE|VALUE... "
        "(purchase=event_name==purchase), or NAME=KEY in PATH, a label from another log "
        "(click=impression_id in clicks/: 1 where it holds a row of that key; add its time "
        "and a span in the file) (default: the 0/1 columns named as labels are: "
        "click, label, like, conversion, ...); a CSV file without a header has its columns "
        "named c1, c2, ...",
    )
    schema.add_argument(
        "--tz",
        help="the time zone of the hour and weekday derived from the rows' time: an IANA name "
        "(America/New_York) or an offset (+05:30) (default: UTC)",
    )
    schema.add_argument("--json", action="store_true", help="one JSON object: the file and why")
    schema.set_defaults(run=cmd_data_schema)
    listing = data_commands.add_parser("list", help="datasets and what is cached")
    common_flags(listing)
    listing.set_defaults(run=cmd_data_list)
    inspect = data_commands.add_parser(
        "inspect",
        help="rows per split, label rates, and per field its cardinality, missing and "
        "out-of-vocabulary rates and list lengths",
    )
    inspect.add_argument("name", help="a dataset's name, or its schema file (FILE.yaml)")
    common_flags(inspect)
    inspect.set_defaults(run=cmd_data_inspect)
    export = data_commands.add_parser(
        "export",
        help="a dataset's splits as one Parquet file, as recnas's models read them: for "
        "another library or your own model to train and test on the same rows",
    )
    _dataset_and_out(export, (".parquet",), "the file to write")
    export.add_argument(
        "--split",
        type=split_names,
        help="train, valid or test, or several joined by commas (default: all three)",
    )
    common_flags(export)
    export.set_defaults(run=cmd_data_export)
    rows = data_commands.add_parser(
        "rows",
        help="a split's rows in the raw form a registered model scores, with their labels: "
        "rows to try nas predict and nas models compare on",
    )
    _dataset_and_out(rows, (".jsonl", ".parquet"), "the JSON lines or Parquet file to write")
    rows.add_argument(
        "--split", choices=("train", "valid", "test"), default="test", help="(default test)"
    )
    rows.add_argument(
        "--rows", type=whole_number(1), metavar="N", help="the split's first N (default: all)"
    )
    common_flags(rows)
    rows.set_defaults(run=cmd_data_rows)


def _dataset_and_out(parser, suffixes: tuple[str, ...], what: str) -> None:
    """A command's dataset (its name or schema file) and the new file it writes."""
    parser.add_argument("name", help="a dataset's name, or its schema file (FILE.yaml)")
    parser.add_argument(
        "--out",
        required=True,
        type=new_file(*suffixes),
        metavar=f"FILE{suffixes[0]}",
        help=f"{what} (a new one; its folder is made if need be)",
    )


def split_names(text: str) -> tuple[str, ...]:
    """``--split``'s value: split names joined by commas, each once, in the data's order."""
    from nas.data.prepared import SPLITS

    names = [part.strip() for part in text.split(",")]
    unknown = [name for name in names if name not in SPLITS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown split {shown(unknown[0] if unknown else text)}; valid: "
            f"{', '.join(SPLITS)}, or several joined by commas (train,valid)"
        )
    return tuple(name for name in SPLITS if name in names)


class _PassesBar:
    """``progress(what, rows, total)`` for ``prepare``: one bar per pass, with rows/s."""

    def __init__(self, quiet: bool):
        self.bar = None if quiet else progress_bar(fields="{task.fields[note]}", eta=True)
        self.tasks: dict[str, int] = {}
        self.started: dict[str, tuple[float, int]] = {}  # pass -> (its first report, rows)

    def __enter__(self) -> _PassesBar:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, what: str, rows: int, total: int | None) -> None:
        if self.bar is None:
            return
        if what not in self.tasks:  # a pass's first report: its first batch, already read
            self.tasks[what] = self.bar.add_task(what, total=total, completed=rows, note="")
            self.started[what] = (time.perf_counter(), rows)
            return
        task = self.tasks[what]
        self.bar.advance(task, rows)
        began, first = self.started[what]  # the rate of the batches read since the first
        rate = (self.bar.tasks[task].completed - first) / max(time.perf_counter() - began, 1e-9)
        self.bar.update(task, note=f"{rate:,.0f} rows/s")


def cmd_data_prepare(args: argparse.Namespace) -> None:
    from nas.data import PrepareRequest, is_schema_path, prepare_dataset

    request = PrepareRequest(
        source=str(Path(args.source).resolve()) if args.source else None,
        rows=args.rows,
        seed=args.seed,
        min_count=args.min_count,
    )
    start = time.perf_counter()
    if is_schema_path(args.name):  # read in passes over the files: a bar per pass
        with as_flags(), _PassesBar(quiet=args.json) as bar:
            dataset, reused = prepare_dataset(
                args.name, args.cache_dir, request, force=args.force, progress=bar
            )
    else:
        with (
            as_flags(),
            console.status(f"Preparing {args.name} ...", spinner="dots")
            if not args.json
            else nullcontext() as status,
        ):
            preparing = preparing_under(status, f"Preparing {args.name}")
            dataset, reused = prepare_dataset(
                args.name, args.cache_dir, request, force=args.force, progress=preparing
            )
    seconds = time.perf_counter() - start
    span = _time_span(dataset)
    summary = _dataset_summary(dataset, span)
    summary.update(reused_cache=reused, seconds=round(seconds, 2))
    if args.json:
        emit_json(summary)
        return
    table = Table(
        title=f"{dataset.name}: {'reused the cache' if reused else f'built in {seconds:.1f} s'}",
        show_header=False,
        title_justify="left",
    )
    table.add_column(style="bold")
    table.add_column()
    m = dataset.manifest
    table.add_row("rows", f"{m['rows']:,}")
    for key in ("users", "items", "requests"):
        if key in m:
            table.add_row(key, f"{m[key]:,}")
    table.add_row("label", m["label_rule"])
    for name, joined in m.get("joined", {}).items():  # a label from another log
        table.add_row(f"{name} from", f"{joined['rows']:,} rows of {joined['rule']}")
    rates = {f"{k} rate": v for k, v in m.get("label_rates", {}).items()}
    for name, by_split in (rates or {"positive rate": m["positive_rate"]}).items():
        table.add_row(name, "  ".join(f"{k} {v:.4f}" for k, v in by_split.items()))
    table.add_row("splits", "  ".join(f"{k} {v:,}" for k, v in m["split_sizes"].items()))
    table.add_row("split rule", m["split_rule"])
    if "times" in summary:
        table.add_row("times", f"{summary['times']['first']} to {summary['times']['last']}")
    table.add_row("split checksum", m["split_checksum"][:16])
    table.add_row("version", dataset.version)
    from nas.data.schema import LABEL

    inputs = [f for f in m["schema"] if f["kind"] != LABEL]
    table.add_row("fields", ", ".join(_field_label(f) for f in inputs))
    if empty := [f["name"] for f in inputs if _carries_nothing(f)]:
        table.add_row(
            styled("warning", "yellow"),
            f"{', '.join(empty)}: no value kept from the training rows (every one missing, or "
            "rarer than min_freq), so the field carries nothing",
        )
    if span and span[0] < EARLY_TIMES:
        table.add_row(
            styled("warning", "yellow"),
            f"the first time is {summary['times']['first']}: are the source's times in its "
            "declared unit (source.time_unit, default s)? Times in seconds read as "
            "milliseconds, or in microseconds read as nanoseconds, fall in 1970",
        )
    if slow := m.get("read_by_line"):
        name, why = next(iter(slow.items()))
        more = f" and {len(slow) - 1} more" if len(slow) > 1 else ""
        table.add_row(
            styled("warning", "yellow"),
            f"{name}{more} read line by line, several times slower: Arrow's reader stopped at "
            f"{why}; a key of one JSON type on every row (ids all numbers or all text) keeps it",
        )
    if skipped := m.get("skipped_lines"):
        lines = sum(s["lines"] for s in skipped.values())
        name, first = next((n, s["first"]) for n, s in skipped.items())
        said = [f"{lines / (lines + m['rows']):.2%} of the lines read"]
        if len(skipped) > 1:
            said.append(f"in {len(skipped)} files")
        if m["source"].get("format") == "jsonl":
            said.append("the blocks holding them read line by line, several times slower")
        table.add_row(
            styled("warning", "yellow"),
            f"{lines:,} line{'s' * (lines > 1)} passed by as not rows (source.on_bad_lines: "
            f"skip; {'; '.join(said)}): the first, {name}: {first}",
        )
    if where := m.get("where"):  # source.where
        table.add_row("rows read", _where_line(where))
    for column, lacking in m.get("absent_columns", {}).items():
        more = f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
        named = ", ".join(lacking[:3]) + more
        table.add_row(
            styled("warning", "yellow"),
            f"column {column} is not in {len(lacking)} of the {m['source'].get('files', '?')} "
            f"files ({named}): missing on their rows",
        )
    source = {k: v for k, v in m["source"].items() if k != "fingerprint"}
    table.add_row("source", ", ".join(f"{k}={v}" for k, v in source.items()))
    table.add_row("cache", str(dataset.root))
    out.print(table)


def _where_line(where: dict) -> str:
    """The rows a dataset read from its source (a manifest's ``where``)."""
    from nas.data.row_filter import passed_text

    passed = passed_text(where["rows_passed_by"], where["files_passed_by"])
    return f"where {where['rule']} ({passed})"


def _carries_nothing(field: dict) -> bool:
    """A categorical or multi-hot field whose only ids are 0 (missing) and 1 (unknown)."""
    return field["kind"] in ("categorical", "multi_hot") and field["cardinality"] <= 2


def _field_label(field: dict) -> str:
    if field["kind"] == "dense":
        return f"{field['name']} (dense)"
    kind = "multi-hot, " if field["kind"] == "multi_hot" else ""
    return f"{field['name']} ({kind}{field['cardinality']:,})"


def _dataset_summary(dataset, span: tuple[int, int] | None) -> dict:
    m = dataset.manifest
    keys = (
        "name",
        "rows",
        "users",
        "items",
        "requests",
        "positive_rate",
        "label_rates",
        "split_sizes",
        "split_rule",
        "split_checksum",
        "label_rule",
        "source",
        "schema",
        "absent_columns",
        "read_by_line",
        "skipped_lines",
        "where",
        "joined",
    )
    summary = {k: m[k] for k in keys if k in m}
    if span:
        from nas.data.schema_file import utc_text

        summary["times"] = {"first": utc_text(span[0]), "last": utc_text(span[1])}
    return {**summary, "cache": str(dataset.root)}


def _time_span(dataset) -> tuple[int, int] | None:
    """The first and last time over every row, unix seconds (None: the dataset has none)."""
    from nas.data.profile import time_bounds

    bounds = time_bounds(dataset).values()
    return (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else None


def _below(path: Path, root: Path) -> str:
    """A file's path below the source's folder (partitions' folders and all)."""
    try:
        return str(path.absolute().relative_to(root.absolute()))
    except ValueError:
        return path.name


# how a draft's title names a CSV source's delimiter other than "," and "\t"
DELIMITER_NAMES = {
    ";": "';' (as Excel writes CSV where a comma is the decimal mark)",
    "|": "'|'",
    "\x01": "Ctrl-A, \\x01 (as Hive writes its text tables)",
}


# --labels NAME=KEY in PATH: a label from another log (``joined``), by a key column both hold
JOINED = re.compile(r"(?P<name>[^=\s]+)=(?P<key>\S+) in (?P<path>.+)")


def _sample_of(source):
    """Rows spread over a found source's files (``read_sample``)."""
    from nas.data.infer import read_sample

    return read_sample(
        source.files,
        source.format,
        source.delimiter,
        columns=source.columns,
        partitions=source.partitions,
        views=source.views,
        decimal=source.decimal,
        thousands=source.thousands,
        escape=source.escape,
    )


def _declared(source, sample, out: Path) -> str:
    """A found source as a schema file at ``out`` declares it: its format and path
    (relative to ``out``'s folder), and what its sample showed of how to read it."""
    import os

    from nas.data.infer import quoted
    from nas.data.row_files import HIVE_DELIMITER

    path = os.path.relpath(source.pattern, out.absolute().parent)
    declared = f"format: {source.format}, path: {quoted(path)}"
    if source.delimiter != ",":
        declared += f", delimiter: {json.dumps(source.delimiter)}"
    if source.delimiter == HIVE_DELIMITER:  # (its fields are never quoted: a '"' is text)
        declared += ", quoting: false"
    if source.escape is not None:
        declared += f", escape: {json.dumps(source.escape)}"
    if source.decimal != ".":
        declared += f', decimal: "{source.decimal}"'
    if source.thousands is not None:
        declared += f", thousands: {json.dumps(source.thousands)}"
    if source.columns:
        declared += f", header: false, columns: [{', '.join(source.columns)}]"
    if sample.skipped.lines:  # lines that are not rows: prepare would refuse the source
        declared += ", on_bad_lines: skip"
    if sample.encoding != "utf-8":  # text that is not UTF-8: prepare would refuse it
        declared += f", encoding: {sample.encoding}"
    return declared


def _joined_label(text: str, sample, out: Path) -> tuple[str, str, str]:
    """``--labels NAME=KEY in PATH``: the label's name, its key column, and its entry in a
    draft's labels (``{name, joined: {source, key}}``); the key refused where either
    log's sample lacks it."""
    from nas.core.names import is_name
    from nas.data.infer import found_source, quoted

    match = JOINED.fullmatch(text)
    name, key, path = match["name"], match["key"], match["path"].strip()
    if not is_name(name):
        raise ConfigError("--labels", f"{shown(name)} is no label name (letters, digits, _.-)")
    try:
        other = found_source(path)
        other_sample = _sample_of(other)
    except ConfigError as err:  # (said of the source: here, of the other log)
        raise ConfigError("--labels", f"{shown(text)}: {err.message}") from None
    for log, held in ((sample, "the source"), (other_sample, path)):
        columns = log.table.column_names
        if key not in columns:
            raise ConfigError(
                "--labels",
                f"{shown(text)}: {key!r} is not a column of {held}; its columns: "
                f"{', '.join(columns)}",
            )
    entry = (
        f"{{name: {name}, joined: {{source: {{{_declared(other, other_sample, out)}}}, "
        f"key: {quoted(key)}}}}}"
    )
    return name, key, entry


def cmd_data_schema(args: argparse.Namespace) -> None:
    from nas.core.disk import new_file as new_path
    from nas.core.names import is_name
    from nas.data.infer import found_source, infer_schema
    from nas.data.row_files import pattern_root
    from nas.data.schema_file import load_schema_file, not_a_zone, time_zone

    name = args.name or args.out.stem
    if not is_name(name):
        raise ConfigError("--name", f"{shown(name)} is not a dataset name (letters, digits, _.-)")
    if args.tz is not None and not time_zone(args.tz):
        raise ConfigError("--tz", not_a_zone(args.tz))
    source = found_source(args.source)
    root = pattern_root(source.pattern)
    sample = _sample_of(source)
    declared = _declared(source, sample, args.out)
    skipped = sample.skipped
    labels = [x.strip() for given in args.labels or () for x in given.split(",") if x.strip()]
    joined = [_joined_label(text, sample, args.out) for text in labels if JOINED.fullmatch(text)]
    labels = [text for text in labels if not JOINED.fullmatch(text)]
    try:
        draft = infer_schema(sample, name, declared, labels or None, args.tz, joined)
    except ConfigError as err:
        if not (source.columns and err.field == "--labels"):
            raise
        raise ConfigError(  # where c1 comes from
            err.field,
            f"{err.message}; the file has no header (its first line holds values like the "
            f"lines below it): its columns are named c1 to c{len(source.columns)}",
        ) from None
    with new_path(args.out) as tmp:
        tmp.write_text(draft.text)
        load_schema_file(tmp)  # a draft that does not load is a bug here, not the user's
    if args.json:
        keys = ("column", "type", "as", "why")
        emit_json(
            {
                "out": str(args.out),
                "header": source.columns is None,
                "delimiter": source.delimiter if source.format == "csv" else None,
                "decimal": source.decimal if source.format == "csv" else None,
                "thousands": source.thousands,
                "columns": [dict(zip(keys, r, strict=True)) for r in draft.reasons],
                "encoding": sample.encoding,
                "bad_lines": {"lines": skipped.lines, "first": skipped.first}
                if skipped.lines
                else None,
            }
        )
        return
    rows, read = len(sample.table), sample.files
    title = f"{args.out}: from {rows:,} rows of {read[0]}"
    if len(read) > 1:
        some = "each" if len(read) == len(source.files) else f"{len(read)}"
        title = (
            f"{args.out}: from rows of {some} of its {len(source.files)} files "
            f"({_below(read[0], root)} to {_below(read[-1], root)}), {rows:,} in all"
        )
    if source.format in ("delta", "iceberg"):
        title += f"; a {source.format.title()} table: its current files, not those it removed"
    if source.delimiter not in (",", "\t"):
        title += f"; its fields are split by {DELIMITER_NAMES[source.delimiter]}"
    if source.decimal != ".":
        title += "; its numbers' decimal mark is a comma (3,14)"
    if source.thousands is not None:
        title += f"; its numbers' thousands are separated by {json.dumps(source.thousands)}"
    if source.columns:
        title += (
            f"; no header (its first line holds values like the lines below it): columns "
            f"named c1 to c{len(source.columns)} (rename them in source.columns)"
        )
    if sample.encoding != "utf-8":
        named = {"cp1252": "Windows' Western European, as Excel writes CSV there"}
        title += (
            f"; its text is not UTF-8: read as {sample.encoding} "
            f"({named.get(sample.encoding, 'Latin-1')}), as the draft's source.encoding says "
            "(give the file's own where it is another: shift_jis, gbk, ...)"
        )
    if skipped.lines:
        title += (
            f"; {skipped.lines:,} line{'s' * (skipped.lines > 1)} read not a row "
            f"({skipped.first}): the draft says on_bad_lines: skip, so prepare passes such "
            "lines by, counted (remove it to refuse them)"
        )
    table_out = Table(title=title, title_justify="left")
    for column in ("column", "type", "taken as", "why"):  # (a nested type cut short: --json)
        cut = {"max_width": 40, "overflow": "ellipsis", "no_wrap": True} if column == "type" else {}
        table_out.add_column(column, **cut)
    for row in draft.reasons:
        table_out.add_row(*row)
    out.print(table_out)
    out.print(
        f"read it, then: nas data prepare {args.out} (docs/models-and-data.md)", highlight=False
    )


def cmd_data_list(args: argparse.Namespace) -> None:
    from nas.core.paths import data_cache_dir
    from nas.data import DATASETS
    from nas.data.prepared import cached_names, open_prepared

    cache_dir = args.cache_dir or data_cache_dir()
    rows = []
    for name, info in DATASETS.items():
        dataset = open_prepared(cache_dir / name)
        rows.append(
            {
                "name": name,
                "description": info.description,
                "prepared": dataset is not None,
                "rows": dataset.manifest["rows"] if dataset else None,
            }
        )
    for name in cached_names(cache_dir):  # schema files' datasets: known once prepared
        dataset = open_prepared(cache_dir / name)
        if dataset is None or dataset.manifest["source"].get("kind") != "schema":
            continue
        rows.append(
            {
                "name": dataset.name,
                "description": f"schema file {dataset.manifest['source']['file']}",
                "prepared": True,
                "rows": dataset.manifest["rows"],
            }
        )
    if args.json:
        emit_json({"cache": str(cache_dir), "datasets": rows})
        return
    table = Table(title=f"datasets (cache: {cache_dir})", title_justify="left")
    for column in ("name", "prepared", "rows", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            "yes" if row["prepared"] else "no",
            f"{row['rows']:,}" if row["rows"] else "",
            row["description"],
        )
    out.print(table)


def _loaded(args: argparse.Namespace):
    """The dataset ``args.name``, prepared first (under a spinner) if it is not yet."""
    from nas.data import load_dataset

    loading = console.status(f"Loading {args.name} ...") if not args.json else nullcontext()
    with as_flags(), loading as status:
        preparing = preparing_under(status, f"Preparing {args.name} (first use)")
        return load_dataset(args.name, args.cache_dir, preparing)


def cmd_data_inspect(args: argparse.Namespace) -> None:
    from nas.data.profile import profile

    dataset = _loaded(args)
    figures = {**profile(dataset), "version": dataset.version}
    if where := dataset.manifest.get("where"):  # source.where
        figures["where"] = where
    if joined := dataset.manifest.get("joined"):  # labels from other logs
        figures["joined"] = joined
    if args.json:
        emit_json(figures)
        return
    head = Table(title=f"{figures['name']}: {figures['rows']:,} rows", title_justify="left")
    head.add_column("split")
    head.add_column("rows", justify="right")
    for label in figures["labels"]:
        head.add_column(f"{label} rate", justify="right")
    times = figures["times"]
    if times:
        head.add_column("first time (UTC)")
        head.add_column("last time (UTC)")
    for split, rows in figures["split_sizes"].items():
        rates = [f"{figures['labels'][label][split]:.4f}" for label in figures["labels"]]
        span = (
            [_minute(times.get(split, {}).get(k, "")) for k in ("first", "last")] if times else []
        )
        head.add_row(split, f"{rows:,}", *rates, *span)
    out.print(head)
    out.print(
        f"split: {figures['split_rule']} (checksum {figures['split_checksum'][:16]}); "
        f"version {figures['version']}"
    )
    if where := figures.get("where"):
        out.print(f"rows read {_where_line(where)}", highlight=False, soft_wrap=True)
    for name, joined in figures.get("joined", {}).items():
        out.print(
            f"label {name} from {joined['rows']:,} rows of {joined['rule']}",
            highlight=False,
            soft_wrap=True,
        )
    table = Table(title="fields", title_justify="left")
    for column in (
        "field",
        "kind",
        "side",
        "cardinality",
        "missing",
        "out of vocab",
        "length p50/p90/p99/max",
    ):
        table.add_column(column, justify="left" if column in ("field", "kind", "side") else "right")
    for f in figures["fields"]:
        length = f.get("length")
        table.add_row(
            f["name"],
            f["kind"],
            f.get("side", ""),
            f"{f['cardinality']:,}" if "cardinality" in f else "",
            f"{f['missing']:.2%}" if "missing" in f else "",
            f"{f['out_of_vocabulary']:.2%}" if "out_of_vocabulary" in f else "",
            "/".join(f"{length[k]:g}" for k in ("p50", "p90", "p99", "max")) if length else "",
        )
    out.print(table)


def _minute(text: str) -> str:
    """An ISO date-time in UTC to the minute ("2024-05-01 12:30"); other text as it is."""
    return text[:16].replace("T", " ") if text[10:11] == "T" else text


def cmd_data_export(args: argparse.Namespace) -> None:
    from nas.data.export import export_splits
    from nas.data.prepared import SPLITS

    dataset = _loaded(args)
    splits = args.split or SPLITS
    total = sum(dataset.manifest["split_sizes"][split] for split in splits)
    start = time.perf_counter()
    with progress_bar(eta=True) if not args.json else nullcontext() as bar:
        task = bar.add_task(f"Exporting {dataset.name}", total=total, note="") if bar else None
        exported = export_splits(
            dataset,
            args.out,
            splits,
            progress=(lambda rows: bar.advance(task, rows)) if bar else None,
        )
    seconds = time.perf_counter() - start
    summary = {**exported.to_dict(), "dataset": dataset.name, "version": dataset.version}
    summary["seconds"] = round(seconds, 2)
    if args.json:
        emit_json(summary)
        return
    rows = ", ".join(f"{split} {count:,}" for split, count in exported.rows.items())
    out.print(
        f"wrote {exported.path} ({exported.bytes / 2**20:,.1f} MiB, {seconds:.1f} s): "
        f"{dataset.name} version {dataset.version}, rows {rows}",
        highlight=False,
        soft_wrap=True,
    )
    out.print(f"columns: {', '.join(exported.columns)}", highlight=False, soft_wrap=True)
    out.print(
        "ids as the models read them (0 missing, 1 out of vocabulary); source_row joins a row "
        "back to its source file; each field's cardinality is in the file's metadata (key "
        "'recnas'); docs/models-and-data.md, 'Exporting a dataset'",
        highlight=False,
        soft_wrap=True,
    )


def cmd_data_rows(args: argparse.Namespace) -> None:
    from nas.data.export import export_raw_rows, hashed_columns

    dataset = _loaded(args)
    total = len(dataset.split_rows(args.split))
    total = total if args.rows is None else min(args.rows, total)
    with progress_bar(eta=True) if not args.json else nullcontext() as bar:
        task = bar.add_task(f"Writing {args.split} rows", total=total, note="") if bar else None
        written = export_raw_rows(
            dataset,
            args.split,
            args.out,
            args.rows,
            progress=(lambda rows: bar.advance(task, rows)) if bar else None,
        )
    hashed = hashed_columns(dataset)
    if args.json:
        emit_json(written.to_dict() | {"dataset": dataset.name, "empty_columns": hashed})
        return
    out.print(
        f"wrote {written.path} ({written.bytes / 2**20:,.1f} MiB): {total:,} {args.split} rows "
        f"of {dataset.name} in the raw form, each with its labels; score them with: nas "
        f"predict MODEL_URI --input {written.path}",
        highlight=False,
        soft_wrap=True,
    )
    if hashed:
        out.print(
            f"written empty: {', '.join(hashed)} (hashed, and {dataset.name} was prepared "
            "before recnas kept a value for each hashed id), so a model scores these rows "
            "otherwise than their source's; prepare it again (--force) to read them back",
            highlight=False,
            soft_wrap=True,
        )
