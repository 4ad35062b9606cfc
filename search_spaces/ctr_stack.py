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
parameters not listed keep the block's defaults.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, field_validator, model_validator

import blocks
from nas.errors import ConfigError
from nas.spec import ArchSpec
from search_spaces.base import SearchSpace, SpaceInputs, SpaceOptions, label, pick
from search_spaces.registry import register_space

MAX_TRIES = 100  # draws before a mutation that keeps giving the parent back is a bug


class CtrStackOptions(SpaceOptions):
    embedding_dims: list[int] = Field(default=[8, 16, 32], min_length=1)
    max_depth: int = Field(default=3, ge=1, le=8)
    blocks: list[str] = Field(default=["mlp", "dot", "fm", "dcnv2", "self_attention"], min_length=1)
    block_params: dict[str, dict[str, list[Any]]] = {
        "mlp": {"widths": [[64], [128], [256, 128]]},
        "dcnv2": {"num_layers": [1, 2, 3], "rank": [16, 32, 64]},
        "self_attention": {"num_heads": [1, 2], "head_dim": [8, 16]},
    }
    top_mlps: list[list[int]] = Field(default=[[], [128], [256, 128], [512, 256]], min_length=1)
    top_inputs: list[str] = Field(default=["last", "all"], min_length=1)

    @field_validator("embedding_dims")
    @classmethod
    def _positive(cls, dims: list[int]) -> list[int]:
        if any(d < 1 for d in dims) or len(set(dims)) != len(dims):
            raise ValueError(f"must be distinct positive integers, got {dims}")
        return dims

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
        if len(set(names)) != len(names):
            raise ValueError(f"lists a block twice: {names}")
        return names

    @field_validator("top_inputs")
    @classmethod
    def _top_inputs(cls, values: list[str]) -> list[str]:
        if not set(values) <= {"last", "all"} or len(set(values)) != len(values):
            raise ValueError(f"must be distinct values from 'last', 'all'; got {values}")
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
            for param, choices in params.items():
                if param not in entry.config_cls.param_names():
                    valid = ", ".join(entry.config_cls.param_names())
                    raise ValueError(
                        f"block_params.{block}.{param}: {block} has no parameter {param!r}; "
                        f"valid: {valid}"
                    )
                if not choices:
                    raise ValueError(f"block_params.{block}.{param}: needs at least one choice")
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


@register_space
class CtrStack(SearchSpace):
    name = "ctr_stack"
    Options = CtrStackOptions

    def __init__(self, options: CtrStackOptions, inputs: SpaceInputs):
        super().__init__(options, inputs)
        dim = options.embedding_dims[0]
        self.mixers = [
            b for b in options.blocks if _block_kinds(b, options.block_params.get(b, {}), dim)
        ]
        self.lasts = list(options.blocks)

    # --- building specs ------------------------------------------------------------------

    def _spec(self, genes: dict[str, Any]) -> ArchSpec:
        data = {
            "embedding_dim": genes["embedding_dim"],
            "interaction": genes["layers"],
            "top_mlp": genes["top_mlp"],
            "top_input": genes["top_input"],
        }
        if genes.get("sequence") is not None:
            data["sequence"] = genes["sequence"]
        return self.inputs.check(ArchSpec.from_dict(data))  # not building is a bug here

    @staticmethod
    def _genes(spec: ArchSpec) -> dict[str, Any]:
        return {
            "embedding_dim": spec.embedding_dim,
            "layers": [layer.to_dict() for layer in spec.interaction],
            "top_mlp": list(spec.top_mlp),
            "top_input": spec.top_input,
            "sequence": spec.sequence.to_dict() if spec.sequence is not None else None,
        }

    def _layer(self, rng: np.random.Generator, block: str) -> dict[str, Any]:
        params = self.options.block_params.get(block, {})
        return {"block": block, **{k: pick(rng, v) for k, v in params.items()}}

    def _depths(self) -> list[int]:
        return list(range(1, self.options.max_depth + 1)) if self.mixers else [1]

    def sample(self, rng: np.random.Generator) -> ArchSpec:
        depth = pick(rng, self._depths())
        layers = [self._layer(rng, pick(rng, self.mixers)) for _ in range(depth - 1)]
        layers.append(self._layer(rng, pick(rng, self.lasts)))
        return self._spec(
            {
                "embedding_dim": pick(rng, self.options.embedding_dims),
                "layers": layers,
                "top_mlp": pick(rng, self.options.top_mlps),
                "top_input": pick(rng, self.options.top_inputs),
            }
        )

    # --- evolution -----------------------------------------------------------------------

    def mutate(self, spec: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """Change one gene: the embedding width, the top MLP or its input, one layer's block
        or one of its parameters, or the depth (a mixer added or removed)."""
        for _ in range(MAX_TRIES):
            genes = self._genes(spec)
            layers = genes["layers"]
            move = pick(rng, ["embedding_dim", "top_mlp", "top_input", "layer", "depth"])
            if move == "embedding_dim":
                genes["embedding_dim"] = pick(rng, self.options.embedding_dims)
            elif move == "top_mlp":
                genes["top_mlp"] = pick(rng, self.options.top_mlps)
            elif move == "top_input":
                genes["top_input"] = pick(rng, self.options.top_inputs)
            elif move == "layer":
                i = int(rng.integers(len(layers)))
                pool = self.lasts if i == len(layers) - 1 else self.mixers
                old = layers[i]
                params = self.options.block_params.get(old["block"], {})
                if params and rng.random() < 0.5:  # one parameter of the same block
                    name = pick(rng, sorted(params))
                    layers[i] = {**old, name: pick(rng, params[name])}
                else:
                    layers[i] = self._layer(rng, pick(rng, pool))
            else:
                depth = len(layers)
                grow = pick(rng, self._depths()) > depth
                if grow and depth < self.options.max_depth and self.mixers:
                    i = int(rng.integers(depth))
                    layers.insert(i, self._layer(rng, pick(rng, self.mixers)))
                elif depth > 1:
                    del layers[int(rng.integers(depth - 1))]
            child = self._spec(genes)
            if child.arch_id != spec.arch_id:
                return child
        raise RuntimeError(f"ctr_stack could not mutate {spec.arch_id} in {MAX_TRIES} draws")

    def crossover(self, a: ArchSpec, b: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """Uniform crossover: each top-level gene from either parent; the depth and the last
        layer from one parent, each mixer position from either parent when both have one."""
        ga, gb = self._genes(a), self._genes(b)
        genes = {k: (ga if rng.random() < 0.5 else gb)[k] for k in ga if k != "layers"}
        base, other = (ga, gb) if rng.random() < 0.5 else (gb, ga)
        layers = list(base["layers"])
        for i in range(len(layers) - 1):
            if i < len(other["layers"]) - 1 and rng.random() < 0.5:
                layers[i] = other["layers"][i]
        if rng.random() < 0.5:
            layers[-1] = other["layers"][-1]
        genes["layers"] = layers
        return self._spec(genes)

    # --- Optuna --------------------------------------------------------------------------

    def suggest(self, trial) -> ArchSpec:
        """Define-by-run: a parameter's name fixes its choices, so every name keeps one
        distribution across trials (``layer0.block`` is always a mixer, ``last.block`` any)."""
        opts = self.options
        depth = trial.suggest_int("depth", 1, max(self._depths()))
        layers = []
        for i in range(depth - 1):
            block = trial.suggest_categorical(f"layer{i}.block", self.mixers)
            layers.append(self._suggest_layer(trial, f"layer{i}", block))
        block = trial.suggest_categorical("last.block", self.lasts)
        layers.append(self._suggest_layer(trial, "last", block))
        widths = [list(w) for w in opts.top_mlps]
        top = trial.suggest_categorical("top_mlp", [label(w) for w in widths])
        return self._spec(
            {
                "embedding_dim": trial.suggest_categorical("embedding_dim", opts.embedding_dims),
                "layers": layers,
                "top_mlp": widths[[label(w) for w in widths].index(top)],
                "top_input": trial.suggest_categorical("top_input", opts.top_inputs),
            }
        )

    def _suggest_layer(self, trial, prefix: str, block: str) -> dict[str, Any]:
        layer: dict[str, Any] = {"block": block}
        for name, choices in self.options.block_params.get(block, {}).items():
            labels = [label(c) for c in choices]
            picked = trial.suggest_categorical(f"{prefix}.{block}.{name}", labels)
            layer[name] = choices[labels.index(picked)]
        return layer

    def size(self) -> int:
        def count(block: str) -> int:
            return int(np.prod([len(c) for c in self.options.block_params.get(block, {}).values()]))

        mixers = sum(count(b) for b in self.mixers)
        lasts = sum(count(b) for b in self.lasts)
        stacks = sum(mixers ** (d - 1) * lasts for d in self._depths())
        o = self.options
        return stacks * len(o.embedding_dims) * len(o.top_mlps) * len(o.top_inputs)


class WukongStackOptions(CtrStackOptions):
    """A stack of Wukong layers (the paper's model: Wukong layers, then an MLP)."""

    embedding_dims: list[int] = Field(default=[8, 16, 32], min_length=1)
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

    embedding_dims: list[int] = Field(default=[8, 16, 32], min_length=1)
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
