"""DLRM pairwise dot-product interaction (Naumov et al. 2019).

    Z = X X^T                      X: [B, N, D] -> Z: [B, N, N]
    Y = [Z_ij for i < j]           (i <= j with self_interaction)  -> [B, 1, P]

P = N(N-1)/2 (or N(N+1)/2). The full N x N product is computed and its triangle gathered,
so the cost is N*N*D multiply-adds per example, as DLRM runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from blocks.base import Block, Gemm, InteractionConfig, TokenShape, check_bool, pair_indices
from blocks.registry import register_block
from nas.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class DotConfig(InteractionConfig):
    self_interaction: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("self_interaction", self.self_interaction)
        if self.num_tokens < 2 and not self.self_interaction:
            raise ConfigError(
                "num_tokens",
                f"a pairwise dot needs at least 2 input tokens, got {self.num_tokens} "
                "(place it before blocks that reduce the tokens to one, such as mlp or fm)",
            )

    def out_shape(self) -> TokenShape:
        n = self.num_tokens
        return TokenShape(1, n * (n + 1) // 2 if self.self_interaction else n * (n - 1) // 2)

    def gemms(self, batch_size: int) -> list[Gemm]:
        n = self.num_tokens
        return [Gemm(n, n, self.dim, count=batch_size, weight="none")]


@register_block("dot", kind="interaction", config=DotConfig)
class DotInteraction(Block):
    """Pairwise dot products of the tokens ``[B, N, D] -> [B, 1, N(N-1)/2]``."""

    def __init__(self, config: DotConfig):
        super().__init__(config)
        offset = 0 if config.self_interaction else 1
        self.register_buffer("pairs", pair_indices(config.num_tokens, offset), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.bmm(x, x.transpose(1, 2))  # [B, N, N]
        # index_select, not z[:, pairs]: the same gather, with a faster backward (one
        # index_add, where advanced indexing's backward scatters element by element).
        return z.flatten(1).index_select(1, self.pairs).unsqueeze(1)  # [B, 1, P]
