"""The Ray Tune trainable of a search: one candidate per call, always one report.

Runs inside a Ray worker. The search's ``TrialData`` arrives through the object store
(``tune.with_parameters``); the candidate's spec and settings arrive as the Tune config.
Whatever happens, the trial reports exactly once, so the controller records every outcome:

    {"outcome": "completed", "payload": <TrialResult JSON>, "started_at", "finished_at"}
    {"outcome": "failed", "payload": <reason>, ...}

A trial fails on a NaN/Inf loss or prediction, on an exception, and when the worker's
resident memory exceeds the search's ``memory_gb_per_trial`` (checked at the first step,
every 25 steps and at the end). A worker the OS or Ray kills outright is recorded by the
controller from Ray's error, and its candidate run again (``resources.max_retries``).
"""

from __future__ import annotations

import json
import time
import traceback
from typing import Any

import psutil
import torch

from nas.errors import NasError, TrainingError
from nas.model import training_bytes
from nas.spec import ArchSpec
from workers.train import TrainConfig
from workers.trial import TrialData, evaluate

MEMORY_CHECK_EVERY = 25  # steps


def run_candidate(config: dict[str, Any], data: TrialData) -> None:
    import ray
    from ray import tune

    started = time.time()
    try:
        result = _run(config, data)
        outcome, payload = "completed", json.dumps(result.to_dict())
    except NasError as err:
        outcome, payload = "failed", str(err)
    except MemoryError:
        outcome, payload = "failed", "ran out of memory (MemoryError)"
    except Exception as err:  # a bug in a block or a space: record it, let the search go on
        tail = "".join(traceback.format_exception(err)[-3:]).strip()
        outcome, payload = "failed", f"{type(err).__name__}: {err}\n{tail}"
    tune.report(
        {
            "outcome": outcome,
            "payload": payload,
            "started_at": started,
            "finished_at": time.time(),
            "node": ray.get_runtime_context().get_node_id(),  # where it trained
        }
    )


def _run(config: dict[str, Any], data: TrialData):
    torch.set_num_threads(config["threads"])
    spec = ArchSpec.from_dict(config["spec"])
    train_config = TrainConfig(**config["train"])
    limit = config["memory_limit_bytes"]
    needed = training_bytes(spec, data.schema)
    if needed > limit:  # refuse before the allocator sees it
        raise TrainingError(
            f"its parameters need {needed / 2**30:.2f} GiB to train (weights, gradients and "
            f"optimizer state), over the limit of {limit / 2**30:.2f} GiB per trial "
            "(resources.memory_gb_per_trial)"
        )
    process = psutil.Process()

    def check_memory(when: str) -> None:
        rss = process.memory_info().rss
        if rss > limit:
            raise TrainingError(
                f"used {rss / 2**30:.2f} GiB {when}, over the limit of "
                f"{limit / 2**30:.2f} GiB per trial (resources.memory_gb_per_trial)"
            )

    def on_step(step: int, loss: float) -> None:
        if step == 1 or step % MEMORY_CHECK_EVERY == 0:
            check_memory(f"at step {step}")

    result = evaluate(spec, data, train_config, on_step)
    check_memory("by the end of training and evaluation")  # trials of any length
    return result
