"""``ctr_stack``: a stack of interaction layers over the feature tokens, then a top MLP.

    spec = embedding_dim, interaction = [mixer, ..., mixer, last], top_mlp, top_input

A *mixer* is a block that leaves at least two tokens (DCNv2, self-attention, Wukong, DHEN),
so any block can follow it; the *last* layer may also be a block that reduces the tokens to
one (MLP, dot, FM). That grammar makes every member buildable: no dot product over a single
token. Which blocks mix and which reduce is read from the blocks themselves (their output
shape), not listed here.

The ``wukong`` and ``dhen`` spaces are this space with other defaults: a stack of Wukong
(or DHEN) layers with their own parameter choices, then the top MLP.

Each block's parameters are drawn from ``block_params`` (lists of choices per parameter);
parameters not listed keep the block's defaults. The decisions: ``depth``, the layer gene of
each mixer position (``layer0.block``, ``layer0.dcnv2.rank``, ...) and of the last layer
(``last.*``), ``embedding_dim``, ``top_mlp``, ``top_input``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, PositiveInt, field_validator, model_validator

import blocks
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from search_spaces import layer_gene
from search_spaces.base import SearchSpace, SpaceInputs, SpaceOptions
from search_spaces.decisions import Decision, Values
from search_spaces.registry import register_space


class CtrStackOptions(SpaceOptions):
    embedding_dims: list[PositiveInt] = Field(default=[8, 16, 32], min_length=1)
    max_depth: int = Field(default=3, ge=1, le=8)
    blocks: list[str] = Field(default=["mlp", "dot", "fm", "dcnv2", "self_attention"], min_length=1)
    block_params: dict[str, dict[str, list[Any]]] = {
        "mlp": {"widths": [[64], [128], [256, 128]]},
        "dcnv2": {"num_layers": [1, 2, 3], "rank": [16, 32, 64]},
        "self_attention": {"num_heads": [1, 2], "head_dim": [8, 16]},
    }
    top_mlps: list[list[int]] = Field(default=[[], [128], [256, 128], [512, 256]], min_length=1)
    top_inputs: list[str] = Field(default=["last", "all"], min_length=1)

    @field_validator("blocks")
    @classmethod
    def _registered(cls, names: list[str]) -> list[str]:
        known = blocks.list_blocks(kind="interaction")
        for name in names:
            if name not in known:
                raise ValueError(f"{name!r} is not an interaction block; valid: {', '.join(known)}")
            if blocks.get_block(name).config_cls.context_fields != ("num_tokens", "dim"):
                raise ValueError(
                    f"{name!r} keeps request and candidate sides apart (GLM, DCA); "
                    "search it with the rocs space"
                )
        return names

    @field_validator("top_inputs")
    @classmethod
    def _top_inputs(cls, values: list[str]) -> list[str]:
        if not set(values) <= {"last", "all"}:
            raise ValueError(f"must be values from 'last', 'all'; got {values}")
        return values

    @field_validator("top_mlps")
    @classmethod
    def _widths(cls, choices: list[list[int]]) -> list[list[int]]:
        if any(w < 1 for widths in choices for w in widths):
            raise ValueError(f"widths must be positive integers, got {choices}")
        return choices

    @model_validator(mode="after")
    def _block_params(self) -> CtrStackOptions:
        for block, params in self.block_params.items():
            entry = blocks.get_block(block, kind="interaction")
            for param in params:
                if param not in entry.config_cls.param_names():
                    valid = ", ".join(entry.config_cls.param_names())
                    raise ValueError(
                        f"block_params.{block}.{param}: {block} has no parameter {param!r}; "
                        f"valid: {valid}"
                    )
        for i, dim in enumerate(self.embedding_dims):
            for block in self.blocks:
                try:
                    _block_kinds(block, self.block_params.get(block, {}), dim)
                except ConfigError as err:
                    raise ValueError(
                        f"block {block!r} cannot take embedding_dims[{i}] = {dim}: {err}"
                    ) from None
        return self


def _block_kinds(block: str, params: dict[str, list[Any]], dim: int) -> bool:
    """Whether ``block`` leaves at least two tokens (a mixer), for every choice."""
    entry = blocks.get_block(block, kind="interaction")
    keeps = set()
    for name, choices in params.items() or [(None, [None])]:
        for choice in choices:
            chosen = {name: choice} if name else {}
            config = entry.config(chosen, num_tokens=4, dim=dim)
            keeps.add(config.out_shape().num_tokens >= 2)
    return keeps == {True}


def _check_tokens(options: CtrStackOptions, tokens: int) -> None:
    """The grammar holds where the data gives at least two feature tokens (a mixer keeps at
    least two); on one (a dataset of one field), a block that needs two (dot, FM) is refused
    before a search starts, not found in the middle of it."""
    if tokens >= 2:
        return
    needs = []
    for block in options.blocks:
        entry = blocks.get_block(block, kind="interaction")
        params = options.block_params.get(block, {})
        try:
            for dim in options.embedding_dims:
                for name, choices in params.items() or [(None, [None])]:
                    for choice in choices:
                        entry.config({name: choice} if name else {}, num_tokens=tokens, dim=dim)
        except ConfigError:
            needs.append(block)
    if needs:
        takes = [b for b in options.blocks if b not in needs]
        fix = f"give blocks: [{', '.join(takes)}]" if takes else "give blocks such as mlp, dcnv2"
        raise ConfigError(
            "space.options.blocks",
            f"the dataset gives {tokens} feature token (one field), and {', '.join(needs)} "
            f"need{'s' * (len(needs) == 1)} at least 2 (with some of their block_params); "
            f"{fix}, or declare more features",
        )


@dataclass(frozen=True)
class StackPlan:
    """A stack space as a weight-sharing supernet, as data (``nas.search.supernet.StackSupernet``
    builds the module): the widths tokens_0 may have, the mixer positions (decision
    prefixes, in stack order, each skipped when the depth is below it), the blocks each kind
    of position may hold with their searched parameters, and the top MLP's choices."""

    embedding_dims: tuple[int, ...]
    mixer_positions: tuple[str, ...]
    mixers: tuple[str, ...]
    lasts: tuple[str, ...]
    block_params: dict[str, dict[str, tuple[Any, ...]]]
    top_mlps: tuple[tuple[int, ...], ...]
    top_inputs: tuple[str, ...]
    sequence: Any = None  # search_spaces.sequence.SequencePlan: a searched history encoder


@register_space
class CtrStack(SearchSpace):
    name = "ctr_stack"
    Options = CtrStackOptions

    def __init__(self, options: CtrStackOptions, inputs: SpaceInputs):
        _check_tokens(options, inputs.num_tokens)
        super().__init__(options, inputs)
        dim = options.embedding_dims[0]
        self.mixers = [
            b for b in options.blocks if _block_kinds(b, options.block_params.get(b, {}), dim)
        ]
        self.lasts = list(options.blocks)

    @property
    def max_mixers(self) -> int:
        """Mixer positions before the last layer (none when no block keeps 2+ tokens)."""
        return self.options.max_depth - 1 if self.mixers else 0

    def declare(self) -> list[Decision]:
        """depth; each mixer position's layer gene (active below the depth); the last layer's;
        the embedding width, the top MLP and its input. This order is the order ``sample``
        draws in, the same as before spaces were declared, so seeds give the same members."""
        o = self.options
        out = [Decision("depth", tuple(range(1, self.max_mixers + 2)))]
        for i in range(self.max_mixers):
            deep_enough = (("depth", tuple(range(i + 2, self.max_mixers + 2))),)
            out += layer_gene.decisions(f"layer{i}", self.mixers, o.block_params, deep_enough)
        out += layer_gene.decisions("last", self.lasts, o.block_params)
        out.append(Decision("embedding_dim", tuple(o.embedding_dims)))
        out.append(Decision("top_mlp", tuple(o.top_mlps)))
        out.append(Decision("top_input", tuple(o.top_inputs)))
        return out

    def supernet_plan(self) -> StackPlan:
        o = self.options
        return StackPlan(
            embedding_dims=tuple(o.embedding_dims),
            mixer_positions=tuple(f"layer{i}" for i in range(self.max_mixers)),
            mixers=tuple(self.mixers),
            lasts=tuple(self.lasts),
            block_params={
                b: {k: tuple(v) for k, v in p.items()} for b, p in o.block_params.items()
            },
            top_mlps=tuple(tuple(t) for t in o.top_mlps),
            top_inputs=tuple(o.top_inputs),
        )

    def build(self, values: Values) -> ArchSpec:
        return self.inputs.check(ArchSpec.from_dict(self.spec_data(values)))  # a bug if not

    def spec_data(self, values: Values) -> dict:
        params = self.options.block_params
        layers = [layer_gene.layer(values, f"layer{i}", params) for i in range(values["depth"] - 1)]
        layers.append(layer_gene.layer(values, "last", params))
        return {
            "embedding_dim": values["embedding_dim"],
            "interaction": layers,
            "top_mlp": list(values["top_mlp"]),
            "top_input": values["top_input"],
        }

    def values_of(self, spec: ArchSpec) -> Values:
        params = self.options.block_params
        layers = [layer.to_dict() for layer in spec.interaction]
        values: Values = {"depth": len(layers)}
        for i, layer in enumerate(layers[:-1]):
            values |= layer_gene.values(f"layer{i}", layer, params)
        values |= layer_gene.values("last", layers[-1], params)
        values |= {
            "embedding_dim": spec.embedding_dim,
            "top_mlp": list(spec.top_mlp),
            "top_input": spec.top_input,
        }
        return values


class WukongStackOptions(CtrStackOptions):
    """A stack of Wukong layers (the paper's model: Wukong layers, then an MLP)."""

    embedding_dims: list[PositiveInt] = Field(default=[8, 16, 32], min_length=1)
    blocks: list[str] = Field(default=["wukong"], min_length=1)
    block_params: dict[str, dict[str, list[Any]]] = {
        "wukong": {
            "num_fm_tokens": [4, 8, 16],
            "num_lc_tokens": [4, 8, 16],
            "rank": [4, 8, 16],
            "widths": [[64], [128], [128, 64]],
        }
    }
    top_mlps: list[list[int]] = Field(default=[[], [128], [256, 128]], min_length=1)
    top_inputs: list[str] = Field(default=["last"], min_length=1)


@register_space
class WukongStack(CtrStack):
    name = "wukong"
    Options = WukongStackOptions


class DHENStackOptions(CtrStackOptions):
    """A hierarchy of DHEN layers, each an ensemble of interaction modules."""

    embedding_dims: list[PositiveInt] = Field(default=[8, 16, 32], min_length=1)
    blocks: list[str] = Field(default=["dhen"], min_length=1)
    block_params: dict[str, dict[str, list[Any]]] = {
        "dhen": {
            "modules": [
                ["dot", "dcn"],
                ["dot", "self_attention"],
                ["linear", "dcn"],
                ["conv", "dcn"],
                ["dot", "self_attention", "dcn"],
            ],
            "ensemble": ["sum", "weighted_sum", "concat"],
            "out_tokens": [None, 4, 8],
            "rank": [8, 16],
        }
    }
    top_mlps: list[list[int]] = Field(default=[[], [128], [256, 128]], min_length=1)
    top_inputs: list[str] = Field(default=["last"], min_length=1)


@register_space
class DHENStack(CtrStack):
    name = "dhen"
    Options = DHENStackOptions
