"""ArchSpec + dataset schema -> a ranking model (``nn.Module`` returning one logit per example).

Every part is a registered block, so the model's analytic cost is the sum of its blocks':

    embedding      categorical ids [B, F]        -> [B, F, D]
    embedding_bag  each multi-hot field [B, L]   -> [B, 1, D]
    mlp (bottom)   dense features [B, 1, Dn]     -> [B, 1, D]       (when the data has any)
    interaction    tokens_0 [B, N_0, D]          -> ... -> tokens_L
    mlp (top)      top input (see ArchSpec)      -> [B, 1, 1] -> logit [B]
"""

from __future__ import annotations

import torch
from torch import nn

import blocks
from blocks.base import BlockConfig, TokenShape
from nas.data.schema import Schema
from nas.errors import ConfigError
from nas.spec import ArchSpec


class RankingModel(nn.Module):
    def __init__(self, spec: ArchSpec, schema: Schema):
        super().__init__()
        self.spec = spec
        self.configs = model_configs(spec, schema)
        parts = {name: blocks.build_block(cfg) for name, cfg in self.configs.items()}
        self.embedding = parts.pop("embedding")
        self.bags = nn.ModuleList(
            parts.pop(f"bag{i}") for i in range(len(schema.of_kind("multi_hot")))
        )
        self.bottom = parts.pop("bottom", None)
        self.top = parts.pop("top")
        self.interaction = nn.ModuleList(
            parts[f"interaction{i}"] for i in range(len(spec.interaction))
        )
        self.feed_all = spec.top_input == "all"

    def forward(
        self, categorical: torch.Tensor, multi_hot: torch.Tensor, dense: torch.Tensor
    ) -> torch.Tensor:
        tokens = [self.embedding(categorical)]  # [B, F, D]
        tokens += [bag(multi_hot[:, i]) for i, bag in enumerate(self.bags)]  # [B, 1, D] each
        if self.bottom is not None:
            tokens.append(self.bottom(dense.unsqueeze(1)))  # [B, 1, D]
        x = torch.cat(tokens, dim=1)  # [B, N_0, D]
        stages = [x]
        for layer in self.interaction:
            x = layer(x)
            stages.append(x)
        top_in = torch.cat([s.flatten(1) for s in stages], dim=1) if self.feed_all else x.flatten(1)
        return self.top(top_in.unsqueeze(1)).view(-1)  # [B]

    def flops(self) -> int:
        """Analytic FLOPs per example (2 per multiply-add of contractions)."""
        return sum(cfg.flops() for cfg in self.configs.values())


def model_configs(spec: ArchSpec, schema: Schema) -> dict[str, BlockConfig]:
    """The config of every block in the model, in order; checks every shape.

    Part names: embedding, bag{i}, bottom (dense data only), interaction{i}, top.
    """
    d = spec.embedding_dim
    categorical = schema.of_kind("categorical")
    if not categorical:
        raise ConfigError("dataset", "the schema has no categorical fields to embed")
    configs: dict[str, BlockConfig] = {
        "embedding": blocks.get_block("embedding").config(
            {"cardinalities": tuple(f.cardinality for f in categorical), "dim": d}
        )
    }
    for i, field in enumerate(schema.of_kind("multi_hot")):
        configs[f"bag{i}"] = blocks.get_block("embedding_bag").config(
            {"cardinality": field.cardinality, "max_len": field.max_len, "dim": d}
        )
    num_dense = len(schema.of_kind("dense"))
    if num_dense:
        configs["bottom"] = blocks.get_block("mlp").config(
            {"widths": (*spec.bottom_mlp, d)}, num_tokens=1, dim=num_dense
        )
    stages = [TokenShape(schema.num_tokens, d)]
    for i, cfg in enumerate(spec.layer_configs(schema.num_tokens)):
        configs[f"interaction{i}"] = cfg
        stages.append(cfg.out_shape())
    top_width = sum(s.numel for s in stages) if spec.top_input == "all" else stages[-1].numel
    configs["top"] = blocks.get_block("mlp").config(
        {"widths": (*spec.top_mlp, 1), "activate_last": False}, num_tokens=1, dim=top_width
    )
    return configs


def build_model(spec: ArchSpec, schema: Schema) -> RankingModel:
    return RankingModel(spec, schema)
