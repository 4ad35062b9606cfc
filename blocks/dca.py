"""DCA, Deep Cross Attention (ROCS): a layer's tokens attend over the encoded request sequence.

    H          = the encoded history, [R, L, d_H]     request-only: the model's sequence encoder
    K_s, V_s   = H W_K^s, H W_V^s                     s in {request, candidate}: separate
                                                      projections, both once per request,
                                                      from the history's width d_H to the
                                                      tokens' d (a layer before may widen them)
    Y_s        = X_s + Attn(X_s W_Q^s, K_s, V_s) W_O^s     softmax over the valid positions

Request tokens read the request and its history only, so they stay request-side; candidate
tokens read the history through their own K/V. Placed after GLM layers, the history is
encoded once per request and its keys and values projected once per request, however many
candidates the request scores. Positions past a request's history length are masked; a
request without history attends to nothing (Y = X).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from blocks.base import Gemm, TokenShape, check_int
from blocks.glm import Memory, Split
from blocks.glm_layers import GLMBlock, GLMConfig, maybe_gemm
from blocks.registry import register_block
from nas.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class DCAConfig(GLMConfig):
    context_fields: ClassVar[tuple[str, ...]] = (
        *GLMConfig.context_fields,
        "memory_tokens",
        "memory_dim",
    )

    memory_tokens: int  # L: the encoded history's length
    memory_dim: int  # d_H: its width (the embedding dim)
    num_heads: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("num_heads", self.num_heads)
        if self.dim % self.num_heads:
            raise ConfigError(
                "num_heads", f"{self.num_heads} heads do not divide the token width {self.dim}"
            )
        if self.memory_tokens < 1:
            raise ConfigError(
                "block",
                "dca attends over the encoded history: give the spec a 'sequence' section "
                '(e.g. {"max_len": 32, "layers": [{"block": "hstu"}]})',
            )

    @classmethod
    def example(cls) -> DCAConfig:
        return cls(num_tokens=5, dim=8, num_request_tokens=2, memory_tokens=6, memory_dim=4)

    def out_shape(self) -> TokenShape:
        return TokenShape(self.num_tokens, self.dim, self.num_request_tokens)

    def gemms(self, batch_size: int) -> list[Gemm]:
        d, L, b, h = self.dim, self.memory_tokens, batch_size, self.num_heads
        d_h = self.memory_dim
        gemms = []
        for tokens, request in zip(self.sides, (True, False), strict=True):
            if not tokens:
                continue
            gemms += [
                *maybe_gemm(b * L, 2 * d, d_h, request=True),  # K, V of the history, per request
                *maybe_gemm(b * tokens, d, d, request=request),  # Q
                *maybe_gemm(tokens, L, d // h, b * h, request, "none"),  # Q K^T
                *maybe_gemm(tokens, d // h, L, b * h, request, "none"),  # A V
                *maybe_gemm(b * tokens, d, d, request=request),  # W_O
            ]
        return gemms


class _CrossAttention(nn.Module):
    """One side's projections: queries from its tokens, keys and values from the history."""

    def __init__(self, dim: int, memory_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(memory_dim, 2 * dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)

    def keys(self, history: torch.Tensor) -> torch.Tensor:
        """[R, L, d_H] -> keys and values [R, 2, h, L, d/h]."""
        r, length, _ = history.shape
        head = self.q.out_features // self.num_heads
        return self.kv(history).view(r, length, 2, self.num_heads, head).permute(0, 2, 3, 1, 4)

    def forward(self, x: torch.Tensor, kv: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q = self.q(x).view(b, n, self.num_heads, -1).transpose(1, 2)  # [B, h, n, d/h]
        k, v = kv.unbind(1)  # [B, h, L, d/h]
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # [B, h, n, L]
        mask = valid[:, None, None, :]
        # A finite fill, then zeroed: a request with no history gets weights 0, not NaN.
        weights = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1) * mask
        attended = torch.matmul(weights, v).transpose(1, 2).reshape(b, n, d)
        return x + self.o(attended)


@register_block("dca", kind="interaction", config=DCAConfig)
class DCA(GLMBlock):
    """DCA: request and candidate tokens cross-attend over the history, separate K/V."""

    def __init__(self, config: DCAConfig):
        super().__init__(config)
        self.request_side = _CrossAttention(config.dim, config.memory_dim, config.num_heads)
        self.candidate_side = _CrossAttention(config.dim, config.memory_dim, config.num_heads)

    def example_input(self, batch_size: int, generator: torch.Generator) -> tuple:
        """Tokens, an encoded history, and history lengths (one empty, one full)."""
        c = self.config
        x = torch.randn(batch_size, c.num_tokens, c.dim, generator=generator)
        memory = torch.randn(batch_size, c.memory_tokens, c.memory_dim, generator=generator)
        lengths = torch.randint(0, c.memory_tokens + 1, (batch_size,), generator=generator)
        lengths[0] = c.memory_tokens
        if batch_size > 1:
            lengths[1] = 0
        return x, memory, lengths

    def forward_split(self, x: Split) -> Split:
        memory: Memory | None = x.memory
        if memory is None:
            raise ValueError("dca needs the encoded history (Split.memory)")
        length = memory.values.shape[1]
        valid = torch.arange(length, device=memory.lengths.device) < memory.lengths.view(-1, 1)
        request = x.request
        if request.shape[1]:
            request = self.request_side(request, self.request_side.keys(memory.values), valid)
        kv = x.broadcast(self.candidate_side.keys(memory.values))  # projected once per request
        candidate = self.candidate_side(x.candidate, kv, x.broadcast(valid))
        return x.replace(request, candidate)
