"""One candidate, start to finish: build -> train -> evaluate (NE, AUC, logloss) -> FLOPs.

``TrialData`` is what a trial needs from a dataset: its schema, the train split and one
held-out split, as plain numpy arrays. Numpy arrays go through Ray's object store without a
copy, so a search puts one ``TrialData`` there and every trial reads the same memory.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import torch

from nas.data.prepared import PreparedDataset
from nas.data.schema import Features, Schema
from nas.flops import measure_flops_per_example
from nas.model import build_model
from nas.objectives import SERVING_CANDIDATES
from nas.spec import ArchSpec
from workers.train import StepCallback, TrainConfig, train
from workers.train import evaluate as evaluate_model

FLOPS_BATCH = 8


@dataclass(frozen=True)
class TrialData:
    name: str
    schema: Schema
    train_positive_rate: float
    split: str  # the held-out split metrics are measured on
    arrays: dict[str, dict[str, np.ndarray]]  # {"train": {...}, split: {...}, "events": {...}}

    @classmethod
    def from_prepared(cls, dataset: PreparedDataset, split: str = "valid") -> TrialData:
        arrays = {part: dataset.feature_arrays(part) for part in ("train", split)}
        arrays["events"] = dataset.event_arrays()
        return cls(dataset.name, dataset.schema, dataset.positive_rate("train"), split, arrays)

    def features(self, part: str, history: bool = True) -> Features:
        """The rows of ``part``; ``history=False`` for a model that does not read the user
        history (gathering it builds a [batch, max_len, 3] tensor every step)."""
        with warnings.catch_warnings():
            # Arrays from Ray's object store are read-only; training only reads them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            rows = Features.from_arrays(self.arrays[part], self.arrays["events"], self.schema)
        return rows if history else rows.without_history()

    def shard(self, index: int, count: int, history: bool = True) -> Features:
        """Training rows of chronological slice ``index`` of ``count`` (by each row's time
        when the data has one, else in file order), standing in for a day of logs."""
        train = self.features("train", history)
        times = self.arrays["train"].get("history_now")
        order = (
            torch.from_numpy(np.argsort(times, kind="stable"))
            if times is not None
            else torch.arange(len(train))
        )
        bounds = [len(train) * i // count for i in range(count + 1)]
        return train[order[bounds[index] : bounds[index + 1]]]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for part in self.arrays.values() for a in part.values())


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
    serving_flops: float  # per candidate, request side shared by SERVING_CANDIDATES (analytic)
    params: int
    train_examples_per_s: float
    train_loss: float  # mean over the last 10% of steps
    seconds: float  # the whole trial: build, train, evaluate, count
    train_seconds: float
    eval_seconds: float
    flops_seconds: float
    steps: int
    batch_size: int
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate(
    spec: ArchSpec,
    data: TrialData,
    config: TrainConfig,
    on_step: StepCallback | None = None,
) -> TrialResult:
    """Train ``spec`` on the train split of ``data`` and measure it on ``data.split``."""
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    model = build_model(spec, data.schema)
    train_rows = data.features("train", model.reads_history)
    held_out = data.features(data.split, model.reads_history)
    stats = train(model, train_rows, config, on_step)
    eval_start = time.perf_counter()
    metrics = evaluate_model(model, held_out, data.train_positive_rate, config.eval_batch_size)
    flops_start = time.perf_counter()
    flops = measure_flops_per_example(model, held_out[:FLOPS_BATCH].inputs())
    end = time.perf_counter()
    return TrialResult(
        arch_id=spec.arch_id,
        name=spec.name,
        dataset=data.name,
        split=data.split,
        ne=metrics["ne"],
        auc=metrics["auc"],
        logloss=metrics["logloss"],
        flops=flops,
        serving_flops=model.flops_per_request(SERVING_CANDIDATES) / SERVING_CANDIDATES,
        params=sum(p.numel() for p in model.parameters()),
        train_examples_per_s=stats.examples_per_s,
        train_loss=stats.final_loss,
        seconds=end - start,
        train_seconds=stats.seconds,
        eval_seconds=flops_start - eval_start,
        flops_seconds=end - flops_start,
        steps=config.steps,
        batch_size=config.batch_size,
        seed=config.seed,
    )
