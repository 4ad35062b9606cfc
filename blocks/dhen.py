"""DHEN layer (Zhang et al. 2022, "DHEN: A Deep and Hierarchical Ensemble Network for
Large-Scale Click-Through Rate Prediction"): several interaction modules side by side.

    Y_i = Interaction_i(X)                        X: [B, n, d] -> Y_i: [B, m, d]
    E   = concat_i Y_i  |  sum_i Y_i  |  sum_i w_i Y_i       (ensemble)
    Y   = LN(E + ShortCut(X))                      ShortCut: identity, or W X (W: [n_out, n])

The modules, each mapping n tokens to m (``out_tokens``, default n):

    linear          W X                                        (W: [m, n], over the tokens)
    dot             AdvancedDLRM: the pairwise dots of X, then a linear map to m*d
    self_attention  AutoInt attention keeping the width d (num_heads), then W X if m != n
    conv            a 1-D convolution along the tokens (kernel_size, d -> d channels), then
                    W X if m != n
    dcn             one low-rank DCNv2 cross layer (rank), then W X if m != n

"concat" gives len(modules) * m output tokens; "sum" and "weighted_sum" (learned w_i,
starting at 1/len(modules)) give m. Layers stack into the hierarchy of the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from blocks.attention import SelfAttention, SelfAttentionConfig
from blocks.base import (
    Block,
    Gemm,
    InteractionConfig,
    LayerNorm,
    TokenLinear,
    TokenShape,
    check_choice,
    check_int,
    token_linear_gemm,
)
from blocks.dcnv2 import DCNv2, DCNv2Config
from blocks.dot import DotConfig, DotInteraction
from blocks.registry import register_block
from nas.core.errors import ConfigError

MODULES = ("linear", "dot", "self_attention", "conv", "dcn")
ENSEMBLES = ("concat", "sum", "weighted_sum")


@dataclass(frozen=True, kw_only=True)
class DHENParams:
    """A DHEN layer's own parameters, shared by ``dhen`` and ``glm_dhen`` (mixed in before
    their input config, so its check runs after the input's)."""

    modules: tuple[str, ...] = ("dot", "dcn")
    ensemble: str = "sum"
    out_tokens: int | None = None  # m per module; None: as many as come in
    num_heads: int = 2  # self_attention
    kernel_size: int = 3  # conv
    rank: int = 16  # dcn

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_dhen_params(self)


def _check_dhen_params(config) -> None:
    """A module list given as a JSON list becomes a tuple."""
    modules = config.modules
    if isinstance(modules, list):
        object.__setattr__(config, "modules", modules := tuple(modules))
    if not isinstance(modules, tuple) or not modules:
        raise ConfigError("modules", f"must be a non-empty list from {', '.join(MODULES)}")
    for module in modules:
        check_choice("modules", module, MODULES)
    if len(set(modules)) != len(modules):
        raise ConfigError("modules", f"lists a module twice: {list(modules)}")
    check_choice("ensemble", config.ensemble, ENSEMBLES)
    if config.out_tokens is not None:
        check_int("out_tokens", config.out_tokens)
    for name in ("num_heads", "rank", "kernel_size"):
        check_int(name, getattr(config, name))
    if config.kernel_size % 2 == 0:
        raise ConfigError("kernel_size", f"must be odd (same length out), got {config.kernel_size}")
    if "dot" in modules:
        DotConfig(num_tokens=config.num_tokens, dim=config.dim)  # needs 2+ tokens
    if "self_attention" in modules and config.dim % config.num_heads:
        raise ConfigError(
            "num_heads", f"{config.num_heads} heads do not divide the token width {config.dim}"
        )


@dataclass(frozen=True, kw_only=True)
class DHENConfig(DHENParams, InteractionConfig):
    @property
    def m(self) -> int:
        return self.out_tokens or self.num_tokens

    @property
    def total_tokens(self) -> int:
        return self.m * len(self.modules) if self.ensemble == "concat" else self.m

    def out_shape(self) -> TokenShape:
        return TokenShape(self.total_tokens, self.dim)

    def slice_family(self) -> tuple:
        # Branches of the same module under any ensemble or module list share by name
        # (branches.{i}.*); attention heads interleave, and a conv kernel's taps are centred.
        return (self.num_heads, self.kernel_size)

    def attention(self) -> SelfAttentionConfig:
        return SelfAttentionConfig(
            num_tokens=self.num_tokens, dim=self.dim, num_heads=self.num_heads
        )

    def cross(self) -> DCNv2Config:
        return DCNv2Config(num_tokens=self.num_tokens, dim=self.dim, num_layers=1, rank=self.rank)

    def dot(self) -> DotConfig:
        return DotConfig(num_tokens=self.num_tokens, dim=self.dim)

    def gemms(self, batch_size: int) -> list[Gemm]:
        n, d, m, b = self.num_tokens, self.dim, self.m, batch_size
        gemms: list[Gemm] = []
        for module in self.modules:
            if module == "dot":
                gemms += [*self.dot().gemms(b), Gemm(b, m * d, self.dot().out_shape().dim)]
                continue
            if module == "self_attention":
                gemms += self.attention().gemms(b)
            elif module == "conv":
                gemms.append(Gemm(b * n, d, d * self.kernel_size))
            elif module == "dcn":
                gemms += self.cross().gemms(b)
            if module == "linear" or m != n:
                gemms.append(token_linear_gemm(n, m, d, b))
        if self.total_tokens != n:
            gemms.append(token_linear_gemm(n, self.total_tokens, d, b))  # the shortcut
        return gemms


class _DotModule(nn.Module):
    def __init__(self, config: DHENConfig):
        super().__init__()
        self.dot = DotInteraction(config.dot())
        self.project = nn.Linear(config.dot().out_shape().dim, config.m * config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(self.dot(x).squeeze(1)).view(x.shape[0], -1, x.shape[2])


class _ConvModule(nn.Module):
    def __init__(self, config: DHENConfig):
        super().__init__()
        k = config.kernel_size
        self.conv = nn.Conv1d(config.dim, config.dim, k, padding=k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.transpose(1, 2)).transpose(1, 2)  # along the tokens: [B, n, d]


def _module(name: str, config: DHENConfig) -> nn.Module:
    """Interaction module ``name``: [B, n, d] -> [B, m, d]."""
    n, m = config.num_tokens, config.m
    if name == "linear":
        return TokenLinear(n, m)
    if name == "dot":
        return _DotModule(config)
    inner = {
        "self_attention": lambda: SelfAttention(config.attention()),
        "conv": lambda: _ConvModule(config),
        "dcn": lambda: DCNv2(config.cross()),
    }[name]()
    return inner if m == n else nn.Sequential(inner, TokenLinear(n, m))


@register_block("dhen", kind="interaction", config=DHENConfig)
class DHEN(Block):
    """DHEN: an ensemble of interaction modules, shortcut, LN; ``[B, n, d] -> [B, m', d]``.

    m' is ``out_tokens`` (default n), times the number of modules for a concat ensemble."""

    def __init__(self, config: DHENConfig):
        super().__init__(config)
        self.branches = nn.ModuleList(_module(name, config) for name in config.modules)
        k = len(config.modules)
        self.weights = (
            nn.Parameter(torch.full((k,), 1.0 / k)) if config.ensemble == "weighted_sum" else None
        )
        n, total = config.num_tokens, config.total_tokens
        self.shortcut = TokenLinear(n, total) if total != n else None
        self.norm = LayerNorm(config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = [branch(x) for branch in self.branches]  # each [B, m, d]
        if self.config.ensemble == "concat":
            ensemble = torch.cat(outputs, dim=1)
        elif self.weights is None:
            ensemble = torch.stack(outputs).sum(0)
        else:
            ensemble = (self.weights.view(-1, 1, 1, 1) * torch.stack(outputs)).sum(0)
        shortcut = x if self.shortcut is None else self.shortcut(x)
        return self.norm(ensemble + shortcut)
