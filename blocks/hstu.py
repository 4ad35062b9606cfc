"""HSTU layer (Zhai et al. 2024, "Actions Speak Louder than Words: Trillion-Parameter
Sequential Transducers for Generative Recommendations").

    U, V, Q, K = Split(SiLU(f1(LN(X))))               X: [B, N, d]; f1: d -> h*(2 d_v + 2 d_qk)
    A          = SiLU(Q K^T + rab(p, t)) / N  * mask  per head: [B, h, N, N]
    Y          = X + f2(Dropout(LN(A V) * U))         f2: h*d_v -> d;  [B, N, d]

The input LayerNorm (pre-norm) and the dropout before f2 are not in the paper's equations
but are in its reference implementation (generative-recommenders), and the input norm
matters for training: without it the gates see the raw, tiny embedding scale.

Pointwise (not softmax) attention, normalised by the sequence length N. ``rab`` is the
relative attention bias: a learned scalar per relative position (i - j, clipped to N-1) plus
one per log-bucketed time gap (bucket = floor(log(1 + |t_i - t_j|) / log(base))), when
timestamps are given. t_i is the time position i's output is for: its own timestamp by
default, or ``query_timestamps`` -- next-item prediction passes the next event's time, as the
reference implementation does, so a query knows how long after each past event it is asked.
The mask is causal: position i sees j <= i.

Target-aware mode (``num_targets`` = T > 0): the last T positions are candidates appended
after the history; each sees the whole history and itself, but no other candidate, so a
candidate's output does not depend on which other candidates share the request.

Padded batches are [B, N, d] with per-row ``lengths``; padding positions are masked out of
every row's attention and come back as zeros. Jagged batches (``values`` [sum L_b, d] and
``offsets`` [B+1]) are padded with torch-only index helpers, run, and unpadded (no fbgemm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from blocks.base import (
    Block,
    Gemm,
    InteractionConfig,
    LayerNorm,
    TokenShape,
    check_bool,
    check_fraction,
    check_int,
    normal_,
)
from blocks.registry import register_block
from kernels.hstu_attention import hstu_attention
from nas.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class HSTUConfig(InteractionConfig):
    """``num_tokens`` is the longest sequence N the layer takes; ``dim`` is d."""

    num_heads: int = 1
    qk_dim: int = 32  # d_qk per head
    value_dim: int = 32  # d_v per head
    time_buckets: int = 32  # 0 turns the time bias off
    time_base: float = 2.0  # bucket = floor(log(1 + gap) / log(base))
    residual: bool = True
    dropout: float = 0.0  # on LN(A V) * U, before f2 (training only)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("num_heads", "qk_dim", "value_dim"):
            check_int(name, getattr(self, name))
        check_int("time_buckets", self.time_buckets, minimum=0)
        base = self.time_base
        if isinstance(base, bool) or not isinstance(base, int | float) or not 1 < base <= 1e6:
            raise ConfigError(
                "time_base", f"must be a number in (1, 1e6] (the log base of gaps), got {base!r}"
            )
        check_bool("residual", self.residual)
        check_fraction("dropout", self.dropout)

    def out_shape(self) -> TokenShape:
        return TokenShape(self.num_tokens, self.dim)

    def slice_family(self) -> tuple:
        # f1's output interleaves U, V, Q and K per head: only the length slices (the
        # position bias is indexed by offset i - j, so a shorter layer reads its first).
        return (self.num_heads, self.qk_dim, self.value_dim, self.time_buckets, self.residual)

    def gemms(self, batch_size: int) -> list[Gemm]:
        n, h, d = self.num_tokens, self.num_heads, self.dim
        rows = batch_size * n
        return [
            Gemm(rows, h * (2 * self.value_dim + 2 * self.qk_dim), d),  # f1
            Gemm(n, n, self.qk_dim, count=batch_size * h, weight="none"),  # Q K^T
            Gemm(n, self.value_dim, n, count=batch_size * h, weight="none"),  # A V
            Gemm(rows, d, h * self.value_dim),  # f2
        ]


@register_block("hstu", kind="sequence", config=HSTUConfig)
class HSTU(Block):
    """HSTU: causal pointwise attention, position/time bias; ``[B, N, d] -> [B, N, d]``.

    Takes padded batches (``forward``) or jagged ones (``forward_jagged``)."""

    def __init__(self, config: HSTUConfig):
        super().__init__(config)
        h, dqk, dv = config.num_heads, config.qk_dim, config.value_dim
        self.input_norm = LayerNorm(config.dim)
        self.f1 = nn.Linear(config.dim, h * (2 * dv + 2 * dqk), bias=False)
        self.f2 = nn.Linear(h * dv, config.dim)
        # The reference implementation's initialisation (f1 small and bias-free).
        normal_(self.f1.weight, std=0.02)
        nn.init.xavier_uniform_(self.f2.weight)
        self.norm = LayerNorm(h * dv)
        self.dropout = nn.Dropout(config.dropout)
        self.position_bias = nn.Parameter(torch.zeros(config.num_tokens))  # by i - j >= 0
        self.time_bias = (
            nn.Parameter(torch.zeros(config.time_buckets)) if config.time_buckets else None
        )

    def example_input(self, batch_size: int, generator: torch.Generator) -> tuple:
        """Sequences of mixed lengths (one full), with increasing timestamps in seconds."""
        n, d = self.config.num_tokens, self.config.dim
        x = torch.randn(batch_size, n, d, generator=generator)
        lengths = torch.randint(1, n + 1, (batch_size,), generator=generator)
        lengths[0] = n
        gaps = torch.randint(0, 10_000, (batch_size, n), generator=generator)
        return x, lengths, gaps.cumsum(dim=1)

    def forward(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor | None = None,
        timestamps: torch.Tensor | None = None,
        num_targets: int = 0,
        query_timestamps: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: [B, N, d]; lengths: [B] valid positions (default all); timestamps: [B, N], and
        query_timestamps [B, N] the time each output is for (default: timestamps)."""
        b, n, _ = x.shape
        c = self.config
        if lengths is None:
            lengths = torch.full((b,), n, dtype=torch.long, device=x.device)
        u, v, q, k = F.silu(self.f1(self.input_norm(x))).split(
            [
                c.num_heads * c.value_dim,
                c.num_heads * c.value_dim,
                c.num_heads * c.qk_dim,
                c.num_heads * c.qk_dim,
            ],
            dim=-1,
        )
        q = q.view(b, n, c.num_heads, c.qk_dim).transpose(1, 2)  # [B, h, N, d_qk]
        k = k.view(b, n, c.num_heads, c.qk_dim).transpose(1, 2)
        v = v.view(b, n, c.num_heads, c.value_dim).transpose(1, 2)  # [B, h, N, d_v]
        rab = self._bias(n, timestamps, query_timestamps).reshape(-1, n, n)  # [B or 1, N, N]
        attended = hstu_attention(q, k, v, rab, lengths, num_targets, n)  # [B, h, N, d_v]
        attended = attended.transpose(1, 2).reshape(b, n, -1)  # [B, N, h*d_v]
        out = self.f2(self.dropout(self.norm(attended) * u))
        if c.residual:
            out = x + out
        valid = torch.arange(n, device=x.device).view(1, -1) < lengths.view(-1, 1)
        return out * valid.unsqueeze(-1)

    def _bias(
        self, n: int, timestamps: torch.Tensor | None, query_timestamps: torch.Tensor | None
    ) -> torch.Tensor:
        """rab: [N, N] from relative positions, + [B, 1, N, N] from time gaps."""
        positions = torch.arange(n, device=self.position_bias.device)
        distance = (positions.view(-1, 1) - positions.view(1, -1)).clamp(min=0)
        # F.embedding rather than indexing: on CUDA, indexing's backward (index_put with
        # accumulation into these few rows, hit [B, N, N] times) took 98% of a training
        # step's GPU time on an H200 (benchmarks/README.md); the embedding's backward, a few %.
        bias = F.embedding(distance, self.position_bias.view(-1, 1)).squeeze(-1)  # [N, N]
        if timestamps is None or self.time_bias is None:
            return bias
        queries = timestamps if query_timestamps is None else query_timestamps
        gap = (queries.unsqueeze(2) - timestamps.unsqueeze(1)).abs().float()  # [B, N, N]
        bucket = (torch.log1p(gap) / math.log(self.config.time_base)).long()
        bucket = bucket.clamp(max=self.config.time_buckets - 1)
        return bias + F.embedding(bucket, self.time_bias.view(-1, 1)).squeeze(-1).unsqueeze(1)

    def forward_jagged(
        self,
        values: torch.Tensor,
        offsets: torch.Tensor,
        timestamps: torch.Tensor | None = None,
        num_targets: int = 0,
        query_timestamps: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """values: [sum L_b, d] rows of B sequences, offsets: [B+1]; timestamps and
        query_timestamps: [sum L_b]; returns the same layout as values."""
        n = self.config.num_tokens
        padded, lengths = jagged_to_padded(values, offsets, n)

        def pad(stamps: torch.Tensor | None) -> torch.Tensor | None:
            return None if stamps is None else jagged_to_padded(stamps, offsets, n)[0]

        out = self.forward(padded, lengths, pad(timestamps), num_targets, pad(query_timestamps))
        return padded_to_jagged(out, lengths)


def jagged_to_padded(
    values: torch.Tensor, offsets: torch.Tensor, max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """[sum L, ...] + offsets [B+1] -> zero-padded [B, max_len, ...] and lengths [B]."""
    lengths = offsets[1:] - offsets[:-1]
    if int(lengths.max()) > max_len:
        raise ValueError(f"a sequence of {int(lengths.max())} exceeds max_len {max_len}")
    rows = torch.repeat_interleave(torch.arange(len(lengths), device=values.device), lengths)
    cols = torch.arange(len(values), device=values.device) - offsets[:-1][rows]
    padded = values.new_zeros(len(lengths), max_len, *values.shape[1:])
    padded[rows, cols] = values
    return padded, lengths


def padded_to_jagged(padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[B, N, ...] + lengths [B] -> the valid rows, concatenated: [sum L, ...]."""
    valid = torch.arange(padded.shape[1], device=padded.device).view(1, -1) < lengths.view(-1, 1)
    return padded[valid]
