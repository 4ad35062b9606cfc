"""The search commands of the ``nas`` CLI: submit, list, status, pareto, resume, cancel.

Every command reads the registry (the source of truth); only submit and resume run a search.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from nas.cli import emit_json, integer, number
from nas.config import default_registry_url
from nas.controller import FINISHED, Reporter
from nas.errors import NasError

console = Console(stderr=True)
out = Console()


def add_commands(commands) -> None:
    submit = commands.add_parser("submit", help="run a search from a YAML file (foreground)")
    submit.add_argument("config", type=Path, help="a search YAML (see examples/searches/)")
    submit.add_argument("--budget", type=integer, help="searched candidates (budget.candidates)")
    submit.add_argument("--steps", type=integer, help="training steps per candidate (budget.steps)")
    submit.add_argument("--seed", type=integer, help="search and training seed")
    submit.add_argument("--concurrency", type=integer, help="candidates trained at once")
    submit.add_argument("--name", help="the search's name (MLflow experiment)")
    submit.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite in nas-runs)")
    _registry_flag(submit)
    submit.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    submit.add_argument("--json", action="store_true", help="print the summary as JSON")
    submit.set_defaults(run=cmd_submit)

    listing = commands.add_parser("list", help="searches with status, trials, best NE, front")
    _registry_flag(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=cmd_list)

    status = commands.add_parser("status", help="one search: config, trials by state, front")
    status.add_argument("search_id", help="a search id (a unique prefix is enough)")
    _registry_flag(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of tables")
    status.set_defaults(run=cmd_status)

    pareto = commands.add_parser("pareto", help="a search's Pareto front")
    pareto.add_argument("search_id", help="a search id (a unique prefix is enough)")
    pareto.add_argument(
        "--objectives", help="comma-separated, e.g. ne,flops (default: the search's own)"
    )
    _registry_flag(pareto)
    pareto.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pareto.set_defaults(run=cmd_pareto)

    resume = commands.add_parser("resume", help="continue a search after a crash or Ctrl-C")
    resume.add_argument("search_id", help="a search id (a unique prefix is enough)")
    _registry_flag(resume)
    resume.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    resume.add_argument("--json", action="store_true", help="print the summary as JSON")
    resume.set_defaults(run=cmd_resume)

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
    retrain.add_argument("--no-baselines", action="store_true", help="only the picks")
    retrain.add_argument("--concurrency", type=integer, help="trainings at once")
    _registry_flag(retrain)
    retrain.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    retrain.add_argument("--json", action="store_true", help="print the comparison as JSON")
    retrain.set_defaults(run=cmd_retrain)

    dashboard = commands.add_parser(
        "dashboard", help="open a search in MLflow's UI, or compare several searches' fronts"
    )
    dashboard.add_argument(
        "search_ids", nargs="*", help="one search (default: the latest), or several to compare"
    )
    dashboard.add_argument("--port", type=integer, default=5000, help="for mlflow ui (5000)")
    dashboard.add_argument("--open", action="store_true", help="open it in a browser")
    _registry_flag(dashboard)
    dashboard.set_defaults(run=cmd_dashboard)

    cancel = commands.add_parser("cancel", help="stop a running search")
    cancel.add_argument("search_id", help="a search id (a unique prefix is enough)")
    _registry_flag(cancel)
    cancel.set_defaults(run=cmd_cancel)


def _registry_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry-url", help="SQLAlchemy URL of the registry (default: sqlite in nas-runs)"
    )


def _registry(args: argparse.Namespace, url: str | None = None):
    from nas.registry import Registry

    return Registry(args.registry_url or url or default_registry_url())


# --- submit and resume ---------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    from nas.config import load_config
    from nas.controller import plan
    from nas.errors import ConfigError
    from nas.registry import new_search_id

    flags = {  # config field -> (the flag that overrides it, its value)
        "budget.candidates": ("--budget", args.budget),
        "budget.steps": ("--steps", args.steps),
        "seed": ("--seed", args.seed),
        "resources.concurrency": ("--concurrency", args.concurrency),
        "name": ("--name", args.name),
        "tracking_uri": ("--tracking-uri", args.tracking_uri),
        "registry_url": ("--registry-url", args.registry_url),
        "ray_address": ("--address", args.address),
    }
    try:
        config = load_config(args.config, {k: v for k, (_, v) in flags.items()})
        with console.status(f"Checking {args.config} against {config.dataset} ..."):
            checked = plan(config, args.config.resolve().parent)
            registry = _registry(args, config.registry_url)
    except ConfigError as err:
        flag, value = flags.get(err.field, (None, None))
        if value is not None:  # the bad value came from the command line, not the file
            raise ConfigError(flag, err.message) from None
        raise (err if err.source else err.within(source=str(args.config))) from None
    search = registry.create_search(
        new_search_id(config.name), config.name, config.to_dict(), str(args.config.resolve())
    )
    return _run(registry, search, checked, args)


def cmd_resume(args: argparse.Namespace) -> int:
    from nas.config import validate_config
    from nas.controller import plan
    from nas.registry import controller_alive

    registry = _registry(args)
    search = registry.get_search(args.search_id)
    if search.status == "completed":
        raise NasError(f"search {search.id} is completed; nothing to resume")
    if search.status == "stopped":
        raise NasError(
            f"search {search.id} stopped at its budget.max_minutes; nothing to resume "
            "(submit a new search with a larger max_minutes to go further)"
        )
    if search.status in ("running", "cancelling") and controller_alive(search):
        where = f"process {search.pid} on {search.host}"
        raise NasError(f"search {search.id} is still running ({where}); nas cancel it first")
    config = validate_config(search.config, f"search {search.id}")
    base = Path(search.config_path).parent if search.config_path else Path.cwd()
    with console.status(f"Checking search {search.id} ..."):
        checked = plan(config, base, args.address)
    return _run(registry, search, checked, args)


def cmd_retrain(args: argparse.Namespace) -> int:
    import math

    from nas.config import validate_config
    from nas.controller import plan
    from nas.errors import ConfigError
    from nas.registry import new_search_id
    from nas.retrain import TRAIN_ON, plan_retrain

    registry = _registry(args)
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
    )
    base = Path(search.config_path).parent if search.config_path else Path.cwd()
    with console.status(f"Checking the retrain of {search.id} ..."):
        checked = plan(config, base, args.address)
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
    )
    return _run(registry, retrain, checked, args)


def _run(registry, search, checked, args: argparse.Namespace) -> int:
    """Run the search in the foreground; exit code 130 when Ctrl-C stopped it early."""
    from nas.controller import Controller
    from nas.summary import summarize

    if checked.config.retrain is not None:
        return _run_retrain(registry, search, checked, args)
    reporter = Reporter() if args.json else ProgressReporter(checked.config)
    if not args.json:
        console.print(
            f"search [bold]{search.id}[/]: {checked.config.space.name} space, "
            f"{checked.config.strategy.name} strategy, {checked.config.budget.candidates} "
            f"candidates + {len(checked.baselines)} baselines, "
            f"{checked.config.budget.steps} steps each, on {checked.config.dataset}",
            highlight=False,
        )
    try:
        controller = Controller(registry, search, checked, reporter)
    except BaseException as err:  # nothing ran: the search ends here, resumable
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        message = f"{type(err).__name__}: {err}".splitlines()[0][:500]
        registry.update_search(search.id, status=status, message=message, pid=None)
        raise
    search = controller.run()
    summary = summarize(checked.config, registry.trials(search.id))
    code = 130 if search.status == "interrupted" else 0
    if args.json:
        emit_json({**_search_row(search, summary), "summary": summary.to_dict()})
        return code
    _print_front(search, summary)
    _print_ending(search, checked.config)
    return code


def _run_retrain(registry, search, checked, args: argparse.Namespace) -> int:
    from nas.retrain import RetrainController, retrain_report

    config = checked.config
    retrain = config.retrain
    if not args.json:
        console.print(
            f"retrain [bold]{search.id}[/] of {retrain.of}: {len(retrain.picks)} "
            f"architectures x {retrain.seeds} seeds, {config.budget.steps} steps each on "
            f"{retrain.train_on}, measured on the test split of {config.dataset}",
            highlight=False,
        )
    reporter = Reporter() if args.json else RetrainReporter()
    try:
        controller = RetrainController(registry, search, checked, reporter)
    except BaseException as err:
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        message = f"{type(err).__name__}: {err}".splitlines()[0][:500]
        registry.update_search(search.id, status=status, message=message, pid=None)
        raise
    search = controller.run()
    report = retrain_report(config, registry.trials(search.id))
    code = 130 if search.status == "interrupted" else 0
    if args.json:
        emit_json({"id": search.id, "status": search.status, **report.to_dict()})
        return code
    print_retrain(report)
    if search.status != "completed":
        console.print(
            f"retrain {search.id}: {search.status}; continue it with: nas resume {search.id}"
        )
    return code


def print_retrain(report) -> None:
    """A retrain's comparison: per architecture, test figures over seeds and the paired
    difference from the best baseline."""
    title = (
        f"retrain of {report.of}: test split, {report.steps} steps on {report.train_on}, "
        f"{report.seeds} seeds (mean ± std)"
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("architecture", "picked as", "NE (± std)", "AUC", "FLOPs"):
        table.add_column(
            column,
            justify="left" if column in ("architecture", "picked as") else "right",
            no_wrap=column != "picked as",
        )
    best = report.best_baseline or "best baseline"
    table.add_column(f"NE - {best} (95% CI)", justify="right", no_wrap=True)
    for row in report.rows:
        ne, auc = row.metrics["ne"], row.metrics["auc"]
        diff = "-"
        if row.vs_best is not None:
            mean, half = row.vs_best
            diff = f"{mean:+.4f} ± {half:.4f}" if half == half else f"{mean:+.4f}"
        table.add_row(
            row.label,
            ", ".join(row.picked_as),
            f"{ne[0]:.4f} ± {ne[1]:.4f}",
            f"{auc[0]:.4f}",
            _format("flops", row.costs.get("flops")),
            diff,
        )
    out.print(table)


class RetrainReporter(Reporter):
    """One progress bar over the retrain's (architecture, seed) trainings."""

    def __init__(self):
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.task = None

    def start(self, search, total: int, done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("retraining", total=total, completed=done, note="")

    def trial_started(self, trial) -> None:
        self.progress.update(self.task, description=f"training {trial.label}")

    def trial_retried(self, trial, reason: str) -> None:
        self.progress.console.print(f"[yellow]retrying[/] {trial.label}: {reason}", highlight=False)

    def trial_finished(self, trial, report) -> None:
        done = report.counts["completed"] + report.counts["failed"]
        note = f"{trial.label}: NE {trial.metrics['ne']:.4f}" if trial.metrics else ""
        self.progress.update(self.task, completed=done, note=note)
        if trial.status == "failed":
            first = (trial.error or "").splitlines()[0] if trial.error else ""
            self.progress.console.print(
                f"[yellow]{trial.label} failed:[/] {first}", highlight=False
            )

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()


class ProgressReporter(Reporter):
    """Rich progress bars: one per setup job while they run (supernet training x/y steps,
    subnet search, DNAS training), then the candidates: done/failed, best, front, ETA."""

    def __init__(self, config):
        self.config = config
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = None
        self.jobs: dict[str, object] = {}  # job name -> its bar

    def start(self, search, total: int, done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task(search.id, total=total, completed=done, note="")

    def phase(self, name: str, total: int | None = None) -> None:
        if name == "setup jobs":
            self.progress.console.print(
                f"first {total} setup job{'s' if total != 1 else ''} of the "
                f"{self.config.strategy.name} strategy, "
                f"{self.config.resources.concurrency} at a time; then the candidates",
                highlight=False,
            )
            self.progress.update(self.task, description="candidates (after the setup jobs)")
        else:
            self.progress.update(self.task, description=name, total=total)

    def job_started(self, job) -> None:
        self.jobs[job.name] = self.progress.add_task(f"{job.name}: starting", total=None, note="")

    def job_progress(self, name: str, phase: str, done: int, total: int) -> None:
        bar = self.jobs.get(name)
        if bar is not None:
            unit = "steps" if "training" in phase else "members"
            self.progress.update(
                bar, description=f"{name}: {phase}", completed=done, total=total, note=unit
            )

    def job_finished(self, job, trial) -> None:
        bar = self.jobs.pop(job.name, None)
        if bar is not None:
            self.progress.update(bar, description=f"{job.name}: done", note="")
            self.progress.stop_task(bar)

    def trial_started(self, trial) -> None:
        label = trial.label or trial.arch_id[:8]
        self.progress.update(self.task, description=f"stand-alone training {label}")

    def trial_retried(self, trial, reason: str) -> None:
        label = trial.label or trial.arch_id[:8]
        self.progress.console.print(
            f"[yellow]retrying[/] {label} (attempt {trial.attempts + 1}): {reason}", highlight=False
        )

    def trial_finished(self, trial, summary) -> None:
        first = summary.objectives[0]
        best = summary.best.get(first)
        best_text = f"best {first} {best:.4f}" if best is not None else "best -"
        stopped = f"stopped {summary.counts['stopped']}  " if summary.counts["stopped"] else ""
        self.progress.update(
            self.task,
            completed=sum(summary.counts[s] for s in FINISHED),
            note=f"failed {summary.counts['failed']}  {stopped}{best_text}  "
            f"front {len(summary.front)}",
        )
        if trial.status == "failed":
            first_line = (trial.error or "").splitlines()[0] if trial.error else ""
            self.progress.console.print(
                f"[yellow]trial {trial.number} failed:[/] {first_line}", highlight=False
            )

    def stop(self) -> None:
        if self.task is not None:
            self.progress.update(self.task, description="done")
            self.progress.stop()


def _print_ending(search, config) -> None:
    from nas.config import default_tracking_uri

    color = {"completed": "green", "cancelled": "yellow"}.get(search.status, "red")
    note = f" ({search.message})" if search.message else ""
    console.print(
        f"search {search.id}: [{color}]{search.status}[/]{note} after "
        f"{search.elapsed_s / 60:.1f} min",
        highlight=False,
    )
    if search.status in ("interrupted", "failed"):
        console.print(f"continue it with: nas resume {search.id}", highlight=False)
    uri = config.tracking_uri or default_tracking_uri()
    ui = f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000"
    console.print(
        f"browse every candidate: {ui}  (then open http://127.0.0.1:5000, "
        f"experiment '{search.name}')",
        highlight=False,
    )


# --- views ---------------------------------------------------------------------------------


def _search_row(search, summary) -> dict:
    from nas.registry import display_status, elapsed_seconds

    return {
        "id": search.id,
        "name": search.name,
        "status": display_status(search),
        "message": search.message,
        "created_at": search.created_at.isoformat() if search.created_at else None,
        "elapsed_min": round(elapsed_seconds(search) / 60, 2),
        "candidates": f"{summary.counts['searched']}/{summary.counts['budget']}",
        "baselines": summary.counts["baselines"],
        "completed": summary.counts["completed"],
        "stopped": summary.counts["stopped"],
        "failed": summary.counts["failed"],
        "best": summary.best,
        "front_size": len(summary.front),
        "hypervolume": summary.hypervolume,
    }


def _summary_of(registry, search, objectives: list[str] | None = None):
    from nas.config import validate_config
    from nas.summary import summarize

    config = validate_config(search.config, f"search {search.id}")
    return config, summarize(config, registry.trials(search.id), objectives)


def cmd_list(args: argparse.Namespace) -> None:
    registry = _registry(args)
    rows = []
    for search in registry.list_searches():
        rows.append(_search_row(search, _summary_of(registry, search)[1]))
    if args.json:
        emit_json(rows)
        return
    if not rows:
        console.print(
            "no searches yet; start one with: nas submit examples/searches/ctr_quick.yaml"
        )
        return
    table = Table(
        title=f"searches ({registry.url})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for column in ("id", "status", "candidates", "failed", "best NE", "front", "minutes"):
        left = column in ("id", "status", "candidates")
        # Never cut an id or a status short: they are what the user types and reads.
        table.add_column(column, justify="left" if left else "right", no_wrap=left)
    for row in rows:
        ne = row["best"].get("ne")
        table.add_row(
            row["id"],
            _status_text(row["status"]),
            row["candidates"] + (f" +{row['baselines']}b" if row["baselines"] else ""),
            str(row["failed"]),
            f"{ne:.4f}" if ne is not None else "-",
            str(row["front_size"]),
            f"{row['elapsed_min']:.1f}",
        )
    out.print(table)


def _status_text(status: str) -> str:
    color = {
        "completed": "green",
        "running": "cyan",
        "crashed": "red",
        "failed": "red",
        "interrupted": "yellow",
        "cancelled": "yellow",
        "cancelling": "yellow",
        "stopped": "yellow",
    }.get(status, "white")
    return f"[{color}]{status}[/]"


def _status_of_retrain(search, config, trials, as_json: bool) -> None:
    from nas.registry import display_status
    from nas.retrain import retrain_report

    report = retrain_report(config, trials)
    status = display_status(search)
    if as_json:
        emit_json(
            {"id": search.id, "status": status, "message": search.message, **report.to_dict()}
        )
        return
    counts = report.counts
    out.print(
        f"retrain {search.id} of {report.of}: {_status_text(status)}"
        + (f" ({search.message})" if search.message else "")
        + f"; {counts['completed']} of {len(config.retrain.picks) * report.seeds} trainings "
        f"done, {counts['failed']} failed",
        highlight=False,
    )
    print_retrain(report)


def cmd_status(args: argparse.Namespace) -> None:
    registry = _registry(args)
    search = registry.get_search(args.search_id)
    config, summary = _summary_of(registry, search)
    trials = registry.trials(search.id)
    if config.retrain is not None:
        return _status_of_retrain(search, config, trials, args.json)
    if args.json:
        emit_json(
            {
                **_search_row(search, summary),
                "config": search.config,
                "mlflow_run_id": search.mlflow_run_id,
                "phase": _phase(trials, summary),
                "trials": [_trial_row(t) for t in trials],
                "summary": summary.to_dict(),
            }
        )
        return
    table = Table(title=f"search {search.id}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    row = _search_row(search, summary)
    table.add_row(
        "status", _status_text(row["status"]) + (f" ({search.message})" if search.message else "")
    )
    table.add_row("dataset", config.dataset)
    table.add_row("space", f"{config.space.name} {json.dumps(config.space.options) or ''}")
    table.add_row("strategy", f"{config.strategy.name} {json.dumps(config.strategy.options)}")
    table.add_row(
        "objectives",
        ", ".join(
            f"{n} ({d})" for n, d in zip(summary.objectives, summary.directions, strict=True)
        ),
    )
    table.add_row(
        "budget",
        f"{config.budget.candidates} candidates x {config.budget.steps} "
        f"steps" + (f", {config.budget.max_minutes} min" if config.budget.max_minutes else ""),
    )
    if config.scheduler is not None:
        scheduler = config.early_stopping()
        table.add_row(
            "early stopping",
            f"{scheduler.name}, rungs at steps {', '.join(map(str, scheduler.rung_steps()))}",
        )
    counts = summary.counts
    table.add_row(
        "trials",
        f"{counts['completed']} completed, {counts['stopped']} stopped early, "
        f"{counts['failed']} failed, {counts['running']} running, "
        f"{counts['cancelled']} cancelled "
        f"({counts['searched']}/{counts['budget']} searched + "
        f"{counts['baselines']} baselines)",
    )
    table.add_row("phase", _phase(trials, summary))
    table.add_row("elapsed", f"{row['elapsed_min']:.1f} min over {search.sessions} session(s)")
    table.add_row(
        "hypervolume",
        f"{summary.hypervolume:.6g} (reference "
        + ", ".join(
            f"{n} {r:.4g}" for n, r in zip(summary.objectives, summary.reference, strict=True)
        )
        + ")"
        if summary.reference
        else "-",
    )
    table.add_row("mlflow run", search.mlflow_run_id or "-")
    out.print(table)
    _print_jobs([t for t in trials if not t.is_candidate])
    failed = [t for t in trials if t.status == "failed"]
    if failed:
        errors = Table(title="failed trials", title_justify="left")
        for column in ("trial", "arch_id", "reason"):
            errors.add_column(column, overflow="fold")
        for t in failed:
            errors.add_row(str(t.number), t.arch_id, (t.error or "").splitlines()[0][:200])
        out.print(errors)
    _print_front(search, summary)


def _phase(trials, summary) -> str:
    """Where the search is: its setup jobs (with the progress each last reported), or the
    stand-alone training of candidates."""
    jobs = [t for t in trials if not t.is_candidate]
    unfinished = [t for t in jobs if t.status != "completed"]
    if unfinished:
        shown = []
        for t in unfinished:
            progress = (t.job or {}).get("progress")
            where = (
                f"{progress['phase']} {progress['done']}/{progress['total']}" if progress else ""
            )
            shown.append(f"{t.arch_id} {t.status} {where}".strip())
        return f"setup jobs: {len(jobs) - len(unfinished)}/{len(jobs)} done; " + "; ".join(shown)
    counts = summary.counts
    done = sum(counts[s] for s in FINISHED)
    after = f", after {len(jobs)} setup job{'s' if len(jobs) > 1 else ''}" if jobs else ""
    return (
        f"stand-alone training: {done} finished, {counts['running']} running "
        f"({counts['searched']}/{counts['budget']} searched so far){after}"
    )


def _print_jobs(jobs) -> None:
    if not jobs:
        return
    table = Table(title="setup jobs", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("trial", "job", "kind", "status", "progress", "minutes", "result"):
        table.add_column(column, overflow="fold")
    for t in jobs:
        progress = (t.job or {}).get("progress")
        timings = t.timings or {}
        minutes = (timings.get("finished_at", 0) - timings.get("started_at", 0)) / 60
        result = t.metrics or {}
        if "arch_id" in result:
            found = f"decoded {result['arch_id']}"
        elif "picks" in result:
            found = f"{result.get('evaluated', 0)} members scored, {len(result['picks'])} picked"
        else:
            found = (t.error or "").splitlines()[0][:120] if t.error else "-"
        table.add_row(
            str(t.number),
            t.arch_id,
            t.kind,
            _status_text(t.status),
            "done"
            if t.status == "completed"
            else f"{progress['phase']} {progress['done']}/{progress['total']}"
            if progress
            else "-",
            f"{minutes:.1f}" if timings.get("finished_at") else "-",
            found,
        )
    out.print(table)


def _trial_row(trial) -> dict:
    return {
        "number": trial.number,
        "arch_id": trial.arch_id,
        "label": trial.label,
        "kind": trial.kind,
        "baseline": trial.is_baseline,
        "status": trial.status,
        "attempts": trial.attempts,
        "values": trial.values,
        "metrics": trial.metrics,
        "timings": trial.timings,
        "error": trial.error,
        "spec": trial.spec,
        "job": trial.job,
        "checkpoint": trial.checkpoint,
        "mlflow_run_id": trial.mlflow_run_id,
    }


def cmd_pareto(args: argparse.Namespace) -> None:
    from nas.errors import ConfigError
    from nas.objectives import get_objective

    registry = _registry(args)
    search = registry.get_search(args.search_id)
    objectives = None
    if args.objectives:
        objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
        for name in objectives:
            get_objective(name, "--objectives")
        if len(set(objectives)) != len(objectives):
            raise ConfigError("--objectives", f"lists an objective twice: {args.objectives}")
    _, summary = _summary_of(registry, search, objectives)
    if args.json:
        emit_json({"search": search.id, **summary.to_dict()})
        return
    _print_front(search, summary)


def _print_front(search, summary) -> None:
    if not summary.front:
        console.print(f"search {search.id} has no completed candidates yet")
        return
    table = Table(
        title=f"Pareto front of {search.id} over "
        + ", ".join(
            f"{n} ({d})" for n, d in zip(summary.objectives, summary.directions, strict=True)
        )
        + f": {len(summary.front)} of {len(summary.candidates)} candidates, "
        f"{summary.searched_on_front} found by the search",
        title_justify="left",
    )
    table.add_column("trial", justify="right")
    table.add_column("candidate")
    for name in summary.objectives:
        table.add_column(name, justify="right")
    extras = [n for n in ("auc", "flops", "params") if n not in summary.objectives]
    for name in extras:
        table.add_column(name, justify="right")
    for c in summary.front:
        label = f"[orange3]{c.label} (baseline)[/]" if c.is_baseline else c.arch_id
        if len(summary.objectives) > 1 and summary.knee and c.number == summary.knee.number:
            label += " [red]* knee[/]"
        cells = [_format(n, v) for n, v in zip(summary.objectives, c.values, strict=True)]
        extra = [
            _format(n, c.metrics.get(n)) for n in ("auc", "params") if n not in summary.objectives
        ]
        table.add_row(str(c.number), label, *cells, *extra)
    out.print(table)


def _format(name: str, value) -> str:
    if value is None:
        return "-"
    if name in ("flops", "serving_flops", "params"):
        for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
            if value >= scale:
                return f"{value / scale:.1f}{unit}"
        return f"{value:.0f}"
    return f"{value:.4f}"


def cmd_dashboard(args: argparse.Namespace) -> int:
    """One search: MLflow's UI on its store (started on 127.0.0.1 for a local one) and the
    URL of its run, until Ctrl-C. Several: a page comparing their fronts."""
    import webbrowser

    from nas.config import default_tracking_uri, runs_dir, validate_config
    from nas.errors import ConfigError
    from nas.summary import summarize

    if not 1 <= args.port <= 65535:
        raise ConfigError("--port", f"must be a port number (1-65535), got {args.port}")
    registry = _registry(args)
    if args.search_ids:
        searches = [registry.get_search(i) for i in args.search_ids]
    else:
        searches = registry.list_searches()[:1]
        if not searches:
            raise NasError("no searches yet: start one with nas submit SEARCH.yaml")
    if len(searches) > 1:
        from dashboards.pareto_html import page
        from dashboards.ui import comparison_figure

        summaries = {
            s.id: summarize(validate_config(s.config), registry.trials(s.id)) for s in searches
        }
        folder = runs_dir() / "dashboards"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ("compare-" + "-".join(s.id for s in searches)[:150] + ".html")
        path.write_text(page("comparison", comparison_figure(summaries)))
        out.print(f"comparison of {len(searches)} searches: {path}", highlight=False)
        if args.open:
            webbrowser.open(path.as_uri())
        return 0
    from dashboards.ui import is_server, run_url, start_ui

    (search,) = searches
    if search.mlflow_run_id is None:
        raise NasError(f"search {search.id} has no MLflow run yet (it never started)")
    config = validate_config(search.config)
    uri = config.tracking_uri or default_tracking_uri()
    if is_server(uri):
        url = run_url(uri, search.mlflow_experiment_id, search.mlflow_run_id)
        out.print(f"{search.id}: {url}", highlight=False)
        if args.open:
            webbrowser.open(url)
        return 0
    with console.status(f"starting mlflow ui on 127.0.0.1:{args.port} ..."):
        process = start_ui(uri, runs_dir() / "mlartifacts", args.port)
    url = run_url(
        f"http://127.0.0.1:{args.port}", search.mlflow_experiment_id, search.mlflow_run_id
    )
    out.print(f"{search.id}: {url}\n(its pareto.html is among the run's artifacts; Ctrl-C stops)")
    if args.open:
        webbrowser.open(url)
    try:
        process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait(timeout=30)
    return 0


def cmd_cancel(args: argparse.Namespace) -> None:
    from nas.registry import controller_alive

    registry = _registry(args)
    search = registry.get_search(args.search_id)
    if search.status not in ("running", "cancelling"):
        console.print(f"search {search.id} is {search.status}; nothing to cancel", highlight=False)
        return
    alive = controller_alive(search)
    if alive is False:  # the controller died: nobody to tell; mark it cancelled directly
        registry.update_search(
            search.id, status="cancelled", message="cancelled by nas cancel", pid=None
        )
        console.print(f"search {search.id} cancelled (its controller was not running)")
        return
    registry.update_search(search.id, status="cancelling")
    console.print(f"asked search {search.id} to stop; waiting for it ...", highlight=False)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(1.0)
        now = registry.get_search(search.id).status
        if now != "cancelling":
            console.print(f"search {search.id} is {now}", highlight=False)
            return
    console.print(f"search {search.id} has not stopped yet; it stops after its running trials")
