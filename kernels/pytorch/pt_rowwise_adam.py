"""The row-wise (lazy) Adam step in PyTorch (``kernels.rowwise_adam``): the touched rows
gathered, stepped by torch's fused Adam, and scattered back."""

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


def _touched_rows(rows: int, parts: Parts, dense_below: float) -> tuple[torch.Tensor, ...]:
    """The buffer rows the parts looked up, ascending, and each one's summed gradient.

    - few rows for the lookups (fewer than ``dense_below`` buffer rows per id looked up;
      MovieLens' tables together are smaller than one batch's lookups): sum into a dense
      buffer and mark the rows looked up, no sort;
    - more (Criteo's millions of rows): coalesce the gradient (a sort)."""
    grads = [grad for _, grad in parts]
    if rows >= dense_below * sum(g._nnz() for g in grads):
        ids = torch.cat([g._indices()[0] + start for start, g in parts])
        values = torch.cat([g._values() for g in grads])
        width = values.shape[1:]
        sparse = torch.sparse_coo_tensor(
            ids.unsqueeze(0), values, (rows, *width), check_invariants=False
        )  # ids in range: they index the tables' rows
        coalesced = sparse.coalesce()  # one value per row: the update is not linear
        return coalesced._indices()[0], coalesced._values()
    device = grads[0].device
    summed = torch.zeros((rows, *grads[0].shape[1:]), dtype=grads[0].dtype, device=device)
    looked_up = torch.zeros(rows, dtype=torch.bool, device=device)
    for start, grad in parts:
        ids = grad._indices()[0] + start
        summed.index_add_(0, ids, grad._values())  # repeats summed
        looked_up.index_fill_(0, ids, True)
    touched = looked_up.nonzero().squeeze(1)
    return touched, summed.index_select(0, touched)


def reference(
    weights: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    parts: Parts,
    adam: AdamStep,
    dense_below: float = 8.0,
) -> None:
    """Gathers the touched rows, runs torch's fused Adam kernel over them and scatters them
    back. That kernel's bias correction divides ``sqrt(v)`` where SparseAdam's multiplies the
    step: the same update once ``eps`` is scaled by ``1/sqrt(1 - beta2^t)``. It is called as
    ``torch._fused_adam_``: the public functional wrapper checks its arguments on every call."""
    rows, grad = _touched_rows(len(weights), parts, dense_below)
    (beta1, beta2), step = adam.betas, adam.step
    rows_w = weights.index_select(0, rows)
    rows_m = exp_avg.index_select(0, rows)
    rows_v = exp_avg_sq.index_select(0, rows)
    torch._fused_adam_(
        [rows_w],
        [grad],
        [rows_m],
        [rows_v],
        [],
        [torch.tensor(float(step), device=weights.device)],  # its bias correction reads it
        lr=adam.lr,
        beta1=beta1,
        beta2=beta2,
        weight_decay=0.0,
        eps=adam.eps / math.sqrt(1 - beta2**step),
        amsgrad=False,
        maximize=False,
    )
    weights.index_copy_(0, rows, rows_w)
    exp_avg.index_copy_(0, rows, rows_m)
    exp_avg_sq.index_copy_(0, rows, rows_v)
