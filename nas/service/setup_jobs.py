"""The setup phase of a search: the strategy's jobs (supernet training, DNAS runs), before
any candidate.

    SetupPhase(controller).run(deadline) -> None (all done) | "cancelled" | "stopped"

Each job is a Ray task (``workers.jobs.run_job``) with as many CPUs as its threads (the
search's ``cpus_per_trial``, times the cores fewer jobs than ``concurrency`` leave free),
up to ``concurrency`` at once, reading the search's data from the object store, and is recorded
as a trial of its kind (``supernet``, ``dnas``) with a checkpoint path under the runs folder
(on a cluster, that folder must be on storage every node mounts, as Tune's storage is).

When a job finishes, the strategy takes its result and its state is written with the job's
outcome in one registry transaction (then its checkpoint is deleted, unless the job keeps
it: a trained supernet does); then the job's MLflow run (settings, the logits'
trajectories, the decoded or picked architectures) and the strategy's summary on the search
run. A job that raises fails the search (``nas resume`` runs it again from its checkpoint);
after a crash, the jobs the strategy has not been told about run again from theirs, and a
job's run gives the same result however often it was interrupted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nas.core.errors import TrainingError
from nas.core.paths import checkpoint_file
from nas.search.strategies import Job, Strategy
from nas.service.config import SearchConfig
from nas.service.recording import Recording
from nas.service.registry import Registry, Search, Trial
from nas.service.reporter import Reporter
from workers.trial_data import TrialData

POLL_S = 0.5  # how often progress and cancellation are read while jobs run
PROGRESS_SAVE_S = 5.0  # how often a job's progress is written to the registry
BULKY = ("subnets", "trajectory", "pool")  # result parts not kept in the registry


class SetupHost(Protocol):
    """What the setup phase reads and calls on the search that runs it (the controller)."""

    registry: Registry
    search: Search
    strategy: Strategy
    config: SearchConfig
    reporter: Reporter
    known: dict[str, Trial]  # job name or arch_id -> its trial, as recorded
    recording: Recording

    @property
    def trial_data(self) -> TrialData: ...

    def poll_cancel(self) -> bool: ...


@dataclass
class _Running:
    job: Job
    trial: Trial
    began: float
    saved: float = 0.0


class SetupPhase:
    def __init__(self, host: SetupHost):
        self.c = host
        self.running: dict[Any, _Running] = {}  # Ray ObjectRef -> the job it computes

    def run(self, deadline: float | None) -> str | None:
        jobs = self.c.strategy.jobs()
        if not jobs:
            return None
        import ray
        from ray.util.queue import Queue

        from workers.jobs import run_job

        resources = self.c.config.resources
        task = ray.remote(run_job)
        # A job's threads are fixed by its settings (so a resume computes what it did);
        # its reservation never asks for more CPUs than one node has, or it would wait forever.
        largest = max(n["Resources"].get("CPU", 1) for n in ray.nodes() if n["Alive"])
        data = ray.put(self.c.trial_data)
        queue = Queue(actor_options={"num_cpus": 0})
        self.c.reporter.phase("setup jobs", len(jobs))
        try:
            while jobs or self.running:
                while jobs and len(self.running) < resources.concurrency:
                    job = jobs.pop(0)
                    trial = self._open(job)
                    cpus = min(job.settings["threads"], largest)
                    gpus = resources.gpus_per_trial  # as a trial's: the job trains on it
                    # A worker that dies (not a job that raises) is retried by Ray; the
                    # job picks up from its last checkpoint.
                    retries = resources.max_retries
                    ref = task.options(num_cpus=cpus, num_gpus=gpus, max_retries=retries).remote(
                        job.kind,
                        job.settings,
                        data,
                        trial.checkpoint,
                        queue,
                        job.name,
                        "cuda" if gpus > 0 else "cpu",
                    )
                    self.running[ref] = _Running(job, trial, time.time())
                    self.c.reporter.job_started(job)
                done, _ = ray.wait(list(self.running), num_returns=1, timeout=POLL_S)
                self._progress(queue)
                stop = self._stop(deadline)
                if stop:
                    self._cancel_all("search " + stop)
                    return stop
                for ref in done:
                    self._finish(self.running.pop(ref), ref)
                if not jobs and not self.running:
                    jobs = self.c.strategy.jobs()  # any that needed these results
        finally:
            ray.kill(queue.actor)
        return None

    # --- one job --------------------------------------------------------------------------

    def _open(self, job: Job) -> Trial:
        """The job's trial: a new one, or the one an earlier session left unfinished."""
        known = self.c.known.get(job.name)
        if known is not None:
            trial = self.c.registry.restart_trial(known.id)
        else:
            trial = self.c.registry.add_trial(
                self.c.search.id, None, job.name, None, job.kind, job={"settings": job.settings}
            )
            path = checkpoint_file(self.c.search.id, job.name)
            self.c.registry.update_trial(trial.id, checkpoint=str(path))
            trial.checkpoint = str(path)
        self.c.known[job.name] = trial
        return trial

    def _finish(self, entry: _Running, ref) -> None:
        import ray

        job, trial = entry.job, entry.trial
        timings = {"started_at": entry.began, "finished_at": time.time()}
        try:
            result = ray.get(ref)
        except Exception as err:  # the task raised, or its worker died
            reason = _task_error(err)
            trial = self.c.registry.finish_trial(trial.id, "failed", error=reason, timings=timings)
            self.c.recording.log_job(trial, None)
            self._cancel_all(f"setup job {job.name} failed")
            raise TrainingError(
                f"setup job {job.name} failed: {reason}\n"
                f"continue with: nas resume {self.c.search.id} (it restarts from its checkpoint)"
            ) from None
        self.c.strategy.job_done(job, result)
        kept = {k: v for k, v in result.items() if k not in BULKY}
        trial = self.c.registry.finish_trial(
            trial.id,
            "completed",
            metrics=kept,
            timings=timings,
            strategy_state=self.c.strategy.state_dict(),
        )
        self.c.known[job.name] = trial
        self.c.recording.log_job(trial, result)
        if not job.keep_checkpoint and trial.checkpoint:
            Path(trial.checkpoint).unlink(missing_ok=True)
            self.c.registry.update_trial(trial.id, checkpoint=None)
        self.c.reporter.job_finished(job, trial)

    # --- watching ---------------------------------------------------------------------------

    def _progress(self, queue) -> None:
        from ray.util.queue import Empty

        by_name = {r.job.name: r for r in self.running.values()}
        while True:
            try:
                name, phase, done, total = queue.get_nowait()
            except Empty:
                return
            self.c.reporter.job_progress(name, phase, done, total)
            entry = by_name.get(name)
            if entry is not None and time.time() - entry.saved >= PROGRESS_SAVE_S:
                entry.saved = time.time()
                progress = {"phase": phase, "done": done, "total": total}
                job = {**(entry.trial.job or {}), "progress": progress}
                self.c.registry.update_trial(entry.trial.id, job=job)
                entry.trial.job = job

    def _stop(self, deadline: float | None) -> str | None:
        if self.c.poll_cancel():
            return "cancelled"
        if deadline is not None and time.time() >= deadline:
            return "stopped"
        return None

    def _cancel_all(self, why: str) -> None:
        import ray

        for ref, entry in list(self.running.items()):
            ray.cancel(ref, force=True)
            self.c.registry.finish_trial(entry.trial.id, "cancelled", error=why)
        self.running.clear()


def _task_error(err: Exception) -> str:
    """The job's own error, without Ray's wrapping (its last lines)."""
    cause = getattr(err, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".strip()
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return "\n".join(lines[-3:]) or type(err).__name__
