"""``rocs``: ROCS-style models: a history encoder, a stack of Wukong/DHEN layers whose first
``glm`` layers are GLM (request side kept apart), DCA after each GLM layer (on or off), and
a top MLP.

    genes = embedding_dim, layers [{block, params}], glm (leading GLM layers), shares
            (each GLM layer's request-side share of its output tokens), dca, dca_heads,
            sequence, top_mlp

GLM "on/off per layer" is a prefix: a layer without GLM makes every token candidate-side, so
a GLM layer after it would have no request side left to keep. The request/candidate widths
are searched as shares: a GLM layer with share s gives round(s * m) of its m output tokens
(of each kind, for Wukong) to the request side, at least one and leaving one. DCA needs the
history, so every member has a sequence encoder.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, field_validator, model_validator

import blocks
from blocks.base import TokenShape
from nas.errors import ConfigError
from nas.spec import ArchSpec
from search_spaces import sequence
from search_spaces.base import SearchSpace, SpaceInputs, SpaceOptions, label, pick
from search_spaces.registry import register_space
from search_spaces.sequence import SequenceOptions

LAYERS = ("wukong", "dhen")  # each has a GLM variant, glm_<name>
MAX_TRIES = 100


class RocsOptions(SpaceOptions):
    embedding_dims: list[int] = Field(default=[8, 16], min_length=1)
    max_depth: int = Field(default=2, ge=1, le=6)
    blocks: list[str] = Field(default=list(LAYERS), min_length=1)
    block_params: dict[str, dict[str, list[Any]]] = {
        "wukong": {
            "num_fm_tokens": [4, 8],
            "num_lc_tokens": [4, 8],
            "rank": [4, 8],
            "widths": [[64], [128]],
        },
        "dhen": {
            "modules": [["dot", "dcn"], ["linear", "self_attention"], ["conv", "dcn"]],
            "ensemble": ["sum", "concat"],
            "out_tokens": [None, 4, 8],
        },
    }
    request_shares: list[float] = Field(default=[0.25, 0.5, 0.75], min_length=1)
    dca: list[bool] = Field(default=[True, False], min_length=1)
    dca_heads: list[int] = Field(default=[1, 2], min_length=1)
    sequence: SequenceOptions = SequenceOptions()
    top_mlps: list[list[int]] = Field(default=[[128], [256, 128]], min_length=1)

    @field_validator("blocks")
    @classmethod
    def _layers(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in LAYERS:
                raise ValueError(f"{name!r} has no GLM variant; valid: {', '.join(LAYERS)}")
        if len(set(names)) != len(names):
            raise ValueError(f"lists a block twice: {names}")
        return names

    @field_validator("request_shares")
    @classmethod
    def _shares(cls, shares: list[float]) -> list[float]:
        if any(not 0 < s < 1 for s in shares) or len(set(shares)) != len(shares):
            raise ValueError(f"must be distinct fractions strictly between 0 and 1, got {shares}")
        return shares

    @model_validator(mode="after")
    def _params(self) -> RocsOptions:
        for block, params in self.block_params.items():
            if block not in LAYERS:
                raise ValueError(f"block_params.{block}: valid blocks are {', '.join(LAYERS)}")
            names = blocks.get_block(block).config_cls.param_names()
            for param, choices in params.items():
                if param not in names:
                    raise ValueError(
                        f"block_params.{block}.{param}: {block} has no parameter {param!r}; "
                        f"valid: {', '.join(names)}"
                    )
                if not choices:
                    raise ValueError(f"block_params.{block}.{param}: needs at least one choice")
        for dim in self.embedding_dims:
            for heads in self.dca_heads:
                if dim % heads:
                    raise ValueError(f"dca_heads {heads} do not divide embedding_dims {dim}")
        return self


def _share_of(count: int, total: int) -> float:
    return count / total if total else 0.0


@register_space
class Rocs(SearchSpace):
    name = "rocs"
    Options = RocsOptions

    def __init__(self, options: RocsOptions, inputs: SpaceInputs):
        sequence.check_history(options.sequence, inputs, self.name)
        if not inputs.num_request_tokens:
            raise ConfigError(
                "space.name",
                "space 'rocs' keeps request-side features apart, and this dataset has none; "
                "use a dataset with request-side fields, such as movielens-1m",
            )
        super().__init__(options, inputs)
        self._check_buildable()

    def _check_buildable(self, draws: int = 100) -> None:
        """Options whose combinations do not build (a DHEN dot after a 1-token layer, heads
        that do not divide a width) are found here, before a search starts: each parameter
        choice is checked alone by the options model, combinations by drawing members."""
        rng = np.random.default_rng(0)
        for _ in range(draws):
            try:
                self.sample(rng)
            except ConfigError as err:
                raise ConfigError(
                    "space.options", f"these choices give members that do not build: {err}"
                ) from None

    # --- genes <-> specs --------------------------------------------------------------------

    def _spec(self, genes: dict[str, Any]) -> ArchSpec:
        d, seq = genes["embedding_dim"], genes["sequence"]
        tokens, request = self.inputs.num_tokens + 1, self.inputs.num_request_tokens + 1
        shape = TokenShape(tokens, d, request)
        layers = []
        for i, layer in enumerate(genes["layers"]):
            params = {k: v for k, v in layer.items() if k != "block"}
            glm = i < genes["glm"]
            name = f"glm_{layer['block']}" if glm else layer["block"]
            if glm:
                params |= _request_counts(layer["block"], params, shape, genes["shares"][i])
            layers.append({"block": name, **params})
            context = {"num_tokens": shape.num_tokens, "dim": d}
            if glm:
                context["num_request_tokens"] = shape.num_request
            shape = blocks.get_block(name).config(params, **context).out_shape()
            if glm and genes["dca"]:
                layers.append({"block": "dca", "num_heads": genes["dca_heads"]})
        data = {
            "embedding_dim": d,
            "sequence": seq,
            "interaction": layers,
            "top_mlp": genes["top_mlp"],
        }
        return self.inputs.check(ArchSpec.from_dict(data))

    def _genes(self, spec: ArchSpec) -> dict[str, Any]:
        """The genes of a member (shares snapped to the nearest option)."""
        layers, shares, glm, dca, heads = [], [], 0, False, self.options.dca_heads[0]
        configs = spec.layer_configs(*self.inputs.input_tokens(spec))
        for layer, config in zip(spec.interaction, configs, strict=True):
            data = layer.to_dict()
            if data["block"] == "dca":
                dca, heads = True, data["num_heads"]
                continue
            block = data.pop("block")
            base = block.removeprefix("glm_")
            glm += block != base
            share = _recorded_share(base, data, config.num_tokens)
            params = {k: data[k] for k in self.options.block_params.get(base, {})}
            layers.append({"block": base, **params})
            shares.append(min(self.options.request_shares, key=lambda s: abs(s - share)))
        return {
            "embedding_dim": spec.embedding_dim,
            "layers": layers,
            "glm": glm,
            "shares": shares,
            "dca": dca,
            "dca_heads": heads,
            "sequence": spec.sequence.to_dict(),
            "top_mlp": list(spec.top_mlp),
        }

    def _layer(self, rng: np.random.Generator) -> dict[str, Any]:
        block = pick(rng, self.options.blocks)
        params = self.options.block_params.get(block, {})
        return {"block": block, **{k: pick(rng, v) for k, v in params.items()}}

    # --- moves ------------------------------------------------------------------------------

    def sample(self, rng: np.random.Generator) -> ArchSpec:
        o = self.options
        depth = int(rng.integers(1, o.max_depth + 1))
        return self._spec(
            {
                "embedding_dim": pick(rng, o.embedding_dims),
                "layers": [self._layer(rng) for _ in range(depth)],
                "glm": int(rng.integers(0, depth + 1)),
                "shares": [pick(rng, o.request_shares) for _ in range(depth)],
                "dca": pick(rng, o.dca),
                "dca_heads": pick(rng, o.dca_heads),
                "sequence": sequence.sample(o.sequence, rng),
                "top_mlp": pick(rng, o.top_mlps),
            }
        )

    def mutate(self, spec: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """Change one gene: width, a layer (block or one parameter), depth, how many layers
        are GLM, one layer's request share, DCA, the encoder, the top MLP."""
        o = self.options
        moves = ["embedding_dim", "layer", "depth", "glm", "share", "dca", "sequence", "top_mlp"]
        for _ in range(MAX_TRIES):
            genes = self._genes(spec)
            layers, shares = genes["layers"], genes["shares"]
            move = pick(rng, moves)
            if move == "embedding_dim":
                genes["embedding_dim"] = pick(rng, o.embedding_dims)
            elif move == "layer":
                i = int(rng.integers(len(layers)))
                params = o.block_params.get(layers[i]["block"], {})
                if params and rng.random() < 0.5:
                    name = pick(rng, sorted(params))
                    layers[i] = {**layers[i], name: pick(rng, params[name])}
                else:
                    layers[i] = self._layer(rng)
            elif move == "depth":
                if len(layers) < o.max_depth and (len(layers) == 1 or rng.random() < 0.5):
                    i = int(rng.integers(len(layers) + 1))
                    layers.insert(i, self._layer(rng))
                    shares.insert(i, pick(rng, o.request_shares))
                elif len(layers) > 1:
                    i = int(rng.integers(len(layers)))
                    del layers[i], shares[i]
                genes["glm"] = min(genes["glm"], len(layers))
            elif move == "glm":
                genes["glm"] = int(rng.integers(0, len(layers) + 1))
            elif move == "share":
                shares[int(rng.integers(len(shares)))] = pick(rng, o.request_shares)
            elif move == "dca":
                genes["dca"] = pick(rng, o.dca)
                genes["dca_heads"] = pick(rng, o.dca_heads)
            elif move == "sequence":
                genes["sequence"] = sequence.mutate(genes["sequence"], o.sequence, rng)
            else:
                genes["top_mlp"] = pick(rng, o.top_mlps)
            child = self._spec(genes)
            if child.arch_id != spec.arch_id:
                return child
        raise RuntimeError(f"rocs could not mutate {spec.arch_id} in {MAX_TRIES} draws")

    def crossover(self, a: ArchSpec, b: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """Each gene from either parent; the stack (layers, shares, GLM prefix) from one."""
        ga, gb = self._genes(a), self._genes(b)
        genes = {k: (ga if rng.random() < 0.5 else gb)[k] for k in ga}
        stack = ga if rng.random() < 0.5 else gb
        for key in ("layers", "shares", "glm"):
            genes[key] = stack[key]
        return self._spec(genes)

    def suggest(self, trial) -> ArchSpec:
        o = self.options
        depth = trial.suggest_int("depth", 1, o.max_depth)
        layers, shares = [], []
        for i in range(depth):
            block = trial.suggest_categorical(f"layer{i}.block", o.blocks)
            layer: dict[str, Any] = {"block": block}
            for name, choices in o.block_params.get(block, {}).items():
                labels = [label(c) for c in choices]
                picked = trial.suggest_categorical(f"layer{i}.{block}.{name}", labels)
                layer[name] = choices[labels.index(picked)]
            layers.append(layer)
            shares.append(trial.suggest_categorical(f"layer{i}.share", o.request_shares))
        tops = [label(w) for w in o.top_mlps]
        top = trial.suggest_categorical("top_mlp", tops)
        return self._spec(
            {
                "embedding_dim": trial.suggest_categorical("embedding_dim", o.embedding_dims),
                "layers": layers,
                # One distribution for every depth: the prefix is cut to the stack.
                "glm": min(depth, trial.suggest_int("glm", 0, o.max_depth)),
                "shares": shares,
                "dca": trial.suggest_categorical("dca", o.dca),
                "dca_heads": trial.suggest_categorical("dca_heads", o.dca_heads),
                "sequence": sequence.suggest(o.sequence, trial),
                "top_mlp": o.top_mlps[tops.index(top)],
            }
        )

    def size(self) -> int:
        """Members counted by genes (a GLM-off layer's share and DCA settings with no GLM
        layer do not change the model, so this is an upper bound)."""
        o = self.options

        def count(block: str) -> int:
            return int(np.prod([len(c) for c in o.block_params.get(block, {}).values()]))

        per_layer = sum(count(b) for b in o.blocks) * len(o.request_shares)
        stacks = sum(per_layer**d * (d + 1) for d in range(1, o.max_depth + 1))
        rest = len(o.embedding_dims) * len(o.dca) * len(o.dca_heads) * len(o.top_mlps)
        return stacks * rest * sequence.size(o.sequence)


def _request_counts(
    block: str, params: dict[str, Any], shape: TokenShape, share: float
) -> dict[str, int]:
    """The request-side output counts a GLM layer gets from its share."""

    def part(total: int) -> int:
        if not shape.num_request or total < 2:
            return 0
        return min(total - 1, max(1, round(share * total)))

    defaults = blocks.get_block(block).config_cls.default_params()
    if block == "wukong":
        return {
            "request_fm_tokens": part(params.get("num_fm_tokens", defaults["num_fm_tokens"])),
            "request_lc_tokens": part(params.get("num_lc_tokens", defaults["num_lc_tokens"])),
        }
    return {"request_out_tokens": part(params.get("out_tokens") or shape.num_tokens)}


def _recorded_share(block: str, params: dict[str, Any], input_tokens: int) -> float:
    """The request share a GLM layer's counts record (0.5 for a layer without GLM)."""
    if block == "wukong" and params.get("request_fm_tokens") is not None:
        return _share_of(params["request_fm_tokens"], params["num_fm_tokens"])
    if block == "dhen" and params.get("request_out_tokens") is not None:
        return _share_of(params["request_out_tokens"], params.get("out_tokens") or input_tokens)
    return 0.5
