"""``nas models``, ``nas predict``, ``nas export``: retrained models in MLflow's registry.

nas models list [NAME]                      registered versions, their aliases and tags
nas models register RETRAIN_ID NAME         register a finished retrain's best model
nas models compare URI URI --input ROWS     measure models on the same labelled rows
nas predict MODEL_URI --input rows.jsonl    score raw rows (``nas.cli.predict``)
nas export MODEL_URI --format torch-export --out DIR
"""

from __future__ import annotations

import argparse

from rich import box
from rich.table import Table

from nas.cli.flags import folder, open_registry, registry_flag, tracking_flag, tracking_uri
from nas.cli.predict import add_command as add_predict_command
from nas.cli.predict import add_compare_command
from nas.cli.render import console, emit_json, out, phrase, styled
from nas.core.errors import ConfigError, shown

FORMATS = ("torch-export", "torchscript")


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
    add_compare_command(verbs)

    add_predict_command(commands)

    export = commands.add_parser("export", help="export a registered model for serving")
    export.add_argument("model_uri", help="e.g. models:/recnas-ml1m@champion")
    export.add_argument("--format", default="torch-export", help=" or ".join(FORMATS))
    export.add_argument(
        "--out", required=True, type=folder, help="folder to write (must not exist)"
    )
    tracking_flag(export)
    export.add_argument("--json", action="store_true")
    export.set_defaults(run=cmd_export)


def cmd_models_list(args: argparse.Namespace) -> None:
    from nas.service.serving import list_versions

    versions = list_versions(tracking_uri(args), args.name)
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
            tags.get("test_ne", tags.get("test_ne_mean", ""))[:6],
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
            f"{what}{how}; score rows with: nas predict {registered.uri} --input rows.jsonl "
            "(a split's, labelled: nas data rows DATASET --out rows.jsonl)",
        )
    )


def cmd_export(args: argparse.Namespace) -> None:
    from nas.service.model_export import export_model

    if args.format not in FORMATS:
        valid = ", ".join(FORMATS)
        raise ConfigError("--format", f"must be one of {valid}, got {shown(args.format)}")
    if args.out.exists():
        raise ConfigError("--out", f"{args.out} exists; give a new folder (nothing is overwritten)")
    with console.status(f"Exporting {args.model_uri} as {args.format} ..."):
        written = export_model(tracking_uri(args), args.model_uri, args.format, args.out)
    if args.json:
        emit_json(written)
        return
    out.print(
        f"exported {args.model_uri} ({args.format}) to {args.out}:", highlight=False, soft_wrap=True
    )
    for name, what in written["files"].items():
        out.print(f"  {name}  {what}", highlight=False)
