"""What every setup job (supernet training, a DNAS run) starts from: the supernet of its
space, built after seeding, and how it reports progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nas.arch.cost import get_target
from nas.arch.cost.candidate import per_example_latency
from nas.search.objectives import DEFAULT_PRECISION
from nas.search.supernet import build_supernet, flops_cost
from search_spaces import SpaceInputs, create_space
from workers.trial_data import TrialData

Progress = Callable[[str, int, int], None]  # (phase, done, total): a job reports it


def job_supernet(settings: dict[str, Any], data: TrialData, device: str | torch.device = "cpu"):
    """What every job starts from: its thread count, the space, and the supernet, built
    after seeding (so the same settings build the same weights), on the host, then moved to
    ``device`` (so a seed gives the same weights on any device)."""
    torch.set_num_threads(settings["threads"])
    space_config = settings["space"]
    inputs = SpaceInputs.of(data.schema)
    space = create_space(space_config["name"], space_config["options"], inputs)
    torch.manual_seed(settings["seed"])
    return build_supernet(space, data.schema, _cost(settings)).to(device)


def _cost(settings: dict[str, Any]):
    """The supernet's cost: FLOPs, or (``cost: latency``) the cost model's estimate."""
    if settings.get("cost", "flops") == "flops":
        return flops_cost
    target = get_target(settings["cost_target"], settings["threads"])
    precision = settings["cost_precision"] or DEFAULT_PRECISION.get(target.name, "bf16")
    return per_example_latency(target, precision, settings["cost_batch"])
