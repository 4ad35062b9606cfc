"""The FP8 probe on one candidate: train it briefly (or load its weights), then probe it on
real batches (``kernels/cost/fp8_probe.py``) and plan its FP8 dispatch."""

from __future__ import annotations

from pathlib import Path

import torch

from kernels.cost.fp8_probe import ProbeResult, probe
from kernels.cost.targets import Target
from nas.errors import NasError
from nas.model import build_model
from nas.spec import ArchSpec
from workers.train import TrainConfig, evaluate, train
from workers.trial import TrialData

PROBE_BATCHES = 4  # batches of the train split whose activations are recorded


def probe_candidate(
    spec: ArchSpec,
    data: TrialData,
    config: TrainConfig,
    weights: Path | None,
    rows: int,
    threshold: float,
    target: Target,
    batch: int,
) -> ProbeResult:
    """``spec`` trained for ``config.steps`` (or loaded from ``weights``, a state dict) and
    probed: NE on the first ``rows`` rows of ``data.split``."""
    torch.manual_seed(config.seed)
    model = build_model(spec, data.schema)
    train_rows = data.features("train", model.reads_history)
    if weights is not None:
        try:
            model.load_state_dict(torch.load(weights, weights_only=True))
        except (OSError, RuntimeError, ValueError) as err:
            first = str(err).splitlines()[0][:300]
            raise NasError(f"{weights}: not this architecture's weights ({first})") from None
    else:
        train(model, train_rows, config)
    held_out = data.features(data.split, model.reads_history)
    return probe_trained(
        model,
        train_rows,
        held_out[:rows],
        data.train_positive_rate,
        config,
        threshold,
        target,
        batch,
    )


def probe_trained(
    model, train_rows, held_out, positive_rate: float, config: TrainConfig, threshold, target, batch
) -> ProbeResult:
    """Probe a trained ``model``: activations from the first batches of ``train_rows``, NE
    on ``held_out``."""
    model.eval()
    probe_rows = train_rows[: PROBE_BATCHES * config.batch_size]
    batches = [
        probe_rows[i : i + config.batch_size].inputs()
        for i in range(0, len(probe_rows), config.batch_size)
    ]

    def ne(candidate) -> float:
        return evaluate(candidate, held_out, positive_rate, config.eval_batch_size)["ne"]

    return probe(model, batches, ne, threshold, target, batch)
