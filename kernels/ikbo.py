"""IKBO-style broadcast linear: a candidate-side linear plus its request's term, the request
rows broadcast to their candidates inside the kernel (ROCS's In-Kernel Broadcast
Optimization), never materialised per candidate.

    out[c] = candidate[c] @ weight.T + bias + request_term[owner[c]]

``request_term`` [R, N] is the request side's share (computed once per request);
``owner`` [C] names each candidate's request row (None: row-aligned, R == C). This is the
first layer of the top MLP and every GLM linear in request-oriented scoring
(``nas.arch.model.RankingModel.score_requests``).

``broadcast_linear`` dispatches: the Triton kernel (``kernels/triton/triton_ikbo.py``) for
CUDA tensors that need no gradient, else the PyTorch reference (``kernels/pytorch/pt_ikbo.py``),
which is also the training path. ``backend="triton"`` forces the kernel (on CPU under
``TRITON_INTERPRET=1``, which the tests use).
"""

from __future__ import annotations

import torch

from kernels.backends import triton_chosen
from kernels.pytorch import pt_ikbo


def broadcast_linear(
    candidate: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    request_term: torch.Tensor | None = None,
    owner: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """``candidate`` [C, K], ``weight`` [N, K], ``bias`` [N], ``request_term`` [R, N],
    ``owner`` [C] int64 -> [C, N]."""
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (candidate, weight, bias, request_term)
    )
    if not triton_chosen(backend, candidate) or (backend == "auto" and grad):
        return pt_ikbo.reference(candidate, weight, bias, request_term, owner)
    from kernels.triton.triton_ikbo import broadcast_linear as kernel

    return kernel(candidate, weight, bias, request_term, owner)
