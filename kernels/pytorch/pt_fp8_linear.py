"""Row-wise e4m3 quantisation in PyTorch (``kernels.fp8_linear``), and the e4m3 constants the
kernel shares."""

from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448
MIN_SCALE = 1e-12


def fp8_scales(x: torch.Tensor, per_row: bool = True) -> torch.Tensor:
    """The e4m3 scale max|x| / 448 (float32) of each row of ``x`` (its last axis, kept as
    size 1), or of the whole tensor."""
    amax = x.abs().amax(dim=-1, keepdim=True) if per_row else x.abs().amax()
    return (amax.float() / E4M3_MAX).clamp(min=MIN_SCALE)


def quantise_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [M, K] -> (e4m3 [M, K], float32 scales [M])."""
    scale = fp8_scales(x)
    return (x.float() / scale).to(E4M3), scale[:, 0]
