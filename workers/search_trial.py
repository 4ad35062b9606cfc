"""The Ray Tune trainable of a search: one candidate per call, always one report.

Runs inside a Ray worker. The search's ``TrialData`` arrives through the object store
(``tune.with_parameters``); the candidate and its settings arrive as the Tune config, a
``TrialRequest`` (``workers/messages.py``). Whatever happens, the trial ends with exactly one
final ``TrialReport``, so the controller records every outcome: completed (the
``TrialResult`` as JSON) or failed (the reason).

Under an early-stopping scheduler (``nas/search/early_stopping.py``) it also reports at each
rung, with no outcome: the step, its NE and the figures of the steps so far. Tune's answer to
a rung report can end the trial there (never a baseline's: the scheduler only files those);
the controller then records it as stopped. With ``budget.select_best`` (``settings.select``)
the trial also checks itself every N steps, ends with its best check's weights, and may end
early on its patience: completed.

A trial fails on a NaN/Inf loss or prediction, on an exception, and when the worker's
resident memory (or, on a GPU, the most GPU memory PyTorch allocated) exceeds the search's
``memory_gb_per_trial`` (checked at the first step, every 25 steps and at the end). A worker
the OS or Ray kills outright is recorded by the controller from Ray's error, and its
candidate run again (``resources.max_retries``).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from typing import Any

import psutil
import torch

from nas.arch.model import training_bytes
from nas.arch.spec import ArchSpec
from nas.core.errors import NasError, TrainingError
from workers.data_parallel import GROUP_TIMEOUT, free_port
from workers.messages import TrialReport, TrialRequest
from workers.trial import Rungs, TrialResult, evaluate
from workers.trial_data import DatasetChanged, TrialData

MEMORY_CHECK_EVERY = 25  # steps


def run_candidate(config: dict[str, Any], data: TrialData) -> None:
    from ray import tune

    started = time.time()
    rung: dict[str, Any] = {}
    try:
        request = TrialRequest.from_config(config)
        if request.settings.workers > 1:
            with _Group(config, data, request.settings) as group:
                result = _run(request, data, started, watch=group.check)
        else:
            result = _run(request, data, started)
        outcome, payload = "completed", json.dumps(result.to_dict())
        # The last rung is the full budget's: the scheduler files it at its top rung.
        if result.rungs and request.settings.rungs:
            rung = {"step": result.steps, "rung_ne": result.rungs[-1]["ne"]}
    except RankLost:  # not the candidate's fault: Tune records a failed trial, which is retried
        raise
    except MemoryError:
        outcome, payload = "failed", "ran out of memory (MemoryError)"
    except Exception as err:
        outcome, payload = _ended_by(err, data)
    report = TrialReport(payload, started, time.time(), _node(), outcome, **rung)
    tune.report(report.to_result())


def _ended_by(err: Exception, data: TrialData) -> tuple[str, str]:
    """A trial's outcome and payload when ``err`` ended it: its data gone where it runs
    (``unavailable``: not the candidate's doing), or ``failed`` with the reason (a bug in a
    block or a space is recorded, and the search goes on)."""
    lost = data.unavailable(err)
    if lost is not None:
        return ("changed" if isinstance(err, DatasetChanged) else "unavailable"), lost
    if isinstance(err, NasError):
        return "failed", str(err)
    tail = "".join(traceback.format_exception(err)[-3:]).strip()
    return "failed", f"{type(err).__name__}: {err}\n{tail}"


def _node() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def rung_reporter(started: float):
    """What a trial does at a rung: report its figures so far to Tune (which may end it)."""
    from ray import tune

    def report(result: TrialResult) -> None:
        payload = json.dumps(result.to_dict())
        rung = TrialReport(
            payload, started, time.time(), _node(), step=result.steps, rung_ne=result.ne
        )
        tune.report(rung.to_result())

    return report


def _run(
    request: TrialRequest,
    data: TrialData,
    started: float | None = None,
    watch: Callable[[], None] | None = None,
    report_rungs: bool = True,
):
    """Train and measure the candidate of ``request`` in this process. ``watch``: called
    with the memory checks (a data-parallel group's rank 0 checks on the other ranks: a
    call to Ray each, so not every step); without
    ``report_rungs`` (the other ranks) its rungs are measured but not reported."""
    settings = request.settings
    torch.set_num_threads(settings.threads)
    spec = ArchSpec.from_dict(request.spec)
    limit = request.memory_limit_bytes
    needed = training_bytes(spec, data.schema)
    if needed > limit:  # refuse before the allocator sees it
        raise TrainingError(
            f"its parameters need {_size(needed)} to train (weights, gradients and "
            f"optimizer state), over the limit of {_size(limit)} per trial "
            "(resources.memory_gb_per_trial)"
        )
    process = psutil.Process()

    def check_memory(when: str) -> None:
        rss = process.memory_info().rss
        # On a GPU the limit bounds its memory too (the most PyTorch allocated at once).
        gpu = torch.cuda.max_memory_allocated() if settings.device == "cuda" else 0
        for used, where in ((rss, ""), (gpu, " of GPU memory")):
            if used > limit:
                raise TrainingError(
                    f"used {_size(used)}{where} {when}, over the limit of "
                    f"{_size(limit)} per trial (resources.memory_gb_per_trial)"
                )

    def on_step(step: int, loss: float) -> None:
        if step == 1 or step % MEMORY_CHECK_EVERY == 0:
            check_memory(f"at step {step}")
            if watch is not None:
                watch()

    rungs = None
    if settings.rungs is not None:
        report = rung_reporter(started or time.time()) if report_rungs else lambda result: None
        rungs = Rungs(settings.rungs.steps, settings.rungs.rows, report)
    result = evaluate(
        spec,
        data,
        settings.train,
        on_step,
        rungs,
        request.save_weights,
        settings.fp8_probe,
        settings.select,
        settings.device,
    )
    check_memory("by the end of training and evaluation")  # trials of any length
    return result


class RankLost(Exception):
    """A data-parallel rank's Ray worker died (a kill, a lost node, a crash outside Python):
    raised out of the trial, so that the controller trains the candidate again
    (``resources.max_retries``), as it does a candidate whose own worker died."""


# How long rank 0, whose collective failed, waits to learn whether another rank ended (a
# worker's death reaches Ray within a second or two; one still training is not waited for).
RANK_NEWS_S = 10.0


class _Group:
    """A data-parallel candidate (``resources.workers_per_trial``): this trial's process is
    rank 0, which reports to Tune; ranks 1..N-1 are Ray tasks in the trial's own placement
    group (one bundle of ``cpus_per_trial`` CPUs per rank), which Tune removes when the
    trial ends, however it ends (completed, failed, or stopped at a rung): the tasks go
    with it. Every rank trains the same way (``workers/data_parallel.py``) and checks
    itself on the same rows, so they stop at the same step.

    When another rank ends early, rank 0's next collective fails with gloo's error
    ("Connection reset by peer"); the trial then fails with that rank's own error (a NaN,
    its memory limit), or, where its worker died, raises ``RankLost`` to be retried.

    Written here rather than with Ray Train's ``TorchTrainer``: in Ray 2.60 a Train run
    inside a Tune trial that the scheduler stops keeps its workers' CPUs (its cleaner
    needs the State API, so the dashboard and ``ray[default]``), and it starts a
    controller and a worker group per trial (about 12 s each here)."""

    def __init__(self, config: dict[str, Any], data: TrialData, settings):
        self.config, self.data, self.settings = config, data, settings
        self.refs: list = []

    def __enter__(self) -> _Group:
        import ray
        import torch.distributed as dist
        from ray.util.placement_group import get_current_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        size = self.settings.workers
        address = f"tcp://{ray.util.get_node_ip_address()}:{free_port()}"
        group = get_current_placement_group()
        rank_task = ray.remote(_other_rank)
        data = ray.put(self.data)
        for rank in range(1, size):
            where = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank)
            self.refs.append(
                rank_task.options(
                    num_cpus=self.settings.threads, scheduling_strategy=where, max_retries=0
                ).remote(self.config, data, address, rank, size)
            )
        dist.init_process_group(
            "gloo", init_method=address, rank=0, world_size=size, timeout=GROUP_TIMEOUT
        )
        return self

    def check(self) -> None:
        """Raise what a rank that ended early raised (it would leave rank 0 waiting)."""
        import ray

        done, _ = ray.wait(self.refs, num_returns=len(self.refs), timeout=0)
        for ref in done:
            self._raise_for(ref)

    def __exit__(self, kind, error, trace) -> None:
        import ray
        import torch.distributed as dist

        try:
            if error is None:
                ray.get(self.refs)
            elif not isinstance(error, NasError):  # rank 0's own failure needs no news
                self._why_a_rank_ended()
        finally:
            dist.destroy_process_group()

    def _why_a_rank_ended(self) -> None:
        """After rank 0's collective failed: why another rank ended, if one did within
        ``RANK_NEWS_S`` (else rank 0's error stands)."""
        import ray

        done, _ = ray.wait(self.refs, num_returns=1, timeout=RANK_NEWS_S)
        for ref in done:
            self._raise_for(ref)

    def _raise_for(self, ref) -> None:
        """Raise why the rank of ``ref``, which ended before rank 0, did: its own error (a
        NaN, its memory limit, a bug), or ``RankLost`` where its Ray worker died."""
        import ray
        from ray.exceptions import RayError, RayTaskError

        rank = self.refs.index(ref) + 1
        try:
            ray.get(ref)
        except RayTaskError as err:
            raise err.cause from None
        except RayError as err:
            first = (str(err).strip().splitlines() or [""])[0][:160]
            raise RankLost(
                f"the Ray worker of data-parallel rank {rank} died (killed, or crashed outside "
                f"Python): {type(err).__name__}: {first}"
            ) from None
        raise TrainingError(f"data-parallel rank {rank} ended before rank 0")


def _other_rank(config: dict[str, Any], data, address: str, rank: int, size: int) -> None:
    """Rank ``rank`` of a data-parallel candidate (``_Group``)."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=address, rank=rank, world_size=size, timeout=GROUP_TIMEOUT
    )
    try:
        _run(TrialRequest.from_config(config), data, report_rungs=False)
    finally:
        dist.destroy_process_group()


def _size(count: int) -> str:
    """Bytes as GiB, or as MiB below a quarter GiB (where two decimals of GiB read 0.00)."""
    return f"{count / 2**30:.2f} GiB" if count >= 2**28 else f"{count / 2**20:.1f} MiB"
