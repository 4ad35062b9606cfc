"""FP8 (e4m3) row-wise scaled linear: what an FP8 dispatch plan runs at its FP8 sites.

    y = (x_q * s_x) @ (W_q * s_w).T + b,   x_q = e4m3(x / s_x),  s_x = max|x_row| / 448

Weights are quantised once, per output row (``Fp8Linear.from_linear``); activations on
every call, per row, by ``quantise_rows``: a Triton kernel (``kernels/_fp8_triton.py``:
one pass per row, amax, scale and cast fused) for CUDA tensors, else the PyTorch reference.
The GEMM is ``torch._scaled_mm`` with the two row-wise scales, accumulating in float32 (it
runs on CPU too). Where ``_scaled_mm`` cannot take the shapes (on CUDA, dimensions that are
not multiples of 16), the dequantised operands are multiplied instead: the same values.

``apply_plan`` swaps the ``nn.Linear`` sites an FP8 probe planned in FP8 for ``Fp8Linear``.
"""

from __future__ import annotations

import torch
from torch import nn

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448
MIN_SCALE = 1e-12
BACKENDS = ("auto", "torch", "triton")


def quantise_rows_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [M, K] -> (e4m3 [M, K], float32 scales [M])."""
    scale = (x.abs().amax(dim=1).float() / E4M3_MAX).clamp(min=MIN_SCALE)
    return (x.float() / scale[:, None]).to(E4M3), scale


def quantise_rows(x: torch.Tensor, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "triton" or (backend == "auto" and x.is_cuda):
        from kernels._fp8_triton import quantise_rows as kernel

        return kernel(x)
    return quantise_rows_reference(x)


def scaled_matmul(
    x_q: torch.Tensor,
    x_scale: torch.Tensor,
    w_q: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """(x_q [M, K], scales [M]) @ (w_q [N, K], scales [N]).T + bias -> [M, N]."""
    m, k = x_q.shape
    n = w_q.shape[0]
    if not x_q.is_cuda or (k % 16 == 0 and n % 16 == 0):
        out = torch._scaled_mm(
            x_q,
            w_q.t(),
            scale_a=x_scale[:, None],
            scale_b=w_scale[None, :],
            # CUDA's row-wise scaled GEMM writes BF16 only; the CPU's, float32.
            out_dtype=torch.bfloat16 if x_q.is_cuda else torch.float32,
        )
    else:  # shapes _scaled_mm refuses on CUDA: the same values, dequantised
        out = (x_q.float() * x_scale[:, None]) @ (w_q.float() * w_scale[:, None]).t()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def fp8_linear(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """``x`` [..., K] through a row-wise FP8 weight ``w_q`` [N, K] (scales [N]) -> [..., N]."""
    flat = x.reshape(-1, x.shape[-1])
    x_q, x_scale = quantise_rows(flat, backend)
    out = scaled_matmul(x_q, x_scale, w_q, w_scale, bias, x.dtype)
    return out.reshape(*x.shape[:-1], w_q.shape[0])


class Fp8Linear(nn.Module):
    """An inference-only ``nn.Linear`` in FP8: weight quantised per output row, once."""

    def __init__(self, w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("w_q", w_q)
        self.register_buffer("w_scale", w_scale)
        self.register_buffer("bias", bias)
        self.in_features, self.out_features = w_q.shape[1], w_q.shape[0]

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Fp8Linear:
        with torch.no_grad():
            w_q, w_scale = quantise_rows_reference(linear.weight)
            bias = None if linear.bias is None else linear.bias.detach().clone()
        return cls(w_q, w_scale, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.w_q, self.w_scale, self.bias)


def apply_plan(model: nn.Module, sites: list) -> list[str]:
    """Swap every linear site the plan put in FP8 (``Site.precision == "fp8"``) for an
    ``Fp8Linear``, in place; the names swapped."""
    planned = {s.name for s in sites if s.precision == "fp8"}
    swapped = []
    for name, module in list(model.named_modules()):
        if name in planned and isinstance(module, nn.Linear):
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, Fp8Linear.from_linear(module))
            swapped.append(name)
    return swapped
