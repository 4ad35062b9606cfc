"""The supernet of a stack space (``ctr_stack``, ``wukong``, ``dhen``, and ``hstu_seq``
with its history encoder, ``nas/search/supernet/sequence.py``): every member of the space is a
path through one weight-sharing model.

    tokens_0      the ranking model's own input side (``FeatureTokens``) at the widest
                  embedding width; a member of width d reads the first d columns of every
                  table and the first d units of the bottom MLP
    layer{i}      mixer position i: every mixer block with every searched parameter, for
                  every token shape that can reach it (``SharedBlock`` groups); a member
                  whose depth is below it skips it (the skip op is the identity)
    last          the last layer: every block, likewise
    top           per top MLP choice, the first layer as one weight block per (stage, token
                  shape) it may read, then the rest of the MLP; ``top_input: all`` sums the
                  blocks of every stage, ``last`` reads the last stage's only

What shares weights: embedding tables and the bottom MLP across widths (leading columns);
at a position, a block's candidates of one token width and one ``slice_family``, whatever
their ranks, hidden widths, layer counts and input token counts (leading slices: the first
n' tokens of a flattened [n, d] axis are its first n' * d entries); the top's block for a
stage, between ``last`` and ``all`` inputs and across token counts. What is separate: other
token widths (a flattened axis of width d does not slice into one of width d': each width
that reaches a position has its own consumers there, which is how the supernet adapts
between candidates that change the token shape), other block families, and each top MLP
choice.

A path is an ``ArchSpec`` of the space: ``forward(spec, *inputs)`` runs exactly the blocks
the stand-alone ``RankingModel`` of that spec runs, on the shared slices, and
``extract(spec)`` returns that model with the slices copied in. ``expected_cost(probs)`` is
the cost of a member drawn from independent per-decision probabilities, from the blocks'
analytic GEMMs and a cost function (FLOPs by default): differentiable in the probabilities,
and the member's own cost when they are one-hot.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import blocks
from blocks.base import BlockConfig, Gemm, TokenShape
from blocks.glm import Split
from nas.arch.model import (
    FeatureTokens,
    RankingModel,
    apply_layer,
    head_logits,
    is_token_part,
    model_configs,
)
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.data.schema import Schema
from nas.search.supernet.sequence import SharedEncoder
from nas.search.supernet.shared import SharedBlock
from search_spaces.base import SearchSpace
from search_spaces.ctr_stack import StackPlan
from search_spaces.decisions import label

CostFn = Callable[[list[Gemm]], float]  # the cost of a part's GEMMs, per example


def flops_cost(gemms: list[Gemm]) -> float:
    """FLOPs (2 per multiply-add): the default cost."""
    return float(sum(g.flops for g in gemms))


@dataclass(frozen=True)
class Embedded:
    """A batch's input side, computed once for every member: tokens_0 at the widest width
    (without a history token) and the raw history, for a searched encoder to read."""

    tokens: Split
    history: torch.Tensor | None


@dataclass(frozen=True)
class Candidate:
    """One block config a position may hold at one input shape."""

    config: BlockConfig
    out: TokenShape
    choice: tuple[tuple[str, int], ...]  # (decision, choice index) that select it
    cost: float


@dataclass(frozen=True)
class _Selection:
    """A position's candidates at one input shape, for all of them at once: each one's
    probability is the product of its choices' entries in the flat probabilities
    (``StackSupernet._flat``), gathered by ``choices`` ([C, L], padded with the index of a
    constant 1); ``outputs`` ([S, C]) sums their mass per output shape ``shapes[s]``.
    Python-level products cost a few tensor ops per candidate, and most candidates of a
    ``mixed_choices`` step weigh zero."""

    choices: torch.Tensor
    cost: torch.Tensor  # [C]
    outputs: torch.Tensor
    shapes: tuple[tuple[int, int], ...]


def _shape(shape: TokenShape) -> tuple[int, int]:
    return shape.num_tokens, shape.dim


class _Mixture:
    """Tensors of one token shape summed with weights; ``done`` gives, per shape, (total
    weight, weighted mean). Weights that are exactly zero add nothing, so a one-hot
    distribution runs exactly one path."""

    def __init__(self):
        self.parts: dict[tuple[int, int], tuple] = {}

    def add(self, shape: tuple[int, int], weight, x: torch.Tensor) -> None:
        if _zero(weight):
            return
        total, acc = self.parts.get(shape, (0.0, 0.0))
        self.parts[shape] = (total + weight, acc + weight * x)

    def done(self) -> dict[tuple[int, int], tuple]:
        return {shape: (total, acc / total) for shape, (total, acc) in self.parts.items()}


def _zero(weight) -> bool:
    return bool(weight == 0)


def _scaled(x: Split, gate: torch.Tensor | None) -> Split:
    if gate is None:
        return x
    return Split(x.request * gate, x.candidate * gate, x.owner, x.memory)


def _shape_of(stage: Split) -> tuple[int, int]:
    return stage.request.shape[1] + stage.candidate.shape[1], stage.candidate.shape[2]


class StackSupernet(nn.Module):
    def __init__(self, space: SearchSpace, schema: Schema, cost: CostFn = flops_cost):
        super().__init__()
        plan: StackPlan = space.supernet_plan()
        self.space, self.plan, self.schema = space, plan, schema
        self.decisions = {d.name: d for d in space.decisions}
        self.widest = max(plan.embedding_dims)
        self.num_tokens, self.num_request = schema.num_tokens, schema.num_request_tokens
        self.encoder = None  # the searched history encoder (hstu_seq)
        if plan.sequence is not None:
            self.encoder = SharedEncoder(
                plan.sequence, schema, plan.embedding_dims, self.decisions, cost
            )
            self.num_tokens, self.num_request = self.num_tokens + 1, self.num_request + 1

        base = ArchSpec(embedding_dim=self.widest, interaction=(), top_mlp=())
        configs = model_configs(base, schema)
        self.tokens = FeatureTokens(
            {k: v for k, v in configs.items() if is_token_part(k)}, base, schema
        )
        self.token_cost = {
            d: cost([g for k, c in self._token_configs(d).items() for g in c.gemms(1)])
            for d in plan.embedding_dims
        }

        # Candidates position by position, from the token shapes that can reach each.
        starts = {(self.num_tokens, d) for d in plan.embedding_dims}
        self.table: dict[str, dict[tuple[int, int], list[Candidate]]] = {}
        self.outputs: dict[str, set[tuple[int, int]]] = {"tokens": starts}
        reaching = set(starts)
        for position in plan.mixer_positions:
            self.table[position] = self._candidates(position, plan.mixers, reaching, cost)
            self.outputs[position] = {
                _shape(c.out) for cands in self.table[position].values() for c in cands
            }
            reaching |= self.outputs[position]  # or skipped: the identity
        self.table["last"] = self._candidates("last", plan.lasts, reaching, cost)
        self.outputs["last"] = {_shape(c.out) for cs in self.table["last"].values() for c in cs}
        # Where each decision's probabilities start in ``_flat``'s vector, and where its 1 is.
        self._offsets, self._ones = {}, 0
        for name, d in self.decisions.items():
            self._offsets[name], self._ones = self._ones, self._ones + len(d.choices)
        self._selections: dict[tuple, _Selection] = {}  # (device, position, shape): built on use

        groups: dict[tuple, list[BlockConfig]] = defaultdict(list)
        for position, by_shape in self.table.items():
            for shape, cands in by_shape.items():
                for c in cands:
                    # One group per width: token counts share by leading slices (the first
                    # n' tokens of a flattened [n, d] axis are its first n' * d entries).
                    key = (position, shape[1], type(c.config).__name__, c.config.slice_family())
                    if c.config not in groups[key]:
                        groups[key].append(c.config)
        self.layers = nn.ModuleDict()
        self._group: dict[tuple[str, BlockConfig], str] = {}
        for n, (key, members) in enumerate(sorted(groups.items(), key=lambda kv: repr(kv[0]))):
            name = f"g{n}"
            self.layers[name] = SharedBlock(members)
            for config in members:
                self._group[(key[0], config)] = name

        self.top = SharedTop(plan.top_mlps, self.outputs, cost, schema.heads)

    # --- candidates -------------------------------------------------------------------------

    @property
    def reads_history(self) -> bool:
        """Whether its members read the history input (a searched encoder, hstu_seq)."""
        return self.encoder is not None

    def _token_configs(self, dim: int) -> dict[str, BlockConfig]:
        spec = ArchSpec(embedding_dim=dim, interaction=(), top_mlp=())
        return {k: v for k, v in model_configs(spec, self.schema).items() if is_token_part(k)}

    def _candidates(
        self, position: str, pool: tuple[str, ...], shapes: set, cost: CostFn
    ) -> dict[tuple[int, int], list[Candidate]]:
        block_decision = self.decisions[f"{position}.block"]
        table = {}
        for shape in sorted(shapes):
            found = []
            for block in pool:
                searched = self.plan.block_params.get(block, {})
                names = list(searched)
                for combo in itertools.product(*(searched[n] for n in names)):
                    params = {
                        n: list(v) if isinstance(v, tuple) else v
                        for n, v in zip(names, combo, strict=True)
                    }
                    try:
                        config = blocks.get_block(block).config(
                            params, num_tokens=shape[0], dim=shape[1]
                        )
                    except ConfigError as err:
                        raise ConfigError(
                            "space.options",
                            f"the supernet needs every candidate to build at every token "
                            f"shape that can reach it; {block} {params} does not take "
                            f"{shape[0]} tokens of width {shape[1]} at {position}: {err}",
                        ) from None
                    choice = ((block_decision.name, block_decision.index(block)),) + tuple(
                        (
                            f"{position}.{block}.{n}",
                            self.decisions[f"{position}.{block}.{n}"].index(v),
                        )
                        for n, v in zip(names, combo, strict=True)
                    )
                    found.append(
                        Candidate(config, config.out_shape(), choice, cost(config.gemms(1)))
                    )
            table[shape] = found
        return table

    # --- one path ---------------------------------------------------------------------------

    def layer_configs(self, spec: ArchSpec) -> list[BlockConfig]:
        return spec.layer_configs(self.num_tokens, self.num_request)

    def position_of(self, index: int, depth: int) -> str:
        return "last" if index == depth - 1 else self.plan.mixer_positions[index]

    def embed(self, *inputs: torch.Tensor) -> Embedded:
        """A batch's input side at the widest width (the inputs of ``RankingModel.forward``);
        every member reads its leading columns, so many members share one embedding pass."""
        request, candidates = self.tokens.split_inputs(*inputs)
        return Embedded(self.tokens(request, candidates, None), request.history)

    def tokens_of(self, spec: ArchSpec, embedded: Embedded) -> Split:
        """tokens_0 of member ``spec``: its width of the embeddings, and its history token."""
        d = spec.embedding_dim
        x = Split(embedded.tokens.request[..., :d], embedded.tokens.candidate[..., :d])
        if self.encoder is None:
            return x
        token, memory = self.encoder.encode(spec.sequence, d, embedded.history)
        return Split(torch.cat([x.request, token], dim=1), x.candidate, None, memory)

    def stages(
        self, spec: ArchSpec, embedded: Embedded, gates: Mapping[str, torch.Tensor] | None = None
    ) -> list[Split]:
        """tokens_0 and every layer's output of member ``spec``, on the shared weights.
        ``gates`` (optional) scales the output of ``tokens`` and of each position (value 1 in
        the forward pass: straight-through gradients to architecture parameters)."""
        gates = gates or {}
        x = _scaled(self.tokens_of(spec, embedded), gates.get("tokens"))
        stages = [x]
        configs = self.layer_configs(spec)
        for i, config in enumerate(configs):
            position = self.position_of(i, len(configs))
            group = self.layers[self._group[(position, config)]]
            x = apply_layer(lambda t, g=group, c=config: g(c, t), x)
            x = _scaled(x, gates.get(position))
            stages.append(x)
        return stages

    def forward(
        self, spec: ArchSpec, *inputs: torch.Tensor, gates: Mapping[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Logits [B] (or [B, K] for K labels) of member ``spec`` (the inputs of
        ``RankingModel.forward``)."""
        return self.logits(spec, self.embed(*inputs), gates)

    def logits(
        self, spec: ArchSpec, embedded: Embedded, gates: Mapping[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Logits [B] of member ``spec`` from ``embed``'s output."""
        stages = self.stages(spec, embedded, gates)
        slots = self.slots(spec)
        fed = range(len(stages)) if spec.top_input == "all" else [len(stages) - 1]
        parts = [(slots[j], _shape_of(stages[j]), stages[j].merged().flatten(1)) for j in fed]
        logit = head_logits(self.top(spec.top_mlp, parts), self.schema.heads)
        gate = (gates or {}).get("logit")
        return logit if gate is None else logit * gate

    def slots(self, spec: ArchSpec) -> list[str]:
        """The top's name for each stage of ``spec``: tokens, layer{i}, last."""
        depth = len(spec.interaction)
        return ["tokens"] + [self.position_of(i, depth) for i in range(depth)]

    # --- a member as a stand-alone model ----------------------------------------------------

    def extract(self, spec: ArchSpec) -> RankingModel:
        """The stand-alone model of member ``spec`` with the supernet's weights copied in."""
        self.space.encode(spec)  # a member of the space, or a ConfigError naming why not
        model = RankingModel(spec, self.schema)
        state = {}
        ours = dict(self.tokens.named_parameters())
        for name, value in model.tokens.named_parameters():
            if not name.startswith("history."):
                state[f"tokens.{name}"] = ours[name][tuple(slice(0, n) for n in value.shape)]
        if self.encoder is not None:
            for name, value in self.encoder.extract(spec.sequence, spec.embedding_dim).items():
                state[f"tokens.history.{name}"] = value
        configs = self.layer_configs(spec)
        for i, config in enumerate(configs):
            group = self.layers[self._group[(self.position_of(i, len(configs)), config)]]
            for name, value in group.extract(config).items():
                state[f"interaction.{i}.{name}"] = value
        stages = [TokenShape(self.num_tokens, spec.embedding_dim)] + [
            c.out_shape() for c in configs
        ]
        slots = self.slots(spec)
        fed = range(len(stages)) if spec.top_input == "all" else [len(stages) - 1]
        for name, value in self.top.extract(
            spec.top_mlp, [(slots[j], _shape(stages[j])) for j in fed]
        ).items():
            state[f"top.{name}"] = value
        model.load_state_dict({k: v.detach().clone() for k, v in state.items()}, strict=True)
        return model

    # --- distributions over members ---------------------------------------------------------

    def expected_cost(self, probs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The cost of a member drawn with ``probs[decision]`` (probabilities over its choices,
        independent across decisions). Exact for any cost that adds up over the model's parts
        (FLOPs; a latency that sums per-GEMM latencies), except the top's first layer, which
        is costed as one GEMM per stage it reads (exact for FLOPs)."""
        p, flat = probs, self._flat(probs)
        dims = self.decisions["embedding_dim"]
        start = {
            (self.num_tokens, d): p["embedding_dim"][dims.index(d)]
            for d in self.plan.embedding_dims
        }
        total = 0.0
        for d in self.plan.embedding_dims:
            encoder = 0.0 if self.encoder is None else self.encoder.expected_cost(p, d)
            total = total + start[(self.num_tokens, d)] * (self.token_cost[d] + encoder)
        depths = self.decisions["depth"].choices
        reach = [
            sum(p["depth"][k] for k, v in enumerate(depths) if v >= i + 2)
            for i in range(len(self.plan.mixer_positions))
        ]
        after = [start]  # output distribution after i active mixers
        for i, position in enumerate(self.plan.mixer_positions):
            out, cost = self._through(position, after[-1], flat)
            total = total + reach[i] * cost
            after.append(out)
        last_in: dict = defaultdict(float)
        for k, depth in enumerate(depths):
            for shape, q in after[depth - 1].items():
                last_in[shape] = last_in[shape] + p["depth"][k] * q
        last_out, cost = self._through("last", last_in, flat)
        total = total + cost
        # The top: the last stage always, the others with top_input "all".
        inputs = self.decisions["top_input"]
        p_all = p["top_input"][inputs.index("all")] if "all" in inputs.choices else 0.0
        tops = self.decisions["top_mlp"]
        for t, widths in enumerate(tops.choices):
            part = self.top.tail_cost[label(widths)]
            part = part + sum(
                q * self.top.first_cost(widths, "last", s) for s, q in last_out.items()
            )
            every = sum(q * self.top.first_cost(widths, "tokens", s) for s, q in start.items())
            for i, position in enumerate(self.plan.mixer_positions):
                every = every + reach[i] * sum(
                    q * self.top.first_cost(widths, position, s) for s, q in after[i + 1].items()
                )
            total = total + p["top_mlp"][t] * (part + p_all * every)
        return total

    def _through(self, position: str, incoming: Mapping, flat: torch.Tensor):
        """(output shape distribution, expected cost) of ``position`` given its input's."""
        out: dict = defaultdict(float)
        cost = 0.0
        for shape, q in incoming.items():
            found = self._selected(position, shape, flat.device)
            if found is None:
                continue
            w = q * flat[found.choices].prod(1)
            cost = cost + (w * found.cost).sum()
            mass = found.outputs @ w
            for j, out_shape in enumerate(found.shapes):
                out[out_shape] = out[out_shape] + mass[j]
        return dict(out), cost

    def _selected(self, position: str, shape, device: torch.device) -> _Selection | None:
        """``position``'s candidates at ``shape`` as index tensors on ``device`` (built once),
        or None when none takes that shape."""
        key = (str(device), position, shape)
        if key not in self._selections:
            cands = self.table[position].get(shape)
            if not cands:
                return None
            width = max(len(c.choice) for c in cands)
            choices = [
                [self._offsets[name] + index for name, index in c.choice]
                + [self._ones] * (width - len(c.choice))
                for c in cands
            ]
            shapes = tuple(sorted({_shape(c.out) for c in cands}))
            outputs = torch.zeros(len(shapes), len(cands), device=device)
            for i, c in enumerate(cands):
                outputs[shapes.index(_shape(c.out)), i] = 1.0
            self._selections[key] = _Selection(
                torch.tensor(choices, device=device),
                torch.tensor([c.cost for c in cands], dtype=torch.float32, device=device),
                outputs,
                shapes,
            )
        return self._selections[key]

    def _flat(self, p: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Every decision's probabilities end to end (in ``self.decisions``' order), then a
        constant 1 (what a candidate's padded choices multiply by)."""
        parts = [p[name] for name in self.decisions]
        return torch.cat([*parts, parts[0].new_ones(1)])

    def relaxed(self, probs: Mapping[str, torch.Tensor], embedded: Embedded) -> torch.Tensor:
        """Logits [B] of the softmax relaxation: every candidate's output weighted by its
        probability (DARTS, FBNet). Candidates that change the token shape cannot be summed,
        so the relaxation keeps, per position, one mixed tensor per token shape with that
        shape's probability (exact over shapes, mean-field within one); the last layer reads
        the mixture over depths, the top the expected first-layer input of each stage. When
        ``probs`` are one-hot this is ``logits(member)`` exactly. It evaluates every
        candidate at every shape with mass: ``relaxed_evaluations(mass)`` per step."""
        p, flat = probs, self._flat(probs)
        tokens = embedded.tokens
        dims = self.decisions["embedding_dim"]
        start = _Mixture()
        for d in self.plan.embedding_dims:
            weight = p["embedding_dim"][dims.index(d)]
            if _zero(weight):
                continue
            request, candidate = tokens.request[..., :d], tokens.candidate[..., :d]
            if self.encoder is not None:
                token = self.encoder.mixed(p, d, embedded.history)
                request = torch.cat([request, token], dim=1)
            start.add((self.num_tokens, d), weight, torch.cat([request, candidate], dim=1))
        reach = self._reach(p)
        after = [start.done()]
        for position in self.plan.mixer_positions:
            after.append(self._mix(position, after[-1], flat))
        last_in = _Mixture()
        for k, depth in enumerate(self.decisions["depth"].choices):
            for shape, (weight, x) in after[depth - 1].items():
                last_in.add(shape, p["depth"][k] * weight, x)
        last_out = self._mix("last", last_in.done(), flat)
        inputs = self.decisions["top_input"]
        p_all = p["top_input"][inputs.index("all")] if "all" in inputs.choices else None
        logit = 0.0
        for t, widths in enumerate(self.decisions["top_mlp"].choices):
            if _zero(p["top_mlp"][t]):
                continue
            hidden = self.top.bias[_key(label(widths))] + self.top.mixed(widths, "last", last_out)
            if p_all is not None and not _zero(p_all):
                every = self.top.mixed(widths, "tokens", after[0])
                for i, position in enumerate(self.plan.mixer_positions):
                    if not _zero(reach[i]):
                        every = every + reach[i] * self.top.mixed(widths, position, after[i + 1])
                hidden = hidden + p_all * every
            logit = logit + p["top_mlp"][t] * self.top.tails[_key(label(widths))](hidden)
        return head_logits(logit, self.schema.heads)

    def relaxed_evaluations(self, mass: Mapping[str, Sequence[bool]] | None = None) -> int:
        """Candidate evaluations one relaxed forward (``relaxed``) makes when ``mass`` names
        the choices of each decision that have mass (default: every choice): each position's
        candidates with mass, at each token shape that reaches it with mass; and the history
        encoder's (counted with every choice)."""

        def has(name: str, index: int) -> bool:
            return mass is None or bool(mass[name][index])

        count = 0 if self.encoder is None else self.encoder.evaluations()

        def through(position: str, incoming: set) -> set:
            nonlocal count
            out = set()
            for shape in incoming:
                for c in self.table[position].get(shape, ()):
                    if all(has(name, index) for name, index in c.choice):
                        count += 1
                        out.add(_shape(c.out))
            return out

        dims = self.decisions["embedding_dim"]
        starts = [d for d in self.plan.embedding_dims if has(dims.name, dims.index(d))]
        after = [{(self.num_tokens, d) for d in starts}]
        for position in self.plan.mixer_positions:
            after.append(through(position, after[-1]))
        last_in: set = set()
        for k, depth in enumerate(self.decisions["depth"].choices):
            if has("depth", k):
                last_in |= after[depth - 1]
        through("last", last_in)
        return count

    def _reach(self, p: Mapping[str, torch.Tensor]) -> list:
        """P(depth reaches mixer position i), for each i."""
        depths = self.decisions["depth"].choices
        return [
            sum(p["depth"][k] for k, v in enumerate(depths) if v >= i + 2)
            for i in range(len(self.plan.mixer_positions))
        ]

    def _mix(self, position: str, incoming: Mapping, flat: torch.Tensor) -> dict:
        out = _Mixture()
        for shape, (weight, x) in incoming.items():
            found = self._selected(position, shape, flat.device)
            if found is None:
                continue
            w = weight * flat[found.choices].prod(1)
            alive = (w != 0).tolist()  # one read of the weights, not one per candidate
            for i, c in enumerate(self.table[position][shape]):
                if alive[i]:
                    group = self.layers[self._group[(position, c.config)]]
                    out.add(_shape(c.out), w[i], group(c.config, x))
        return out.done()

    def one_hot(self, spec: ArchSpec) -> dict[str, torch.Tensor]:
        """Probabilities that put all their mass on member ``spec`` (inactive decisions:
        on their first choice, which no path reads)."""
        values = self.space.encode(spec)
        out = {}
        for name, d in self.decisions.items():
            index = d.index(values[name]) if name in values else 0
            out[name] = F.one_hot(torch.tensor(index), len(d.choices)).float()
        return out


class SharedTop(nn.Module):
    """The top MLP of every member: per top MLP choice, its first layer as one weight block
    per (stage slot, token width), read by leading columns for fewer tokens, one bias, and
    the rest of the MLP shared by all members.

    A member's first layer is its blocks side by side, in the order of the stages it reads,
    which is the column order ``RankingModel`` feeds its top (request part first: only
    tokens_0 has one in a stack space)."""

    def __init__(
        self, top_mlps, slots: Mapping[str, set[tuple[int, int]]], cost: CostFn, heads: int = 1
    ):
        super().__init__()
        self.first = nn.ParameterDict()
        self.bias = nn.ParameterDict()
        self.tails = nn.ModuleDict()
        self.tail_cost: dict[str, float] = {}
        self._first_cost: dict[tuple, float] = {}
        for widths in top_mlps:
            key = _key(label(widths))
            mlp = blocks.build_block(
                blocks.get_block("mlp").config(
                    {"widths": [*widths, heads], "activate_last": False}, num_tokens=1, dim=1
                )
            )
            self.tails[key] = mlp.layers[1:]
            width = mlp.layers[0].out_features
            config = mlp.config
            self.tail_cost[label(widths)] = cost(config.gemms(1)[1:])
            fan_in = max(n * d for shapes in slots.values() for n, d in shapes)
            bound = 1 / math.sqrt(fan_in)
            self.bias[key] = nn.Parameter(torch.empty(width).uniform_(-bound, bound))
            for slot, shapes in sorted(slots.items()):
                for d in sorted({d for _, d in shapes}):  # one block per width: see layers
                    n = max(m for m, e in shapes if e == d)
                    weight = torch.empty(width, n * d)
                    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))  # nn.Linear's own init
                    self.first[_key(label(widths), slot, d)] = nn.Parameter(weight)
                for n, d in shapes:
                    self._first_cost[(label(widths), slot, (n, d))] = cost([Gemm(1, width, n * d)])

    def first_cost(self, widths, slot: str, shape: tuple[int, int]) -> float:
        return self._first_cost[(label(widths), slot, shape)]

    def forward(self, widths, parts: list[tuple[str, tuple[int, int], torch.Tensor]]):
        """Logits [B, heads] from (slot, token shape, flattened stage [B, n*d]) triples."""
        key = label(widths)
        hidden = self.bias[_key(key)]
        for slot, (n, d), x in parts:
            hidden = hidden + F.linear(x, self.first[_key(key, slot, d)][:, : n * d])
        return self.tails[_key(key)](hidden)

    def mixed(self, widths, slot: str, stages: Mapping) -> torch.Tensor:
        """The first layer's expected input term from ``slot``: its stages per token shape
        (total weight, mean tensor), weighted."""
        key = label(widths)
        out = 0.0
        for (n, d), (weight, x) in stages.items():
            out = out + weight * F.linear(x.flatten(1), self.first[_key(key, slot, d)][:, : n * d])
        return out

    def extract(self, widths, fed: list[tuple[str, tuple[int, int]]]) -> dict[str, torch.Tensor]:
        """The state dict of a member's top MLP (``mlp`` block names) reading ``fed``."""
        key = label(widths)
        blocks_ = [self.first[_key(key, slot, d)][:, : n * d] for slot, (n, d) in fed]
        state = {
            "layers.0.weight": torch.cat(blocks_, dim=1),
            "layers.0.bias": self.bias[_key(key)],
        }
        for name, value in self.tails[_key(key)].named_parameters():
            state[f"layers.{name}"] = value  # a sliced Sequential keeps its indices
        return state


def _key(*parts) -> str:
    """A ParameterDict/ModuleDict key (no dots) for a tuple of labels."""
    return "_".join(str(p) for p in parts).replace(".", "p").replace("-", "x")
