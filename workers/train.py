"""Train a ranking model on a step budget; evaluate it on a split.

Seeded and deterministic on CPU (same seed, thread count and data -> same weights). Batches
are gathered from in-memory tensors with a seeded permutation per epoch: no per-row Python
in the hot loop. Embedding tables have sparse gradients and their own optimizer (lazy Adam,
``RowwiseAdam``: only the rows a batch used move); dense weights use AdamW. Both learning
rates warm up linearly, then decay with a cosine to 10% by the last step.

A model trains on the device it is on (``workers.device``). On a GPU the training rows move
to it once when they fit (``DeviceRows``), else each batch is gathered on the host and
copied; the loss is read back every ``LOSS_READ_EVERY`` steps, not every step (each read
waits for the GPU); held-out logits come back to the host once per evaluation.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from kernels.fp8_linear import Fp8Training
from nas.core.errors import ConfigError, TrainingError
from nas.data.schema import Features
from workers.data_parallel import check_batch, mean_across, my_rows, reduce_gradients, world
from workers.metrics import Groups, Rates, binary_metrics
from workers.optimizers import AdamW, ParamOptimizer, RowwiseAdam
from workers.train_settings import MAX_BATCH, MAX_STEPS, TRAIN_PRECISIONS

# (steps done, running mean train loss) -> True to end training there (early stopping)
StepCallback = Callable[[int, float], bool | None]
LOSS_READ_EVERY = 25  # steps between reads of the loss on a GPU (on the CPU: every step)
CPU = torch.device("cpu")
RESIDENT_SHARE = 0.5  # of a GPU's free memory the training rows may take to live on it


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    batch_size: int = 1024
    lr: float = 2e-3  # dense weights (AdamW)
    embedding_lr: float = 1e-2  # embedding tables (RowwiseAdam)
    weight_decay: float = 1e-5  # dense weights only
    warmup_steps: int = 100
    seed: int = 0
    eval_batch_size: int = 16384
    # "bf16": the model runs under torch.autocast(bfloat16), GEMMs and attention in bfloat16,
    # weights, optimizer state and the loss in float32 (mixed precision). It pays on a CPU
    # with native bfloat16 GEMMs (AVX512-BF16, AMX) for MLP-heavy models
    # (docs/models-and-data.md); elsewhere the casts cost more than they save. "fp8": bf16,
    # and every GEMM site's forward a row-wise FP8 GEMM, straight-through backward
    # (``kernels.fp8_linear.Fp8Training``): FP8's rounding seen while training. Evaluation
    # runs in float32, as after bf16.
    precision: str = "fp32"  # one of TRAIN_PRECISIONS
    # precision "fp8" only: the sites trained in FP8 (a dispatch plan's, as ``nas retrain``
    # passes them); the others in bf16. None: every site.
    fp8_sites: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.precision not in TRAIN_PRECISIONS:
            raise ConfigError(
                "precision",
                f"must be one of {', '.join(TRAIN_PRECISIONS)}, got {self.precision!r}",
            )
        if self.fp8_sites is not None:
            if self.precision != "fp8":
                raise ConfigError(
                    "fp8_sites", f"apply to precision fp8 only, not {self.precision!r}"
                )
            object.__setattr__(self, "fp8_sites", tuple(self.fp8_sites))  # from JSON: a list
        for name, most in (
            ("steps", MAX_STEPS),
            ("batch_size", MAX_BATCH),
            ("eval_batch_size", MAX_BATCH),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ConfigError(name, f"must be an integer from 1 to {most:,}, got {value!r}")
        for name in ("lr", "embedding_lr"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < 10:
                raise ConfigError(name, f"must be a learning rate in (0, 10), got {value!r}")
        if self.warmup_steps < 0 or self.weight_decay < 0:
            raise ConfigError("warmup_steps", "warmup_steps and weight_decay must be >= 0")


def _is_sparse(module: nn.Module) -> bool:
    return isinstance(module, nn.Embedding | nn.EmbeddingBag) and module.sparse


def make_optimizers(model: nn.Module, config: TrainConfig) -> list[ParamOptimizer]:
    sparse = [p for m in model.modules() if _is_sparse(m) for p in m.parameters(recurse=False)]
    sparse_ids = {id(p) for p in sparse}
    dense = [p for p in model.parameters() if id(p) not in sparse_ids]
    optimizers: list[ParamOptimizer] = []
    if dense:
        optimizers.append(AdamW(dense, lr=config.lr, weight_decay=config.weight_decay))
    if sparse:
        optimizers.append(RowwiseAdam(sparse, lr=config.embedding_lr))
    return optimizers


def lr_scale(step: int, config: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to 10% at the last step."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


class Batches:
    """Row ids of each step's batch: a seeded permutation per epoch, cut in order. Its state
    (generator, permutation, cursor) saves and restores, so a resumed run sees the same
    batches an unbroken run would.

    The permutation is drawn on the host (the same batches on every device) and copied to
    ``device`` (the rows', ``DeviceRows.batches``) once per epoch: a step's ids copied from pageable
    host memory would make the host wait for the GPU at every step."""

    def __init__(self, rows: int, batch_size: int, seed: int, device: torch.device = CPU):
        if batch_size > rows:
            raise ConfigError(
                "batch_size", f"{batch_size} is more than the {rows} training rows; use fewer"
            )
        self.rows, self.batch_size, self.device = rows, batch_size, device
        self.generator = torch.Generator().manual_seed(seed)
        self._start(torch.randperm(rows, generator=self.generator), 0)

    def _start(self, order: torch.Tensor, cursor: int) -> None:
        self.order, self.cursor = order, cursor
        self._ids = order.to(self.device)

    def next(self) -> torch.Tensor:
        if self.cursor + self.batch_size > self.rows:
            self._start(torch.randperm(self.rows, generator=self.generator), 0)
        batch = self._ids[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return batch

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "order": self.order, "cursor": self.cursor}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self._start(state["order"], state["cursor"])


class Optimizers:
    """The dense (AdamW) and sparse (RowwiseAdam) optimizers of a model, stepped together
    under the warm-up + cosine schedule."""

    def __init__(self, params_of: nn.Module, config: TrainConfig):
        self.config = config
        self.all = make_optimizers(params_of, config)
        self.base_lrs = [[g["lr"] for g in opt.param_groups] for opt in self.all]

    def zero_grad(self, step: int) -> None:
        """Clear gradients and set the learning rates of step ``step`` (0-based)."""
        scale = lr_scale(step, self.config)
        for opt, lrs in zip(self.all, self.base_lrs, strict=True):
            for group, lr in zip(opt.param_groups, lrs, strict=True):
                group["lr"] = lr * scale
            opt.zero_grad()

    def step(self) -> None:
        for opt in self.all:
            opt.step()

    def state_dict(self) -> list[dict]:
        return [opt.state_dict() for opt in self.all]

    def load_state_dict(self, states: list[dict]) -> None:
        for opt, state in zip(self.all, states, strict=True):
            opt.load_state_dict(state)


def batch_loss(
    model, inputs, label: torch.Tensor, precision: str = "fp32", fp8: Fp8Training | None = None
) -> torch.Tensor:
    """The mean logloss of one batch (over its labels too, for several); ``fp8``: the
    model's FP8 training mode (precision fp8), made once per training."""
    mixed = precision in ("bf16", "fp8")
    with (
        torch.autocast(label.device.type, dtype=torch.bfloat16, enabled=mixed),
        fp8 if fp8 is not None else contextlib.nullcontext(),
    ):
        logits = model(*inputs)
    return F.binary_cross_entropy_with_logits(logits.float(), label)


class DeviceRows:
    """The training rows as a model on ``device`` reads each step's batch: on the CPU, as
    they are; on a GPU, moved there once when they take at most ``RESIDENT_SHARE`` of its
    free memory (each batch then gathered on the GPU), else kept on the host: each batch
    gathered there into pinned memory and copied on a side stream while the step before it
    computes (``RECNAS_GPU_ROWS=host`` keeps them on the host whatever their size)."""

    def __init__(self, data: Features, device: torch.device):
        self.device = device
        self.resident = device.type != "cuda" or _fits(data, device)
        self.data = data.to(device) if self.resident and device.type != "cpu" else data
        self.stream = None if self.resident else torch.cuda.Stream(device)
        self._prefetched: tuple[torch.Tensor, tuple[torch.Tensor, ...]] | None = None

    def batches(self, batch_size: int, seed: int) -> Batches:
        """Each step's row ids over these rows, on the device the rows are read from."""
        return Batches(len(self.data), batch_size, seed, self.device if self.resident else CPU)

    def batch(
        self, rows: torch.Tensor, following: torch.Tensor | None = None
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """(the model's inputs, the labels) of ``rows`` (row ids from ``batches``).
        ``following``: the next step's rows, copied meanwhile when the rows live on the host."""
        if self.resident:
            batch = self.data[rows.to(self.device)]
            return batch.inputs(), batch.label
        found = self._prefetched
        tensors = found[1] if found is not None and found[0] is rows else self._copy(rows)
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(self.stream)
        for t in tensors:
            t.record_stream(current)  # its memory is not reused before this step is done
        self._prefetched = None if following is None else (following, self._copy(following))
        return tensors[:-1], tensors[-1]

    def _copy(self, rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The batch's inputs and labels, gathered on the host, copied on the side stream."""
        batch = self.data[rows]
        with torch.cuda.stream(self.stream):
            return tuple(_onto(t, self.device) for t in (*batch.inputs(), batch.label))


def _fits(data: Features, device: torch.device) -> bool:
    if os.environ.get("RECNAS_GPU_ROWS") == "host":
        return False
    free, _ = torch.cuda.mem_get_info(device)
    return data.nbytes <= RESIDENT_SHARE * free


class Losses:
    """The training loss as it goes: read back from the device every ``every`` steps (one
    wait for the device each; a NaN/Inf loss is a ``TrainingError`` naming its step), its
    running mean, and the last 10% of the budget's steps."""

    def __init__(self, steps: int, every: int):
        self.every = every
        self.pending: list[torch.Tensor] = []
        self.first = 0  # the step of pending[0]
        self.running = float("nan")
        self.tail: deque[float] = deque(maxlen=max(1, steps // 10))

    def add(self, loss: torch.Tensor, step: int) -> None:
        if not self.pending:
            self.first = step
        self.pending.append(loss.detach())
        if len(self.pending) >= self.every:
            self.read()

    def read(self) -> None:
        if not self.pending:
            return
        values = torch.stack(self.pending).tolist() if len(self.pending) > 1 else None
        values = values or [self.pending[0].item()]
        for i, value in enumerate(values):
            step = self.first + i
            finite(value, step)
            self.running = value if step == 0 else 0.98 * self.running + 0.02 * value
            self.tail.append(value)
        self.pending.clear()


def checked(loss: torch.Tensor, step: int) -> float:
    """The loss as a float; a NaN/Inf loss is a ``TrainingError``."""
    return finite(loss.item(), step)


def finite(value: float, step: int) -> float:
    """``value``, the loss of (0-based) ``step``, unless it is NaN/Inf: a ``TrainingError``."""
    if not math.isfinite(value):
        raise TrainingError(f"training diverged: loss is {value} at step {step + 1}")
    return value


@dataclass(frozen=True)
class TrainStats:
    steps: int
    examples: int
    seconds: float
    final_loss: float  # mean train loss over the last 10% of the budget's steps (or fewer)

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else float("nan")


def train(
    model: nn.Module, data: Features, config: TrainConfig, on_step: StepCallback | None = None
) -> TrainStats:
    """Train ``model`` for ``config.steps`` steps, or until ``on_step`` says to stop, on the
    device the model is on (``data`` on the host). In a process group (data parallel,
    ``workers.data_parallel``), this process trains on its slice of each step's batch and
    the gradients are reduced across the group before each step."""
    device = device_of(model)
    check_batch(config.batch_size, world()[1])
    rows = DeviceRows(data, device)
    batches = rows.batches(config.batch_size, config.seed)
    optimizers = Optimizers(model, config)
    losses = Losses(config.steps, read_every(device))
    # its sites named once per training
    fp8 = Fp8Training(model, config.fp8_sites) if config.precision == "fp8" else None
    done = 0
    model.train()
    start = time.perf_counter()
    upcoming = my_rows(batches.next())
    for step in range(config.steps):
        now, upcoming = upcoming, (my_rows(batches.next()) if step + 1 < config.steps else None)
        inputs, label = rows.batch(now, following=upcoming)
        optimizers.zero_grad(step)
        loss = batch_loss(model, inputs, label, config.precision, fp8)
        losses.add(mean_across(loss), step)  # on the CPU, read before the step is taken
        loss.backward()
        reduce_gradients(model)
        optimizers.step()
        done = step + 1
        if on_step is not None and on_step(done, losses.running):
            break
    losses.read()
    seconds = time.perf_counter() - start
    tail = losses.tail
    return TrainStats(done, done * config.batch_size, seconds, sum(tail) / len(tail))


def read_every(device: torch.device) -> int:
    """Steps between reads of the loss: every step on the CPU (a read costs nothing there),
    ``LOSS_READ_EVERY`` on a GPU."""
    return 1 if device.type == "cpu" else LOSS_READ_EVERY


def device_of(model: nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


@torch.no_grad()
def predict(model: nn.Module, data: Features, batch_size: int) -> torch.Tensor:
    """The model's logits over ``data`` (on the host), computed on the model's device and
    brought back once."""
    model.eval()
    device = device_of(model)
    logits = [
        model(*(_onto(t, device) for t in data[i : i + batch_size].inputs()))
        for i in range(0, len(data), batch_size)
    ]
    return torch.cat(logits).cpu()


def _onto(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``: to a GPU through pinned memory without blocking (a copy
    from pageable memory waits for the GPU to finish what it was given)."""
    if device.type != "cuda" or tensor.is_cuda:
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def evaluate(
    model: nn.Module,
    data: Features,
    rates: Rates,
    batch_size: int,
    groups: Groups | None = None,
) -> dict:
    """logloss, NE (against the training positive ``rates``) and AUC of ``model`` on
    ``data``; with ``groups`` (each row's user or request), the AUC per group; each label's
    and their mean for several labels (``workers.metrics.binary_metrics``)."""
    logits = predict(model, data, batch_size)
    if not torch.isfinite(logits).all():
        raise TrainingError("the model predicts NaN/Inf logits")
    return binary_metrics(data.label, logits, rates, groups)
