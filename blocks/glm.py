"""GLM, Generalized Layer Masking (ROCS): request/candidate isolation inside every operator.

Tokens are grouped by side: request-side tokens (user, context, history) first, then
candidate-side tokens (the item). A GLM operator is a *masked* operator: an output may read
only the inputs its side allows,

    request output    <- request inputs
    candidate output  <- request inputs and candidate inputs

which for a linear map over the tokens is the block-lower-triangular weight

    [Y_r]   [W_rr    0  ] [X_r]
    [Y_c] = [W_cr  W_cc ] [X_c]

Every operator here applies that mask to its contraction (token mixing, the FM's X^T Y,
pairwise dots, attention, convolution, the cross layer, dense layers) or to its statistics
(LayerNorm over a flattened vector). Token-wise operators (per-token LayerNorm, per-token
projections) are GLM already: they run on each side separately.

The masked zeros are never stored or multiplied. A ``Split`` holds the request side once per
*request* and the candidate side once per *candidate*; a request-only term (W_cr X_r) is
computed once per request and broadcast to that request's candidates. In training every row
is its own request (``owner`` None); at inference one request scores N candidates and its
request side is computed once (``nas.arch.model.RankingModel.score_requests``).

Shapes: tokens [R, n_r, d] / [C, n_c, d]; flat features [R, f_r] / [C, f_c].
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from blocks.attention import attend
from blocks.base import pair_indices
from kernels.ikbo import broadcast_linear


@dataclass(frozen=True)
class Memory:
    """An encoded request-side sequence: ``values`` [R, L, d], valid ``lengths`` [R]."""

    values: torch.Tensor
    lengths: torch.Tensor


@dataclass(frozen=True)
class Split:
    """Request side [R, ...], candidate side [C, ...], and which request owns each candidate."""

    request: torch.Tensor
    candidate: torch.Tensor
    owner: torch.Tensor | None = None  # [C] request row per candidate; None: row-aligned
    memory: Memory | None = None  # the encoded history, for DCA layers

    @classmethod
    def tokens(cls, x: torch.Tensor, num_request: int, memory: Memory | None = None) -> Split:
        """Row-aligned split of ``x`` [B, n, d]: its first ``num_request`` tokens, the rest."""
        return cls(x[:, :num_request], x[:, num_request:], None, memory)

    def broadcast(self, request_term: torch.Tensor) -> torch.Tensor:
        """A tensor with one row per request -> one row per candidate."""
        return request_term if self.owner is None else request_term.index_select(0, self.owner)

    def replace(self, request: torch.Tensor, candidate: torch.Tensor) -> Split:
        return dataclasses.replace(self, request=request, candidate=candidate)

    def merged(self) -> torch.Tensor:
        """Every token of every candidate: [C, n_r + n_c, d] (the request side repeated)."""
        if self.request.shape[1] == 0:
            return self.candidate
        return torch.cat([self.broadcast(self.request), self.candidate], dim=1)

    def flat(self) -> Split:
        return self.replace(self.request.flatten(1), self.candidate.flatten(1))

    @property
    def num_request(self) -> int:
        return self.request.shape[1]


def tokenwise(module: nn.Module, x: Split) -> Split:
    """A per-token operator, run on each side: GLM by construction."""
    return x.replace(module(x.request), module(x.candidate))


def _uniform(*shape: int, fan_in: int, fan_out: int | None = None) -> nn.Parameter:
    """A weight drawn as its unmasked layer's would be: Xavier-uniform when ``fan_out`` is
    given, else PyTorch's Linear default (bound 1/sqrt(fan_in)). Empty shapes are allowed."""
    if fan_out is None:
        bound = 1 / math.sqrt(max(fan_in, 1))
    else:
        bound = math.sqrt(6 / max(fan_in + fan_out, 1))
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


def _mix(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[m, n] over the token axis of [B, n, d] -> [B, m, d], as a batched matmul (fvcore
    counts a broadcast matmul once, not per example)."""
    return torch.bmm(weight.expand(x.shape[0], -1, -1), x)


class MaskedTokenLinear(nn.Module):
    """Linear map over the tokens with the GLM mask: (n_r, n_c) -> (m_r, m_c) tokens."""

    def __init__(self, n_r: int, n_c: int, m_r: int, m_c: int):
        super().__init__()
        n, m = n_r + n_c, m_r + m_c
        self.rr = _uniform(m_r, n_r, fan_in=n, fan_out=m)
        self.cr = _uniform(m_c, n_r, fan_in=n, fan_out=m)
        self.cc = _uniform(m_c, n_c, fan_in=n, fan_out=m)

    def forward(self, x: Split) -> Split:
        request = _mix(self.rr, x.request)
        candidate = x.broadcast(_mix(self.cr, x.request)) + _mix(self.cc, x.candidate)
        return x.replace(request, candidate)


class MaskedDense(nn.Module):
    """A dense layer over flat features with the GLM mask: (f_r, f_c) -> (o_r, o_c)."""

    def __init__(self, f_r: int, f_c: int, o_r: int, o_c: int):
        super().__init__()
        self.rr = _uniform(o_r, f_r, fan_in=f_r)
        self.r_bias = _uniform(o_r, fan_in=f_r)
        self.cr = _uniform(o_c, f_r, fan_in=f_r + f_c)
        self.cc = _uniform(o_c, f_c, fan_in=f_r + f_c)
        self.c_bias = _uniform(o_c, fan_in=f_r + f_c)

    def forward(self, x: Split) -> Split:
        request = F.linear(x.request, self.rr, self.r_bias)
        request_term = F.linear(x.request, self.cr)  # once per request, broadcast in-kernel
        candidate = broadcast_linear(x.candidate, self.cc, self.c_bias, request_term, x.owner)
        return x.replace(request, candidate)


def split_widths(widths: tuple[int, ...], request_share: float) -> list[tuple[int, int]]:
    """Hidden widths of a masked MLP, each split into (request, candidate) units."""
    out = []
    for width in widths:
        request = min(width - 1, max(1, round(width * request_share))) if request_share else 0
        out.append((request, width - request))
    return out


class MaskedMLP(nn.Module):
    """Masked dense layers with activations between them (and after the last if asked).

    ``hidden`` lists each hidden layer's (request, candidate) units."""

    def __init__(
        self,
        f_r: int,
        f_c: int,
        hidden: list[tuple[int, int]],
        out: tuple[int, int],
        activation: type[nn.Module] = nn.ReLU,
        activate_last: bool = True,
    ):
        super().__init__()
        sizes = [(f_r, f_c), *hidden, out]
        self.layers = nn.ModuleList(
            MaskedDense(*a, *b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.activation = activation()
        self.activate_last = activate_last

    def forward(self, x: Split) -> Split:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1 or self.activate_last:
                x = tokenwise(self.activation, x)
        return x


class MaskedFlatNorm(nn.Module):
    """LayerNorm over flat features with masked statistics: request features are normalised
    by the request features' mean and variance, candidate features by all features'. In
    float32 under autocast, as ``blocks.base.LayerNorm``: a variance from sums of squares
    in bfloat16 would lose most of its digits."""

    def __init__(self, f_r: int, f_c: int, eps: float = 1e-5):
        super().__init__()
        self.f_r, self.f_c, self.eps = f_r, f_c, eps
        self.r_weight, self.r_bias = nn.Parameter(torch.ones(f_r)), nn.Parameter(torch.zeros(f_r))
        self.c_weight, self.c_bias = nn.Parameter(torch.ones(f_c)), nn.Parameter(torch.zeros(f_c))

    def forward(self, x: Split) -> Split:
        r, c = x.request.float(), x.candidate.float()
        request = F.layer_norm(r, (self.f_r,), self.r_weight, self.r_bias, self.eps)
        # Sums over the request features once per request; combined per candidate.
        r_sums = torch.stack([r.sum(1), r.square().sum(1)], dim=1)  # [R, 2]
        sums = x.broadcast(r_sums) + torch.stack([c.sum(1), c.square().sum(1)], dim=1)
        mean = sums[:, :1] / (self.f_r + self.f_c)
        var = (sums[:, 1:] / (self.f_r + self.f_c) - mean.square()).clamp(min=0)
        candidate = (c - mean) * torch.rsqrt(var + self.eps) * self.c_weight + self.c_bias
        return x.replace(request, candidate)


class MaskedFM(nn.Module):
    """Wukong's optimized FM, X (X^T Y), masked: the request rows see request tokens only.

    P_r = X_r^T Y_r                 [R, d, k]    once per request
    P   = P_r + X_c^T Y_c           [C, d, k]
    FM_r = X_r P_r,  FM_c = X_c P   -> (n_r, n_c) rows of width k
    """

    def __init__(self, n_r: int, n_c: int, rank: int):
        super().__init__()
        self.y_r = _uniform(n_r, rank, fan_in=n_r + n_c, fan_out=rank)
        self.y_c = _uniform(n_c, rank, fan_in=n_r + n_c, fan_out=rank)

    def forward(self, x: Split) -> Split:
        r, c = x.request, x.candidate
        p_r = torch.bmm(r.transpose(1, 2), self.y_r.expand(r.shape[0], -1, -1))  # [R, d, k]
        p = x.broadcast(p_r) + torch.bmm(c.transpose(1, 2), self.y_c.expand(c.shape[0], -1, -1))
        return x.replace(torch.bmm(r, p_r), torch.bmm(c, p))


class MaskedDot(nn.Module):
    """Pairwise dots, masked: request features are the dots among request tokens (i < j);
    candidate features are each candidate token's dots with the request tokens, then the
    dots among candidate tokens (i < j). Returns flat features."""

    def __init__(self, n_r: int, n_c: int):
        super().__init__()
        for name, n in (("r_pairs", n_r), ("c_pairs", n_c)):
            self.register_buffer(name, pair_indices(n), persistent=False)

    def forward(self, x: Split) -> Split:
        r, c = x.request, x.candidate
        request = torch.bmm(r, r.transpose(1, 2)).flatten(1)[:, self.r_pairs]
        cross = torch.bmm(c, x.broadcast(r).transpose(1, 2)).flatten(1)  # [C, n_c * n_r]
        within = torch.bmm(c, c.transpose(1, 2)).flatten(1)[:, self.c_pairs]
        return x.replace(request, torch.cat([cross, within], dim=1))

    @staticmethod
    def widths(n_r: int, n_c: int) -> tuple[int, int]:
        return n_r * (n_r - 1) // 2, n_c * n_r + n_c * (n_c - 1) // 2


class MaskedAttention(nn.Module):
    """AutoInt attention (``blocks.attention``), masked: request queries attend over request
    keys; candidate queries over request and candidate keys. Keeps the width d."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.res = nn.Linear(dim, dim, bias=False)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, n, d = x.shape  # the head width spelt out: a side may have no tokens (n = 0)
        heads = self.qkv(x).view(b, n, 3, self.num_heads, d // self.num_heads)
        return heads.permute(2, 0, 3, 1, 4).unbind(0)

    def forward(self, x: Split) -> Split:
        r, c = x.request, x.candidate
        q_r, k_r, v_r = self._heads(r)  # [R, H, n_r, d/H]
        q_c, k_c, v_c = self._heads(c)
        keys = torch.cat([x.broadcast(k_r), k_c], dim=2)
        values = torch.cat([x.broadcast(v_r), v_c], dim=2)
        parts = []
        for q, k, v, tokens in ((q_r, k_r, v_r, r), (q_c, keys, values, c)):
            if tokens.shape[1] == 0:  # no request tokens: nothing to attend from
                parts.append(tokens)
                continue
            attended = attend(q, k, v).transpose(1, 2).flatten(2)
            parts.append(torch.relu(attended + self.res(tokens)))
        return x.replace(*parts)


class MaskedConv(nn.Module):
    """1-D convolution along the tokens, masked: a request token's window is cut at the end
    of the request side (zero padding); a candidate token's window reaches back into it."""

    def __init__(self, dim: int, kernel_size: int):
        super().__init__()
        self.reach = kernel_size // 2
        self.conv = nn.Conv1d(dim, dim, kernel_size, padding=self.reach)

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.transpose(1, 2)).transpose(1, 2)

    def forward(self, x: Split) -> Split:
        r, c = x.request, x.candidate
        request = self._run(r) if r.shape[1] else r
        tail = x.broadcast(r[:, r.shape[1] - min(self.reach, r.shape[1]) :])  # left context
        candidate = self._run(torch.cat([tail, c], dim=1))[:, tail.shape[1] :]
        return x.replace(request, candidate)


class MaskedCross(nn.Module):
    """One low-rank DCNv2 cross layer over flat features, masked:

    request:   x_r * (U_r V_r x_r + b_r) + x_r
    candidate: x_c * (U_c (V_cr x_r + V_cc x_c) + b_c) + x_c      (V_cr x_r once per request)
    """

    def __init__(self, f_r: int, f_c: int, rank: int):
        super().__init__()
        self.v_r = _uniform(rank, f_r, fan_in=f_r)
        self.u_r = _uniform(f_r, rank, fan_in=rank)
        self.b_r = _uniform(f_r, fan_in=rank)
        self.v_cr = _uniform(rank, f_r, fan_in=f_r + f_c)
        self.v_cc = _uniform(rank, f_c, fan_in=f_r + f_c)
        self.u_c = _uniform(f_c, rank, fan_in=rank)
        self.b_c = _uniform(f_c, fan_in=rank)

    def forward(self, x: Split) -> Split:
        r, c = x.request, x.candidate
        request = r * F.linear(F.linear(r, self.v_r), self.u_r, self.b_r) + r
        code = x.broadcast(F.linear(r, self.v_cr)) + F.linear(c, self.v_cc)  # [C, rank]
        candidate = c * F.linear(code, self.u_c, self.b_c) + c
        return x.replace(request, candidate)
