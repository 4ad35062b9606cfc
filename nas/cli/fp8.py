"""``nas fp8 probe``: where FP8 is safe and fast in one architecture (LoKA-style)."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path

from rich import box
from rich.table import Table

from nas.cli.flags import integer, number
from nas.cli.render import console, emit_json, out, styled
from nas.core.errors import ConfigError
from nas.core.user_files import require_file
from nas.search.objectives import PROBE_ROWS, PROBE_THRESHOLD
from nas.service import endpoints


def add_commands(commands) -> None:
    fp8 = commands.add_parser("fp8", help="FP8: probe where it is safe and fast")
    fp8.set_defaults(group=fp8)
    verbs = fp8.add_subparsers(title="commands", metavar="COMMAND")
    probe = verbs.add_parser(
        "probe",
        help="train (or load) an architecture, find its FP8-safe GEMM sites and plan their "
        "dispatch",
    )
    probe.add_argument("spec", type=Path, help="an ArchSpec JSON file (see examples/specs/)")
    probe.add_argument(
        "--dataset",
        default="movielens-1m",
        help="a prepared or preparable dataset, or a schema file (default movielens-1m)",
    )
    probe.add_argument("--steps", type=integer, default=400, help="training steps (default 400)")
    probe.add_argument("--weights", type=Path, help="a trained state dict instead of training")
    probe.add_argument(
        "--rows", type=integer, default=PROBE_ROWS, help="validation rows for NE (20,000)"
    )
    probe.add_argument(
        "--threshold",
        type=number,
        default=PROBE_THRESHOLD,
        help="largest NE increase a safe site may cause (0.001)",
    )
    probe.add_argument("--target", default="h100-sxm", help="h100-sxm (default) or h200")
    probe.add_argument(
        "--batch", type=integer, default=4096, help="serving batch to price at (4096)"
    )
    probe.add_argument("--json", action="store_true")
    probe.set_defaults(run=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> None:
    from nas.arch.cost.targets import GPU_TARGETS, get_target
    from nas.arch.model import model_configs
    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from workers.fp8_probe import probe_candidate
    from workers.train import TrainConfig
    from workers.train_settings import MAX_BATCH, MAX_STEPS
    from workers.trial_data import TrialData

    for flag, value, most in (
        ("--steps", args.steps, MAX_STEPS),
        ("--rows", args.rows, None),  # at most the validation split's: all of them
        ("--batch", args.batch, MAX_BATCH),
    ):
        if value < 1 or (most is not None and value > most):
            within = f"from 1 to {most:,}" if most else "of 1 or more"
            raise ConfigError(flag, f"must be an integer {within}, got {value}")
    if not 0 <= args.threshold < 1:
        raise ConfigError("--threshold", f"must be in [0, 1), got {args.threshold}")
    if args.target not in GPU_TARGETS:
        raise ConfigError("--target", f"must be one of {', '.join(GPU_TARGETS)} (FP8 GPUs)")
    if args.weights is not None:
        require_file(args.weights, "--weights")
    spec = ArchSpec.load(args.spec)
    endpoints.local_tracking_uri()  # where the probe logs: checked before the training
    quiet = nullcontext() if args.json else None
    with quiet or console.status(f"Loading {args.dataset} ..."):
        dataset = load_dataset(args.dataset)
    model_configs(spec, dataset.schema)
    data = TrialData.from_prepared(dataset, "valid")
    what = "Loading its weights" if args.weights else f"Training {args.steps} steps"
    with quiet or console.status(f"{what} and probing every linear site ..."):
        result = probe_candidate(
            spec,
            data,
            TrainConfig(steps=args.steps),
            args.weights,
            args.rows,
            args.threshold,
            get_target(args.target),
            args.batch,
        )
    report = {"arch_id": spec.arch_id, "dataset": dataset.name, **result.to_dict()}
    run_id = _log(report, spec)
    if args.json:
        emit_json(report | {"mlflow_run_id": run_id})
        return
    _print(result, spec)
    out.print(f"logged to MLflow: probe.json and probe.csv on run {run_id}", highlight=False)


def _print(result, spec) -> None:
    table = Table(
        title=f"FP8 probe of {spec.name or spec.arch_id[:12]}: NE {result.ne:.4f} in FP32, "
        f"{result.ne_all_safe_fp8:.4f} with every safe site in FP8",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),  # narrow, so that the site's name fits in 80 columns
    )
    # amax/med: the activations' outlier ratio; err/T, err/R: the FP8 GEMM's relative error
    # with per-tensor and per-row scales; dNE: NE with the site alone in FP8, minus FP32's.
    columns = ("k x n", "amax/med", "err/T", "err/R", "dNE", "safe", "plan", "bf16us", "fp8us")
    for column in columns:
        table.add_column(column, justify="left" if column == "plan" else "right", no_wrap=True)
    table.add_column("site", overflow="fold")
    for s in result.sites:
        table.add_row(
            f"{s.in_features}x{s.out_features}",
            f"{s.outlier_ratio:.0f}",
            f"{s.error_tensor:.3f}",
            f"{s.error_row:.3f}",
            f"{s.ne_delta:+.4f}",
            "yes" if s.safe else styled("no", "red"),
            s.precision,
            f"{s.bf16_us:.1f}",
            f"{s.fp8_us:.1f}",
            s.name,
        )
    out.print(table)
    out.print(
        f"{result.target}, serving batch {result.batch}, the probed GEMMs (microseconds): "
        f"{result.latency_bf16_us:.1f} "
        f"in BF16, {result.latency_fp8_us:.1f} all in FP8, "
        f"{result.latency_dispatch_us:.1f} as planned (FP8 where safe and faster; "
        f"threshold {result.threshold:g} NE). The plan run with real FP8 GEMMs at its "
        f"{len(result.sites_in_fp8)} FP8 site(s): NE {result.ne_dispatched:.4f}",
        highlight=False,
    )


def _log(report: dict, spec) -> str:
    """The probe as an MLflow run (experiment ``fp8-probe``): figures, probe.json, probe.csv."""
    from nas.core.paths import artifacts_dir
    from nas.service.tracking import Tracker

    tracker = Tracker(endpoints.local_tracking_uri(), artifacts_dir())
    experiment = tracker.experiment("fp8-probe")
    return tracker.log_probe(experiment, spec, report)
