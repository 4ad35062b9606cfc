"""The search commands: submit, list, status, pareto, resume, cancel.

Every command reads the registry (the source of truth); only submit and resume run a search.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich import box
from rich.table import Table
from rich.text import Text

from nas.cli.flags import integer, open_registry, registry_flag, seed_number
from nas.cli.render import (
    console,
    counted,
    emit_json,
    format_value,
    out,
    phrase,
    preparing_under,
    progress_bar,
    status_text,
    styled,
)
from nas.cli.retrain import run_retrain, status_of_retrain
from nas.cli.signals import stop_on_sigterm
from nas.core.errors import ConfigError, NasError
from nas.service.registry.models import FINISHED
from nas.service.reporter import Reporter

# A DNAS job whose decode last changed in the last tenth of its steps is shown as unsettled.
UNSETTLED_SHARE = 0.9


def add_commands(commands) -> None:
    submit = commands.add_parser("submit", help="run a search from a YAML file (foreground)")
    submit.add_argument("config", type=Path, help="a search YAML (see examples/searches/)")
    submit.add_argument("--budget", type=integer, help="searched candidates (budget.candidates)")
    submit.add_argument("--steps", type=integer, help="training steps per candidate (budget.steps)")
    submit.add_argument("--seed", type=seed_number, help="search and training seed")
    submit.add_argument("--concurrency", type=integer, help="candidates trained at once")
    submit.add_argument("--name", help="the search's name (MLflow experiment)")
    submit.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite in nas-runs)")
    registry_flag(submit)
    submit.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    submit.add_argument("--json", action="store_true", help="print the summary as JSON")
    submit.set_defaults(run=cmd_submit)

    listing = commands.add_parser("list", help="searches with status, trials, best NE, front")
    registry_flag(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=cmd_list)

    status = commands.add_parser("status", help="one search: config, trials by state, front")
    status.add_argument("search_id", help="a search id (a unique prefix is enough)")
    registry_flag(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of tables")
    status.set_defaults(run=cmd_status)

    pareto = commands.add_parser("pareto", help="a search's Pareto front")
    pareto.add_argument("search_id", help="a search id (a unique prefix is enough)")
    pareto.add_argument(
        "--objectives", help="comma-separated, e.g. ne,flops (default: the search's own)"
    )
    registry_flag(pareto)
    pareto.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pareto.set_defaults(run=cmd_pareto)

    resume = commands.add_parser("resume", help="continue a search after a crash or Ctrl-C")
    resume.add_argument("search_id", help="a search id (a unique prefix is enough)")
    registry_flag(resume)
    resume.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    resume.add_argument("--json", action="store_true", help="print the summary as JSON")
    resume.set_defaults(run=cmd_resume)

    cancel = commands.add_parser("cancel", help="stop a running search")
    cancel.add_argument("search_id", help="a search id (a unique prefix is enough)")
    registry_flag(cancel)
    cancel.set_defaults(run=cmd_cancel)


def cmd_submit(args: argparse.Namespace) -> int:
    from nas.service.config import load_config
    from nas.service.registry import new_search_id

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
        from nas.service.plan import plan  # Ray and Tune: not loaded for a config in error

        with console.status(f"Checking {args.config} against {config.dataset} ...") as status:
            preparing = preparing_under(status, f"Preparing {config.dataset} (first use)")
            checked = plan(config, args.config.resolve().parent, progress=preparing)
            registry = open_registry(args, config.registry_url, create=True)
    except ConfigError as err:
        flag, value = flags.get(err.field, (None, None))
        if value is not None:  # the bad value came from the command line, not the file
            raise ConfigError(flag, err.message) from None
        raise (err if err.source else err.within(source=str(args.config))) from None
    search = registry.create_search(
        new_search_id(config.name),
        config.name,
        config.to_dict(),
        str(args.config.resolve()),
        checked.dataset.version,
    )
    return run_search(registry, search, checked, args)


def cmd_resume(args: argparse.Namespace) -> int:
    from nas.service.config import validate_config
    from nas.service.plan import plan, same_data
    from nas.service.registry import controller_alive

    registry = open_registry(args)
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
    with console.status(f"Checking search {search.id} ...") as status:
        preparing = preparing_under(status, f"Preparing {config.dataset} (first use)")
        checked = plan(config, base, args.address, preparing)
    same_data(search, checked.dataset)
    return run_search(registry, search, checked, args)


def run_search(registry, search, checked, args: argparse.Namespace) -> int:
    """Run the search in the foreground; exit code 130 when Ctrl-C (or SIGTERM) stopped it
    early."""
    from nas.service.controller import Controller, run_controller
    from nas.service.summary import summarize

    if checked.config.retrain is not None:
        return run_retrain(registry, search, checked, args)
    stop_on_sigterm()
    reporter = Reporter() if args.json else ProgressReporter(checked.config)
    if not args.json:
        console.print(
            phrase(
                "search ",
                styled(search.id, "bold"),
                f": {checked.config.space.name} space, {checked.config.strategy.name} strategy, "
                f"{checked.config.budget.candidates} candidates + {len(checked.baselines)} "
                f"baselines, {checked.config.budget.steps} steps each, on "
                f"{checked.config.dataset}",
            )
        )
        if left_out := checked.baselines_left_out:
            console.print(
                "baselines left out, as they do not build on "
                f"{checked.dataset.name}: "
                + "; ".join(f"{name} ({why})" for name, why in left_out)
                + " (list the baselines to train under baselines:, or include_baselines: false)",
                highlight=False,
            )
    _, search = run_controller(registry, search, Controller, checked, reporter)
    trials = registry.trials(search.id)
    summary = summarize(checked.config, trials)
    code = 130 if search.status == "interrupted" else 0
    if args.json:
        emit_json({**search_row(search, summary), "summary": summary.to_dict()})
        return code
    print_front(search, summary)
    _print_unsettled(trials)
    _print_ending(search, bool(summary.front))
    return code


class ProgressReporter(Reporter):
    """Rich progress bars: one per setup job while they run (supernet training x/y steps,
    subnet search, DNAS training), beside the candidates': done/failed, best, front, ETA."""

    def __init__(self, config):
        self.config = config
        self.progress = progress_bar()
        self.task = None
        self.jobs: dict[str, object] = {}  # job name -> its bar

    def start(self, search, total: int, done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task(search.id, total=total, completed=done, note="")

    def phase(self, name: str, total: int | None = None) -> None:
        if name == "setup jobs":
            self.progress.console.print(
                f"{counted(total, 'setup job')} of the "
                f"{self.config.strategy.name} strategy, and its candidates as the jobs give "
                f"them: {self.config.resources.concurrency} at a time in all",
                highlight=False,
            )
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
        # Short, so the bar and the times fit an 80-column terminal (the candidate's label
        # sat here: with several training at once it named only the last one started).
        self.progress.update(self.task, description="candidates")

    def trial_retried(self, trial, reason: str) -> None:
        label = trial.label or trial.arch_id[:8]
        self.progress.console.print(
            phrase(
                styled("retrying", "yellow"), f" {label} (attempt {trial.attempts + 1}): {reason}"
            )
        )

    def trial_finished(self, trial, summary) -> None:
        first = summary.objectives[0]
        best = summary.best.get(first)
        best_text = f"best {first} {best:.4f}" if best is not None else "best -"
        counts = [f"{s} {summary.counts[s]}" for s in ("failed", "stopped") if summary.counts[s]]
        self.progress.update(
            self.task,
            completed=sum(summary.counts[s] for s in FINISHED),
            note="  ".join([*counts, best_text, f"front {len(summary.front)}"]),
        )
        if trial.status == "failed":
            first_line = (trial.error or "").splitlines()[0] if trial.error else ""
            self.progress.console.print(
                phrase(styled(f"trial {trial.number} failed:", "yellow"), f" {first_line}")
            )

    def stop(self) -> None:
        if self.task is not None:
            self.progress.update(self.task, description="done")
            self.progress.stop()


def _print_ending(search, anything_to_retrain: bool) -> None:
    color = {"completed": "green", "cancelled": "yellow"}.get(search.status, "red")
    note = f" ({search.message})" if search.message else ""
    console.print(
        phrase(
            f"search {search.id}: ",
            styled(search.status, color),
            f"{note} after {search.elapsed_s / 60:.1f} min",
        )
    )
    if search.status in ("interrupted", "failed"):
        console.print(f"continue it with: nas resume {search.id}", highlight=False)
    console.print(f"browse it: nas dashboard {search.id}", highlight=False)
    if anything_to_retrain:
        console.print(
            f"retrain its knee against the baselines, on test: nas retrain {search.id}",
            highlight=False,
        )


def search_row(search, summary) -> dict:
    from nas.service.registry import display_status, elapsed_seconds

    return {
        "id": search.id,
        "name": search.name,
        "status": display_status(search),
        "message": search.message,
        "data_version": search.data_version,
        "created_at": search.created_at.isoformat() if search.created_at else None,
        "elapsed_min": round(elapsed_seconds(search) / 60, 2),
        "candidates": f"{summary.counts['searched']}/{summary.counts['budget']}"
        if not search.config.get("retrain")
        else f"retrain of {search.config['retrain']['of']}",
        "baselines": summary.counts["baselines"],
        "completed": summary.counts["completed"],
        "stopped": summary.counts["stopped"],
        "failed": summary.counts["failed"],
        "best": summary.best,
        "front_size": len(summary.front),
        "hypervolume": summary.hypervolume,
    }


def summary_of(registry, search, objectives: list[str] | None = None):
    from nas.service.config import stored_config
    from nas.service.summary import summarize

    config = stored_config(search.config, f"search {search.id}")
    return config, summarize(config, registry.trials(search.id), objectives)


def cmd_list(args: argparse.Namespace) -> None:
    registry = open_registry(args)
    rows = []
    for search in registry.list_searches():
        rows.append(search_row(search, summary_of(registry, search)[1]))
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
        # a search of several labels ranks one label's NE: "ne:click"
        ne = next((v for k, v in row["best"].items() if k.partition(":")[0] == "ne"), None)
        table.add_row(
            row["id"],
            status_text(row["status"]),
            row["candidates"] + (f" +{row['baselines']}b" if row["baselines"] else ""),
            str(row["failed"]),
            f"{ne:.4f}" if ne is not None else "-",
            str(row["front_size"]),
            f"{row['elapsed_min']:.1f}",
        )
    out.print(table)


def cmd_status(args: argparse.Namespace) -> None:
    registry = open_registry(args)
    search = registry.get_search(args.search_id)
    config, summary = summary_of(registry, search)
    trials = registry.trials(search.id)
    if config.retrain is not None:
        return status_of_retrain(search, config, trials, args.json)
    if args.json:
        emit_json(
            {
                **search_row(search, summary),
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
    row = search_row(search, summary)
    table.add_row(
        "status", status_text(row["status"]) + (f" ({search.message})" if search.message else "")
    )
    version = f" (version {search.data_version})" if search.data_version else ""
    table.add_row("dataset", config.dataset + version)
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
            f"{scheduler.name}, rungs at steps {', '.join(map(str, scheduler.rung_steps()))}, "
            f"{scheduler.judged_by()}"
            + ("; baselines judged with them, never stopped" if config.include_baselines else ""),
        )
    select = config.selection()
    if select is not None:
        patience = select["patience"]
        table.add_row(
            "weights kept",
            f"each candidate's best, checked every {select['every_steps']} steps on "
            f"{select['rows']:,} validation rows"
            + (f"; stopped after {patience} checks without a new best" if patience else ""),
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
    reused = [t for t in trials if (t.timings or {}).get("reused_from")]
    if reused:
        sources = sorted({t.timings["reused_from"]["search_id"] for t in reused})
        table.add_row(
            "baselines reused",
            f"{', '.join(t.label or t.arch_id for t in reused)}: trained with the same "
            f"settings by {', '.join(sources)} (reuse_baselines: false trains them again)",
        )
    table.add_row("phase", _phase(trials, summary))
    table.add_row("elapsed", f"{row['elapsed_min']:.1f} min over {search.sessions} session(s)")
    volume = "-"
    if summary.reference:
        reference = ", ".join(
            f"{n} {r:.4g}" for n, r in zip(summary.objectives, summary.reference, strict=True)
        )
        empty = "; no candidate is better than it on every objective" * (summary.hypervolume == 0)
        volume = f"{summary.hypervolume:.6g} (reference {reference}{empty})"
    table.add_row("hypervolume", volume)
    table.add_row("mlflow run", search.mlflow_run_id or "-")
    out.print(table)
    _print_jobs([t for t in trials if not t.is_candidate])
    failed = [t for t in trials if t.status == "failed"]
    if failed:
        errors = Table(title="failed trials", title_justify="left")
        for column in ("trial", "arch_id", "reason"):
            errors.add_column(column, overflow="fold")
        for t in failed:
            reason = t.error.splitlines()[0][:200] if t.error else "(no reason recorded)"
            errors.add_row(str(t.number), t.arch_id, reason)
        out.print(errors)
    print_front(search, summary)


def _phase(trials, summary) -> str:
    """Where the search is: the stand-alone training of candidates, after its setup jobs
    or beside them (with the progress each last reported)."""
    jobs = [t for t in trials if not t.is_candidate]
    unfinished = [t for t in jobs if t.status != "completed"]
    counts = summary.counts
    done = sum(counts[s] for s in FINISHED)
    after = f", after {counted(len(jobs), 'setup job')}" if jobs else ""
    training = (
        f"stand-alone training: {done} finished, {counts['running']} running "
        f"({counts['searched']}/{counts['budget']} searched so far)"
    )
    if not unfinished:
        return training + after
    shown = []
    for t in unfinished:
        progress = (t.job or {}).get("progress")
        where = f"{progress['phase']} {progress['done']}/{progress['total']}" if progress else ""
        shown.append(f"{t.arch_id} {t.status} {where}".strip())
    jobs_text = f"setup jobs: {len(jobs) - len(unfinished)} done; " + "; ".join(shown)
    return f"{jobs_text}; {training}" if done or counts["running"] else jobs_text


def _settled(result: dict) -> str:
    """When a DNAS job's decode settled, and a warning if it was still moving at the end."""
    settled, steps = result.get("settled_from_step"), result.get("steps")
    if settled is None or not steps:
        return ""
    if _unsettled(result):
        return (
            f", still changing at step {settled} of {steps}: more steps may decode another "
            "architecture"
        )
    return f", held from step {settled} of {steps}"


def _unsettled(result: dict) -> bool:
    settled, steps = result.get("settled_from_step"), result.get("steps")
    return settled is not None and bool(steps) and settled >= UNSETTLED_SHARE * steps


def _print_unsettled(trials) -> None:
    """After a search: each DNAS job whose decode still moved at its end, in one line."""
    for t in trials:
        result = t.metrics or {}
        if not t.is_candidate and _unsettled(result):
            console.print(
                phrase(
                    styled("note", "yellow"),
                    f": {t.arch_id} decoded {result['arch_id']}{_settled(result)}",
                )
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
            found = f"decoded {result['arch_id']}{_settled(result)}"
        elif "picks" in result:
            found = f"{result.get('evaluated', 0)} members scored, {len(result['picks'])} picked"
            if result.get("calibration"):
                found += f"; {len(result['calibration'])} to calibrate the ranker, trained first"
        else:
            found = (t.error or "").splitlines()[0][:120] if t.error else "-"
        table.add_row(
            str(t.number),
            t.arch_id,
            t.kind,
            status_text(t.status),
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
    from nas.search.objectives import get_objective

    registry = open_registry(args)
    search = registry.get_search(args.search_id)
    retrain = (search.config or {}).get("retrain")
    if retrain:
        raise NasError(
            f"{search.id} is a retrain: it has no front. Its table: nas status {search.id}; "
            f"the front of the search it retrained: nas pareto {retrain['of']}"
        )
    objectives = None
    if args.objectives:
        objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
        for name in objectives:
            get_objective(name, "--objectives")
        if len(set(objectives)) != len(objectives):
            raise ConfigError("--objectives", f"lists an objective twice: {args.objectives}")
    _, summary = summary_of(registry, search, objectives)
    if args.json:
        emit_json({"search": search.id, **summary.to_dict()})
        return
    print_front(search, summary)


def print_front(search, summary) -> None:
    if not summary.front:
        failed = summary.counts["failed"]
        why = f" ({failed} failed; the reasons: nas status {search.id})" if failed else ""
        still = " yet" if search.status == "running" else ""
        console.print(f"search {search.id} has no completed candidates{still}{why}")
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
        label = styled(f"{c.label} (baseline)", "orange3") if c.is_baseline else Text(c.arch_id)
        if len(summary.objectives) > 1 and summary.knee and c.number == summary.knee.number:
            label.append(" * knee", style="red")
        cells = [format_value(n, v) for n, v in zip(summary.objectives, c.values, strict=True)]
        extra = [format_value(n, c.metrics.get(n)) for n in extras]
        table.add_row(str(c.number), label, *cells, *extra)
    out.print(table)


def cmd_cancel(args: argparse.Namespace) -> None:
    from nas.service.registry import controller_alive

    registry = open_registry(args)
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
