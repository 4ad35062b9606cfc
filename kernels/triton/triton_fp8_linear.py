"""The Triton kernel of ``kernels.fp8_linear.quantise_rows`` (imported only when it runs):
one program per row, in BLOCK-wide steps over K: the row's amax, then its scale and the
e4m3 cast in a second pass, both in one launch."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.pytorch.pt_fp8_linear import E4M3, E4M3_MAX, MIN_SCALE


@triton.jit
def _kernel(
    x_ptr, q_ptr, s_ptr, K, stride_x, stride_q,
    MAX: tl.constexpr, FLOOR: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        cols = k0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < K, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, axis=0) / MAX, FLOOR)
    for k0 in range(0, K, BLOCK):
        cols = k0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < K, other=0.0).to(tl.float32)
        v = _round_e4m3(x / scale, MAX)
        tl.store(q_ptr + row * stride_q + cols, v.to(tl.float8e4nv), mask=cols < K)
    tl.store(s_ptr + row, scale)


@triton.jit
def _round_e4m3(v, MAX: tl.constexpr):
    """``v`` rounded to the nearest e4m3 value (ties to even), in float32, so that the cast
    after it is exact. Done by hand because the Triton interpreter's own float8 cast rounds
    wrongly across powers of two (measured: 31.66 -> 16, where e4m3 has 32); on a GPU the
    result is the same as the hardware cast's."""
    size = tl.abs(v)
    bits = size.to(tl.int32, bitcast=True)
    exponent = ((bits >> 23) & 0xFF) - 127
    exponent = tl.maximum(exponent, -6)  # e4m3's smallest normal exponent: subnormals below
    quantum = ((exponent - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits
    magic = 12582912.0  # 1.5 * 2**23: adding and taking it away rounds to an integer, ties even
    rounded = tl.minimum(((size / quantum + magic) - magic) * quantum, MAX)
    return tl.where(v < 0, -rounded, rounded)  # a negative that rounds to zero stays -0


def quantise_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, k = x.shape
    q = torch.empty(m, k, dtype=E4M3, device=x.device)
    scale = torch.empty(m, dtype=torch.float32, device=x.device)
    if m and k:
        block = min(1024, triton.next_power_of_2(k))
        _kernel[(m,)](
            x, q, scale, k, x.stride(0), q.stride(0),
            MAX=E4M3_MAX, FLOOR=MIN_SCALE, BLOCK=block,
        )  # fmt: skip
    return q, scale
