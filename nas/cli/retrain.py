"""``nas retrain``: a search's picks and baselines trained again, compared on test."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich import box
from rich.table import Table

from nas.cli.flags import integer, number, open_registry, registry_flag
from nas.cli.render import (
    console,
    counted,
    emit_json,
    format_value,
    out,
    phrase,
    progress_bar,
    status_text,
    styled,
)
from nas.cli.signals import stop_on_sigterm
from nas.core.errors import ConfigError
from nas.service.reporter import Reporter


def add_commands(commands) -> None:
    retrain = commands.add_parser(
        "retrain",
        help="retrain a search's picks and its baselines over seeds, measured on the test split",
    )
    retrain.add_argument("search_id", help="a search id (a unique prefix is enough)")
    retrain.add_argument(
        "--pick",
        action="append",
        help="knee (default), best, front, a trial number or an arch_id; repeatable",
    )
    length = retrain.add_mutually_exclusive_group()
    length.add_argument("--steps", type=integer, help="training steps (default: the search's)")
    length.add_argument("--epochs", type=number, help="passes over the training rows instead")
    retrain.add_argument("--seeds", type=integer, default=3, help="seeds 0..S-1 (default 3)")
    retrain.add_argument(
        "--train-on",
        default="train",
        help="train (default), or train+valid: more rows, measured on test all the same",
    )
    retrain.add_argument(
        "--select-every",
        type=integer,
        metavar="N",
        help="check every N steps on validation rows and keep each training's best weights "
        "(default: as the search's budget.select_best; 0 keeps the last step's)",
    )
    retrain.add_argument(
        "--no-baselines", action="store_true", help="not the search's baselines, only the picks"
    )
    retrain.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        metavar="SPEC",
        help="also train this spec file as a baseline (repeatable), e.g. "
        "examples/specs/dcnv2.json for a search that trained none",
    )
    retrain.add_argument(
        "--register",
        metavar="NAME",
        help="when done, register the best retrained pick in MLflow's Model Registry as NAME",
    )
    retrain.add_argument(
        "--alias", default="champion", help="the registered version's alias (default champion)"
    )
    retrain.add_argument("--concurrency", type=integer, help="trainings at once")
    retrain.add_argument(
        "--workers",
        type=integer,
        help="processes that train each architecture together, data parallel "
        "(resources.workers_per_trial; default: the search's)",
    )
    registry_flag(retrain)
    retrain.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    retrain.add_argument("--json", action="store_true", help="print the comparison as JSON")
    retrain.set_defaults(run=cmd_retrain)


def cmd_retrain(args: argparse.Namespace) -> int:

    from nas.service.config import RegisterConfig, validate_config
    from nas.service.plan import plan
    from nas.service.registry import new_search_id
    from nas.service.retrain import TRAIN_ON, plan_retrain

    registry = open_registry(args)
    search = registry.get_search(args.search_id)
    for flag, value in (("--steps", args.steps), ("--concurrency", args.concurrency)):
        if value is not None and value < 1:
            raise ConfigError(flag, f"must be a positive integer, got {value}")
    if args.epochs is not None and not 0 < args.epochs <= 1000:
        raise ConfigError("--epochs", f"must be in (0, 1000], got {args.epochs}")
    config = plan_retrain(
        registry,
        search,
        args.pick or [],
        args.steps,
        args.seeds,
        args.train_on,
        not args.no_baselines,
        RegisterConfig(name=args.register, alias=args.alias) if args.register else None,
        args.select_every,
        args.baseline,
    )
    if args.workers is not None:
        if not 1 <= args.workers <= 256:
            raise ConfigError("--workers", f"must be an integer from 1 to 256, got {args.workers}")
        resources = {**config.resources.model_dump(), "workers_per_trial": args.workers}
        config = validate_config({**config.to_dict(), "resources": resources}, "--workers")
    base = Path(search.config_path).parent if search.config_path else Path.cwd()
    with console.status(f"Checking the retrain of {search.id} ..."):
        checked = plan(config, base, args.address)
    if search.data_version not in (None, checked.dataset.version):
        console.print(
            phrase(
                styled("warning:", "yellow"),
                f" {checked.dataset.name} has been prepared again since search {search.id} "
                "ran on it (another schema, or changed source files): its picks were chosen "
                "on the earlier data, and the retrain trains on the data as it is now",
            )
        )
    changes = {}
    if args.epochs is not None:
        rows = sum(len(checked.dataset.split_rows(p)) for p in TRAIN_ON[args.train_on])
        changes["budget"] = {
            **config.budget.model_dump(),
            "steps": max(1, math.ceil(args.epochs * rows / config.train.batch_size)),
        }
    if args.concurrency is not None:
        changes["resources"] = {**config.resources.model_dump(), "concurrency": args.concurrency}
    if changes:
        config = validate_config({**config.to_dict(), **changes}, f"the retrain of {search.id}")
        checked.config = config
    retrain = registry.create_search(
        new_search_id(f"{config.name[:16]}-retrain"),
        config.name,
        config.to_dict(),
        search.config_path,
        checked.dataset.version,
    )
    return run_retrain(registry, retrain, checked, args)


def run_retrain(registry, search, checked, args: argparse.Namespace) -> int:
    from nas.service.controller import run_controller
    from nas.service.retrain import RetrainController
    from nas.service.retrain_report import retrain_report

    stop_on_sigterm()
    config = checked.config
    retrain = config.retrain
    if not args.json:
        console.print(
            phrase(
                "retrain ",
                styled(search.id, "bold"),
                f" of {retrain.of}: {counted(len(retrain.picks), 'architecture')} x "
                f"{counted(retrain.seeds, 'seed')}, "
                f"{config.budget.steps} steps each on {retrain.train_on}, measured on the test "
                f"split of {config.dataset}",
            )
        )
    reporter = Reporter() if args.json else RetrainReporter()
    controller, search = run_controller(registry, search, RetrainController, checked, reporter)
    recording = controller.recording
    report = retrain_report(config, registry.trials(search.id))
    code = 130 if search.status == "interrupted" else 0
    registered = recording.registered.to_dict() if recording.registered else None
    if recording.register_error:
        code = 2
    if args.json:
        extra = {"registered": registered, "register_error": recording.register_error}
        emit_json({"id": search.id, "status": search.status, **report.to_dict(), **extra})
        return code
    print_retrain(report)
    if search.status != "completed":
        console.print(
            f"retrain {search.id}: {search.status}; continue it with: nas resume {search.id}"
        )
    if recording.registered:
        from nas.cli.models import print_registered

        print_registered(recording.registered)
    if recording.register_error:
        console.print(
            phrase(
                styled("error:", "red"),
                f" could not register the model: {recording.register_error}; try again with: "
                f"nas models register {search.id} {retrain.register_as.name}",
            )
        )
    return code


def print_retrain(report) -> None:
    """A retrain's comparison: per architecture, test figures over seeds and the paired
    difference from the best baseline."""
    title = (
        f"retrain of {report.of}: test split, {report.steps} steps on {report.train_on}, "
        f"{report.seeds} seed{'s' * (report.seeds != 1)}"
    )
    key = report.ranked_by  # "ne", or one label's: "ne:click"
    label = key.partition(":")[2]
    ne_name = f"NE {label}" if label else "NE"
    labels = [lb for lb in (report.rows[0].labels if report.rows else []) if lb != label]
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    columns = ["architecture", "picked as", f"{ne_name} (mean ± std)", f"AUC {label}".strip()]
    for column in [*columns, *(f"NE {lb}" for lb in labels), "FLOPs"]:
        table.add_column(
            column,
            justify="left" if column in ("architecture", "picked as") else "right",
            no_wrap=column != "picked as",
            min_width=len("baseline") if column == "picked as" else None,
        )
    best = report.best_baseline or "best baseline"
    table.add_column(f"{ne_name} - {best}\n(95% CI)", justify="right", no_wrap=True)
    auc_key = f"auc:{label}" if label else "auc"
    for row in report.rows:
        ne, auc = row.metrics[key], row.metrics[auc_key]
        diff = "-"
        if row.vs_best is not None:
            mean, half = row.vs_best
            diff = f"{mean:+.4f} ± {half:.4f}" if half == half else f"{mean:+.4f}"
        table.add_row(
            row.label,
            ", ".join(row.picked_as),
            f"{ne[0]:.4f} ± {ne[1]:.4f}",
            f"{auc[0]:.4f}",
            *(f"{row.metrics[f'ne:{lb}'][0]:.4f}" for lb in labels),
            format_value("flops", row.costs.get("flops")),
            diff,
        )
    out.print(table)


class RetrainReporter(Reporter):
    """One progress bar over the retrain's (architecture, seed) trainings."""

    def __init__(self):
        self.progress = progress_bar(eta=False)
        self.task = None

    def start(self, search, total: int, done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("retraining", total=total, completed=done, note="")

    def trial_started(self, trial) -> None:
        self.progress.update(self.task, description=f"training {trial.label}")

    def trial_retried(self, trial, reason: str) -> None:
        self.progress.console.print(
            phrase(styled("retrying", "yellow"), f" {trial.label}: {reason}")
        )

    def trial_finished(self, trial, report) -> None:
        done = report.counts["completed"] + report.counts["failed"]
        note = f"{trial.label}: NE {trial.metrics['ne']:.4f}" if trial.metrics else ""
        self.progress.update(self.task, completed=done, note=note)
        if trial.status == "failed":
            first = (trial.error or "").splitlines()[0] if trial.error else ""
            self.progress.console.print(
                phrase(styled(f"{trial.label} failed:", "yellow"), f" {first}")
            )

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()


def status_of_retrain(search, config, trials, as_json: bool) -> None:
    from nas.service.registry import display_status
    from nas.service.retrain_report import retrain_report

    report = retrain_report(config, trials)
    status = display_status(search)
    if as_json:
        emit_json(
            {"id": search.id, "status": status, "message": search.message, **report.to_dict()}
        )
        return
    counts = report.counts
    out.print(
        f"retrain {search.id} of {report.of}: {status_text(status)}"
        + (f" ({search.message})" if search.message else "")
        + f"; {counts['completed']} of {len(config.retrain.picks) * report.seeds} trainings "
        f"done, {counts['failed']} failed",
        highlight=False,
    )
    print_retrain(report)
