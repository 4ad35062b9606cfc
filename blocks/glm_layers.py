"""GLM layers (ROCS): linear, MLP, Wukong and DHEN built from the masked operators of
``blocks.glm``, so that request-side outputs depend on request-side inputs only.

Each maps (n_r request, n_c candidate) tokens of width d to (m_r, m_c) tokens, request
tokens first. ``num_request_tokens`` (n_r) is context, like ``num_tokens``: the model
builder fills it in from the previous layer. A request-side output count left at ``None``
takes a default; with no request-side input (after a layer without GLM, or on data without
request-side fields) it must be 0.

    glm_linear   Y = M X                                   M: the masked [m, n] token map
    glm_mlp      request token  = MLP_r(flatten(X_r))      candidate token = MLP_c(flatten(X))
    glm_wukong   LN(concat(FMB(X), LCB(X)) + R X) with a masked FM, LayerNorm, MLP, LCB and R
    glm_dhen     LN(Ensemble_i(Module_i(X)) + ShortCut(X)) with masked modules
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from blocks.base import (
    Block,
    Gemm,
    InteractionConfig,
    LayerNorm,
    TokenShape,
    check_bool,
    check_choice,
    check_int,
    check_widths,
)
from blocks.dhen import DHENParams
from blocks.glm import (
    MaskedAttention,
    MaskedConv,
    MaskedCross,
    MaskedDense,
    MaskedDot,
    MaskedFlatNorm,
    MaskedFM,
    MaskedMLP,
    MaskedTokenLinear,
    Memory,
    Split,
    split_widths,
    tokenwise,
)
from blocks.mlp import ACTIVATIONS
from blocks.registry import register_block
from nas.core.errors import ConfigError

# --- costs of the masked operators (request_side: once per request at inference) -----------


def maybe_gemm(
    m: int, n: int, k: int, count: int = 1, request: bool = False, weight: str = "b"
) -> list[Gemm]:
    return [Gemm(m, n, k, count, request, weight)] if m and n and k and count else []


def token_mix_gemms(n: tuple[int, int], m: tuple[int, int], d: int, b: int) -> list[Gemm]:
    (n_r, n_c), (m_r, m_c) = n, m
    return [
        *maybe_gemm(m_r, d, n_r, b, True, "a"),
        *maybe_gemm(m_c, d, n_r, b, True, "a"),
        *maybe_gemm(m_c, d, n_c, b, weight="a"),
    ]


def dense_gemms(f: tuple[int, int], o: tuple[int, int], b: int) -> list[Gemm]:
    (f_r, f_c), (o_r, o_c) = f, o
    return [
        *maybe_gemm(b, o_r, f_r, request=True),
        *maybe_gemm(b, o_c, f_r, request=True),
        *maybe_gemm(b, o_c, f_c),
    ]


def mlp_gemms(f: tuple[int, int], hidden: list[tuple[int, int]], out: tuple[int, int], b: int):
    sizes = [f, *hidden, out]
    return [g for a, o in zip(sizes[:-1], sizes[1:], strict=True) for g in dense_gemms(a, o, b)]


# --- the shared base -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GLMConfig(InteractionConfig):
    context_fields: ClassVar[tuple[str, ...]] = ("num_tokens", "dim", "num_request_tokens")

    num_request_tokens: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("num_request_tokens", self.num_request_tokens, minimum=0)
        if self.num_request_tokens >= self.num_tokens:
            raise ConfigError(
                "num_request_tokens",
                f"{self.num_request_tokens} of {self.num_tokens} input tokens are request-side; "
                "a GLM layer needs at least one candidate-side token",
            )

    @classmethod
    def example(cls) -> GLMConfig:
        return cls(num_tokens=5, dim=8, num_request_tokens=2)

    @property
    def sides(self) -> tuple[int, int]:
        """Input tokens per side: (n_r, n_c)."""
        return self.num_request_tokens, self.num_tokens - self.num_request_tokens

    def request_count(self, name: str, value: int | None, total: int, default: int) -> int:
        """A request-side output count, checked against ``total`` outputs of its kind."""
        if value is None:
            return default if self.num_request_tokens else 0
        check_int(name, value, minimum=0)
        if value and not self.num_request_tokens:
            raise ConfigError(
                name,
                f"must be 0 (got {value}): the layer's input has no request-side tokens (it "
                "follows a layer without GLM, or the data has no request-side fields)",
            )
        if value > total:
            raise ConfigError(name, f"must be at most {total}, got {value}")
        return value

    def check_candidates(self, out: tuple[int, int], field: str) -> None:
        if out[1] < 1:
            raise ConfigError(
                field,
                f"leaves no candidate-side output token ({out[0]} request-side of {sum(out)})",
            )


class GLMBlock(Block):
    """A block whose ``forward_split`` keeps the request side apart; ``forward`` takes and
    returns plain tokens [B, n, d] (request tokens first), row-aligned."""

    def forward_split(self, x: Split) -> Split:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, lengths=None):
        mem = Memory(memory, lengths) if memory is not None else None
        return self.forward_split(Split.tokens(x, self.config.num_request_tokens, mem)).merged()


def _tokens(x: Split, dim: int) -> Split:
    """Flat features back to tokens of width ``dim``."""
    return x.replace(
        x.request.reshape(x.request.shape[0], -1, dim),
        x.candidate.reshape(x.candidate.shape[0], -1, dim),
    )


# --- glm_linear -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GLMLinearConfig(GLMConfig):
    out_tokens: int | None = None  # m; None: as many as come in
    request_out_tokens: int | None = None  # m_r; None: in proportion to the input's

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.out_tokens is not None:
            check_int("out_tokens", self.out_tokens)
        self.check_candidates(self.out, "request_out_tokens")

    @property
    def out(self) -> tuple[int, int]:
        return _out_sides(self, self.out_tokens, self.request_out_tokens)

    def out_shape(self) -> TokenShape:
        return TokenShape(sum(self.out), self.dim, self.out[0])

    def gemms(self, batch_size: int) -> list[Gemm]:
        return token_mix_gemms(self.sides, self.out, self.dim, batch_size)


def _out_sides(config: GLMConfig, out_tokens: int | None, request_out: int | None):
    """(m_r, m_c) for an ``out_tokens`` / ``request_out_tokens`` pair."""
    n_r, n_c = config.sides
    m = out_tokens or n_r + n_c
    default = n_r if out_tokens is None else min(m - 1, round(m * n_r / (n_r + n_c)))
    m_r = config.request_count("request_out_tokens", request_out, m, default)
    return m_r, m - m_r


@register_block("glm_linear", kind="interaction", config=GLMLinearConfig)
class GLMLinear(GLMBlock):
    """GLM linear map over the tokens (LCB): request outputs read request tokens only."""

    def __init__(self, config: GLMLinearConfig):
        super().__init__(config)
        self.mix = MaskedTokenLinear(*config.sides, *config.out)

    def forward_split(self, x: Split) -> Split:
        return self.mix(x)


# --- glm_mlp ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GLMMLPConfig(GLMConfig):
    widths: tuple[int, ...] = (256, 128)
    activation: str = "relu"
    activate_last: bool = True
    request_output: bool | None = None  # a request-side output token; None: when n_r > 0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "widths", check_widths("widths", self.widths))
        check_choice("activation", self.activation, tuple(ACTIVATIONS))
        check_bool("activate_last", self.activate_last)
        if self.request_output is not None:
            check_bool("request_output", self.request_output)
            if self.request_output and not self.num_request_tokens:
                raise ConfigError(
                    "request_output",
                    "must be false: the layer's input has no request-side tokens",
                )

    @property
    def has_request_output(self) -> bool:
        return bool(self.num_request_tokens) if self.request_output is None else self.request_output

    @property
    def hidden(self) -> list[tuple[int, int]]:
        return split_widths(self.widths[:-1], 0.5 if self.has_request_output else 0.0)

    @property
    def out(self) -> tuple[int, int]:
        return int(self.has_request_output) * self.widths[-1], self.widths[-1]

    @property
    def flat_in(self) -> tuple[int, int]:
        n_r, n_c = self.sides
        return n_r * self.dim, n_c * self.dim

    def out_shape(self) -> TokenShape:
        request = int(self.has_request_output)
        return TokenShape(1 + request, self.widths[-1], request)

    def gemms(self, batch_size: int) -> list[Gemm]:
        return mlp_gemms(self.flat_in, self.hidden, self.out, batch_size)


@register_block("glm_mlp", kind="interaction", config=GLMMLPConfig)
class GLMMLP(GLMBlock):
    """GLM MLP: a request token from the request tokens, a candidate token from all."""

    def __init__(self, config: GLMMLPConfig):
        super().__init__(config)
        activation = ACTIVATIONS[config.activation]
        self.mlp = MaskedMLP(
            *config.flat_in, config.hidden, config.out, activation, config.activate_last
        )

    def forward_split(self, x: Split) -> Split:
        return _tokens(self.mlp(x.flat()), self.config.widths[-1])


# --- glm_wukong -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GLMWukongConfig(GLMConfig):
    num_fm_tokens: int = 8  # n_F
    num_lc_tokens: int = 8  # n_L
    rank: int = 8  # k
    widths: tuple[int, ...] = (64,)  # the FMB's hidden MLP layers
    request_fm_tokens: int | None = None  # of n_F; None: half
    request_lc_tokens: int | None = None  # of n_L; None: half

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("num_fm_tokens", "num_lc_tokens", "rank"):
            check_int(name, getattr(self, name))
        object.__setattr__(self, "widths", check_widths("widths", self.widths, allow_empty=True))
        self.check_candidates(self.out, "request_fm_tokens")

    @property
    def fm_out(self) -> tuple[int, int]:
        n = self.num_fm_tokens
        r = self.request_count("request_fm_tokens", self.request_fm_tokens, n, n // 2)
        return r, n - r

    @property
    def lc_out(self) -> tuple[int, int]:
        n = self.num_lc_tokens
        r = self.request_count("request_lc_tokens", self.request_lc_tokens, n, n // 2)
        return r, n - r

    @property
    def out(self) -> tuple[int, int]:
        return self.fm_out[0] + self.lc_out[0], self.fm_out[1] + self.lc_out[1]

    @property
    def hidden(self) -> list[tuple[int, int]]:
        return split_widths(self.widths, self.fm_out[0] / self.num_fm_tokens)

    def out_shape(self) -> TokenShape:
        return TokenShape(sum(self.out), self.dim, self.out[0])

    def gemms(self, batch_size: int) -> list[Gemm]:
        (n_r, n_c), d, k, b = self.sides, self.dim, self.rank, batch_size
        fm_out = (self.fm_out[0] * d, self.fm_out[1] * d)
        gemms = [
            *maybe_gemm(d, k, n_r, b, True, "none"),  # X_r^T Y_r
            *maybe_gemm(n_r, k, d, b, True, "none"),  # X_r P_r
            *maybe_gemm(d, k, n_c, b, weight="none"),  # X_c^T Y_c
            *maybe_gemm(n_c, k, d, b, weight="none"),  # X_c P
            *mlp_gemms((n_r * k, n_c * k), self.hidden, fm_out, b),
            *token_mix_gemms(self.sides, self.lc_out, d, b),  # LCB
        ]
        if self.out != self.sides:
            gemms += token_mix_gemms(self.sides, self.out, d, b)  # projected residual
        return gemms


@register_block("glm_wukong", kind="interaction", config=GLMWukongConfig)
class GLMWukong(GLMBlock):
    """GLM Wukong: masked FM block + masked LCB, residual, LN, request tokens first."""

    def __init__(self, config: GLMWukongConfig):
        super().__init__(config)
        (n_r, n_c), k, d = config.sides, config.rank, config.dim
        self.fm = MaskedFM(n_r, n_c, k)
        self.fm_norm = MaskedFlatNorm(n_r * k, n_c * k)
        fm_out = (config.fm_out[0] * d, config.fm_out[1] * d)
        self.fm_mlp = MaskedMLP(n_r * k, n_c * k, config.hidden, fm_out, activate_last=False)
        self.lcb = MaskedTokenLinear(n_r, n_c, *config.lc_out)
        self.residual = (
            MaskedTokenLinear(n_r, n_c, *config.out) if config.out != config.sides else None
        )
        self.norm = LayerNorm(d)

    def forward_split(self, x: Split) -> Split:
        fmb = _tokens(self.fm_mlp(self.fm_norm(self.fm(x).flat())), self.config.dim)
        lcb = self.lcb(x)
        out = x.replace(
            torch.cat([fmb.request, lcb.request], dim=1),
            torch.cat([fmb.candidate, lcb.candidate], dim=1),
        )
        shortcut = x if self.residual is None else self.residual(x)
        summed = out.replace(out.request + shortcut.request, out.candidate + shortcut.candidate)
        return tokenwise(self.norm, summed)


# --- glm_dhen ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GLMDHENConfig(DHENParams, GLMConfig):
    request_out_tokens: int | None = None  # m_r per module; None: in proportion

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_candidates(self.m, "request_out_tokens")

    @property
    def m(self) -> tuple[int, int]:
        """(m_r, m_c): each module's output tokens."""
        return _out_sides(self, self.out_tokens, self.request_out_tokens)

    @property
    def out(self) -> tuple[int, int]:
        times = len(self.modules) if self.ensemble == "concat" else 1
        return self.m[0] * times, self.m[1] * times

    def out_shape(self) -> TokenShape:
        return TokenShape(sum(self.out), self.dim, self.out[0])

    def gemms(self, batch_size: int) -> list[Gemm]:
        (n_r, n_c), d, b, m = self.sides, self.dim, batch_size, self.m
        h, dh = self.num_heads, self.dim // self.num_heads
        gemms: list[Gemm] = []
        for module in self.modules:
            if module == "dot":
                gemms += [
                    *maybe_gemm(n_r, n_r, d, b, True, "none"),
                    *maybe_gemm(n_c, n_r, d, b, weight="none"),
                ]
                gemms += maybe_gemm(n_c, n_c, d, b, weight="none")
                gemms += dense_gemms(MaskedDot.widths(n_r, n_c), (m[0] * d, m[1] * d), b)
                continue
            if module == "self_attention":
                n = n_r + n_c
                gemms += [
                    *maybe_gemm(b * n_r, 3 * d, d, request=True),  # Q, K, V of request tokens
                    *maybe_gemm(b * n_c, 3 * d, d),
                    *maybe_gemm(n_r, n_r, dh, b * h, True, "none"),  # request Q K^T
                    *maybe_gemm(n_r, dh, n_r, b * h, True, "none"),  # and A V
                    *maybe_gemm(n_c, n, dh, b * h, weight="none"),  # candidate Q K^T, all keys
                    *maybe_gemm(n_c, dh, n, b * h, weight="none"),
                    *maybe_gemm(b * n_r, d, d, request=True),  # residual projections
                    *maybe_gemm(b * n_c, d, d),
                ]
            elif module == "conv":
                reach = min(self.kernel_size // 2, n_r)
                gemms += maybe_gemm(b * n_r, d, d * self.kernel_size, request=True)
                gemms += maybe_gemm(b * (reach + n_c), d, d * self.kernel_size)
            elif module == "dcn":
                f_r, f_c, r = n_r * d, n_c * d, self.rank
                gemms += [
                    *maybe_gemm(b, r, f_r, request=True),  # V_r x_r
                    *maybe_gemm(b, f_r, r, request=True),  # U_r
                    *maybe_gemm(b, r, f_r, request=True),  # V_cr x_r
                    *maybe_gemm(b, r, f_c),  # V_cc x_c
                    *maybe_gemm(b, f_c, r),  # U_c
                ]
            if module == "linear" or m != self.sides:
                gemms += token_mix_gemms(self.sides, m, d, b)
        if self.out != self.sides:
            gemms += token_mix_gemms(self.sides, self.out, d, b)  # the shortcut
        return gemms


class _DotModule(nn.Module):
    def __init__(self, config: GLMDHENConfig):
        super().__init__()
        self.dot = MaskedDot(*config.sides)
        d = config.dim
        self.project = MaskedDense(
            *MaskedDot.widths(*config.sides), config.m[0] * d, config.m[1] * d
        )
        self.dim = d

    def forward(self, x: Split) -> Split:
        return _tokens(self.project(self.dot(x)), self.dim)


class _CrossModule(nn.Module):
    def __init__(self, config: GLMDHENConfig):
        super().__init__()
        (n_r, n_c), d = config.sides, config.dim
        self.cross = MaskedCross(n_r * d, n_c * d, config.rank)
        self.dim = d

    def forward(self, x: Split) -> Split:
        return _tokens(self.cross(x.flat()), self.dim)


class _Then(nn.Module):
    def __init__(self, first: nn.Module, then: nn.Module):
        super().__init__()
        self.first, self.then = first, then

    def forward(self, x: Split) -> Split:
        return self.then(self.first(x))


def _glm_module(name: str, config: GLMDHENConfig) -> nn.Module:
    if name == "linear":
        return MaskedTokenLinear(*config.sides, *config.m)
    if name == "dot":
        return _DotModule(config)
    inner = {
        "self_attention": lambda: MaskedAttention(config.dim, config.num_heads),
        "conv": lambda: MaskedConv(config.dim, config.kernel_size),
        "dcn": lambda: _CrossModule(config),
    }[name]()
    if config.m == config.sides:
        return inner
    return _Then(inner, MaskedTokenLinear(*config.sides, *config.m))


@register_block("glm_dhen", kind="interaction", config=GLMDHENConfig)
class GLMDHEN(GLMBlock):
    """GLM DHEN: masked interaction modules, ensemble, shortcut, LN, request tokens first."""

    def __init__(self, config: GLMDHENConfig):
        super().__init__(config)
        self.branches = nn.ModuleList(_glm_module(name, config) for name in config.modules)
        k = len(config.modules)
        self.weights = (
            nn.Parameter(torch.full((k,), 1.0 / k)) if config.ensemble == "weighted_sum" else None
        )
        self.shortcut = (
            MaskedTokenLinear(*config.sides, *config.out) if config.out != config.sides else None
        )
        self.norm = LayerNorm(config.dim)

    def _ensemble(self, parts: list[torch.Tensor]) -> torch.Tensor:
        if self.config.ensemble == "concat":
            return torch.cat(parts, dim=1)
        stacked = torch.stack(parts)
        if self.weights is None:
            return stacked.sum(0)
        return (self.weights.view(-1, 1, 1, 1) * stacked).sum(0)

    def forward_split(self, x: Split) -> Split:
        outputs = [branch(x) for branch in self.branches]
        shortcut = x if self.shortcut is None else self.shortcut(x)
        request = self._ensemble([o.request for o in outputs]) + shortcut.request
        candidate = self._ensemble([o.candidate for o in outputs]) + shortcut.candidate
        return tokenwise(self.norm, x.replace(request, candidate))
