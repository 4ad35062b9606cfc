"""ArchSpec + dataset schema -> a ranking model (``nn.Module`` returning one logit per example,
or one per label: [B, K], for a dataset of K labels).

Every part is a registered block, so the model's analytic cost is the sum of its blocks':

    request_embedding  request-side categorical ids [B, F_r]   -> [B, F_r, D]
    embedding          candidate-side categorical ids [B, F_c] -> [B, F_c, D]
    bag{i}             each multi-hot field [B, L]             -> [B, 1, D]
    bottom (mlp)       dense features [B, 1, Dn]               -> [B, 1, D]  (candidate-side)
    history_embedding  the history's (item, action) ids        -> [B, L, D]  (summed)
    sequence{i}        sequence blocks over the history        -> pooled to [B, 1, D]
    interaction{i}     tokens_0 [B, N_0, D] (request tokens first) -> ... -> tokens_L
    top (mlp)          top input (see ArchSpec)                -> [B, 1, K] -> logits [B] (K=1)
                                                                   or [B, K]

With several labels (``Schema.labels``) the top MLP is the shared trunk up to its last
layer, and its last layer holds one linear head per label: K outputs instead of one.

Two ways to score, one computation (``blocks.glm.Split``):

- ``forward(categorical, multi_hot, dense[, history])``: one row per candidate, each carrying
  its own copy of the request (training, evaluation).
- ``score_requests(request, candidates, owner)``: R requests and C candidates, ``owner[c]``
  naming the request of candidate c. The request side (request embeddings, the history
  encoder, the request part of every leading GLM layer, the request part of the top MLP's
  first layer) runs once per request; the rest once per candidate. Same result.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import blocks
from blocks.base import BlockConfig, TokenShape
from blocks.glm import Memory, Split
from blocks.glm_layers import GLMBlock
from kernels.ikbo import broadcast_linear
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.data.schema import SIDES, Field, Schema

REQUEST_PARTS = ("request_embedding", "history_embedding")  # and sequence{i}: request-only


@dataclass(frozen=True)
class RequestInputs:
    """One row per request."""

    categorical: torch.Tensor  # [R, F_r] int64, the schema's request-side categorical fields
    multi_hot: torch.Tensor  # [R, M_r, L] int64
    history: torch.Tensor | None = None  # [R, L_h, 3] int64 (item, action, age)


@dataclass(frozen=True)
class CandidateInputs:
    """One row per candidate."""

    categorical: torch.Tensor  # [C, F_c] int64, the candidate-side categorical fields
    multi_hot: torch.Tensor  # [C, M_c, L] int64
    dense: torch.Tensor  # [C, Dn] float32


class HistoryEncoder(nn.Module):
    """The history's last ``max_len`` events -> (one pooled token, the encoded sequence)."""

    def __init__(self, embedding: nn.Module, layers: list[nn.Module], max_len: int, pooling: str):
        super().__init__()
        self.embedding = embedding
        self.layers = nn.ModuleList(layers)
        self.max_len, self.pooling = max_len, pooling

    def forward(self, history: torch.Tensor) -> tuple[torch.Tensor, Memory]:
        """history [R, L_h, 3], left-aligned, item 0 = padding."""
        lengths = (history[..., 0] > 0).sum(1)  # [R]
        device = history.device
        k = self.max_len
        if history.shape[1] > k:  # keep each row's last k events, still left-aligned
            start = (lengths - k).clamp(min=0)
            # start + k - 1 <= max(lengths, k) - 1 < history.shape[1]: no index past the end
            index = start.view(-1, 1) + torch.arange(k, device=device)
            history = history.gather(1, index.unsqueeze(-1).expand(-1, -1, 3))
            lengths = lengths.clamp(max=k)
        r, length, _ = history.shape
        ids = history[..., :2].reshape(r * length, 2)  # (item, action) per event
        x = self.embedding(ids).sum(1).view(r, length, -1)  # [R, L, D]
        times = -history[..., 2]  # ages -> increasing timestamps; the request is at 0
        # Each event's output is queried at the next event's time, the last one's at the
        # request's: the time bias then sees how long before the query each event was.
        positions = torch.arange(length, device=device).view(1, -1)
        is_last = positions == (lengths - 1).view(-1, 1)
        queries = times.roll(-1, dims=1) * ~is_last  # the request is at time 0
        for layer in self.layers:
            x = layer(x, lengths, times, query_timestamps=queries)
        valid = (positions < lengths.view(-1, 1)).unsqueeze(-1)
        if self.pooling == "mean":
            pooled = (x * valid).sum(1) / lengths.clamp(min=1).view(-1, 1)
        else:  # the last event's output (zeros for an empty history)
            last = (lengths - 1).clamp(min=0)
            pooled = x[torch.arange(r, device=device), last] * (lengths > 0).view(-1, 1)
        return pooled.unsqueeze(1), Memory(x, lengths)


class FeatureTokens(nn.Module):
    """tokens_0 of a ranking model: every input field as a token of width ``embedding_dim``,
    request-side tokens first (request embeddings, request bags, the history token), then
    the candidate side (embeddings, bags, the dense features through the bottom MLP).

    The parts are the ``configs`` entries named request_embedding, embedding, bag{i},
    bottom, history_embedding and sequence{i} (see ``model_configs``)."""

    def __init__(self, configs: dict[str, BlockConfig], spec: ArchSpec, schema: Schema):
        super().__init__()
        parts = {name: blocks.build_block(cfg) for name, cfg in configs.items()}
        self.dim = spec.embedding_dim
        self.request_embedding = parts.get("request_embedding")
        self.embedding = parts.get("embedding")
        self.bags = nn.ModuleList(parts[f"bag{i}"] for i in range(len(schema.of_kind("multi_hot"))))
        self.bottom = parts.get("bottom")
        self.history = None
        if spec.sequence is not None:
            layers = [parts[f"sequence{i}"] for i in range(len(spec.sequence.layers))]
            self.history = HistoryEncoder(
                parts["history_embedding"], layers, spec.sequence.max_len, spec.sequence.pooling
            )
        # Which input columns are on which side: the per-candidate path splits its inputs.
        self.columns = {
            kind: {side: _where(schema.of_kind(kind), side) for side in SIDES}
            for kind in ("categorical", "multi_hot")
        }

    def split_inputs(self, categorical, multi_hot, dense, history=None):
        """Per-candidate inputs -> (RequestInputs, CandidateInputs), row-aligned."""
        cat, bags = self.columns["categorical"], self.columns["multi_hot"]
        return (
            RequestInputs(categorical[:, cat["request"]], multi_hot[:, bags["request"]], history),
            CandidateInputs(
                categorical[:, cat["candidate"]], multi_hot[:, bags["candidate"]], dense
            ),
        )

    def forward(
        self, request: RequestInputs, candidates: CandidateInputs, owner: torch.Tensor | None
    ) -> Split:
        tokens, memory = self.request_tokens(request)
        return Split(tokens, self.candidate_tokens(candidates), owner, memory)

    def request_tokens(self, request: RequestInputs) -> tuple[torch.Tensor, Memory | None]:
        """The request side's tokens [R, N_r, D] and its encoded history (if it has one)."""
        req = []
        if self.request_embedding is not None:
            req.append(self.request_embedding(request.categorical))
        for j, i in enumerate(self.columns["multi_hot"]["request"]):
            req.append(self.bags[i](request.multi_hot[:, j]))
        memory = None
        if self.history is not None:
            if request.history is None:
                raise ValueError("this model encodes the history: pass the history input")
            token, memory = self.history(request.history)
            req.append(token)
        rows = request.categorical.shape[0]
        none = request.categorical.new_zeros(rows, 0, self.dim, dtype=torch.float32)
        return (torch.cat(req, dim=1) if req else none), memory

    def candidate_tokens(self, candidates: CandidateInputs) -> torch.Tensor:
        """The candidate side's tokens [C, N_c, D]."""
        cand = []
        if self.embedding is not None:
            cand.append(self.embedding(candidates.categorical))
        for j, i in enumerate(self.columns["multi_hot"]["candidate"]):
            cand.append(self.bags[i](candidates.multi_hot[:, j]))
        if self.bottom is not None:
            cand.append(self.bottom(candidates.dense.unsqueeze(1)))
        return torch.cat(cand, dim=1)


TOKEN_PARTS = ("request_embedding", "embedding", "bag", "bottom", "history_embedding", "sequence")


def is_token_part(name: str) -> bool:
    """Whether part ``name`` of ``model_configs`` belongs to ``FeatureTokens``."""
    return name.rstrip("0123456789") in TOKEN_PARTS


class RankingModel(nn.Module):
    def __init__(self, spec: ArchSpec, schema: Schema):
        super().__init__()
        self.spec = spec
        self.configs = model_configs(spec, schema)
        token_configs = {k: v for k, v in self.configs.items() if is_token_part(k)}
        self.tokens = FeatureTokens(token_configs, spec, schema)
        self.top = blocks.build_block(self.configs["top"])
        self.interaction = nn.ModuleList(
            blocks.build_block(self.configs[f"interaction{i}"])
            for i in range(len(spec.interaction))
        )
        self.feed_all = spec.top_input == "all"
        self.top_request_features = top_request_features(self.configs, spec, schema)
        self.heads = schema.heads

    @property
    def history(self) -> HistoryEncoder | None:
        return self.tokens.history

    @property
    def reads_history(self) -> bool:
        """Whether forward reads its history input (else it need not be gathered)."""
        return self.history is not None

    # --- the two entry points -------------------------------------------------------------

    def forward(
        self,
        categorical: torch.Tensor,
        multi_hot: torch.Tensor,
        dense: torch.Tensor,
        history: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One row per candidate (each with its own copy of the request): logits [B], or
        [B, K] for K labels."""
        request, candidates = self.split_inputs(categorical, multi_hot, dense, history)
        return self.score_requests(request, candidates, owner=None)

    def score_requests(
        self, request: RequestInputs, candidates: CandidateInputs, owner: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits [C] (or [C, K]) for C candidates of R requests; ``owner`` [C] gives each
        candidate's request row (None: row-aligned, R == C)."""
        return self._score(self.stages(request, candidates, owner))

    def score_candidates(
        self,
        request_tokens: torch.Tensor,
        memory: Memory | None,
        candidates: CandidateInputs,
        owner: torch.Tensor | None,
    ) -> torch.Tensor:
        """``score_requests`` from the request side's tokens and history (``request_tokens``
        of ``self.tokens``), computed earlier: the candidate half of request-oriented
        serving. The request parts of GLM layers still run once per request, here."""
        x = Split(request_tokens, self.tokens.candidate_tokens(candidates), owner, memory)
        return self._score(self.stages_from(x))

    def _score(self, stages: list[Split]) -> torch.Tensor:
        """Logits [C] (or [C, K]) from tokens_0 and every interaction layer's output."""
        fed = stages if self.feed_all else stages[-1:]
        requests, candidates = [s.request for s in fed], [s.candidate for s in fed]
        if self.training and stages[0].owner is None:
            # Training, row-aligned: one GEMM over both sides' features. Scoring keeps the
            # split, so that the request share is a GEMM of its own (request-oriented serving,
            # the FP8 probe's and the cost model's sites); the sums are the same.
            return head_logits(self.top(_flat_cat(requests + candidates)), self.heads)
        split = Split(_flat_cat(requests), _flat_cat(candidates), stages[0].owner)
        return head_logits(self._top(split), self.heads)

    def stages(
        self, request: RequestInputs, candidates: CandidateInputs, owner: torch.Tensor | None
    ) -> list[Split]:
        """tokens_0 and every interaction layer's output, split by side."""
        return self.stages_from(self.tokens(request, candidates, owner))

    def stages_from(self, x: Split) -> list[Split]:
        """tokens_0 ``x`` and every interaction layer's output."""
        stages = [x]
        for layer in self.interaction:
            x = apply_layer(layer, x)
            stages.append(x)
        return stages

    def split_inputs(self, categorical, multi_hot, dense, history=None):
        """Per-candidate inputs -> (RequestInputs, CandidateInputs), row-aligned."""
        return self.tokens.split_inputs(categorical, multi_hot, dense, history)

    # --- pieces -----------------------------------------------------------------------------

    def _top(self, x: Split) -> torch.Tensor:
        """The top MLP, its first layer split by columns: the request features' share of it
        is computed once per request."""
        layers = self.top.layers
        first: nn.Linear = layers[0]
        f_r = x.request.shape[1]
        request_term = F.linear(x.request, first.weight[:, :f_r]) if f_r else None
        hidden = broadcast_linear(
            x.candidate, first.weight[:, f_r:], first.bias, request_term, x.owner
        )
        return layers[1:](hidden)

    # --- cost --------------------------------------------------------------------------------

    def flops(self) -> int:
        """Analytic FLOPs per example (2 per multiply-add of contractions)."""
        return sum(cfg.flops() for cfg in self.configs.values())

    def flops_by_side(self) -> tuple[int, int]:
        """(request-side, candidate-side) FLOPs per example: request-oriented inference runs
        the first once per request and the second once per candidate."""
        request = candidate = 0
        for name, cfg in self.configs.items():
            whole_request = name in REQUEST_PARTS or name.startswith("sequence")
            for gemm in cfg.gemms(1):
                if whole_request or gemm.request_side:
                    request += gemm.flops
                else:
                    candidate += gemm.flops
        top_share = 2 * self.top.layers[0].out_features * self.top_request_features
        return request + top_share, candidate - top_share

    def flops_per_request(self, num_candidates: int) -> int:
        request, candidate = self.flops_by_side()
        return request + num_candidates * candidate


def head_logits(out: torch.Tensor, heads: int) -> torch.Tensor:
    """A top MLP's output [C, K] -> logits [C] for one label (K = 1), [C, K] for K."""
    return out.view(-1) if heads == 1 else out.view(-1, heads)


def _flat_cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """[B, n_i, d_i] tensors -> [B, sum n_i * d_i], in order; a view, not a copy, when only
    one part has features."""
    flat = [part.flatten(1) for part in parts]
    with_features = [f for f in flat if f.shape[1]] or flat[:1]
    return with_features[0] if len(with_features) == 1 else torch.cat(with_features, dim=1)


def apply_layer(layer: nn.Module, x: Split) -> Split:
    """One interaction layer on tokens split by side (``layer`` may be any callable module
    that maps ``[B, N, D]`` tokens, such as a supernet's shared candidate)."""
    if isinstance(layer, GLMBlock):
        return layer.forward_split(x)
    # Every output of a layer without GLM is candidate-side.
    merged = layer(x.merged())
    none = merged.new_zeros(x.request.shape[0], 0, merged.shape[2])
    return Split(none, merged, x.owner, x.memory)


def _where(fields: tuple[Field, ...], side: str) -> list[int]:
    return [i for i, f in enumerate(fields) if f.side == side]


def model_configs(spec: ArchSpec, schema: Schema) -> dict[str, BlockConfig]:
    """The config of every block in the model, in order; checks every shape.

    Part names: request_embedding, embedding, bag{i}, bottom (dense data only),
    history_embedding and sequence{i} (with a sequence section), interaction{i}, top.
    """
    d = spec.embedding_dim
    if not schema.of_kind("categorical"):
        raise ConfigError(
            "dataset",
            "the schema has no categorical fields to embed; every model needs at least one "
            "(an id such as the user or the item: type categorical)",
        )
    configs: dict[str, BlockConfig] = {}
    for name, side in (("request_embedding", "request"), ("embedding", "candidate")):
        fields = schema.of_kind("categorical", side)
        if fields:
            configs[name] = blocks.get_block("embedding").config(
                {"cardinalities": tuple(f.cardinality for f in fields), "dim": d}
            )
    for i, field in enumerate(schema.of_kind("multi_hot")):
        configs[f"bag{i}"] = blocks.get_block("embedding_bag").config(
            {"cardinality": field.cardinality, "max_len": field.max_len, "dim": d}
        )
    num_dense = len(schema.of_kind("dense"))
    if num_dense:
        configs["bottom"] = blocks.get_block("mlp").config(
            {"widths": (*spec.bottom_mlp, d)}, num_tokens=1, dim=num_dense
        )
    tokens, request_tokens = schema.num_tokens, schema.num_request_tokens
    if spec.sequence is not None:
        configs.update(_history_configs(spec, schema))
        tokens, request_tokens = tokens + 1, request_tokens + 1
    stages = [TokenShape(tokens, d, request_tokens)]
    for i, cfg in enumerate(spec.layer_configs(tokens, request_tokens)):
        configs[f"interaction{i}"] = cfg
        stages.append(cfg.out_shape())
    fed = stages if spec.top_input == "all" else stages[-1:]
    configs["top"] = blocks.get_block("mlp").config(
        {"widths": (*spec.top_mlp, schema.heads), "activate_last": False},
        num_tokens=1,
        dim=sum(s.numel for s in fed),
    )
    return configs


def _history_configs(spec: ArchSpec, schema: Schema) -> dict[str, BlockConfig]:
    history = schema.history
    sequence = spec.sequence
    if history is None:
        raise ConfigError(
            "sequence", "the dataset has no history (no sequence field); drop the section"
        )
    if sequence.max_len > history.max_len:
        raise ConfigError(
            "sequence.max_len",
            f"must be at most {history.max_len}, the events the dataset keeps; "
            f"got {sequence.max_len}",
        )
    configs: dict[str, BlockConfig] = {
        "history_embedding": blocks.get_block("embedding").config(
            {"cardinalities": (history.cardinality, history.actions), "dim": spec.embedding_dim}
        )
    }
    for i, cfg in enumerate(sequence.layer_configs(spec.embedding_dim)):
        configs[f"sequence{i}"] = cfg
    return configs


def top_request_features(configs: dict[str, BlockConfig], spec: ArchSpec, schema: Schema) -> int:
    """How many of the top MLP's input features are request-side."""
    d = spec.embedding_dim
    first = schema.num_request_tokens + (1 if spec.sequence is not None else 0)
    shapes = [TokenShape(0, d, first)] + [
        cfg.out_shape() for name, cfg in configs.items() if name.startswith("interaction")
    ]
    fed = shapes if spec.top_input == "all" else shapes[-1:]
    return sum(s.num_request * s.dim for s in fed)


def build_model(spec: ArchSpec, schema: Schema) -> RankingModel:
    return RankingModel(spec, schema)


TRAINING_BYTES_PER_PARAM = 16  # fp32 weight, gradient and Adam's two moments


def training_bytes(spec: ArchSpec, schema: Schema) -> int:
    """What training ``spec`` holds in memory for its parameters, counted before anything is
    allocated: the model is built on PyTorch's meta device (shapes only, no storage)."""
    with torch.device("meta"):
        model = build_model(spec, schema)
    return TRAINING_BYTES_PER_PARAM * sum(p.numel() for p in model.parameters())
