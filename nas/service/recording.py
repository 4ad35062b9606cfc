"""A search's records: how a finished trial is filed in the registry and in MLflow.

    Recording.open()     the search's parent MLflow run (found again on a resume)
    Recording.file()     one finished trial: one registry transaction (its outcome and the
                         strategy's state after the tell), then its MLflow child run, then
                         the parent run's front
    Recording.close()    the search's final status, then the parent run's front, plot and
                         pages, then the run's end

The registry comes first every time: kill the process between two steps and ``nas resume``
finds the trial recorded and writes its missing MLflow run (``log_unlogged``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from nas.search.strategies import Strategy
from nas.service.config import SearchConfig
from nas.service.registry import Registry, Search, Trial
from nas.service.registry.models import FINISHED, utcnow
from nas.service.reporter import Reporter
from nas.service.summary import SearchSummary, summarize
from nas.service.tracking import Tracker, TrackingError


@dataclass(frozen=True)
class Outcome:
    """How a trial ended, as the registry files it."""

    status: str  # completed | stopped | failed
    values: list[float] | None  # the objectives, in the search's order; None unless measured
    metrics: dict[str, Any] | None
    error: str | None

    @classmethod
    def failed(cls, error: str) -> Outcome:
        return cls("failed", None, None, error)

    @classmethod
    def measured(
        cls, metrics: dict[str, Any], objectives: list[str], stopped_by: str | None
    ) -> Outcome:
        """A trial that reported its figures (``stopped_by``: the scheduler that stopped it
        early, if one did). A figure that is not finite fails it."""
        values = [float(metrics[o]) for o in objectives]
        if not all(math.isfinite(v) for v in values):
            shown = dict(zip(objectives, values, strict=True))
            return cls("failed", None, metrics, f"an objective is not finite: {shown}")
        if stopped_by is not None:
            error = f"stopped by {stopped_by} at step {metrics['steps']}"
            return cls("stopped", values, metrics, error)
        return cls("completed", values, metrics, None)


class Recording:
    """Files a search's trials in the registry and MLflow, and the search's end."""

    def __init__(
        self,
        registry: Registry,
        tracker: Tracker,
        reporter: Reporter,
        config: SearchConfig,
        strategy: Strategy | None,
    ):
        self.registry, self.tracker, self.reporter = registry, tracker, reporter
        self.config, self.strategy = config, strategy
        self.search: Search | None = None  # set by open()

    def open(self, search: Search, dataset: dict | None = None) -> Search:
        """The search's parent MLflow run: made on the first session (with ``dataset``, the
        figures of the data it searches on: ``nas.data.profile``), resumed after."""
        if search.mlflow_run_id is None:
            experiment = self.tracker.experiment(search.name)
            run_id = self.tracker.start_search(experiment, search.id, search.config, dataset)
            search = self.registry.update_search(
                search.id, owned=True, mlflow_experiment_id=experiment, mlflow_run_id=run_id
            )
        else:
            self.tracker.resume_search(search.mlflow_run_id)
        self.search = search
        return search

    def file(
        self,
        trial: Trial,
        outcome: Outcome,
        timings: dict[str, Any],
        begin: float,
        state: dict | None = None,
    ) -> Trial:
        """A finished trial's record (with the strategy's ``state`` after the tell, if any),
        then its MLflow run and the search's front; the bookkeeping time since ``begin``."""
        trial = self.registry.finish_trial(
            trial.id,
            outcome.status,
            values=outcome.values,
            metrics=outcome.metrics,
            error=outcome.error,
            timings=timings,
            strategy_state=state,
        )
        trial = self.log_trial(trial)
        summary = self.progress(self.registry.trials(self.search.id))
        timings["bookkeeping_s"] = time.time() - begin
        self.registry.update_trial(trial.id, timings=timings)
        self.reporter.trial_finished(trial, summary)
        return trial

    def progress(self, trials: list[Trial]) -> SearchSummary:
        """What the search is now, after a trial's record: its front, logged on its run."""
        summary = summarize(self.config, trials)
        self.tracker.log_front(self.search.mlflow_run_id, summary, step=_done(summary))
        return summary

    def log_trial(self, trial: Trial) -> Trial:
        run_id = self.tracker.log_trial(
            self.search.mlflow_experiment_id,
            self.search.mlflow_run_id,
            self.search.id,
            self.config.strategy.name,
            trial,
        )
        self.registry.update_trial(trial.id, mlflow_run_id=run_id)
        trial.mlflow_run_id = run_id
        return trial

    def add_estimates(self, trial: Trial, estimates: dict[str, float]) -> Trial:
        """The strategy's estimates for a trial recorded before the strategy had them (a
        one-shot calibration member, trained before its supernet job ended): in its registry
        figures and on its MLflow run."""
        metrics = {**(trial.metrics or {}), **estimates}
        self.registry.update_trial(trial.id, metrics=metrics)
        trial.metrics = metrics
        if trial.mlflow_run_id:  # else: logged with them on a resume (log_unlogged)
            self.tracker.log_metrics(trial.mlflow_run_id, estimates)
        return trial

    def log_job(self, trial: Trial, result: dict[str, Any] | None) -> None:
        """A setup job's MLflow run (with its result when it has one), and what the strategy
        has learned so far on the search's run."""
        run_id = self.tracker.log_job(
            self.search.mlflow_experiment_id,
            self.search.mlflow_run_id,
            self.search.id,
            trial,
            result,
        )
        self.registry.update_trial(trial.id, mlflow_run_id=run_id)
        self.tracker.log_strategy(self.search.mlflow_run_id, self.strategy.summary())

    def log_unlogged(self, trials: list[Trial]) -> None:
        """Trials recorded just before a crash, whose MLflow run was not written."""
        for trial in trials:
            if trial.status in FINISHED and trial.mlflow_run_id is None:
                if not trial.is_job:
                    self.log_trial(trial)
                else:  # its bulky result parts were never kept: the run gets the rest
                    self.log_job(trial, trial.metrics)

    def close(self, search: Search, status: str, message: str | None, seconds: float) -> Search:
        """The search's end: trials left open are cancelled (to run again on a resume), the
        final status, then the parent run's last figures and its end."""
        for trial in self.registry.trials(search.id):
            if trial.status == "running":  # suggested or started, never finished
                self.registry.finish_trial(trial.id, "cancelled", error="search stopped")
        finished = None if status in ("interrupted", "stopped") else utcnow()
        search = self.registry.update_search(
            search.id,
            owned=True,
            status=status,
            message=message,
            elapsed_s=search.elapsed_s + seconds,
            finished_at=finished,
            pid=None,
        )
        if self.search is not None and self.search.mlflow_run_id:  # None: MLflow unreachable
            try:
                try:
                    self.log_end(search, self.registry.trials(search.id))
                finally:  # the run says how the search ended, even if its front failed to log
                    self.tracker.end_search(search.mlflow_run_id, status)
            except TrackingError as err:
                if status == "completed":  # MLflow lacks its end: `nas resume` logs it
                    self.registry.update_search(search.id, status="failed", message=str(err))
                raise
        return search

    def log_end(self, search: Search, trials: list[Trial]) -> None:
        """What the search's MLflow run shows at the end: the front, its plot, and the
        interactive pages (``dashboards/pareto_html.py``)."""
        summary = self.progress(trials)
        if summary.candidates and len(summary.objectives) >= 2:
            from dashboards.pareto_plot import pareto_figure

            figure = pareto_figure(summary, search.name)
            self.tracker.log_figure(search.mlflow_run_id, figure, "pareto.png")
        if summary.candidates:
            from dashboards.pareto_html import page, pareto_figure, progress_figure

            runs = {t.number: t.mlflow_run_id for t in trials if t.mlflow_run_id}
            html = page(
                search.id,
                pareto_figure(summary, search.id, runs),
                progress_figure(summary, trials, search.id),
            )
            self.tracker.log_text(search.mlflow_run_id, html, "pareto.html")


def _done(summary: SearchSummary) -> int:
    return sum(summary.counts[s] for s in FINISHED)
