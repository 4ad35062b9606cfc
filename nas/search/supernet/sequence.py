"""The history encoder of every member of ``hstu_seq``, as shared weights.

    sequence     the history embedding (item, action) at the widest width, read by leading
                 columns; HSTU layer i of width d, for every searched head layout, one
                 ``SharedBlock`` whose candidates differ in sequence length only (their
                 position bias is indexed by offset, so a shorter encoder reads the first
                 entries); depth k reads layers 0..k-1, so encoders of every depth share
                 their first layers

Separate: each width (a layer's norms and projections are over d), and each head layout
(``HSTUConfig.slice_family``: f1 interleaves U, V, Q and K per head). A member's encoder is
the ranking model's own ``HistoryEncoder`` run on those slices, so it computes exactly what
the extracted model's does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

import blocks
from blocks.base import BlockConfig
from blocks.glm import Memory
from nas.arch.model import HistoryEncoder
from nas.arch.spec import SequenceSpec
from nas.data.schema import Schema
from nas.search.supernet.shared import SharedBlock
from search_spaces.decisions import Decision
from search_spaces.sequence import SequencePlan


@dataclass(frozen=True)
class Encoder:
    """One layer config of an encoder of width d, and the decisions that select it."""

    config: BlockConfig
    choice: tuple[tuple[str, int], ...]  # (decision, index): max_len and the HSTU params
    cost: float


class SharedEncoder(nn.Module):
    def __init__(self, plan: SequencePlan, schema: Schema, dims, decisions, cost):
        super().__init__()
        history = schema.history
        self.plan, self.decisions = plan, decisions
        widest = max(dims)
        self.embedding = blocks.build_block(
            blocks.get_block("embedding").config(
                {"cardinalities": (history.cardinality, history.actions), "dim": widest}
            )
        )
        names = list(plan.hstu_params)
        self.table: dict[int, list[Encoder]] = {}
        groups: dict[tuple, list[BlockConfig]] = {}
        for d in dims:
            self.table[d] = []
            for max_len in plan.max_lens:
                for combo in itertools.product(*(plan.hstu_params[n] for n in names)):
                    params = dict(zip(names, combo, strict=True))
                    config = blocks.get_block("hstu").config(params, num_tokens=max_len, dim=d)
                    choice = (_pick(decisions["sequence.max_len"], max_len),) + tuple(
                        _pick(decisions[f"sequence.{n}"], v) for n, v in params.items()
                    )
                    self.table[d].append(Encoder(config, choice, cost(config.gemms(1))))
                    for layer in range(max(plan.depths)):
                        groups.setdefault((layer, d, config.slice_family()), []).append(config)
        self.layers = nn.ModuleDict()
        self._group: dict[tuple[int, BlockConfig], str] = {}
        for n, (key, members) in enumerate(sorted(groups.items(), key=lambda kv: repr(kv[0]))):
            self.layers[f"g{n}"] = SharedBlock(members)
            for config in members:
                self._group[(key[0], config)] = f"g{n}"

    def encoder(self, sequence: SequenceSpec, dim: int) -> HistoryEncoder:
        """The member's encoder (the ranking model's own module) over the shared slices."""
        layers = [
            _Candidate(self.layers[self._group[(i, config)]], config)
            for i, config in enumerate(sequence.layer_configs(dim))
        ]
        return HistoryEncoder(
            _Narrow(self.embedding, dim), layers, sequence.max_len, sequence.pooling
        )

    def encode(
        self, sequence: SequenceSpec, dim: int, history: torch.Tensor
    ) -> tuple[torch.Tensor, Memory]:
        return self.encoder(sequence, dim)(history)

    def extract(self, sequence: SequenceSpec, dim: int) -> dict[str, torch.Tensor]:
        """The state dict of the member's ``HistoryEncoder``."""
        table = self.embedding.table.weight
        state = {"embedding.table.weight": table[:, :dim]}
        for i, config in enumerate(sequence.layer_configs(dim)):
            group = self.layers[self._group[(i, config)]]
            for name, value in group.extract(config).items():
                state[f"layers.{i}.{name}"] = value
        return state

    # --- distributions over encoders -------------------------------------------------------

    def expected_cost(self, p: Mapping[str, torch.Tensor], dim: int):
        """The encoder's cost for width ``dim`` under per-decision probabilities: every layer
        of an encoder has the same config, so a depth-k encoder costs k of it."""
        depths = self.decisions["sequence.depth"].choices
        mean_depth = sum(p["sequence.depth"][k] * depth for k, depth in enumerate(depths))
        return mean_depth * sum(_weight(p, e.choice) * e.cost for e in self.table[dim])

    def mixed(self, p: Mapping[str, torch.Tensor], dim: int, history: torch.Tensor):
        """The expected history token of width ``dim``: every encoder (length, HSTU params,
        depth, pooling) weighted by its probability. Weights exactly zero run nothing."""
        out = 0.0
        depths = self.decisions["sequence.depth"]
        poolings = self.decisions["sequence.pooling"]
        for e in self.table[dim]:
            base = _weight(p, e.choice)
            for k, depth in enumerate(depths.choices):
                for j, pooling in enumerate(poolings.choices):
                    w = base * p["sequence.depth"][k] * p["sequence.pooling"][j]
                    if bool(w == 0):
                        continue
                    layers = [{"block": "hstu", **_params(e.config, self.plan)}] * depth
                    spec = SequenceSpec.from_dict(
                        {"max_len": e.config.num_tokens, "layers": layers, "pooling": pooling}
                    )
                    out = out + w * self.encode(spec, dim, history)[0]
        return out

    def evaluations(self) -> int:
        """Encoder runs one mixed token makes when every choice has mass."""
        runs = len(self.decisions["sequence.depth"].choices) * len(self.plan.poolings)
        return sum(len(encoders) * runs for encoders in self.table.values())


class _Narrow(nn.Module):
    """A module's output cut to its first ``dim`` columns."""

    def __init__(self, module: nn.Module, dim: int):
        super().__init__()
        self.module, self.dim = module, dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)[..., : self.dim]


class _Candidate(nn.Module):
    """One candidate of a ``SharedBlock``, callable as the block itself."""

    def __init__(self, group: SharedBlock, config: BlockConfig):
        super().__init__()
        self.group, self.config = group, config

    def forward(self, *args, **kwargs) -> torch.Tensor:
        return self.group(self.config, *args, **kwargs)


def _pick(decision: Decision, value) -> tuple[str, int]:
    return decision.name, decision.index(value)


def _weight(p: Mapping[str, torch.Tensor], choice) -> torch.Tensor:
    return math.prod(p[name][index] for name, index in choice)


def _params(config: BlockConfig, plan: SequencePlan) -> dict:
    return {name: getattr(config, name) for name in plan.hstu_params}
