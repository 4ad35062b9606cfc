"""Multi-head self-attention over feature tokens (AutoInt, Song et al. 2019).

For each head h, with Q_h = X W_Q^h, K_h = X W_K^h, V_h = X W_V^h   (X: [B, N, D], d = head_dim):
    A_h = softmax(Q_h K_h^T / sqrt(d)) V_h                              [B, N, d]
    Y   = ReLU(concat_h(A_h) + X W_res)                                 [B, N, H*d]

AutoInt's interacting layer, with the scaled dot product of the Transformer (the paper's is
unscaled; scaling keeps stacked layers stable). ``residual: false`` drops the X W_res term.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from blocks.base import Block, Gemm, InteractionConfig, TokenShape, check_bool, check_int
from blocks.registry import register_block
from nas.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class SelfAttentionConfig(InteractionConfig):
    num_heads: int = 2
    head_dim: int | None = None  # None: dim // num_heads, so the width is kept
    residual: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("num_heads", self.num_heads)
        check_bool("residual", self.residual)
        if self.head_dim is not None:
            check_int("head_dim", self.head_dim)
        elif self.dim % self.num_heads:
            raise ConfigError(
                "num_heads",
                f"{self.num_heads} heads do not divide the token width {self.dim}; "
                "pick a divisor of it or set head_dim",
            )

    @property
    def width(self) -> int:
        """Per-head width times heads: the output token width."""
        head_dim = self.head_dim or self.dim // self.num_heads
        return head_dim * self.num_heads

    def out_shape(self) -> TokenShape:
        return TokenShape(self.num_tokens, self.width)

    def slice_family(self) -> tuple:
        return (self.num_heads, self.head_dim, self.residual)  # Q/K/V rows interleave by head

    def gemms(self, batch_size: int) -> list[Gemm]:
        n, h = self.num_tokens, self.num_heads
        head_dim = self.width // h
        rows = batch_size * n
        gemms = [
            Gemm(rows, 3 * self.width, self.dim),  # Q, K, V projections
            Gemm(n, n, head_dim, count=batch_size * h, weight="none"),  # Q K^T
            Gemm(n, head_dim, n, count=batch_size * h, weight="none"),  # softmax(.) V
        ]
        if self.residual:
            gemms.append(Gemm(rows, self.width, self.dim))
        return gemms


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d)) V over ``[..., N, d]`` queries and ``[..., M, d]`` keys.

    ``F.scaled_dot_product_attention``, except under CPU autocast (``train.precision:
    bf16``). There its bfloat16 flash kernel, made for long sequences, is slower than its
    float32 one over a dozen feature tokens. This path does the two matmuls in bfloat16 and
    the softmax in float32, over the keys laid out on dim -2, where CPU's softmax over so
    short a last dim is slow (the figures: ``benchmarks/README.md``).
    """
    if q.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return F.scaled_dot_product_attention(q, k, v)
    scores = torch.matmul(k, q.transpose(-1, -2) * q.shape[-1] ** -0.5)  # [..., M, N]
    return torch.matmul(scores.float().softmax(-2).transpose(-1, -2), v)  # [..., N, d]


@register_block("self_attention", kind="interaction", config=SelfAttentionConfig)
class SelfAttention(Block):
    """AutoInt interacting layer: attention across tokens, ``[B, N, D] -> [B, N, H*d]``."""

    def __init__(self, config: SelfAttentionConfig):
        super().__init__(config)
        self.qkv = nn.Linear(config.dim, 3 * config.width, bias=False)
        self.res = nn.Linear(config.dim, config.width, bias=False) if config.residual else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        h = self.config.num_heads
        q, k, v = self.qkv(x).view(b, n, 3, h, -1).permute(2, 0, 3, 1, 4)  # 3 x [B, H, N, d]
        attended = attend(q, k, v)  # [B, H, N, d]
        out = attended.transpose(1, 2).reshape(b, n, -1)  # [B, N, H*d]
        if self.res is not None:
            out = out + self.res(x)
        return torch.relu(out)
