"""MLP over the flattened tokens.

    h_0 = flatten(X)                      X: [B, N, D] -> h_0: [B, N*D]
    h_l = act(W_l h_{l-1} + b_l)          l = 1..L  (the last layer is linear if not activate_last)
    Y   = h_L                             [B, 1, widths[-1]]

The same block is the model's top MLP (ending in a 1-wide linear logit layer) and the bottom
MLP that turns dense features into a token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from blocks.base import (
    Block,
    Gemm,
    InteractionConfig,
    TokenShape,
    check_bool,
    check_choice,
    check_widths,
)
from blocks.registry import register_block

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}


@dataclass(frozen=True, kw_only=True)
class MLPConfig(InteractionConfig):
    widths: tuple[int, ...] = (256, 128)
    activation: str = "relu"
    activate_last: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "widths", check_widths("widths", self.widths))
        check_choice("activation", self.activation, tuple(ACTIVATIONS))
        check_bool("activate_last", self.activate_last)

    def out_shape(self) -> TokenShape:
        return TokenShape(1, self.widths[-1])

    def slice_family(self) -> tuple:
        return (len(self.widths), self.activation, self.activate_last)  # a layer's role

    def gemms(self, batch_size: int) -> list[Gemm]:
        fan_in = (self.num_tokens * self.dim, *self.widths[:-1])
        return [Gemm(batch_size, w, k) for k, w in zip(fan_in, self.widths, strict=True)]


@register_block("mlp", kind="interaction", config=MLPConfig)
class MLP(Block):
    """Fully connected layers over the flattened tokens ``[B, N*D] -> [B, 1, widths[-1]]``."""

    def __init__(self, config: MLPConfig):
        super().__init__(config)
        layers: list[nn.Module] = []
        fan_in = config.num_tokens * config.dim
        for i, width in enumerate(config.widths):
            layers.append(nn.Linear(fan_in, width))
            if i < len(config.widths) - 1 or config.activate_last:
                layers.append(ACTIVATIONS[config.activation]())
            fan_in = width
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1)).unsqueeze(1)  # [B, N, D] -> [B, 1, W]
