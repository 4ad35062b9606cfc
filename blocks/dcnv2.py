"""DCNv2 cross network, full or low-rank (Wang et al. 2021, "DCN V2").

    x_0 = flatten(X)                                      X: [B, N, D] -> x_0: [B, N*D]
    x_{l+1} = x_0 * (U_l (V_l^T x_l) + b_l) + x_l         U_l, V_l: [N*D, r]   (low-rank)
    x_{l+1} = x_0 * (W_l x_l + b_l) + x_l                 W_l: [N*D, N*D]      (rank: null)
    Y = reshape(x_L)                                      [B, N, D]

The cross keeps the token shape, so it stacks with token blocks on either side.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from blocks.base import Block, Gemm, InteractionConfig, TokenShape, check_int
from blocks.registry import register_block


@dataclass(frozen=True, kw_only=True)
class DCNv2Config(InteractionConfig):
    num_layers: int = 2
    rank: int | None = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("num_layers", self.num_layers)
        if self.rank is not None:
            check_int("rank", self.rank)

    def out_shape(self) -> TokenShape:
        return self.in_shape

    def gemms(self, batch_size: int) -> list[Gemm]:
        width = self.num_tokens * self.dim
        if self.rank is None:
            return [Gemm(batch_size, width, width)] * self.num_layers
        down, up = Gemm(batch_size, self.rank, width), Gemm(batch_size, width, self.rank)
        return [down, up] * self.num_layers


class CrossLayer(nn.Module):
    def __init__(self, width: int, rank: int | None):
        super().__init__()
        if rank is None:
            self.project = nn.Linear(width, width)
        else:
            self.project = nn.Sequential(nn.Linear(width, rank, bias=False), nn.Linear(rank, width))

    def forward(self, x0: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        # Not torch.addcmul: one kernel forward, but its backward multiplies by the scalar
        # value too (four multiplies, not two). Under bf16 autocast the projection comes out
        # in bfloat16: cast to x0's float32 once here, or the mixed-dtype multiply casts
        # inside it, forward and again in backward. The same numbers either way; a no-op in
        # float32.
        return x0 * self.project(x).to(x0.dtype) + x


@register_block("dcnv2", kind="interaction", config=DCNv2Config)
class DCNv2(Block):
    """Stacked cross layers over the flattened tokens; ``[B, N, D] -> [B, N, D]``."""

    def __init__(self, config: DCNv2Config):
        super().__init__(config)
        width = config.num_tokens * config.dim
        self.layers = nn.ModuleList(
            CrossLayer(width, config.rank) for _ in range(config.num_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x0 = x.flatten(1)  # [B, N*D]
        h = x0
        for layer in self.layers:
            h = layer(x0, h)
        return h.view_as(x)
