"""HSTU attention: pointwise (SiLU) attention with a relative bias, causal, per-row lengths,
optionally target-aware, normalised by ``norm`` (the layer's N):

    out[b, h] = (SiLU(q[b, h] k[b, h]^T + rab[b]) * mask[b] / norm) @ v[b, h]

``q``, ``k`` [B, H, N, d_qk], ``v`` [B, H, N, d_v]; ``rab`` [B, N, N] (or [1, N, N]) the
relative attention bias (positions and time gaps, ``blocks/hstu.py``); ``lengths`` [B]:
each row's valid positions, the rest padding (its outputs are 0). ``mask``: j <= i within
the row's length; with T targets (a row's last T positions) a target sees the history and
itself only.

``hstu_attention`` dispatches: the Triton kernels (``kernels/_hstu_triton.py``: forward,
and a backward that recomputes the scores) for CUDA tensors, else the PyTorch reference
(``reference``: today's math of ``blocks/hstu.py``). ``backend="triton"`` forces the
kernels (on CPU under ``TRITON_INTERPRET=1``, which the tests use). The kernels skip every
block past a row's length and above the diagonal, so their work follows the jagged lengths,
not the padded N (the storage stays padded).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BACKENDS = ("auto", "torch", "triton")


def attention_mask(lengths: torch.Tensor, max_len: int, num_targets: int = 0) -> torch.Tensor:
    """[B, N, N] bool: may position i attend to j. Causal over the history; with T targets
    (the last T valid positions of each row), a target sees the history and itself only."""
    positions = torch.arange(max_len, device=lengths.device)
    i, j = positions.view(-1, 1), positions.view(1, -1)
    valid = positions.view(1, -1) < lengths.view(-1, 1)  # [B, N]
    mask = (j <= i).unsqueeze(0) & valid.unsqueeze(1) & valid.unsqueeze(2)  # [B, N, N]
    if num_targets:
        first_target = (lengths - num_targets).view(-1, 1, 1)
        j_is_target = j.unsqueeze(0) >= first_target
        i_is_target = i.unsqueeze(0) >= first_target
        mask = mask & ~(i_is_target & j_is_target & (i != j).unsqueeze(0))
    return mask


def reference(q, k, v, rab, lengths, num_targets: int = 0, norm: float | None = None):
    n = q.shape[2]
    scores = torch.matmul(q, k.transpose(-1, -2)) + rab.unsqueeze(1)  # [B, H, N, N]
    mask = attention_mask(lengths, n, num_targets).unsqueeze(1)
    weights = F.silu(scores) * mask / (norm or n)
    return torch.matmul(weights, v)


def hstu_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rab: torch.Tensor,
    lengths: torch.Tensor,
    num_targets: int = 0,
    norm: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch" or (backend == "auto" and not q.is_cuda):
        return reference(q, k, v, rab, lengths, num_targets, norm)
    from kernels._hstu_triton import HstuAttention

    rab = rab.expand(q.shape[0], -1, -1)
    return HstuAttention.apply(q, k, v, rab, lengths, num_targets, float(norm or q.shape[2]))
