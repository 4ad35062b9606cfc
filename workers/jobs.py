"""A strategy's setup job as it runs inside a Ray task: the worker of its kind, its progress
sent back to the controller.

    run_job("dnas", settings, data, checkpoint, progress_queue, "dnas-l0.05") -> result

Progress goes through a Ray queue (so it reaches the controller from any node of a
cluster), at most once a second per job plus the last step of each phase.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from workers.trial import TrialData

PROGRESS_EVERY_S = 1.0
Progress = Callable[[str, int, int], None]  # (phase, done, total): a job reports it


def job_supernet(settings: dict[str, Any], data: TrialData):
    """What every job starts from: its thread count, the space, and the supernet, built
    after seeding (so the same settings build the same weights)."""
    import torch

    from nas.supernet import build_supernet
    from search_spaces import SpaceInputs, create_space

    torch.set_num_threads(settings["threads"])
    space_config = settings["space"]
    inputs = SpaceInputs.of(data.schema)
    space = create_space(space_config["name"], space_config["options"], inputs)
    torch.manual_seed(settings["seed"])
    return build_supernet(space, data.schema, _cost(settings))


def _cost(settings: dict[str, Any]):
    """The supernet's cost: FLOPs, or (``cost: latency``) the cost model's estimate."""
    from nas.supernet import flops_cost

    if settings.get("cost", "flops") == "flops":
        return flops_cost
    from kernels.cost import get_target
    from kernels.cost.candidate import per_example_latency
    from nas.objectives import DEFAULT_PRECISION

    target = get_target(settings["cost_target"], settings["threads"])
    precision = settings["cost_precision"] or DEFAULT_PRECISION.get(target.name, "bf16")
    return per_example_latency(target, precision, settings["cost_batch"])


def _runners():
    from workers import dnas, oneshot

    return {"supernet": oneshot.run, "dnas": dnas.run}


def run_job(
    kind: str,
    settings: dict[str, Any],
    data: TrialData,
    checkpoint: str | None,
    queue,
    name: str,
) -> dict[str, Any]:
    last = 0.0

    def progress(phase: str, done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if done == total or now - last >= PROGRESS_EVERY_S:
            last = now
            # A full or closed queue only costs a progress line.
            with contextlib.suppress(Exception):
                queue.put_nowait((name, phase, done, total))

    return _runners()[kind](settings, data, checkpoint, progress)
