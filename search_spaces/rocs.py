"""``rocs``: ROCS-style models: a history encoder, a stack of Wukong/DHEN layers whose first
``glm`` layers are GLM (request side kept apart), DCA after each GLM layer (on or off), and
a top MLP.

    genes = embedding_dim, layers [{block, params}], glm (leading GLM layers), shares
            (each GLM layer's request-side share of its output tokens), dca, dca_heads,
            sequence, top_mlp

GLM "on/off per layer" is a prefix: a layer without GLM makes every token candidate-side, so
a GLM layer after it would have no request side left to keep. The decisions say so: layer
i's ``layer{i}.glm`` is only active when layer i-1 is GLM, its ``layer{i}.share`` only when
it is GLM itself, and ``dca`` only when the first layer is. The request/candidate widths
are searched as shares: a GLM layer with share s gives round(s * m) of its m output tokens
(of each kind, for Wukong) to the request side, at least one and leaving one. DCA needs the
history, so every member has a sequence encoder.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, PositiveInt, field_validator, model_validator

import blocks
from blocks.base import TokenShape
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from search_spaces import layer_gene, sequence
from search_spaces.base import SearchSpace, SpaceInputs, SpaceOptions
from search_spaces.decisions import Decision, Values
from search_spaces.registry import register_space
from search_spaces.sequence import SequenceOptions

LAYERS = ("wukong", "dhen")  # each has a GLM variant, glm_<name>


class RocsOptions(SpaceOptions):
    embedding_dims: list[PositiveInt] = Field(default=[8, 16], min_length=1)
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
    dca_heads: list[PositiveInt] = Field(default=[1, 2], min_length=1)
    sequence: SequenceOptions = SequenceOptions()
    top_mlps: list[list[int]] = Field(default=[[128], [256, 128]], min_length=1)

    @field_validator("blocks")
    @classmethod
    def _layers(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in LAYERS:
                raise ValueError(f"{name!r} has no GLM variant; valid: {', '.join(LAYERS)}")
        return names

    @field_validator("request_shares")
    @classmethod
    def _shares(cls, shares: list[float]) -> list[float]:
        if any(not 0 < s < 1 for s in shares):
            raise ValueError(f"must be fractions strictly between 0 and 1, got {shares}")
        return shares

    @model_validator(mode="after")
    def _params(self) -> RocsOptions:
        for block, params in self.block_params.items():
            if block not in LAYERS:
                raise ValueError(f"block_params.{block}: valid blocks are {', '.join(LAYERS)}")
            names = blocks.get_block(block).config_cls.param_names()
            for param in params:
                if param not in names:
                    raise ValueError(
                        f"block_params.{block}.{param}: {block} has no parameter {param!r}; "
                        f"valid: {', '.join(names)}"
                    )
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
        fitted = sequence.fitted(options.sequence, inputs, self.name)
        options = options.model_copy(update={"sequence": fitted})
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

    # --- genes (the stack as the layers see it) <-> specs -------------------------------------

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
        layers, shares, glm, dca, heads = [], [], 0, False, None
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
            if block != base:
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

    def supernet_plan(self):
        raise ConfigError(
            "space.name",
            "space 'rocs' has no supernet form: whether a layer is GLM changes which of its "
            "tokens are request-side, so the same layer position holds blocks whose inputs "
            "are split differently, and DCA reads a history encoder that is itself searched; "
            "no weight sharing keeps those candidates comparable. Search it with random, "
            "evolution or optuna",
        )

    # --- decisions ----------------------------------------------------------------------------

    def declare(self) -> list[Decision]:
        """depth, width; each layer's gene; each layer's GLM flag (a prefix: layer i can be GLM
        only if layer i-1 is) and, for a GLM layer, its request share; DCA and its heads (with
        at least one GLM layer); the history encoder; the top MLP."""
        o = self.options
        depths = tuple(range(1, o.max_depth + 1))
        out = [Decision("depth", depths), Decision("embedding_dim", tuple(o.embedding_dims))]
        present = [(("depth", depths[i:]),) for i in range(o.max_depth)]
        for i in range(o.max_depth):
            out += layer_gene.decisions(f"layer{i}", o.blocks, o.block_params, present[i])
        for i in range(o.max_depth):
            after_glm = ((f"layer{i - 1}.glm", (True,)),) if i else ()
            out.append(Decision(f"layer{i}.glm", (True, False), present[i] + after_glm))
        for i in range(o.max_depth):
            out.append(
                Decision(f"layer{i}.share", tuple(o.request_shares), ((f"layer{i}.glm", (True,)),))
            )
        out.append(Decision("dca", tuple(o.dca), (("layer0.glm", (True,)),)))
        out.append(Decision("dca_heads", tuple(o.dca_heads), (("dca", (True,)),)))
        out += sequence.decisions(o.sequence)
        out.append(Decision("top_mlp", tuple(o.top_mlps)))
        return out

    def build(self, values: Values) -> ArchSpec:
        o = self.options
        depth = values["depth"]
        glm = next((i for i in range(depth) if not values.get(f"layer{i}.glm")), depth)
        return self._spec(
            {
                "embedding_dim": values["embedding_dim"],
                "layers": [
                    layer_gene.layer(values, f"layer{i}", o.block_params) for i in range(depth)
                ],
                "glm": glm,
                "shares": [values[f"layer{i}.share"] for i in range(glm)],
                "dca": values.get("dca", False),
                "dca_heads": values.get("dca_heads"),
                "sequence": sequence.gene(values, o.sequence),
                "top_mlp": values["top_mlp"],
            }
        )

    def values_of(self, spec: ArchSpec) -> Values:
        o = self.options
        genes = self._genes(spec)
        values: Values = {"depth": len(genes["layers"]), "embedding_dim": genes["embedding_dim"]}
        for i, layer in enumerate(genes["layers"]):
            values |= layer_gene.values(f"layer{i}", layer, o.block_params)
        for i in range(min(genes["glm"] + 1, len(genes["layers"]))):
            values[f"layer{i}.glm"] = i < genes["glm"]
        for i in range(genes["glm"]):
            values[f"layer{i}.share"] = genes["shares"][i]
        if genes["glm"]:
            values["dca"] = genes["dca"]
            if genes["dca"]:
                values["dca_heads"] = genes["dca_heads"]
        values |= sequence.values(genes["sequence"], o.sequence)
        values["top_mlp"] = genes["top_mlp"]
        return values


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
