"""The row-wise (lazy) Adam step in PyTorch (``kernels.rowwise_adam``): the touched rows
stepped by torch's fused Adam, without a host sync on a GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

Parts = list[tuple[int, torch.Tensor]]


@dataclass(frozen=True)
class AdamStep:
    """One step's settings: the learning rate, betas and eps, and the step count (from 1)."""

    lr: float
    betas: tuple[float, float]
    eps: float
    step: int

    @property
    def step_size(self) -> float:
        """SparseAdam's bias-corrected learning rate."""
        beta1, beta2 = self.betas
        return self.lr * math.sqrt(1 - beta2**self.step) / (1 - beta1**self.step)


def _coalesced(rows: int, parts: Parts) -> tuple[torch.Tensor, torch.Tensor]:
    """The buffer rows the parts looked up, ascending, and each one's summed gradient, by
    coalescing the gradient (a sort)."""
    grads = [grad for _, grad in parts]
    ids = torch.cat([g._indices()[0] + start for start, g in parts])
    values = torch.cat([g._values() for g in grads])
    sparse = torch.sparse_coo_tensor(
        ids.unsqueeze(0), values, (rows, *values.shape[1:]), check_invariants=False
    )  # ids in range: they index the tables' rows
    coalesced = sparse.coalesce()  # one value per row: the update is not linear
    return coalesced._indices()[0], coalesced._values()


def _summed(rows: int, parts: Parts) -> tuple[torch.Tensor, torch.Tensor]:
    """Every buffer row's summed gradient (zero where not looked up) and whether the parts
    looked it up: [R, D] and [R] bool, no sort."""
    first = parts[0][1]
    summed = torch.zeros((rows, *first.shape[1:]), dtype=first.dtype, device=first.device)
    looked_up = torch.zeros(rows, dtype=torch.bool, device=first.device)
    for start, grad in parts:
        ids = grad._indices()[0] + start
        summed.index_add_(0, ids, grad._values())  # repeats summed
        looked_up.index_fill_(0, ids, True)
    return summed, looked_up


def reference(
    weights: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    parts: Parts,
    adam: AdamStep,
    dense_below: float = 8.0,
    sync_free: bool | None = None,
) -> None:
    """Finds the rows the parts looked up and steps them with torch's fused Adam kernel.

    - many rows for the lookups (at least ``dense_below`` buffer rows per id looked up:
      Criteo's millions): the gradient coalesced (a sort), the touched rows gathered,
      stepped and scattered back;
    - fewer (MovieLens' tables together are smaller than one batch's lookups): the gradient
      summed into a dense buffer, then either the rows looked up gathered as above, or,
      ``sync_free`` (the default on a GPU), every row stepped on copies of the buffers and
      the looked-up ones kept: listing the rows (``nonzero``) would make the host wait for
      the GPU every step, and at these sizes a pass over the buffers costs the GPU less.

    The fused kernel's bias correction divides ``sqrt(v)`` where SparseAdam's multiplies
    the step: the same update once ``eps`` is scaled by ``1/sqrt(1 - beta2^t)``."""
    rows = len(weights)
    if rows >= dense_below * sum(grad._nnz() for _, grad in parts):
        _step_rows(weights, exp_avg, exp_avg_sq, *_coalesced(rows, parts), adam)
        return
    summed, looked_up = _summed(rows, parts)
    if weights.is_cuda if sync_free is None else sync_free:
        stepped = [weights.clone(), exp_avg.clone(), exp_avg_sq.clone()]
        _fused_adam(*stepped, summed, adam)
        keep = looked_up.unsqueeze(1)
        for buffer, new in zip((weights, exp_avg, exp_avg_sq), stepped, strict=True):
            buffer.copy_(torch.where(keep, new, buffer))
        return
    touched = looked_up.nonzero().squeeze(1)
    _step_rows(weights, exp_avg, exp_avg_sq, touched, summed.index_select(0, touched), adam)


def _step_rows(
    weights: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor,
    grad: torch.Tensor,
    adam: AdamStep,
) -> None:
    """``rows`` gathered, stepped, and scattered back."""
    rows_w = weights.index_select(0, rows)
    rows_m = exp_avg.index_select(0, rows)
    rows_v = exp_avg_sq.index_select(0, rows)
    _fused_adam(rows_w, rows_m, rows_v, grad, adam)
    weights.index_copy_(0, rows, rows_w)
    exp_avg.index_copy_(0, rows, rows_m)
    exp_avg_sq.index_copy_(0, rows, rows_v)


def _fused_adam(
    weights: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    grad: torch.Tensor,
    adam: AdamStep,
) -> None:
    """Torch's fused Adam kernel, called as ``torch._fused_adam_``: the public functional
    wrapper checks its arguments on every call."""
    (beta1, beta2), step = adam.betas, adam.step
    torch._fused_adam_(
        [weights],
        [grad],
        [exp_avg],
        [exp_avg_sq],
        [],
        # its bias correction reads it; filled on the device (a copy would wait for it)
        [torch.full((), float(step), device=weights.device)],
        lr=adam.lr,
        beta1=beta1,
        beta2=beta2,
        weight_decay=0.0,
        eps=adam.eps / math.sqrt(1 - beta2**step),
        amsgrad=False,
        maximize=False,
    )
