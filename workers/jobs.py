"""A strategy's setup job as it runs inside a Ray task: the worker of its kind, its progress
sent back to the controller.

    run_job("dnas", settings, data, checkpoint, progress_queue, "dnas-l0.05", "cuda") -> result

Progress goes through a Ray queue (so it reaches the controller from any node of a
cluster): a first message as the job starts (phase ``None``: it runs now, no longer waits for
its resources), then at most once a second per job plus the last step of each phase. The
controller kills a job silent for longer than ``resources.max_trial_minutes`` (hung).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from workers import dnas, oneshot
from workers.trial_data import TrialData

PROGRESS_EVERY_S = 1.0
RUNNERS = {"supernet": oneshot.run, "dnas": dnas.run}


def run_job(
    kind: str,
    settings: dict[str, Any],
    data: TrialData,
    checkpoint: str | None,
    queue,
    name: str,
    device: str = "cpu",
) -> dict[str, Any]:
    """Run the job on ``device`` ("cuda": the GPU Ray gave this task)."""
    last = 0.0

    def send(phase: str | None, done: int, total: int) -> None:
        # A full or closed queue only costs a progress line.
        with contextlib.suppress(Exception):
            queue.put_nowait((name, phase, done, total))

    def progress(phase: str, done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if done == total or now - last >= PROGRESS_EVERY_S:
            last = now
            send(phase, done, total)

    send(None, 0, 0)
    return RUNNERS[kind](settings, data, checkpoint, progress, torch.device(device))
