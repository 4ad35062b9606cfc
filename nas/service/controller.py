"""The controller: runs a search's candidates as Ray Tune trials and records every outcome.

    Controller.run()      ray.init -> Tuner(trainable, search_alg=ask the strategy,
                          callbacks=record each outcome) -> fit, the strategy's setup jobs
                          (supernet or DNAS training, ``setup_jobs.py``) beside the trials ->
                          the search's final status recorded -> ray.shutdown

Tune drives the candidates' loop. Its ``Searcher`` asks this controller for the next
candidate (a trial to re-run after a crash; a baseline, while the baselines hold fewer than
half the workers and no setup job waits; the strategy's next ask, until the budget is spent;
while the strategy waits, a setup job in the free workers; the baselines left); a Tune
``Callback`` hands each finished trial back, and ``recording.py`` files it. Kill the process
anywhere and ``nas resume`` finds a consistent registry: trials left "running" are run
again, MLflow runs are looked up before they are created.

Ray's per-trial start-up cost (a process, imports: seconds) is paid once per worker, not per
candidate: ``reuse_actors=True`` keeps each worker for the next candidate. The prepared data
goes into the object store once (``tune.with_parameters``) and is read without copies.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from nas.arch.spec import ArchSpec
from nas.core.errors import NasError
from nas.core.paths import ray_errors_file, tune_dir
from nas.data.profile import profile
from nas.search.objectives import cost_values, fp8_probe_settings
from nas.search.strategies import SpaceExhausted, Strategy, Waiting
from nas.service.baselines import BaselineSchedule
from nas.service.plan import Plan
from nas.service.recording import Outcome, Recording
from nas.service.registry import LeaseLost, Registry, Search, Trial
from nas.service.registry.models import FINISHED
from nas.service.registry.store import HEARTBEAT_S
from nas.service.reporter import Reporter
from nas.service.rungs import RungBook
from nas.service.setup_jobs import SetupJobs
from nas.service.tracking import Tracker
from nas.service.trained_before import training_key
from nas.service.tune_glue import (
    WAIT,
    RayWatch,
    Recorder,
    StopWhenAsked,
    StrategySearcher,
    WorkerCrash,
    check_gpus,
    init_ray,
    kill_local_ray,
    shutdown_ray,
    tune_scheduler,
)
from workers.messages import RungPlan, TrialReport, TrialRequest, TrialSettings
from workers.train import TrainConfig
from workers.trial import SelectBest

CANCEL_POLL_S = 1.0
INTERRUPTED = "stopped before the budget was spent; continue with nas resume"


class Heartbeat:
    """Renews this process's lease on a search every ``HEARTBEAT_S``, from a thread, so the
    search reads as crashed soon after its controller dies, from any host. A lease found
    taken over (this process was silent too long, and another resumed the search) is
    handed to ``on_lost``, and the beats stop."""

    def __init__(self, registry: Registry, search_id: str, on_lost: Callable[[Exception], None]):
        self.registry, self.search_id, self.on_lost = registry, search_id, on_lost
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="recnas-heartbeat", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(HEARTBEAT_S):
            renewed = True
            with contextlib.suppress(NasError):  # unreachable now: the next beat tries again
                renewed = self.registry.beat(self.search_id)
            if not renewed:
                row = None
                with contextlib.suppress(NasError):  # who took it over, if the registry says
                    row = self.registry.get_search(self.search_id)
                self.on_lost(LeaseLost(self.search_id, row))
                return

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


@dataclass
class _Running:
    trial: Trial
    suggested_at: float


@dataclass
class Controller:
    registry: Registry
    search: Search
    plan: Plan
    reporter: Reporter = field(default_factory=Reporter)
    recording_class: ClassVar[type[Recording]] = Recording

    def __post_init__(self) -> None:
        self.config = self.plan.config
        self.strategy = self._strategy()
        self.objectives = [o.name for o in self.config.objectives]
        self.running: dict[str, _Running] = {}  # Tune trial id -> our trial
        select = self.config.selection()  # None: every candidate keeps its last weights
        self.selection = SelectBest(**select) if select else None
        self.retried: dict[int, list[str]] = {}  # trial id -> why its earlier attempts died
        self.live_since: dict[str, float] = {}  # Tune trial id -> first seen on a worker
        self.timed_out: set[str] = set()  # Tune trial ids killed over max_trial_minutes
        self.exhausted: str | None = None
        self.setup = SetupJobs(self)  # the strategy's setup jobs (none for sampling)
        self.setup_stop: str | None = None  # why the setup jobs stopped short, if they did
        self.cancelled = False
        self.interrupted = False  # a first Ctrl-C: the trials stop, the search is resumable
        self.failure: Exception | None = None  # in Tune's hooks (``failed``): the search stops
        self.deadline: float | None = None  # budget.max_minutes, as a time.time()
        self._last_poll = 0.0
        self.tracker = Tracker(self.plan.tracking_uri, self.plan.artifact_root)
        self.recording = self.recording_class(
            self.registry, self.tracker, self.reporter, self.config, self.strategy
        )
        self.rungs = RungBook(self.config.early_stopping(), self.objectives, self._costs)

    def _strategy(self) -> Strategy | None:
        return self.plan.strategy(self.registry.url, self.search.id)

    # --- the session ---------------------------------------------------------------------

    def run(self) -> Search:
        """Run the search until its budget is spent, it is cancelled, or it is interrupted.
        However it ends, the registry and the parent MLflow run say how."""
        start = time.time()
        search = self.registry.claim(self.search)
        status, message = "failed", None
        heartbeat = Heartbeat(self.registry, search.id, self.failed)
        started_ray, watch = False, None
        stopped_by: BaseException | None = None
        try:
            trials = self.begin(search)
            remaining = self._time_left(search)
            total = self._total()
            finished = sum(t.status in FINISHED for t in trials)
            self.reporter.start(search, total, finished)
            started_ray = init_ray(self.plan.ray_address)
            watch = RayWatch(functools.partial(self._ray_died, start)) if started_ray else None
            check_gpus(self.config.resources.gpus_per_trial)
            self._run_phases(search, remaining)
            status, message = self._final_status(search, remaining, time.time() - start)
        except KeyboardInterrupt as err:
            status, message, stopped_by = "interrupted", INTERRUPTED, err
            raise
        except Exception as err:
            message, stopped_by = f"{type(err).__name__}: {err}".splitlines()[0], err
            raise
        finally:
            if watch is not None:
                watch.stop()
            heartbeat.stop()
            self.reporter.stop()
            # The record first, then Ray: after a SIGTERM to the whole process group (what
            # systemd sends) Ray's processes are gone and its shutdown can hang for a minute.
            try:
                search = self.recording.close(search, status, message, time.time() - start)
            except NasError:
                if stopped_by is None:
                    raise
                # What stopped the search is the news (MLflow down, say, fails its close too);
                # the registry has the end recorded before the close failed.
            finally:
                if started_ray:
                    shutdown_ray()
        return search

    def _total(self) -> int:
        """Trials the session's progress counts to: the budget and the baselines."""
        return self.config.budget.candidates + len(self.plan.baselines)

    def begin(self, search: Search) -> list[Trial]:
        """Pick up where the registry says the search is: the strategy's state, the MLflow
        runs, the trials to run again, the baselines still to train. Its trials so far."""
        if search.strategy_state:
            self.strategy.load_state_dict(search.strategy_state)
        figures = profile(self.plan.dataset) if search.mlflow_run_id is None else None
        self.search = self.recording.open(search, figures)
        trials = self.registry.trials(search.id)
        self.recording.log_unlogged(trials)
        self.rerun = [
            t for t in trials if t.is_candidate and t.status in ("running", "cancelled")
        ]  # unfinished setup jobs run again when the strategy lists them
        done = {t.arch_id for t in trials}
        left = [b for b in self.plan.baselines if b.arch_id not in done]
        self.baselines = BaselineSchedule(left, self.config.resources.concurrency)
        self.known = {t.arch_id: t for t in trials}
        return trials

    @functools.cached_property
    def trial_data(self):
        """What every trial and job reads: the splits as arrays put in Ray's object store,
        or, for a dataset whose splits are contiguous on a local Ray, its folder, which each
        trial maps (``workers/trial_data.py``)."""
        from workers.trial_data import TrialData

        mapped = self.plan.ray_address is None
        return TrialData.from_prepared(self.plan.dataset, "valid", mapped=mapped)

    def _run_phases(self, search: Search, time_budget_s: float | None) -> None:
        """The candidates, with the strategy's setup jobs (if any) in the workers the
        candidates leave free, on one Ray session."""
        self.deadline = None if time_budget_s is None else time.time() + time_budget_s
        jobs = self.setup.pending()
        if jobs:
            self.reporter.phase("setup jobs", len(jobs))
        self._reuse_baselines()
        self.reporter.phase("stand-alone training", self._planned())
        try:
            self._fit(search, time_budget_s)
        finally:
            unfinished = bool(self.setup.running or self.setup.pending())
            self.setup.close("search stopped" if self.setup.error is None else "a job failed")
        if self.setup.error is not None:
            raise self.setup.error
        if self.failure is not None:
            raise self.failure
        if unfinished and self.deadline is not None and time.time() >= self.deadline - 1:
            self.setup_stop = "stopped"

    def _planned(self) -> int:
        """Trials the search will train in all, as far as the strategy knows now."""
        offered = self.strategy.offers()  # in all, sessions before this one included
        searched = self.config.budget.candidates
        if offered is not None:
            searched = min(searched, offered)
        return searched + len(self.plan.baselines)

    def pump(self) -> None:
        """Between Tune's steps: the setup jobs' progress, and the ones that finished."""
        if self.setup.poll():
            self.reporter.phase("stand-alone training", self._planned())
            for trial in list(self.known.values()):  # trained before the job that scores it
                if trial.kind == "searched" and trial.metrics is not None:
                    new = self._estimate(trial).items()
                    if missing := {k: v for k, v in new if k not in trial.metrics}:
                        self.known[trial.arch_id] = self.recording.add_estimates(trial, missing)

    def _fit(self, search: Search, time_budget_s: float | None) -> None:
        from ray import tune

        from workers.search_trial import run_candidate

        resources = self.config.resources
        needs: Any = {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}
        if resources.workers_per_trial > 1:  # one bundle per rank (workers/search_trial.py)
            bundle = {"CPU": resources.cpus_per_trial}
            needs = tune.PlacementGroupFactory([bundle] * resources.workers_per_trial)
        trainable = tune.with_resources(
            tune.with_parameters(run_candidate, data=self.trial_data), needs
        )
        scheduler = None
        if self.rungs.scheduler is not None:
            scheduler = tune_scheduler(self.rungs.scheduler, self)
            for trial in self.registry.trials(search.id):  # what earlier sessions measured
                rungs = (trial.metrics or {}).get("rungs")
                if trial.is_candidate and trial.status in FINISHED and rungs:
                    reports = self.rungs.replay(trial.spec, trial.metrics)
                    scheduler.remember(f"trial{trial.number}", reports)
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=StrategySearcher(self),
                scheduler=scheduler,
                num_samples=-1,  # until the searcher says FINISHED
                max_concurrent_trials=resources.concurrency,
                reuse_actors=True,
                time_budget_s=time_budget_s,
                trial_dirname_creator=lambda t: f"trial{t.config['number']:04d}",
            ),
            run_config=tune.RunConfig(
                name=f"{search.id}-session{search.sessions}",
                storage_path=str(tune_dir()),
                callbacks=[Recorder(self)],
                stop=StopWhenAsked(self),
                verbose=0,
                log_to_file=True,
            ),
        )
        with self._first_ctrl_c():
            tuner.fit()

    @contextlib.contextmanager
    def _first_ctrl_c(self):
        """A first Ctrl-C stops the trials and ends the search, resumable; a second one
        raises ``KeyboardInterrupt`` at once. Ray Tune's own handler does the first part, but
        its loop does not look while it waits for the searcher's next trial, which is where a
        search whose workers all run setup jobs spends its time. A process started with
        Ctrl-C ignored (in the background: ``nas submit ... &`` in a script, ``nohup``) keeps
        ignoring it, as Python itself does: the terminal's Ctrl-C is for the foreground."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        kept = signal.getsignal(signal.SIGINT)

        def first(signum, frame) -> None:
            self.interrupted = True
            signal.signal(signal.SIGINT, kept)

        if kept is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, first)
        before = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, kept)
            if before is None:
                os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
            else:
                os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = before

    # --- asking --------------------------------------------------------------------------

    def next_config(self, tune_id: str) -> dict[str, Any] | Literal["wait"] | None:
        """The Tune config of the next candidate; ``WAIT`` while the strategy waits on
        trials or setup jobs still running; None when there is nothing left, or the search
        must stop."""
        self.pump()
        if self.should_stop() or (self.deadline is not None and time.time() >= self.deadline):
            return None
        if self.setup.busy() and self._free_workers() <= 0:
            return WAIT  # the setup jobs hold the workers the trials leave
        trial = self._next_trial()
        if trial is None or trial == WAIT:
            return trial
        self.known[trial.arch_id] = trial
        return self.start(tune_id, trial, self.settings(self.config.seed, self.rungs.plan()))

    def _next_trial(self) -> Trial | Literal["wait"] | None:
        """A trial cut short to run again; else a baseline, while the baselines hold fewer
        than half the workers and every setup job has started; else the strategy's next
        candidate, until the budget is spent; else, while the strategy waits on a setup job
        still to start, that job (``WAIT``); else the baselines left; else ``WAIT`` while the
        strategy waits on running trials or jobs.
        Baselines trained alongside the candidates, not before them, let the search start at
        once: trained first, they held every worker of a small search for its first minutes.
        They still come first where there is one worker and no setup job."""
        jobs = self.setup.pending()  # once a call: it lists the strategy's jobs afresh
        if self.config.resources.gpus_per_trial > 0 and (jobs or self.setup.busy()):
            # On GPUs the jobs run first: a job reserves its GPU from Ray, and Tune keeps an
            # idle trial worker, with its GPU, while it waits for the next trial.
            if jobs:
                self.setup.start(jobs[0], self._free_workers())
            return WAIT
        if self.rerun:
            return self.registry.restart_trial(self.rerun.pop(0).id)
        running = sum(r.trial.is_baseline for r in self.running.values())
        if not jobs and (spec := self.baselines.due(running)) is not None:
            return self._add_baseline(spec)
        waiting = False
        if self._searched() < self.config.budget.candidates and not self.exhausted:
            try:
                spec = self._ask()
            except SpaceExhausted as err:
                self.exhausted = str(err)
            except Waiting:
                waiting = True
            else:
                return self.registry.add_trial(
                    self.search.id,
                    spec.to_dict(),
                    spec.arch_id,
                    None,
                    "searched",
                    self.strategy.state_dict(),
                )
        if waiting and jobs:
            # The next job; or, if it needs more workers than are free now, none started
            # until it has them (the strategy waits on it; the baselines can wait).
            self.setup.start(jobs[0], self._free_workers())
            return WAIT
        spec = self.baselines.next()
        if spec is not None:
            return self._add_baseline(spec)
        return WAIT if waiting or self.setup.running else None

    def _free_workers(self) -> int:
        """Workers (of ``resources.concurrency``) neither a trial nor a setup job holds."""
        return self.config.resources.concurrency - len(self.running) - self.setup.busy()

    def _add_baseline(self, spec: ArchSpec) -> Trial:
        return self.registry.add_trial(
            self.search.id, spec.to_dict(), spec.arch_id, spec.name, "baseline"
        )

    def start(self, tune_id: str, trial: Trial, settings: TrialSettings) -> dict[str, Any]:
        """``trial`` is starting as Tune trial ``tune_id``: its Tune config, the request
        ``workers/search_trial.py`` reads."""
        self.running[tune_id] = _Running(trial, time.time())
        self.reporter.trial_started(trial)
        return self.request(trial, settings).to_config()

    def request(self, trial: Trial, settings: TrialSettings) -> TrialRequest:
        memory = int(self.config.resources.memory_gb_per_trial * 2**30)
        return TrialRequest(trial.id, trial.number, trial.spec, settings, memory)

    def settings(self, seed: int, rungs: RungPlan | None) -> TrialSettings:
        """What decides a trial's figures besides its spec."""
        train = self.config.train
        return TrialSettings(
            train=TrainConfig(
                steps=self.config.budget.steps,
                batch_size=train.batch_size,
                lr=train.lr,
                embedding_lr=train.embedding_lr,
                precision=train.precision,
                seed=seed,
            ),
            threads=self.config.resources.cpus_per_trial,
            rungs=rungs,
            select=self.selection,
            fp8_probe=fp8_probe_settings(self.config.objectives, self.config.fp8_probe),
            gpus=self.config.resources.gpus_per_trial,
            workers=self.config.resources.workers_per_trial,
        )

    def _ask(self) -> ArchSpec:
        """The strategy's next candidate that this search has not measured (a strategy never
        repeats itself, but it may propose a baseline: it is told the baseline's result, or
        no result for one still to train or training, as for a failed candidate)."""
        pending = self.baselines.pending()
        while True:
            spec = self.strategy.ask()
            known = self.known.get(spec.arch_id)
            if known is not None:
                self._tell(spec, known.status, known.values, known.metrics)
            elif spec.arch_id in pending:
                self.strategy.tell(spec, None)  # no result yet, as for a running baseline
            else:
                return spec

    def _tell(self, spec: ArchSpec, status: str, values, metrics) -> None:
        """The strategy hears how a finished trial of ``spec`` ended."""
        if status == "stopped":
            self.strategy.tell_stopped(spec, values, metrics["rungs"])
        else:
            self.strategy.tell(spec, values if status == "completed" else None)

    def _searched(self) -> int:
        return sum(t.kind == "searched" for t in self.known.values())

    # --- recording -----------------------------------------------------------------------

    def record(
        self, tune_id: str, result: dict[str, Any] | None, crash: WorkerCrash | None
    ) -> None:
        """Record a finished Tune trial: its report, or ``crash`` (Ray's error) when the
        worker died before reporting. A trial Tune stopped (cancel, time limit, Ctrl-C) has
        neither; it stays open, and the search's end marks it cancelled, to run again."""
        entry = self.running.pop(tune_id, None)
        stopped = tune_id in self.rungs.stopped
        report = TrialReport.from_result(result)
        reported = report is not None and (report.outcome is not None or stopped)
        if entry is None or (crash is None and not reported):
            return
        if report is not None and report.outcome in ("unavailable", "changed"):
            # Not the candidate's doing: it stays open (cancelled at the search's end, to run
            # again on the resume), and the search stops rather than fail every candidate.
            advice = (
                f"prepare it again ({self._prepare}) first"
                if report.outcome == "unavailable"
                else "a search's candidates all train on one version of its data: it resumes "
                f"once the data is as it was ({self._prepare}, with the schema and files the "
                "search started on)"
            )
            self.failed(NasError(f"{report.payload}; {advice}"))
            return
        begin = time.time()
        trial = entry.trial
        if crash is not None and tune_id in self.timed_out:  # killed: it would hang again
            limit = self.config.resources.max_trial_minutes
            why = f"ran over resources.max_trial_minutes ({limit:g}) and was killed"
            crash = WorkerCrash(why, final=True)
        if crash is not None and self._retry(trial, crash):
            return
        timings: dict[str, Any] = {"suggested_at": entry.suggested_at, "recorded_at": begin}
        if trial.id in self.retried:
            timings["retried_after"] = self.retried.pop(trial.id)
        if crash is not None:
            outcome = Outcome.failed(crash.reason)
        else:
            timings.update(
                started_at=report.started_at, finished_at=report.finished_at, node=report.node
            )
            outcome = self._outcome(trial, report, stopped)
        state = self._heard(trial, outcome)
        self.known[trial.arch_id] = self.recording.file(trial, outcome, timings, begin, state)

    def _outcome(self, trial: Trial, report: TrialReport, stopped: bool) -> Outcome:
        """A reported trial's outcome: its figures with the strategy's estimate and the
        latency estimates beside them, or the error it reported."""
        if not (stopped or report.completed):
            return Outcome.failed(report.payload)
        metrics = report.metrics() | self._estimate(trial)
        metrics |= self._costs(trial.spec, metrics)
        if trial.is_baseline:  # filed for later searches (nas/service/trained_before.py)
            metrics["training_key"] = self.training_key(trial.spec)
        stopped_by = self.rungs.scheduler.name if stopped else None
        return Outcome.measured(metrics, self.objectives, stopped_by)

    @property
    def _prepare(self) -> str:
        """The command that prepares the search's dataset again."""
        from nas.data import prepare_command

        return prepare_command(self.config.dataset)

    def training_key(self, spec: dict[str, Any]) -> str:
        """The key this search's training of ``spec`` files its figures under."""
        settings = self.settings(self.config.seed, self.rungs.plan()).as_dict()
        return training_key(spec, settings, self.plan.dataset.manifest["files"])

    def _reuse_baselines(self) -> None:
        """Record the baselines this registry has trained before with the same training key
        from that training, instead of training them again."""
        if not self.config.reuse_baselines:
            return
        earlier = self.baselines.trained_before(
            self.registry, self.training_key, self._costs, self.objectives
        )
        for spec, trial_before, metrics, values in earlier:
            begin = time.time()
            trial = self.registry.add_trial(
                self.search.id, spec.to_dict(), spec.arch_id, spec.name, "baseline"
            )
            reused = {"search_id": trial_before.search_id, "trial": trial_before.number}
            timings = {"suggested_at": begin, "recorded_at": begin, "reused_from": reused}
            outcome = Outcome("completed", values, metrics, None)
            self.known[trial.arch_id] = self.recording.file(trial, outcome, timings, begin)

    def _costs(self, spec: dict[str, Any], trial_metrics: dict) -> dict[str, float]:
        """The latency objectives' estimates for ``spec`` (``nas/arch/cost``)."""
        threads = self.config.resources.cpus_per_trial
        return cost_values(
            self.config.objectives,
            ArchSpec.from_dict(spec),
            self.plan.dataset.schema,
            threads,
            trial_metrics,
        )

    def _estimate(self, trial: Trial) -> dict[str, float]:
        """The strategy's prediction for a searched candidate, kept beside its figures."""
        if trial.kind != "searched":
            return {}
        return self.strategy.estimate(ArchSpec.from_dict(trial.spec))

    def _heard(self, trial: Trial, outcome: Outcome) -> dict | None:
        """The strategy hears a finished candidate; its state after that, to record with it
        (None: a baseline, which the strategy is not told)."""
        if trial.is_baseline:
            return None
        # Optuna's study is in the registry's database too: a controller taken over while it
        # was silent must not tell it a result beside the new one
        self.registry.require_lease(self.search.id)
        spec = ArchSpec.from_dict(trial.spec)
        self._tell(spec, outcome.status, outcome.values, outcome.metrics)
        return self.strategy.state_dict()

    def overdue(self, live: set[str]) -> set[str]:
        """Of the Tune trials on a worker now (``live``), those over
        ``resources.max_trial_minutes`` since first seen there, each named once: their
        workers are killed (a trial waiting for a worker is not counted)."""
        limit = self.config.resources.max_trial_minutes
        if limit is None:
            return set()
        now, running = time.time(), live & self.running.keys()
        for tune_id in running:
            self.live_since.setdefault(tune_id, now)
        found = {i for i in running if now - self.live_since[i] > limit * 60} - self.timed_out
        self.timed_out |= found
        return found

    def yardstick(self, tune_id: str) -> bool:
        """Whether a running Tune trial is a baseline, which the scheduler files but never
        stops."""
        entry = self.running.get(tune_id)
        return entry is not None and entry.trial.is_baseline

    def rung_losses(self, report: dict[str, Any]) -> list[float]:
        """The search's objectives at a rung report (or a final one) of a running trial."""
        metrics = TrialReport.from_result(report).metrics()
        return self.rungs.losses_at(self.known[metrics["arch_id"]].spec, metrics)

    def stopped_early(self, tune_id: str) -> None:
        self.rungs.stop(tune_id)

    def _retry(self, trial: Trial, crash: WorkerCrash) -> bool:
        """Whether the candidate of a worker that died is run again (on a new worker): yes,
        up to ``resources.max_retries`` times, unless its death was final (memory or its
        time limit killed it: it would again)."""
        if crash.final or trial.attempts > self.config.resources.max_retries:
            return False
        first = crash.reason.splitlines()[0][:300]
        self.retried.setdefault(trial.id, []).append(f"attempt {trial.attempts}: {first}")
        self.registry.update_trial(trial.id, error="\n".join(self.retried[trial.id]))
        self.rerun.append(trial)
        self.reporter.trial_retried(trial, first)
        return True

    # --- cancel and the end ---------------------------------------------------------------

    def should_stop(self) -> bool:
        """Whether the trials must stop now: ``nas cancel``, a first Ctrl-C, a failed setup
        job, a failure in the bookkeeping."""
        return (
            self.poll_cancel()
            or self.interrupted
            or self.setup.error is not None
            or self.failure is not None
        )

    def _ray_died(self, started: float, what: str) -> None:
        """Ray's GCS or raylet died under the search (``RayWatch``, from its thread). Ray's
        driver would end this process without a word, so the search's end is recorded and
        said here; then what is left of its Ray is killed and this process exits 2."""
        message = f"{what}; the trials stopped with it (Ray's own words: {ray_errors_file()})"
        self.reporter.stop()
        try:
            self.recording.close(self.search, "failed", message, time.time() - started)
        except Exception as err:  # the registry too: the search reads crashed, resumable
            message += f" (and its end could not be recorded: {err})"
        self.reporter.fatal(
            f"{message}\nthe search stopped, resumable: nas resume {self.search.id}"
        )
        kill_local_ray()
        os._exit(2)

    def failed(self, error: Exception) -> None:
        """An error in Tune's hooks (recording a trial, the setup jobs' pump): the registry
        or MLflow stopped answering, or a bug. The trials stop, and the search ends failed
        with it (``_run_phases`` raises it), resumable; the first one is kept."""
        if self.failure is None:
            self.failure = error

    def poll_cancel(self) -> bool:
        """Whether ``nas cancel`` asked this search to stop (reads the registry at most once
        a second)."""
        now = time.time()
        if not self.cancelled and now - self._last_poll >= CANCEL_POLL_S:
            self._last_poll = now
            self.cancelled = self.registry.get_search(self.search.id).status == "cancelling"
        return self.cancelled

    def _time_left(self, search: Search) -> float | None:
        limit = self.config.budget.max_minutes
        return None if limit is None else max(1.0, limit * 60 - search.elapsed_s)

    def _final_status(
        self, search: Search, time_budget: float | None, seconds: float
    ) -> tuple[str, str | None]:
        trials = self.registry.trials(search.id)
        open_trials = [t for t in trials if t.status == "running"]
        searched = sum(t.kind == "searched" for t in trials)
        if self.cancelled:
            return "cancelled", "cancelled by nas cancel"
        if self.setup_stop == "stopped":
            return "stopped", (
                f"reached budget.max_minutes ({self.config.budget.max_minutes}) during the "
                "strategy's setup jobs"
            )
        if not open_trials and not self.baselines and not self.rerun:
            if searched >= self.config.budget.candidates:
                return "completed", None
            if self.exhausted:
                return "completed", self.exhausted
        if time_budget is not None and seconds >= time_budget:
            return "stopped", f"reached budget.max_minutes ({self.config.budget.max_minutes})"
        return "interrupted", INTERRUPTED


def run_controller(registry, search, controller_class, checked, reporter):
    """Make the controller of ``search`` and run it: (the controller, the search as it
    ended). However it ends, the registry says how: a controller that cannot be made ends
    the search there (resumable); a second Ctrl-C or SIGTERM, which the controller
    recorded as it stopped, returns the search as recorded."""
    try:
        controller = controller_class(registry, search, checked, reporter)
    except BaseException as err:  # nothing ran: the search ends here, resumable
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        message = f"{type(err).__name__}: {err}".splitlines()[0][:500]
        registry.update_search(search.id, status=status, message=message, pid=None)
        raise
    try:
        return controller, controller.run()
    except KeyboardInterrupt:
        return controller, registry.get_search(search.id)
    except LeaseLost:  # another process controls the search now
        raise
    except NasError as err:  # recorded as failed (the store that failed may be MLflow's)
        err.args = (f"{err}\nthe search stopped, resumable: nas resume {search.id}",)
        raise
    except OSError as err:  # a full disk: recorded as failed where the disk still took it
        err.add_note(f"the search stopped, resumable: nas resume {search.id}")
        raise
