"""``nas models``, ``nas predict``, ``nas export``: retrained models in MLflow's registry.

nas models list [NAME]                      registered versions, their aliases and tags
nas models register RETRAIN_ID NAME         register a finished retrain's best model
nas predict MODEL_URI --input rows.jsonl    score raw rows (JSONL, JSON, CSV or Parquet)
nas export MODEL_URI --format torch-export --out DIR
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from pathlib import Path

from rich import box
from rich.table import Table

from nas.cli.flags import folder, new_file, open_registry, registry_flag
from nas.cli.render import console, emit_json, out, phrase, styled
from nas.core.errors import ConfigError, shown
from nas.core.user_files import require_file

FORMATS = ("torch-export", "torchscript")
TABLE_ROWS = 20  # rows a predict's table shows
SCORED_SUFFIXES = (".parquet", ".jsonl")  # what predict --out writes


def add_commands(commands) -> None:
    models = commands.add_parser("models", help="registered models (MLflow Model Registry)")
    models.set_defaults(group=models)
    verbs = models.add_subparsers(title="commands", metavar="COMMAND")
    listing = verbs.add_parser("list", help="registered versions, their aliases and tags")
    listing.add_argument("name", nargs="?", help="one registered model (default: all)")
    tracking_flag(listing)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=cmd_models_list)
    register = verbs.add_parser("register", help="register a finished retrain's best model")
    register.add_argument("retrain_id", help="a retrain's id (a unique prefix is enough)")
    register.add_argument("name", help="the registered model's name")
    register.add_argument("--alias", default="champion", help="alias to set (default champion)")
    registry_flag(register)
    register.add_argument("--json", action="store_true")
    register.set_defaults(run=cmd_models_register)

    predict = commands.add_parser("predict", help="score raw rows with a registered model")
    predict.add_argument("model_uri", help="e.g. models:/recnas-ml1m@champion, or runs:/ID/model")
    predict.add_argument(
        "--input",
        required=True,
        help="rows as JSON lines (.jsonl), a JSON array (.json), CSV or Parquet",
    )
    predict.add_argument(
        "--out",
        type=new_file(*SCORED_SUFFIXES),
        metavar="FILE",
        help="write every row with its probabilities to a new .parquet or .jsonl file",
    )
    tracking_flag(predict)
    predict.add_argument("--json", action="store_true", help="one JSON object per row")
    predict.set_defaults(run=cmd_predict)

    export = commands.add_parser("export", help="export a registered model for serving")
    export.add_argument("model_uri", help="e.g. models:/recnas-ml1m@champion")
    export.add_argument("--format", default="torch-export", help=" or ".join(FORMATS))
    export.add_argument(
        "--out", required=True, type=folder, help="folder to write (must not exist)"
    )
    tracking_flag(export)
    export.add_argument("--json", action="store_true")
    export.set_defaults(run=cmd_export)


def tracking_flag(parser) -> None:
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking store (default: MLFLOW_TRACKING_URI, else the runs folder's)",
    )


def _tracking(args: argparse.Namespace) -> str:
    from nas.service import endpoints

    given = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    return endpoints.tracking_uri(given) if given else endpoints.local_tracking_uri()


def cmd_models_list(args: argparse.Namespace) -> None:
    from nas.service.serving import list_versions

    versions = list_versions(_tracking(args), args.name)
    if args.json:
        emit_json(versions)
        return
    if not versions and args.name:
        out.print(f"no registered model named {shown(args.name)} (all of them: nas models list)")
        return
    if not versions:
        out.print("no registered models yet; register one with nas retrain ... --register NAME")
        return
    table = Table(box=box.SIMPLE_HEAD, title="registered models", title_justify="left")
    for column in ("name", "version", "aliases", "architecture", "test NE", "search"):
        table.add_column(column, overflow="fold")
    table.add_column("created (UTC)")
    for v in versions:
        tags = v["tags"]
        table.add_row(
            v["name"],
            v["version"],
            ", ".join("@" + a for a in v["aliases"]),
            tags.get("arch_id", "")[:12],
            tags.get("test_ne_mean", "")[:6],
            tags.get("search_id", ""),
            v["created"],
        )
    out.print(table)


def cmd_models_register(args: argparse.Namespace) -> None:
    from nas.service.serving import register_retrain

    registry = open_registry(args)
    search = registry.get_search(args.retrain_id)
    with console.status(f"Registering {search.id}'s best model as {args.name} ..."):
        registered = register_retrain(registry, search, args.name, args.alias)
    if args.json:
        emit_json(registered.to_dict())
    else:
        print_registered(registered)


def print_registered(registered) -> None:
    alias = f"@{registered.alias}"
    what = f" version {registered.version} ({registered.arch_id[:12]}, seed {registered.seed})"
    how = f" as {alias}" if registered.new else f" held this model already; it is now {alias}"
    out.print(
        phrase(
            "registered " if registered.new else "",
            styled(registered.name, "bold"),
            f"{what}{how}; score rows with: nas predict {registered.uri} --input rows.jsonl",
        )
    )


# MLflow's scoring request forms (``{"dataframe_records": [...]}`` and the like) whose
# value is a list of row objects: a .json file may hold its rows under one of these.
JSON_ROW_KEYS = ("dataframe_records", "instances", "inputs")


def read_rows(path: str) -> list[dict]:
    """Rows from JSON lines, a JSON array (or MLflow's scoring request forms), CSV or
    Parquet (by the file's suffix); ``ConfigError`` names the line."""
    file = Path(path)
    require_file(file, "--input")
    suffix = file.suffix.lower()
    if suffix not in (".jsonl", ".json", ".csv", ".parquet"):
        raise ConfigError(
            "--input", f"{file}: use a .jsonl (JSON lines), .json, .csv or .parquet file"
        )
    if suffix == ".parquet":
        return _parquet_rows(file)
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError("--input", f"{file}: cannot read it ({err})") from None
    if suffix == ".csv":
        return list(csv.DictReader(text.splitlines()))
    if suffix == ".json":
        return _json_rows(file, text)
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as err:
            raise ConfigError("--input", f"{file} line {number}: not JSON ({err})") from None
    return rows


def _parquet_rows(file: Path) -> list[dict]:
    """A Parquet file's rows (a day of your own logs, say), each as a mapping of column to
    value: lists stay lists, as the model's raw form reads them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(file).to_pylist()
    except (pa.ArrowException, OSError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError("--input", f"{file}: not readable as Parquet ({reason})") from None


def _json_rows(file: Path, text: str) -> list:
    """A .json file's rows: an array of row objects, one row object, or an object holding
    the array under one of ``JSON_ROW_KEYS``."""
    try:
        found = json.loads(text)
    except ValueError as err:
        raise ConfigError("--input", f"{file}: not JSON ({err})") from None
    if isinstance(found, dict):
        wrapped = [key for key in JSON_ROW_KEYS if isinstance(found.get(key), list)]
        if wrapped and len(found) == 1:
            found = found[wrapped[0]]
    return found if isinstance(found, list) else [found]


def cmd_predict(args: argparse.Namespace) -> None:
    from nas.service.serving import predict_rows

    rows = read_rows(args.input)
    if not rows:
        raise ConfigError("--input", f"{args.input} has no rows")
    with console.status(f"Scoring {len(rows):,} rows with {args.model_uri} ..."):
        predicted = predict_rows(_tracking(args), args.model_uri, rows)
    scores = predicted.scores
    if args.out:
        write_scored(args.out, rows, scores)
    if args.json:
        for i, row in enumerate(rows):
            # default=str: a Parquet row's times are datetimes
            scored = {"row": row, **{k: float(v[i]) for k, v in scores.items()}}
            print(json.dumps(scored, default=str))
        return
    table = Table(box=box.SIMPLE_HEAD, title=f"{args.model_uri}: probabilities")
    table.add_column("row", justify="right")
    shown = [c for c in list(rows[0])[:4] if c != "history"]
    for column in shown:
        table.add_column(column, overflow="ellipsis", max_width=24)
    for name in scores:
        table.add_column(name, justify="right")
    for i, row in enumerate(rows[:TABLE_ROWS]):
        table.add_row(
            str(i + 1),
            *(str(row.get(c, "")) for c in shown),
            *(f"{v[i]:.4f}" for v in scores.values()),
        )
    out.print(table)
    if len(rows) > TABLE_ROWS:
        every = f"every row is in {args.out}" if args.out else "--out FILE or --json: every row"
        out.print(f"the first {TABLE_ROWS} of {len(rows):,} rows; {every}", highlight=False)
    elif args.out:
        out.print(f"wrote {args.out}", highlight=False)
    print_measured(predicted, len(rows))


def print_measured(predicted, rows: int) -> None:
    """What the rows' own labels say of the model's probabilities, if they carry them."""
    if predicted.unmeasured:
        out.print(f"not measured: {predicted.unmeasured} (every row needs its label)")
    for name, m in (predicted.measured or {}).items():
        auc = "n/a (one class)" if m["auc"] != m["auc"] else f"{m['auc']:.4f}"
        out.print(
            f"label {name} ({m['rule']}) on these {rows:,} rows: NE {m['ne']:.4f} (against "
            f"the training rate {m['train_rate']:.4f}), AUC {auc}, logloss {m['logloss']:.4f}",
            highlight=False,
        )


def write_scored(path: Path, rows: list[dict], scores: dict) -> None:
    """Each input row with its probabilities, as Parquet or JSON lines (by the suffix), a
    new file named only when complete (``new_file``)."""
    from nas.core.disk import new_file

    with new_file(path) as tmp:
        if path.suffix.lower() == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            columns = {name: _arrow_column(rows, name) for name in _column_names(rows)}
            for name, values in scores.items():
                columns[_fresh(name, list(columns))] = pa.array(values)
            pq.write_table(pa.table(columns), tmp)
        else:
            with open(tmp, "w") as file:
                for i, row in enumerate(rows):
                    scored = {"row": row, **{k: float(v[i]) for k, v in scores.items()}}
                    file.write(json.dumps(scored, default=str) + "\n")


def _column_names(rows: list[dict]) -> list[str]:
    """Every column any row has, in the order rows first name them."""
    return list(dict.fromkeys(str(name) for row in rows for name in row))


def _arrow_column(rows: list[dict], name: str):
    """A column's values as Arrow reads them; where they mix types (ids as numbers on some
    rows, text on others; a history's [item, action, time] events), as their JSON text."""
    import pyarrow as pa

    values = [row.get(name) for row in rows]
    try:
        return pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return pa.array([None if v is None else json.dumps(v, default=str) for v in values])


def _fresh(name: str, taken: list[str]) -> str:
    """An output column's name, underscored until no input column has it."""
    while name in taken:
        name = f"_{name}"
    return name


def cmd_export(args: argparse.Namespace) -> None:
    from nas.service.serving import export_model

    if args.format not in FORMATS:
        valid = ", ".join(FORMATS)
        raise ConfigError("--format", f"must be one of {valid}, got {shown(args.format)}")
    if args.out.exists():
        raise ConfigError("--out", f"{args.out} exists; give a new folder (nothing is overwritten)")
    with console.status(f"Exporting {args.model_uri} as {args.format} ..."):
        written = export_model(_tracking(args), args.model_uri, args.format, args.out)
    if args.json:
        emit_json(written)
        return
    out.print(
        f"exported {args.model_uri} ({args.format}) to {args.out}:", highlight=False, soft_wrap=True
    )
    for name, what in written["files"].items():
        out.print(f"  {name}  {what}", highlight=False)
