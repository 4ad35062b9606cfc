"""The Triton kernel of ``kernels.ikbo.broadcast_linear`` (imported only when it runs).

One program computes a [BLOCK_C, BLOCK_N] tile of the output: the candidate GEMM over K in
BLOCK_K steps, then an epilogue that adds the bias and gathers each row's request term by
its owner, straight from the [R, N] request terms: the per-candidate repeat is never
written to memory. Accumulation is in float32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, owner_ptr, out_ptr,
    C, N, K,
    stride_xc, stride_xk, stride_wn, stride_wk, stride_rr, stride_rn, stride_oc, stride_on,
    HAS_BIAS: tl.constexpr, HAS_REQUEST: tl.constexpr, ALIGNED: tl.constexpr,
    BLOCK_C: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_c, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_C, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(
            x_ptr + rows[:, None] * stride_xc + ks[None, :] * stride_xk,
            mask=(rows[:, None] < C) & (ks[None, :] < K),
            other=0.0,
        )
        w = tl.load(
            w_ptr + cols[None, :] * stride_wn + ks[:, None] * stride_wk,
            mask=(cols[None, :] < N) & (ks[:, None] < K),
            other=0.0,
        )
        acc += tl.dot(x.to(tl.float32), w.to(tl.float32))
    inside = (rows[:, None] < C) & (cols[None, :] < N)
    if HAS_BIAS:
        acc += tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    if HAS_REQUEST:
        if ALIGNED:  # noqa: SIM108  (a compile-time branch: Triton specialises on it)
            source = rows
        else:
            source = tl.load(owner_ptr + rows, mask=rows < C, other=0)
        acc += tl.load(
            r_ptr + source[:, None] * stride_rr + cols[None, :] * stride_rn, mask=inside, other=0.0
        ).to(tl.float32)
    tl.store(
        out_ptr + rows[:, None] * stride_oc + cols[None, :] * stride_on,
        acc.to(out_ptr.dtype.element_ty),
        mask=inside,
    )


def broadcast_linear(candidate, weight, bias, request_term, owner) -> torch.Tensor:
    c, k = candidate.shape
    n = weight.shape[0]
    out = torch.empty(c, n, dtype=candidate.dtype, device=candidate.device)
    if c == 0 or n == 0:
        return out
    block_c, block_n, block_k = 32, 32, 32
    grid = (triton.cdiv(c, block_c), triton.cdiv(n, block_n))
    dummy = out  # an unused pointer argument must still be a tensor
    r = request_term if request_term is not None else dummy
    _kernel[grid](
        candidate, weight, bias if bias is not None else dummy, r,
        owner if owner is not None else dummy, out,
        c, n, k,
        candidate.stride(0), candidate.stride(1), weight.stride(0), weight.stride(1),
        r.stride(0), r.stride(1), out.stride(0), out.stride(1),
        HAS_BIAS=bias is not None, HAS_REQUEST=request_term is not None, ALIGNED=owner is None,
        BLOCK_C=block_c, BLOCK_N=block_n, BLOCK_K=block_k,
    )  # fmt: skip
    return out
