"""Wukong layer (Zhang et al. 2024, "Wukong: Towards a Scaling Law for Large-Scale
Recommendation"): a factorization-machine block and a linear-compression block side by side.

    FMB(X) = reshape(MLP(LN(flatten(X (X^T Y)))))      X: [B, n, d], Y: [n, k] learnable
                                                       X^T Y: [B, d, k]; X (X^T Y): [B, n, k]
                                                       MLP: n*k -> widths -> n_F*d; -> [B, n_F, d]
    LCB(X) = W X                                       W: [n_L, n]              -> [B, n_L, d]
    Y      = LN(concat(FMB(X), LCB(X)) + R X)          [B, n_F + n_L, d]

``X (X^T Y)`` is the paper's optimized FM: the pairwise-dot matrix X X^T projected to rank k
without forming it (O(n d k) instead of O(n^2 d)). R is the identity when n_F + n_L = n,
otherwise a learned linear map over the token axis (the paper's projected residual).
LayerNorms are over the last (width) axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from blocks.base import (
    Block,
    Gemm,
    InteractionConfig,
    LayerNorm,
    TokenLinear,
    TokenShape,
    check_int,
    check_widths,
    token_linear_gemm,
)
from blocks.registry import register_block


@dataclass(frozen=True, kw_only=True)
class WukongConfig(InteractionConfig):
    num_fm_tokens: int = 8  # n_F
    num_lc_tokens: int = 8  # n_L
    rank: int = 8  # k: columns of Y
    widths: tuple[int, ...] = (64,)  # the FMB's hidden MLP layers

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("num_fm_tokens", self.num_fm_tokens)
        check_int("num_lc_tokens", self.num_lc_tokens)
        check_int("rank", self.rank)
        object.__setattr__(self, "widths", check_widths("widths", self.widths, allow_empty=True))

    @property
    def out_tokens(self) -> int:
        return self.num_fm_tokens + self.num_lc_tokens

    def out_shape(self) -> TokenShape:
        return TokenShape(self.out_tokens, self.dim)

    def slice_family(self) -> tuple:
        return (len(self.widths),)  # the FMB MLP's layers change role with its depth

    def gemms(self, batch_size: int) -> list[Gemm]:
        n, d, k, b = self.num_tokens, self.dim, self.rank, batch_size
        fan_in = (n * k, *self.widths)
        fan_out = (*self.widths, self.num_fm_tokens * d)
        gemms = [
            Gemm(d, k, n, count=b, weight="none"),  # X^T Y
            Gemm(n, k, d, count=b, weight="none"),  # X (X^T Y)
            *(Gemm(b, o, i) for i, o in zip(fan_in, fan_out, strict=True)),  # the FMB's MLP
            token_linear_gemm(n, self.num_lc_tokens, d, b),  # LCB
        ]
        if self.out_tokens != n:
            gemms.append(token_linear_gemm(n, self.out_tokens, d, b))  # projected residual
        return gemms


@register_block("wukong", kind="interaction", config=WukongConfig)
class Wukong(Block):
    """Wukong: FM block + linear compression, residual, LN; ``[B, n, d] -> [B, n_F+n_L, d]``."""

    def __init__(self, config: WukongConfig):
        super().__init__(config)
        n, d, k = config.num_tokens, config.dim, config.rank
        self.y = nn.Parameter(torch.empty(n, k))
        nn.init.xavier_uniform_(self.y)
        self.fm_norm = LayerNorm(n * k)
        layers: list[nn.Module] = []
        fan_in = n * k
        for width in config.widths:
            layers += [nn.Linear(fan_in, width), nn.ReLU()]
            fan_in = width
        layers.append(nn.Linear(fan_in, config.num_fm_tokens * d))
        self.fm_mlp = nn.Sequential(*layers)
        self.lcb = TokenLinear(n, config.num_lc_tokens)
        self.residual = TokenLinear(n, config.out_tokens) if config.out_tokens != n else None
        self.norm = LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, d = x.shape
        projected = torch.bmm(x.transpose(1, 2), self.y.expand(b, -1, -1))  # [B, d, k]
        fm = torch.bmm(x, projected)  # [B, n, k]
        fmb = self.fm_mlp(self.fm_norm(fm.flatten(1))).view(b, -1, d)  # [B, n_F, d]
        out = torch.cat([fmb, self.lcb(x)], dim=1)  # [B, n_F + n_L, d]
        shortcut = x if self.residual is None else self.residual(x)
        return self.norm(out + shortcut)
