"""One candidate, start to finish: build -> train -> evaluate (NE, AUC, logloss) -> FLOPs."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from nas.data.prepared import PreparedDataset
from nas.flops import measure_flops_per_example
from nas.model import build_model
from nas.spec import ArchSpec
from workers.train import StepCallback, TrainConfig, train
from workers.train import evaluate as evaluate_model

FLOPS_BATCH = 8


@dataclass(frozen=True)
class TrialResult:
    arch_id: str
    name: str | None
    dataset: str
    split: str  # where the metrics were measured
    ne: float
    auc: float
    logloss: float
    flops: float  # per example, measured (fvcore; 2 per multiply-add)
    params: int
    train_examples_per_s: float
    train_loss: float  # mean over the last 10% of steps
    seconds: float  # the whole trial: build, train, evaluate, count
    steps: int
    batch_size: int
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate(
    spec: ArchSpec,
    data: PreparedDataset,
    config: TrainConfig,
    split: str = "valid",
    on_step: StepCallback | None = None,
) -> TrialResult:
    """Train ``spec`` on the train split of ``data`` and measure it on ``split``."""
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    model = build_model(spec, data.schema)
    stats = train(model, data.features("train"), config, on_step)
    held_out = data.features(split)
    metrics = evaluate_model(model, held_out, data.positive_rate("train"), config.eval_batch_size)
    flops = measure_flops_per_example(model, held_out[:FLOPS_BATCH].inputs())
    return TrialResult(
        arch_id=spec.arch_id,
        name=spec.name,
        dataset=data.name,
        split=split,
        ne=metrics["ne"],
        auc=metrics["auc"],
        logloss=metrics["logloss"],
        flops=flops,
        params=sum(p.numel() for p in model.parameters()),
        train_examples_per_s=stats.examples_per_s,
        train_loss=stats.final_loss,
        seconds=time.perf_counter() - start,
        steps=config.steps,
        batch_size=config.batch_size,
        seed=config.seed,
    )
