"""What every block shares: token shapes, GEMM shapes, and config validation.

A block is a frozen config dataclass + an ``nn.Module`` built from it + an analytic cost.
Interaction blocks map feature tokens ``[B, N, D] -> [B, N', D']``; their config carries the
input shape (``num_tokens``, ``dim``) so that the config alone fixes the output shape and the
cost, and a candidate can be costed without building it.

FLOPs convention (the same as fvcore's and ``torch.utils.flop_counter``'s): 2 FLOPs per
multiply-add of a contraction (linear, matmul, bmm, einsum, attention). Elementwise ops,
activations, normalisation and embedding lookups are not counted: they are memory-bound and
a rounding error next to the contractions of any block here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from blocks.gemm import Gemm  # noqa: F401  (blocks name it from here)
from nas.core.errors import ConfigError, shown


@dataclass(frozen=True)
class TokenShape:
    """Per-example shape of a block's output: ``num_tokens`` tokens of width ``dim``, the
    first ``num_request`` of them request-side (GLM, ``blocks.glm``); the rest, and every
    output of a block without GLM masking, candidate-side."""

    num_tokens: int
    dim: int
    num_request: int = 0

    @property
    def numel(self) -> int:
        return self.num_tokens * self.dim


# --- initialisation on the meta device ----------------------------------------------------
# A supernet is first built on the meta device, to check a space before anything runs
# (``nas.search.supernet.check_supernet``). There, torch's ``normal_`` is a Python reference
# op whose first call imports torch's compiler: 2.5-4.5 s of every one-shot or DNAS `nas
# submit`. Meta tensors hold no values, so their normal draws are skipped; on real devices
# the draws, and so every seed's weights, are what they were.


def normal_(tensor: torch.Tensor, std: float) -> None:
    """``nn.init.normal_(tensor, std=std)``, except on the meta device."""
    if not tensor.is_meta:
        nn.init.normal_(tensor, std=std)


def pair_indices(n: int, offset: int = 1) -> torch.Tensor:
    """The flat indices (i * n + j) of the pairs j >= i + ``offset`` of an n x n matrix, on
    the CPU even when built under the meta device (there ``triu_indices`` is a Python op that
    imports torch's compiler, and orders of magnitude slower); a module's ``.to`` moves them."""
    rows, cols = torch.triu_indices(n, n, offset=offset, device="cpu")
    return rows * n + cols


def meta_weight(*shape: int) -> torch.Tensor | None:
    """For ``nn.Embedding``/``nn.EmbeddingBag``'s ``_weight``: an uninitialised weight when
    building on the meta device (their own ``reset_parameters`` draws normally), else None
    (they draw as always)."""
    return torch.empty(*shape) if torch.get_default_device().type == "meta" else None


# --- config validation -----------------------------------------------------------------


# Upper bounds on every size a spec states. Far above any ranking model (widths of a few
# thousand, a handful of layers), low enough that a typo fails here, not in the allocator.
MAX_SIZE = 65_536  # a width, an embedding dimension, a rank, a count of heads or experts
MAX_LAYERS = 64  # layers in one MLP, in a block's stack, or in the interaction stack


def check_int(name: str, value: Any, minimum: int = 1, maximum: int = MAX_SIZE) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be an integer in [{minimum}, {maximum}], got {shown(value)}")
    if not minimum <= value <= maximum:
        raise ConfigError(name, f"must be in [{minimum}, {maximum}], got {shown(value)}")


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(choices)}; got {shown(value)}")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(name, f"must be true or false, got {shown(value)}")


def check_fraction(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ConfigError(name, f"must be a number in [0, 1), got {shown(value)}")


def check_widths(name: str, value: Any, allow_empty: bool = False) -> tuple[int, ...]:
    """A list of layer widths, returned as a tuple."""
    if not isinstance(value, list | tuple) or (not value and not allow_empty):
        need = "a list of" if allow_empty else "a non-empty list of"
        raise ConfigError(name, f"must be {need} positive integers, got {shown(value)}")
    if len(value) > MAX_LAYERS:
        raise ConfigError(name, f"has {len(value)} layers; at most {MAX_LAYERS}")
    for i, width in enumerate(value):
        check_int(f"{name}[{i}]", width)
    return tuple(value)


class BlockConfig:
    """Mixin for block config dataclasses: parameters from a plain mapping, and back."""

    # Fields that describe where a block sits (its input), not what it is. A spec does not
    # state them; the model builder fills them in.
    context_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in cls.context_fields)

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        """The parameters that have defaults, JSON-ready."""
        out = {}
        for f in dataclasses.fields(cls):
            if f.name in cls.context_fields or f.default is dataclasses.MISSING:
                continue
            out[f.name] = list(f.default) if isinstance(f.default, tuple) else f.default
        return out

    @classmethod
    def check_param_names(cls, params: dict[str, Any]) -> None:
        names = cls.param_names()
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise ConfigError(
                unknown[0], f"unknown parameter; valid: {', '.join(names) or '(none)'}"
            )
        missing = sorted(set(names) - set(params) - set(cls.default_params()))
        if missing:
            raise ConfigError(missing[0], "is required")

    @classmethod
    def from_params(cls, params: dict[str, Any], **context: Any) -> BlockConfig:
        cls.check_param_names(params)
        return cls(**params, **context)

    @classmethod
    def example(cls) -> BlockConfig:
        """A small valid config: what the registry contract tests build."""
        raise NotImplementedError

    def out_shape(self) -> TokenShape:
        raise NotImplementedError

    def gemms(self, batch_size: int) -> list[Gemm]:
        """The matrix multiplies one forward pass of ``batch_size`` examples runs."""
        raise NotImplementedError

    def flops(self) -> int:
        """Analytic FLOPs per example (2 per multiply-add of contractions)."""
        return sum(g.flops for g in self.gemms(1))

    def slice_family(self) -> tuple:
        """Configs of this block at one input shape whose families are equal share weights in
        a supernet, each reading the leading slice of the largest (``nas.search.supernet.shared``).
        Sizes (ranks, widths, token and layer counts) bridge by slicing; a block whose
        structure changes a parameter's role names what must match."""
        return ()


@dataclass(frozen=True, kw_only=True)
class InteractionConfig(BlockConfig):
    """Config of a block over feature tokens ``[B, num_tokens, dim]``."""

    context_fields: ClassVar[tuple[str, ...]] = ("num_tokens", "dim")

    num_tokens: int
    dim: int

    def __post_init__(self) -> None:
        check_int("num_tokens", self.num_tokens)
        check_int("dim", self.dim)

    @classmethod
    def example(cls) -> InteractionConfig:
        return cls(num_tokens=5, dim=8)

    @property
    def in_shape(self) -> TokenShape:
        return TokenShape(self.num_tokens, self.dim)


class Block(nn.Module):
    """An ``nn.Module`` built from a frozen config; ``example_input`` feeds tests and FLOPs."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config

    @property
    def out_shape(self) -> TokenShape:
        return self.config.out_shape()

    def example_input(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        """Random feature tokens; blocks with other inputs (ids) override this."""
        shape = self.config.in_shape
        return (torch.randn(batch_size, shape.num_tokens, shape.dim, generator=generator),)


# --- shared pieces -----------------------------------------------------------------------


class TokenLinear(nn.Module):
    """A linear map over the token axis: ``[B, n, d] -> [B, m, d]``, Y = W X (W: [m, n])."""

    def __init__(self, num_in: int, num_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_out, num_in))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A batched matmul (not a broadcast one, which fvcore counts once, not per example).
        return torch.bmm(self.weight.expand(x.shape[0], -1, -1), x)  # [B, m, n] @ [B, n, d]


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` computed in float32 under autocast, as CUDA's autocast computes it.

    CPU autocast runs layer norm in bfloat16, and its bfloat16 backward took twice the
    float32 one at the token shapes here (Wukong, ``train.precision: bf16``). Float32 input:
    the same op as ``nn.LayerNorm``, the same weights and state dict.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.layer_norm(
            x.float(), self.normalized_shape, self.weight, self.bias, self.eps
        )


def token_linear_gemm(num_in: int, num_out: int, dim: int, batch_size: int) -> Gemm:
    return Gemm(num_out, dim, num_in, count=batch_size, weight="a")
