"""The ``nas`` command line.

    nas data prepare movielens-1m          build (or reuse) the cached views of a dataset
    nas data list                          datasets and what is cached
    nas blocks                             the registered blocks and their parameters
    nas train SPEC.json --dataset NAME     train one architecture, print NE/AUC/FLOPs
    nas submit SEARCH.yaml                 run a search on Ray, logging to MLflow
    nas list | status ID | pareto ID       what the registry knows about searches
    nas resume ID | cancel ID              continue after a crash or Ctrl-C; stop a search

Errors in what the user gave (a spec, a flag, a data file) print one paragraph and exit 2;
a training run that diverges exits 1.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nas.errors import ConfigError, NasError, TrainingError, shown
from nas.objectives import SERVING_CANDIDATES

console = Console(stderr=True)  # progress and messages; stdout carries results
out = Console()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):  # a command group without its command
        getattr(args, "group", parser).print_help()
        return 2
    try:
        code = args.run(args)  # a command may return an exit code; None is success
    except TrainingError as err:
        console.print(f"[red]error:[/] {escape(str(err))}", highlight=False)
        return 1
    except NasError as err:  # user input, a file, a service: one paragraph, never markup
        console.print(f"[red]error:[/] {escape(str(err))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130
    return code or 0


def integer(text: str) -> int:
    """An integer flag's value; argparse's own message would echo any text back in full."""
    try:
        return int(text)
    except ValueError:  # not a number, or over Python's 4,300-digit limit
        raise argparse.ArgumentTypeError(f"expected an integer, got {shown(text)}") from None


def number(text: str) -> float:
    """A finite number flag's value."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {shown(text)}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nas", description="Neural architecture search for ranking models."
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    data = commands.add_parser("data", help="prepare and list datasets")
    data.set_defaults(group=data)
    data_commands = data.add_subparsers(title="data commands", metavar="COMMAND")
    prepare = data_commands.add_parser(
        "prepare", help="build (or reuse) the cached views of a dataset"
    )
    prepare.add_argument(
        "name", help="dataset: movielens-1m, movielens-100k, criteo, synthetic-criteo"
    )
    prepare.add_argument(
        "--source", help="movielens-1m: folder of GroupLens .dat files; criteo: a TSV file"
    )
    prepare.add_argument(
        "--rows", type=integer, help="synthetic-criteo: rows to generate (default 100000)"
    )
    prepare.add_argument(
        "--seed", type=integer, help="synthetic-criteo: generator seed (default 0)"
    )
    prepare.add_argument(
        "--min-count", type=integer, help="criteo: keep categorical values seen this often in train"
    )
    prepare.add_argument(
        "--force", action="store_true", help="rebuild even if a matching cache exists"
    )
    _common(prepare)
    prepare.set_defaults(run=cmd_data_prepare)
    listing = data_commands.add_parser("list", help="datasets and what is cached")
    _common(listing)
    listing.set_defaults(run=cmd_data_list)

    blocks_cmd = commands.add_parser("blocks", help="the registered blocks and their parameters")
    blocks_cmd.add_argument(
        "pattern", nargs="?", default="*", help="glob over block names (default *)"
    )
    blocks_cmd.add_argument("--json", action="store_true", help="print JSON instead of a table")
    blocks_cmd.set_defaults(run=cmd_blocks)

    train = commands.add_parser("train", help="train one architecture and measure it")
    train.add_argument("spec", type=Path, help="an ArchSpec JSON file (see examples/specs/)")
    train.add_argument("--dataset", default="movielens-1m", help="a prepared or preparable dataset")
    train.add_argument("--steps", type=integer, default=2000, help="optimizer steps (default 2000)")
    train.add_argument(
        "--batch-size", type=integer, default=1024, help="examples per step (default 1024)"
    )
    train.add_argument("--lr", type=number, help="dense-weight learning rate (AdamW)")
    train.add_argument("--embedding-lr", type=number, help="embedding learning rate (lazy Adam)")
    train.add_argument(
        "--seed", type=integer, default=0, help="seed for initialisation and shuffling"
    )
    train.add_argument(
        "--split",
        choices=("valid", "test"),
        default="valid",
        help="where to measure (default valid; keep test for the final report)",
    )
    _common(train)
    train.set_defaults(run=cmd_train)

    from nas import search_cli

    search_cli.add_commands(commands)

    doctor = commands.add_parser(
        "doctor", help="check a setup: Ray, registry, MLflow, data, runs folder"
    )
    doctor.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    doctor.add_argument("--registry-url", help="registry URL (default: sqlite in nas-runs)")
    doctor.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite in nas-runs)")
    _common(doctor)
    doctor.set_defaults(run=cmd_doctor)
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="dataset cache (default $RECNAS_CACHE_DIR or ./nas-runs/data)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )


@contextmanager
def _as_flags() -> Iterator[None]:
    """Name option errors by the flag the user typed (``--batch-size``, not ``batch_size``)."""
    try:
        yield
    except ConfigError as err:
        if err.field in FLAG_FIELDS:
            raise ConfigError("--" + err.field.replace("_", "-"), err.message) from None
        raise


FLAG_FIELDS = ("steps", "batch_size", "lr", "embedding_lr", "seed", "source", "rows", "min_count")


def emit_json(data: object) -> None:
    """``--json`` output: always valid JSON (RFC 8259 has no NaN or Infinity: they print as
    null), non-JSON values (datetimes) as text."""

    def finite(value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [finite(v) for v in value]
        return value

    print(json.dumps(finite(data), indent=2, default=str, allow_nan=False))


# --- data ---------------------------------------------------------------------------------


def cmd_data_prepare(args: argparse.Namespace) -> None:
    from nas.data import PrepareRequest, prepare_dataset

    request = PrepareRequest(
        source=str(Path(args.source).resolve()) if args.source else None,
        rows=args.rows,
        seed=args.seed,
        min_count=args.min_count,
    )
    start = time.perf_counter()
    with (
        _as_flags(),
        console.status(f"Preparing {args.name} ...", spinner="dots")
        if not args.json
        else nullcontext(),
    ):
        dataset, reused = prepare_dataset(args.name, args.cache_dir, request, force=args.force)
    seconds = time.perf_counter() - start
    summary = _dataset_summary(dataset)
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
    table.add_row("positive rate", "  ".join(f"{k} {v:.4f}" for k, v in m["positive_rate"].items()))
    table.add_row("splits", "  ".join(f"{k} {v:,}" for k, v in m["split_sizes"].items()))
    table.add_row("split rule", m["split_rule"])
    table.add_row("split checksum", m["split_checksum"][:16])
    table.add_row("fields", ", ".join(_field_label(f) for f in m["schema"]))
    table.add_row("source", ", ".join(f"{k}={v}" for k, v in m["source"].items()))
    table.add_row("cache", str(dataset.root))
    out.print(table)


def _field_label(field: dict) -> str:
    if field["kind"] == "dense":
        return f"{field['name']} (dense)"
    kind = "multi-hot, " if field["kind"] == "multi_hot" else ""
    return f"{field['name']} ({kind}{field['cardinality']:,})"


def _dataset_summary(dataset) -> dict:
    m = dataset.manifest
    keys = (
        "name",
        "rows",
        "users",
        "items",
        "requests",
        "positive_rate",
        "split_sizes",
        "split_rule",
        "split_checksum",
        "label_rule",
        "source",
        "schema",
    )
    return {**{k: m[k] for k in keys if k in m}, "cache": str(dataset.root)}


def cmd_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when every check passes, 1 otherwise."""
    from nas.doctor import run_checks

    with console.status("Checking the setup ..."):
        checks = run_checks(args.address, args.registry_url, args.tracking_uri, args.cache_dir)
    if args.json:
        ok = all(check.ok for check in checks)
        emit_json({"ok": ok, "checks": [check.__dict__ for check in checks]})
    else:
        table = Table(title="nas doctor", title_justify="left")
        for column in ("check", "", "found", "to fix"):
            table.add_column(column, overflow="fold")
        for check in checks:
            mark = "[green]ok[/]" if check.ok else "[red]no[/]"
            table.add_row(check.name, mark, escape(check.found), escape(check.fix))
        out.print(table)
    return 0 if all(check.ok for check in checks) else 1


def cmd_data_list(args: argparse.Namespace) -> None:
    from nas.data import DATASETS, default_cache_dir
    from nas.data.prepared import open_prepared

    cache_dir = args.cache_dir or default_cache_dir()
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


# --- blocks -------------------------------------------------------------------------------


def cmd_blocks(args: argparse.Namespace) -> None:
    import blocks

    entries = [blocks.get_block(name) for name in blocks.list_blocks(args.pattern)]
    listing = [
        {
            "name": e.name,
            "kind": e.kind,
            "summary": e.summary,
            "parameters": {
                k: e.config_cls.default_params().get(k, "(required)")
                for k in e.config_cls.param_names()
            },
        }
        for e in entries
    ]
    if args.json:
        emit_json(listing)
        return
    if not listing:
        console.print(f"no block matches {args.pattern!r}; try: nas blocks")
        return
    table = Table(
        title='blocks: interaction blocks go in a spec\'s "interaction" list; '
        "embedding blocks are built from the dataset's fields; sequence blocks go in its "
        '"sequence" "layers" and run over the user\'s history',
        title_justify="left",
    )
    for column in ("name", "kind", "parameters (defaults)", "what it is"):
        table.add_column(column, overflow="fold")
    for item in listing:
        params = ", ".join(
            f"{k}={json.dumps(v) if v != '(required)' else v}"
            for k, v in item["parameters"].items()
        )
        table.add_row(item["name"], item["kind"], params, item["summary"])
    out.print(table)


# --- train --------------------------------------------------------------------------------


def cmd_train(args: argparse.Namespace) -> None:
    from nas.data import load_dataset
    from nas.model import model_configs
    from nas.spec import ArchSpec
    from workers.train import TrainConfig
    from workers.trial import TrialData, evaluate

    spec = ArchSpec.load(args.spec)
    overrides = {
        k: v for k, v in (("lr", args.lr), ("embedding_lr", args.embedding_lr)) if v is not None
    }
    with _as_flags():
        config = TrainConfig(
            steps=args.steps, batch_size=args.batch_size, seed=args.seed, **overrides
        )
    with console.status(f"Loading {args.dataset} ...") if not args.json else nullcontext():
        dataset = load_dataset(args.dataset, args.cache_dir)
    try:
        model_configs(spec, dataset.schema)  # every shape error surfaces here, before training
    except ConfigError as err:
        raise err.within(source=f"{args.spec} (on {dataset.name})") from None
    data = TrialData.from_prepared(dataset, args.split)
    if args.json:
        result = evaluate(spec, data, config)
        emit_json(result.to_dict())
        return
    result = _train_with_progress(spec, data, config)
    _print_result(result)


def _train_with_progress(spec, data, config):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from workers.trial import evaluate

    label = spec.name or spec.arch_id
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(f"train {label}", total=config.steps, loss=float("nan"))

        def on_step(step: int, loss: float) -> None:
            if step % 10 == 0 or step == config.steps:
                progress.update(task, completed=step, loss=loss)

            if step == config.steps:
                progress.update(task, description=f"evaluate {label} on {data.split}")

        return evaluate(spec, data, config, on_step=on_step)


def _print_result(result) -> None:
    table = Table(
        title=f"{result.name or 'candidate'} on {result.dataset} ({result.split} split)",
        show_header=False,
        title_justify="left",
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column(style="dim")
    for label, value, note in (
        ("arch_id", result.arch_id, ""),
        (
            "NE",
            f"{result.ne:.4f}",
            "logloss / entropy of the training positive rate; lower is better",
        ),
        ("AUC", f"{result.auc:.4f}", ""),
        ("logloss", f"{result.logloss:.4f}", ""),
        ("FLOPs / example", _si(result.flops), "2 per multiply-add, measured with fvcore"),
        (
            "serving FLOPs",
            _si(result.serving_flops),
            f"per candidate, {SERVING_CANDIDATES} per request, request side computed once",
        ),
        ("params", f"{result.params:,}", ""),
        ("train examples/s", f"{result.train_examples_per_s:,.0f}", ""),
        (
            "seconds",
            f"{result.seconds:.1f}",
            f"{result.steps} steps x {result.batch_size}, seed {result.seed}",
        ),
    ):
        table.add_row(label, value, note)
    out.print(table)


def _si(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f}{unit}"
    return f"{value:.0f}"


if __name__ == "__main__":
    sys.exit(main())
