"""Vector-wise factorization machine (Rendle 2010; DeepFM's FM component, kept as a vector).

    Y = 1/2 [ (sum_i x_i)^2 - sum_i x_i^2 ] = sum_{i<j} x_i * x_j     X: [B, N, D] -> [B, 1, D]

The O(N D) identity replaces the O(N^2 D) pair sum. It is all sums and squares, elementwise
work, so by the FLOPs convention (blocks/base.py) an FM counts 0 FLOPs; the cost model prices
it as memory traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from blocks.base import Block, Gemm, InteractionConfig, TokenShape
from blocks.registry import register_block
from nas.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class FMConfig(InteractionConfig):
    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_tokens < 2:
            raise ConfigError(
                "num_tokens", f"an FM needs at least 2 input tokens, got {self.num_tokens}"
            )

    def out_shape(self) -> TokenShape:
        return TokenShape(1, self.dim)

    def gemms(self, batch_size: int) -> list[Gemm]:
        return []  # sums and squares only: elementwise, not counted (blocks/base.py)


@register_block("fm", kind="interaction", config=FMConfig)
class FactorizationMachine(Block):
    """Second-order interactions of all token pairs, summed: ``[B, N, D] -> [B, 1, D]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square_of_sum = x.sum(dim=1).square()  # [B, D]
        # Elementwise, not an einsum: "bnd,bnd->bd" runs as B*D one-by-one matmuls on CPU,
        # slower still under bf16 autocast (it becomes a bfloat16 bmm).
        sum_of_squares = x.square().sum(dim=1)  # [B, D]
        return (0.5 * (square_of_sum - sum_of_squares)).unsqueeze(1)
