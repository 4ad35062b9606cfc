"""The Triton kernels of ``kernels.hstu_attention`` (imported only when they run).

Forward: one program per (query block, batch row x head). It loops over key blocks up to
the diagonal and the row's length only, computing SiLU(q k^T + rab) under the mask, scaled
by 1 / norm, times v, accumulated in float32. Padding rows come out 0.

Backward, in two kernels that recompute the scores (FlashAttention-2's split), neither with
an atomic add:

- keys: one program per (key block, batch row x head) loops over the query blocks from the
  diagonal to the row's length and accumulates dK and dV in registers;
- queries: one program per (query block, batch row) loops over the key blocks up to the
  diagonal and, inside, over the heads: each head's share of dQ is added to rows that this
  program alone owns, and d(rab), summed over the heads in registers, is stored once per
  tile.

The first backward (measured on the H200, 2026-12-04: 1.20x the PyTorch reference at L =
1024) added dQ and d(rab) atomically from every key block's program: at L = 1024, batch
32, 2 heads, about 33 million float32 atomic adds for the benchmark's lengths (L/4 to L),
70 million for full rows. A shared bias ([1, N, N], one for every
row) is read with a zero batch stride, not copied per row; its gradient is the per-row
gradients' sum.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _scores(q, k, rab_ptr, rab_b, offs_m, offs_n, length, first_target, N):
    """The masked pointwise attention weights' ingredients for one tile: (s, mask)."""
    s = tl.dot(q, tl.trans(k))
    inside = (offs_m[:, None] < length) & (offs_n[None, :] < length)
    s += tl.load(
        rab_ptr + rab_b + offs_m[:, None] * N + offs_n[None, :], mask=inside, other=0.0
    ).to(tl.float32)
    both_targets = (offs_m[:, None] >= first_target) & (offs_n[None, :] >= first_target)
    mask = inside & (offs_n[None, :] <= offs_m[:, None])
    mask = mask & ~(both_targets & (offs_m[:, None] != offs_n[None, :]))
    return s, mask


@triton.jit
def _grad_scores(s, mask, grad_out, v, norm):
    """d(loss)/d(scores) of one tile, from d(loss)/d(out) of its query rows."""
    sig = tl.sigmoid(s)
    grad_w = tl.dot(grad_out, tl.trans(v))
    return tl.where(mask, grad_w * sig * (1.0 + s * (1.0 - sig)) / norm, 0.0), sig


@triton.jit
def _forward(
    q_ptr, k_ptr, v_ptr, rab_ptr, len_ptr, out_ptr,
    H, N, DQK, DV, num_targets, norm, stride_rab,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_QK: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    b = bh // H
    length = tl.load(len_ptr + b).to(tl.int32)
    first_target = length - num_targets
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dqk, dv = tl.arange(0, BLOCK_QK), tl.arange(0, BLOCK_V)
    q = tl.load(
        q_ptr + bh * N * DQK + offs_m[:, None] * DQK + dqk[None, :],
        mask=(offs_m[:, None] < length) & (dqk[None, :] < DQK),
        other=0.0,
    )
    acc = tl.zeros((BLOCK_M, BLOCK_V), dtype=tl.float32)
    end = tl.minimum((pid_m + 1) * BLOCK_M, length)  # keys up to the diagonal, in the row
    for start_n in range(0, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(
            k_ptr + bh * N * DQK + offs_n[:, None] * DQK + dqk[None, :],
            mask=(offs_n[:, None] < length) & (dqk[None, :] < DQK),
            other=0.0,
        )
        s, mask = _scores(q, k, rab_ptr, b * stride_rab, offs_m, offs_n, length, first_target, N)
        w = tl.where(mask, s * tl.sigmoid(s) / norm, 0.0)
        v = tl.load(
            v_ptr + bh * N * DV + offs_n[:, None] * DV + dv[None, :],
            mask=(offs_n[:, None] < length) & (dv[None, :] < DV),
            other=0.0,
        )
        acc += tl.dot(w.to(v.dtype), v)  # in the inputs' precision, accumulated in float32
    tl.store(
        out_ptr + bh * N * DV + offs_m[:, None] * DV + dv[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=(offs_m[:, None] < N) & (dv[None, :] < DV),
    )


@triton.jit
def _backward_keys(
    q_ptr, k_ptr, v_ptr, rab_ptr, len_ptr, dout_ptr, dk_ptr, dv_ptr,
    H, N, DQK, DV, num_targets, norm, stride_rab,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_QK: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    pid_n, bh = tl.program_id(0), tl.program_id(1)
    b = bh // H
    length = tl.load(len_ptr + b).to(tl.int32)
    first_target = length - num_targets
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dqk, dv = tl.arange(0, BLOCK_QK), tl.arange(0, BLOCK_V)
    keys = (offs_n[:, None] < length) & (dqk[None, :] < DQK)
    k = tl.load(k_ptr + bh * N * DQK + offs_n[:, None] * DQK + dqk[None, :], mask=keys, other=0.0)
    values = (offs_n[:, None] < length) & (dv[None, :] < DV)
    v = tl.load(v_ptr + bh * N * DV + offs_n[:, None] * DV + dv[None, :], mask=values, other=0.0)
    grad_k = tl.zeros((BLOCK_N, BLOCK_QK), dtype=tl.float32)
    grad_v = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    start = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M  # queries from the diagonal on
    for start_m in range(start, length, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = tl.load(
            q_ptr + bh * N * DQK + offs_m[:, None] * DQK + dqk[None, :],
            mask=(offs_m[:, None] < length) & (dqk[None, :] < DQK),
            other=0.0,
        )
        grad_out = tl.load(
            dout_ptr + bh * N * DV + offs_m[:, None] * DV + dv[None, :],
            mask=(offs_m[:, None] < length) & (dv[None, :] < DV),
            other=0.0,
        )
        s, mask = _scores(q, k, rab_ptr, b * stride_rab, offs_m, offs_n, length, first_target, N)
        grad_s, sig = _grad_scores(s, mask, grad_out, v, norm)
        w = tl.where(mask, s * sig / norm, 0.0)
        grad_v += tl.dot(tl.trans(w).to(grad_out.dtype), grad_out)
        grad_k += tl.dot(tl.trans(grad_s).to(q.dtype), q)
    tl.store(
        dk_ptr + bh * N * DQK + offs_n[:, None] * DQK + dqk[None, :],
        grad_k.to(dk_ptr.dtype.element_ty),
        mask=(offs_n[:, None] < N) & (dqk[None, :] < DQK),
    )
    tl.store(
        dv_ptr + bh * N * DV + offs_n[:, None] * DV + dv[None, :],
        grad_v.to(dv_ptr.dtype.element_ty),
        mask=(offs_n[:, None] < N) & (dv[None, :] < DV),
    )


@triton.jit
def _backward_queries(
    q_ptr, k_ptr, v_ptr, rab_ptr, len_ptr, dout_ptr, dq_ptr, drab_ptr,
    H, N, DQK, DV, num_targets, norm, stride_rab,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_QK: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    pid_m, b = tl.program_id(0), tl.program_id(1)
    length = tl.load(len_ptr + b).to(tl.int32)
    first_target = length - num_targets
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dqk, dv = tl.arange(0, BLOCK_QK), tl.arange(0, BLOCK_V)
    rows_qk = (offs_m[:, None] < length) & (dqk[None, :] < DQK)
    rows_v = (offs_m[:, None] < length) & (dv[None, :] < DV)
    end = tl.minimum((pid_m + 1) * BLOCK_M, length)  # keys up to the diagonal, in the row
    for start_n in range(0, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        keys = (offs_n[:, None] < length) & (dqk[None, :] < DQK)
        values = (offs_n[:, None] < length) & (dv[None, :] < DV)
        grad_rab = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for h in range(H):
            bh = b * H + h
            q = tl.load(
                q_ptr + bh * N * DQK + offs_m[:, None] * DQK + dqk[None, :], mask=rows_qk, other=0.0
            )
            k = tl.load(
                k_ptr + bh * N * DQK + offs_n[:, None] * DQK + dqk[None, :], mask=keys, other=0.0
            )
            v = tl.load(
                v_ptr + bh * N * DV + offs_n[:, None] * DV + dv[None, :], mask=values, other=0.0
            )
            grad_out = tl.load(
                dout_ptr + bh * N * DV + offs_m[:, None] * DV + dv[None, :], mask=rows_v, other=0.0
            )
            s, mask = _scores(
                q, k, rab_ptr, b * stride_rab, offs_m, offs_n, length, first_target, N
            )
            grad_s, _ = _grad_scores(s, mask, grad_out, v, norm)
            grad_rab += grad_s
            dq = dq_ptr + bh * N * DQK + offs_m[:, None] * DQK + dqk[None, :]
            # these rows belong to this program alone: a plain read-modify-write
            tl.store(dq, tl.load(dq, mask=rows_qk) + tl.dot(grad_s.to(k.dtype), k), mask=rows_qk)
        tl.store(
            drab_ptr + b * N * N + offs_m[:, None] * N + offs_n[None, :],
            grad_rab,
            mask=(offs_m[:, None] < length) & (offs_n[None, :] < length),
        )


def _blocks(q, v):
    n = q.shape[2]
    block = 16 if n <= 16 else 32 if n <= 256 else 64
    width = max(16, triton.next_power_of_2(q.shape[3])), max(16, triton.next_power_of_2(v.shape[3]))
    return block, block, *width


class HstuAttention(torch.autograd.Function):
    """``rab`` [B, N, N], or [1, N, N] shared by every row."""

    @staticmethod
    def forward(ctx, q, k, v, rab, lengths, num_targets: int, norm: float):
        q, k, v, rab = (t.contiguous() for t in (q, k, v, rab))
        lengths = lengths.contiguous()
        b, h, n, dqk = q.shape
        dv = v.shape[3]
        out = torch.empty(b, h, n, dv, dtype=q.dtype, device=q.device)
        stride_rab = 0 if rab.shape[0] == 1 else n * n
        block_m, block_n, block_qk, block_v = _blocks(q, v)
        _forward[(triton.cdiv(n, block_m), b * h)](
            q, k, v, rab, lengths, out, h, n, dqk, dv, num_targets, norm, stride_rab,
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_QK=block_qk, BLOCK_V=block_v,
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, rab, lengths)
        ctx.num_targets, ctx.norm, ctx.stride_rab = num_targets, norm, stride_rab
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, rab, lengths = ctx.saved_tensors
        b, h, n, dqk = q.shape
        dv = v.shape[3]
        grad_out = grad_out.contiguous()
        grad_q = torch.zeros(b, h, n, dqk, dtype=torch.float32, device=q.device)
        grad_rab = torch.zeros(b, n, n, dtype=torch.float32, device=q.device)  # per row
        grad_k, grad_v = torch.empty_like(k), torch.empty_like(v)
        block_m, block_n, block_qk, block_v = _blocks(q, v)
        shape = (h, n, dqk, dv, ctx.num_targets, ctx.norm, ctx.stride_rab)
        blocks = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_QK": block_qk, "BLOCK_V": block_v}
        _backward_keys[(triton.cdiv(n, block_n), b * h)](
            q, k, v, rab, lengths, grad_out, grad_k, grad_v, *shape, **blocks
        )
        _backward_queries[(triton.cdiv(n, block_m), b)](
            q, k, v, rab, lengths, grad_out, grad_q, grad_rab, *shape, **blocks
        )
        if rab.shape[0] == 1 and b > 1:
            grad_rab = grad_rab.sum(0, keepdim=True)
        return grad_q.to(q.dtype), grad_k, grad_v, grad_rab.to(rab.dtype), None, None, None
