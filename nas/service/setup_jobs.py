"""The strategy's setup jobs (supernet training, DNAS runs), run beside its candidates.

    jobs = SetupJobs(controller)
    jobs.pending()     # the strategy's jobs not started yet, in the order to start them
    jobs.start(job, free)  # ``job`` if it fits in ``free`` workers; the controller calls it
                       # only when the strategy has no candidate to give now (``Waiting``)
    jobs.poll()        # progress; each finished job handed to the strategy and recorded
    jobs.close(why)    # at the search's end: the jobs still running cancelled

A one-shot or DNAS strategy's candidates come from its jobs, but not all of them wait for
all the jobs: a DNAS penalty's first member can train as soon as that penalty's job ends,
and a one-shot search's calibration members need no supernet. So the jobs share the
search's workers with the candidates (``resources.concurrency`` in all; a job holds as many
as its threads are trials' threads), and a worker goes to a job only when the strategy has
nothing to train.

That count, not Ray's, holds the jobs to their share: a job reserves no CPUs from Ray.
Ray Tune keeps an idle trial worker, and the CPUs Ray gave it, while it waits for its next
trial; a job waiting for those CPUs would wait forever, since the next trial waits on the
job. Jobs are spread over a cluster's nodes. On GPUs, where a job does reserve its GPU,
the jobs run before the candidates.

Each job is a Ray task (``workers.jobs.run_job``) reading the search's data from the object
store, and is recorded as a trial of its kind (``supernet``, ``dnas``) with a checkpoint
path under the runs folder (on a cluster, that folder must be on storage every node mounts,
as Tune's storage is).

When a job finishes, the strategy takes its result and its state is written with the job's
outcome in one registry transaction (then its checkpoint is deleted, unless the job keeps
it: a trained supernet does); then the job's MLflow run (settings, the logits'
trajectories, the decoded or picked architectures) and the strategy's summary on the search
run. A job that raises fails the search (``error``; ``nas resume`` runs it again from its
checkpoint); after a crash, the jobs the strategy has not been told about run again from
theirs, and a job's run gives the same result however often it was interrupted. A job that
reports no progress for ``resources.max_trial_minutes`` once it runs (hung: a stopped
process, a stalled disk; a running job reports every second) is killed and fails so too.
"""

from __future__ import annotations

import math
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

POLL_S = 0.5  # how often progress and finished jobs are read
PROGRESS_SAVE_S = 5.0  # how often a job's progress is written to the registry
BULKY = ("subnets", "trajectory", "pool")  # result parts not kept in the registry


class SetupHost(Protocol):
    """What the setup jobs read and call on the search that runs them (the controller)."""

    registry: Registry
    search: Search
    strategy: Strategy
    config: SearchConfig
    reporter: Reporter
    known: dict[str, Trial]  # job name or arch_id -> its trial, as recorded
    recording: Recording

    @property
    def trial_data(self) -> TrialData: ...


@dataclass
class _Running:
    job: Job
    trial: Trial
    began: float
    workers: int
    saved: float = 0.0  # when its progress was last written to the registry
    heard: float | None = None  # when it last reported; None: not running yet

    def timings(self) -> dict[str, float]:
        return {"started_at": self.began, "finished_at": time.time()}


class SetupJobs:
    def __init__(self, host: SetupHost):
        self.c = host
        self.running: dict[Any, _Running] = {}  # Ray ObjectRef -> the job it computes
        self.error: TrainingError | None = None  # a job that failed: the search fails
        self._ray: tuple | None = None  # (task, data, queue), once a job started
        self._polled = 0.0

    def pending(self) -> list[Job]:
        """The strategy's jobs not started yet."""
        if self.error is not None:
            return []
        started = {r.job.name for r in self.running.values()}
        return [job for job in self.c.strategy.jobs() if job.name not in started]

    def busy(self) -> int:
        """Workers the running jobs hold."""
        return sum(r.workers for r in self.running.values())

    def start(self, job: Job, free: int) -> bool:
        """Start ``job`` if it fits in ``free`` workers; whether it started."""
        if self._workers(job) > free:
            return False
        task, data, queue = self._connect()
        resources = self.c.config.resources
        trial = self._open(job)
        gpus = resources.gpus_per_trial  # as a trial's: the job trains on it
        # No CPUs reserved (see above): the job's threads are its settings' (so a resume
        # computes what it did). A worker that dies (not a job that raises) is retried by
        # Ray; the job picks up from its last checkpoint.
        options = {"num_cpus": 0, "num_gpus": gpus, "scheduling_strategy": "SPREAD"}
        ref = task.options(**options, max_retries=resources.max_retries).remote(
            job.kind,
            job.settings,
            data,
            trial.checkpoint,
            queue,
            job.name,
            "cuda" if gpus > 0 else "cpu",
        )
        self.running[ref] = _Running(job, trial, time.time(), self._workers(job))
        self.c.strategy.job_started(job)
        self.c.reporter.job_started(job)
        return True

    def poll(self) -> int:
        """Read the jobs' progress and hand each finished one to the strategy (at most every
        ``POLL_S``); how many finished."""
        if not self.running or time.time() - self._polled < POLL_S:
            return 0
        import ray

        self._polled = time.time()
        done, _ = ray.wait(list(self.running), num_returns=len(self.running), timeout=0)
        self._progress()
        for ref in done:
            self._finish(self.running.pop(ref), ref)
            if self.error is not None:
                return len(done)
        self._kill_silent()
        return len(done)

    def close(self, why: str) -> None:
        """Cancel the jobs still running (recorded ``cancelled``: a resume runs them again
        from their checkpoints), and let go of Ray's queue."""
        import ray

        for ref, entry in list(self.running.items()):
            ray.cancel(ref, force=True)
            self.c.registry.finish_trial(entry.trial.id, "cancelled", error=why)
        self.running.clear()
        if self._ray is not None:
            ray.kill(self._ray[2].actor)
            self._ray = None

    # --- one job --------------------------------------------------------------------------

    def _workers(self, job: Job) -> int:
        """The search's workers a job holds: its threads over a trial's."""
        resources = self.c.config.resources
        share = math.ceil(job.settings["threads"] / resources.cpus_per_trial)
        return max(1, min(resources.concurrency, share))

    def _connect(self) -> tuple:
        if self._ray is None:
            import ray
            from ray.util.queue import Queue

            from workers.jobs import run_job

            queue = Queue(actor_options={"num_cpus": 0})
            self._ray = (ray.remote(run_job), ray.put(self.c.trial_data), queue)
        return self._ray

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
        try:
            result = ray.get(ref)
        except Exception as err:  # the task raised, or its worker died
            self._fail(entry, _task_error(err))
            return
        self.c.strategy.job_done(job, result)
        kept = {k: v for k, v in result.items() if k not in BULKY}
        trial = self.c.registry.finish_trial(
            trial.id,
            "completed",
            metrics=kept,
            timings=entry.timings(),
            strategy_state=self.c.strategy.state_dict(),
        )
        self.c.known[job.name] = trial
        self.c.recording.log_job(trial, result)
        if not job.keep_checkpoint and trial.checkpoint:
            Path(trial.checkpoint).unlink(missing_ok=True)
            self.c.registry.update_trial(trial.id, checkpoint=None)
        self.c.reporter.job_finished(job, trial)

    def _fail(self, entry: _Running, reason: str) -> None:
        """The job failed: recorded so, the other jobs cancelled, and the search to fail."""
        job = entry.job
        trial = self.c.registry.finish_trial(
            entry.trial.id, "failed", error=reason, timings=entry.timings()
        )
        self.c.recording.log_job(trial, None)
        self.close(f"setup job {job.name} failed")
        self.error = TrainingError(
            f"setup job {job.name} failed: {reason}\n"
            f"continue with: nas resume {self.c.search.id} (it restarts from its checkpoint)"
        )

    # --- watching ---------------------------------------------------------------------------

    def _progress(self) -> None:
        from ray.util.queue import Empty

        by_name = {r.job.name: r for r in self.running.values()}
        queue = self._ray[2]
        while True:
            try:
                name, phase, done, total = queue.get_nowait()
            except Empty:
                return
            entry = by_name.get(name)
            if entry is not None:
                entry.heard = time.time()
            if phase is None:  # it started: nothing to show yet
                continue
            self.c.reporter.job_progress(name, phase, done, total)
            if entry is not None and time.time() - entry.saved >= PROGRESS_SAVE_S:
                entry.saved = time.time()
                progress = {"phase": phase, "done": done, "total": total}
                job = {**(entry.trial.job or {}), "progress": progress}
                self.c.registry.update_trial(entry.trial.id, job=job)
                entry.trial.job = job

    def _kill_silent(self) -> None:
        """Kill the first running job silent for longer than ``resources.max_trial_minutes``
        (its worker ends, the task is cancelled) and fail it: the search stops, and its
        resume starts the job again from its last checkpoint."""
        import ray

        limit = self.c.config.resources.max_trial_minutes
        if limit is None:
            return
        now = time.time()
        for ref, entry in self.running.items():
            if entry.heard is not None and now - entry.heard > limit * 60:
                ray.cancel(ref, force=True)
                del self.running[ref]
                why = f"reported no progress for {limit:g} minutes, over "
                self._fail(entry, why + "resources.max_trial_minutes, and was killed")
                return


def _task_error(err: Exception) -> str:
    """The job's own error, without Ray's wrapping (its last lines)."""
    cause = getattr(err, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".strip()
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return "\n".join(lines[-3:]) or type(err).__name__
