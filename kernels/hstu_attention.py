"""HSTU attention: pointwise (SiLU) attention with a relative bias, causal, per-row lengths,
optionally target-aware, normalised by ``norm`` (the layer's N):

    out[b, h] = (SiLU(q[b, h] k[b, h]^T + rab[b]) * mask[b] / norm) @ v[b, h]

``q``, ``k`` [B, H, N, d_qk], ``v`` [B, H, N, d_v]; ``rab`` [B, N, N] (or [1, N, N]) the
relative attention bias (positions and time gaps, ``blocks/hstu.py``); ``lengths`` [B]:
each row's valid positions, the rest padding (its outputs are 0). ``mask``: j <= i within
the row's length; with T targets (a row's last T positions) a target sees the history and
itself only.

``hstu_attention`` dispatches: the Triton kernels
(``kernels/triton/triton_hstu_attention.py``: forward, and a backward that recomputes the
scores) for CUDA tensors, else the PyTorch reference (``kernels/pytorch/pt_hstu_attention.py``,
the math ``blocks/hstu.py`` trains with). ``backend="triton"`` forces the kernels (on CPU
under ``TRITON_INTERPRET=1``, which the tests use). The kernels skip every block past a
row's length and above the diagonal, so their work follows the jagged lengths, not the
padded N (the storage stays padded).
"""

from __future__ import annotations

import torch

from kernels.backends import triton_chosen
from kernels.pytorch.pt_hstu_attention import reference


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
    if not triton_chosen(backend, q):
        return reference(q, k, v, rab, lengths, num_targets, norm)
    from kernels.triton.triton_hstu_attention import HstuAttention

    return HstuAttention.apply(q, k, v, rab, lengths, num_targets, float(norm or q.shape[2]))
