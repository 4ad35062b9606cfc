"""Embedding tables: categorical ids and multi-hot bags -> feature tokens.

``embedding``: F categorical fields, one id each -> ``[B, F, D]``. The F tables live in one
fused table with per-field row offsets (one lookup, not F), as torchrec and DLRM do.

``embedding_bag``: one multi-hot field padded to ``max_len`` ids with 0 as padding ->
``[B, 1, D]``, the mean (or sum) of the present ids' vectors; an empty bag gives zeros. On a
GPU it runs as a weighted sum whose backward never waits for the GPU (``weighted_sum``).

Id 0 of every field is reserved for "unknown/missing". Tables use sparse gradients, so an
optimizer updates only the rows a batch touched. Lookups cost 0 FLOPs by convention.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import nn

from blocks.base import (
    Block,
    BlockConfig,
    Gemm,
    TokenShape,
    check_choice,
    check_int,
    meta_weight,
    normal_,
)
from blocks.registry import register_block
from nas.core.errors import ConfigError

INIT_STD = 0.01
MAX_TABLE_ROWS = 2**31 - 2  # rows of one embedding table (a hashed field may declare millions)


@dataclass(frozen=True, kw_only=True)
class EmbeddingConfig(BlockConfig):
    cardinalities: tuple[int, ...]
    dim: int

    def __post_init__(self) -> None:
        if not isinstance(self.cardinalities, tuple) or not self.cardinalities:
            raise ConfigError("cardinalities", "must be a non-empty tuple of table sizes")
        for i, size in enumerate(self.cardinalities):
            check_int(f"cardinalities[{i}]", size, minimum=2, maximum=MAX_TABLE_ROWS)
        check_int("dim", self.dim)

    @classmethod
    def example(cls) -> EmbeddingConfig:
        return cls(cardinalities=(7, 3, 11), dim=8)

    def out_shape(self) -> TokenShape:
        return TokenShape(len(self.cardinalities), self.dim)

    def gemms(self, batch_size: int) -> list[Gemm]:
        return []


@register_block("embedding", kind="embedding", config=EmbeddingConfig)
class Embedding(Block):
    """Categorical ids ``[B, F]`` -> tokens ``[B, F, D]`` via one fused table."""

    def __init__(self, config: EmbeddingConfig):
        super().__init__(config)
        # Summed in Python: on the meta device a cumsum is a Python reference op too (see
        # ``blocks.base.normal_``).
        offsets = torch.tensor([0, *itertools.accumulate(config.cardinalities[:-1])])
        self.register_buffer("offsets", offsets, persistent=False)  # [F]
        rows = sum(config.cardinalities)
        weight = meta_weight(rows, config.dim)
        self.table = nn.Embedding(rows, config.dim, sparse=True, _weight=weight)
        normal_(self.table.weight, std=INIT_STD)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids + self.offsets)  # [B, F] -> [B, F, D]

    def example_input(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        sizes = torch.tensor(self.config.cardinalities)
        return ((torch.rand(batch_size, len(sizes), generator=generator) * sizes).long(),)


@dataclass(frozen=True, kw_only=True)
class EmbeddingBagConfig(BlockConfig):
    cardinality: int
    max_len: int
    dim: int
    mode: str = "mean"

    def __post_init__(self) -> None:
        check_int("cardinality", self.cardinality, minimum=2, maximum=MAX_TABLE_ROWS)
        check_int("max_len", self.max_len)
        check_int("dim", self.dim)
        check_choice("mode", self.mode, ("mean", "sum"))

    @classmethod
    def example(cls) -> EmbeddingBagConfig:
        return cls(cardinality=9, max_len=4, dim=8)

    def out_shape(self) -> TokenShape:
        return TokenShape(1, self.dim)

    def gemms(self, batch_size: int) -> list[Gemm]:
        return []


@register_block("embedding_bag", kind="embedding", config=EmbeddingBagConfig)
class EmbeddingBag(Block):
    """Multi-hot ids ``[B, L]`` (0 = padding) -> one pooled token ``[B, 1, D]``."""

    def __init__(self, config: EmbeddingBagConfig):
        super().__init__(config)
        self.bag = nn.EmbeddingBag(
            config.cardinality,
            config.dim,
            mode=config.mode,
            sparse=True,
            padding_idx=0,
            _weight=meta_weight(config.cardinality, config.dim),
        )
        normal_(self.bag.weight, std=INIT_STD)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.is_cuda and not torch.jit.is_tracing():  # traced (fvcore): as on the CPU
            return self.weighted_sum(ids).unsqueeze(1)
        return self.bag(ids).unsqueeze(1)  # [B, L] -> [B, 1, D]

    def weighted_sum(self, ids: torch.Tensor) -> torch.Tensor:
        """The bag as a sum weighted per id (0 for padding; 1 / the ids present, for the
        mean): what a GPU runs. ``nn.EmbeddingBag``'s sparse gradient drops the padding ids
        by boolean indexing, which makes the host wait for the GPU every step; here padding
        rows get a zero gradient instead, which moves neither them nor their Adam moments."""
        present = (ids != 0).to(self.bag.weight.dtype)
        if self.config.mode == "mean":
            present = present / present.sum(1, keepdim=True).clamp(min=1)
        return nn.functional.embedding_bag(
            ids, self.bag.weight, mode="sum", sparse=True, per_sample_weights=present
        )

    def example_input(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        cfg = self.config
        ids = torch.randint(0, cfg.cardinality, (batch_size, cfg.max_len), generator=generator)
        return (ids,)
