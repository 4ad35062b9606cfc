"""``nas blocks`` and ``nas train``: the block library, and one architecture trained."""

from __future__ import annotations

import argparse
import json
from contextlib import nullcontext
from pathlib import Path

from rich.table import Table

from nas.cli.flags import as_flags, common_flags, integer, number, seed_number
from nas.cli.render import console, emit_json, out, preparing_under, progress_bar, si
from nas.core.errors import ConfigError
from nas.search.objectives import SERVING_CANDIDATES
from workers.train_settings import TRAIN_PRECISIONS


def add_commands(commands) -> None:
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
        "--seed", type=seed_number, default=0, help="seed for initialisation and shuffling"
    )
    train.add_argument(
        "--precision",
        choices=TRAIN_PRECISIONS,
        default="fp32",
        help="fp32 (default), bf16 mixed precision (faster for MLP-heavy models on a CPU "
        "with native bfloat16), or fp8: bf16 with every GEMM's forward in row-wise FP8",
    )
    train.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to train: auto (default: a CUDA GPU when one is visible, else the CPU), "
        "cpu or cuda",
    )
    train.add_argument(
        "--workers",
        type=integer,
        default=1,
        help="processes that train it together, data parallel (default 1): each takes an "
        "equal slice of every step's --batch-size rows; the CPU only, for now",
    )
    train.add_argument(
        "--split",
        choices=("valid", "test"),
        default="valid",
        help="where to measure (default valid; keep test for the final report)",
    )
    common_flags(train)
    train.set_defaults(run=cmd_train)


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


def cmd_train(args: argparse.Namespace) -> None:
    from nas.arch.model import model_configs
    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from workers.device import resolve_device
    from workers.train import TrainConfig
    from workers.trial import evaluate
    from workers.trial_data import TrialData

    device = resolve_device(args.device)
    if args.workers < 1 or args.workers > 64:
        raise ConfigError("--workers", f"must be an integer from 1 to 64, got {args.workers}")
    if args.workers > 1 and device.type != "cpu":
        raise ConfigError(
            "--workers", "data-parallel training runs on CPUs only for now; add --device cpu"
        )
    spec = ArchSpec.load(args.spec)
    overrides = {
        k: v for k, v in (("lr", args.lr), ("embedding_lr", args.embedding_lr)) if v is not None
    }
    with as_flags():
        config = TrainConfig(
            steps=args.steps,
            batch_size=args.batch_size,
            seed=args.seed,
            precision=args.precision,
            **overrides,
        )
    loading = console.status(f"Loading {args.dataset} ...") if not args.json else nullcontext()
    with loading as status:
        preparing = preparing_under(status, f"Preparing {args.dataset} (first use)")
        dataset = load_dataset(args.dataset, args.cache_dir, preparing)
    try:
        model_configs(spec, dataset.schema)  # every shape error surfaces here, before training
    except ConfigError as err:
        raise err.within(source=f"{args.spec} (on {dataset.name})") from None
    if args.workers > 1:
        from workers.data_parallel import check_batch

        with as_flags():
            check_batch(config.batch_size, args.workers)
        result = _train_in_processes(spec, dataset, args, config)
        if args.json:
            emit_json(result.to_dict() | {"precision": config.precision, "device": "cpu"})
        else:
            _print_result(result, f"{config.precision} on {args.workers} CPU processes")
        return
    data = TrialData.from_prepared(dataset, args.split, mapped=True)
    if args.json:
        result = evaluate(spec, data, config, device=device)
        emit_json(result.to_dict() | {"precision": config.precision, "device": device.type})
        return
    result = _train_with_progress(spec, data, config, device)
    _print_result(result, f"{config.precision} on {_device_name(device)}")


def _train_in_processes(spec, dataset, args, config):
    """``nas train --workers N``: N processes of one gloo group train it, rank 0 reports."""
    import os

    from nas.cli.signals import stop_on_sigterm
    from workers.data_parallel import run_processes

    stop_on_sigterm()  # as Ctrl-C: the processes end with this one (at exit: daemons)
    threads = max(1, (os.cpu_count() or 1) // args.workers)
    task = (spec.to_dict(), str(dataset.root), args.split, config)
    with console.status(f"Training {spec.name or spec.arch_id} on {args.workers} processes ..."):
        return run_processes(args.workers, _trained_here, task, threads)[0]


def _trained_here(spec: dict, root: str, split: str, config):
    """One process's share of ``nas train --workers N`` (every process ends with the same
    weights and figures)."""
    from pathlib import Path

    from nas.arch.spec import ArchSpec
    from nas.data.prepared import open_prepared
    from workers.trial import evaluate
    from workers.trial_data import TrialData

    data = TrialData.from_prepared(open_prepared(Path(root)), split, mapped=True)
    return evaluate(ArchSpec.from_dict(spec), data, config)


def _device_name(device) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU"


def _train_with_progress(spec, data, config, device):

    from workers.trial import evaluate

    label = spec.name or spec.arch_id
    with progress_bar("loss {task.fields[loss]:.4f}") as progress:
        task = progress.add_task(f"train {label}", total=config.steps, loss=float("nan"))

        def on_step(step: int, loss: float) -> None:
            if step % 10 == 0 or step == config.steps:
                progress.update(task, completed=step, loss=loss)

            if step == config.steps:
                progress.update(task, description=f"evaluate {label} on {data.split}")

        return evaluate(spec, data, config, on_step=on_step, device=device)


def _print_result(result, precision: str) -> None:
    table = Table(
        title=f"{result.name or 'candidate'} on {result.dataset} ({result.split} split)",
        show_header=False,
        title_justify="left",
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column(style="dim")
    labels = _labels(result)
    mean = f" (the mean over {len(labels)} labels)" if labels else ""
    for label, value, note in (
        ("arch_id", result.arch_id, ""),
        (
            "NE",
            f"{result.ne:.4f}",
            "logloss / entropy of the training positive rate; lower is better" + mean,
        ),
        ("AUC", f"{result.auc:.4f}", ""),
        *(
            [("gAUC", f"{result.gauc:.4f}", "AUC per user, weighted by rows")]
            if result.gauc is not None
            else []
        ),
        *(
            [("gAUC per request", f"{result.gauc_request:.4f}", "AUC per request, likewise")]
            if result.gauc_request is not None
            else []
        ),
        ("logloss", f"{result.logloss:.4f}", ""),
        ("FLOPs / example", si(result.flops), "2 per multiply-add, measured with fvcore"),
        (
            "serving FLOPs",
            si(result.serving_flops),
            f"per candidate, {SERVING_CANDIDATES} per request, request side computed once",
        ),
        ("params", f"{result.params:,}", ""),
        ("train examples/s", f"{result.train_examples_per_s:,.0f}", ""),
        (
            "seconds",
            f"{result.seconds:.1f}",
            f"{result.steps} steps x {result.batch_size}, seed {result.seed}, {precision}",
        ),
    ):
        table.add_row(label, value, note)
    out.print(table)
    if labels:
        out.print(_by_label(result, labels))


def _labels(result) -> list[str]:
    """The labels of a result on a dataset of several (each has its ``ne:<label>``)."""
    from nas.search.objectives import split_label

    found = [split_label(key) for key in result.per_label]
    return [label for base, label in found if base == "ne"]


def _by_label(result, labels: list[str]) -> Table:
    table = Table(title="by label (one head each)", title_justify="left")
    figures = [("NE", "ne"), ("AUC", "auc"), ("gAUC", "gauc"), ("per request", "gauc_request")]
    figures.append(("logloss", "logloss"))
    figures = [(h, k) for h, k in figures if f"{k}:{labels[0]}" in result.per_label]
    table.add_column("label", style="bold")
    for header, _ in figures:
        table.add_column(header, justify="right")
    for label in labels:
        table.add_row(label, *(f"{result.per_label[f'{k}:{label}']:.4f}" for _, k in figures))
    return table
