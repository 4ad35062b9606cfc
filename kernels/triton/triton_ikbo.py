"""The Triton kernel of ``kernels.ikbo.broadcast_linear`` (imported only when it runs).

One program computes a [BLOCK_C, BLOCK_N] tile of the output: the candidate GEMM over K in
BLOCK_K steps, then an epilogue that adds the bias and gathers each row's request term by
its owner, straight from the [R, N] request terms: the per-candidate repeat is never
written to memory. The GEMM multiplies in the inputs' own precision (bf16 and fp16 on the
tensor cores) and accumulates in float32.

On a GPU the tile shape is autotuned per (N, K, C to the next power of two) over a few
shapes of the kind Triton's matmul tutorial tunes (128 x 128 x 64 down to 64 x 64 x 64, 3-4
pipeline stages). The first kernel measured on the H200 used fixed 32 x 32 x 32 tiles and
upcast bf16 to float32 before ``tl.dot``, and reached 43-52 TFLOP/s. Under
``TRITON_INTERPRET=1`` (the CPU tests) one small tile is used and nothing is timed.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

# Triton's interpreter multiplies bf16 wrongly in ``tl.dot`` (numpy has no bf16; fp16 and
# fp32 are right), so there bf16 tiles are upcast to float32 first.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def _configs() -> list[triton.Config]:
    if INTERPRETED:
        return [triton.Config({"BLOCK_C": 32, "BLOCK_N": 32, "BLOCK_K": 32})]
    shapes = [(128, 128, 64, 8, 3), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 64, 64, 4, 4)]
    return [
        triton.Config({"BLOCK_C": c, "BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
        for c, n, k, w, s in shapes
    ]


@triton.autotune(configs=_configs(), key=["C_BUCKET", "N", "K"])
@triton.jit
def _kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, owner_ptr, out_ptr,
    C, N, K, C_BUCKET,
    stride_xc, stride_xk, stride_wn, stride_wk, stride_rr, stride_rn, stride_oc, stride_on,
    HAS_BIAS: tl.constexpr, HAS_REQUEST: tl.constexpr, ALIGNED: tl.constexpr,
    UPCAST: tl.constexpr,
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
        if UPCAST:
            x, w = x.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(x, w, acc)
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
    weight = weight.to(candidate.dtype)  # tl.dot takes one precision (a no-op when they agree)
    dummy = out  # an unused pointer argument must still be a tensor
    r = request_term if request_term is not None else dummy
    grid = lambda meta: (triton.cdiv(c, meta["BLOCK_C"]), triton.cdiv(n, meta["BLOCK_N"]))  # noqa: E731
    _kernel[grid](
        candidate, weight, bias if bias is not None else dummy, r,
        owner if owner is not None else dummy, out,
        c, n, k, min(triton.next_power_of_2(c), 1 << 16),
        candidate.stride(0), candidate.stride(1), weight.stride(0), weight.stride(1),
        r.stride(0), r.stride(1), out.stride(0), out.stride(1),
        HAS_BIAS=bias is not None, HAS_REQUEST=request_term is not None, ALIGNED=owner is None,
        UPCAST=INTERPRETED and candidate.dtype == torch.bfloat16,
    )  # fmt: skip
    return out
