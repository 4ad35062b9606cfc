"""ArchSpec: the one description of a candidate architecture.

A frozen, JSON-serialisable value. The model it describes:

    tokens_0 = [request-side tokens ; candidate-side tokens]           [B, N_0, embedding_dim]
               one per categorical or multi-hot field (embedding / embedding_bag), one for
               the dense features (bottom_mlp), and, with a ``sequence`` section, one
               request-side token for the history: ``layers`` (sequence blocks, e.g. HSTU)
               over its last ``max_len`` events, pooled (``last`` position or ``mean``)
    tokens_i = interaction[i](tokens_{i-1})                            i = 1..L
    logit    = top_mlp(flatten(tokens_L))                              top_input: "last"
             = top_mlp(concat_i flatten(tokens_i), i = 0..L)           top_input: "all"

``top_input: "all"`` feeds the top MLP every stage's output (the embeddings included), as
DLRM (embeddings + pairwise dots) and DeepFM (embeddings + FM) do.

GLM layers (``glm_*``, ``dca``) keep request-side tokens apart from candidate-side ones; a
layer without GLM makes every token candidate-side. DCA layers attend over the encoded
history, so they need a ``sequence`` section.

A spec is checked twice: on load (structure, block names, parameter names, widths) and
against a dataset's token count when its layers are resolved (parameter values, shapes).
Its canonical JSON (keys sorted, every default filled in, ``name`` left out) hashes to a
stable ``arch_id``, so two specs that build the same model share an id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blocks
from blocks.base import BlockConfig, TokenShape, check_choice, check_int, check_widths
from nas.core.errors import ConfigError, shown

TOP_INPUTS = ("last", "all")
SPEC_FIELDS = (
    "name",
    "embedding_dim",
    "interaction",
    "top_mlp",
    "top_input",
    "bottom_mlp",
    "sequence",
)
SEQUENCE_FIELDS = ("max_len", "layers", "pooling")
POOLINGS = ("last", "mean")
JSONValue = int | float | str | bool | None | tuple


@dataclass(frozen=True)
class LayerSpec:
    """One interaction layer: a registered block name and its parameters (defaults filled)."""

    block: str
    params: tuple[tuple[str, JSONValue], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"block": self.block, **{k: _to_json(v) for k, v in self.params}}

    def config(self, in_shape: TokenShape, memory: TokenShape | None = None) -> BlockConfig:
        """Its config at ``in_shape``, reading the encoded history's ``memory`` (if any)."""
        entry = blocks.get_block(self.block)
        context = {
            "num_tokens": in_shape.num_tokens,
            "dim": in_shape.dim,
            "num_request_tokens": in_shape.num_request,
            "memory_tokens": memory.num_tokens if memory else 0,
            "memory_dim": memory.dim if memory else 0,
        }
        return entry.config(
            {k: _to_json(v) for k, v in self.params},
            **{k: context[k] for k in entry.config_cls.context_fields},
        )


@dataclass(frozen=True)
class SequenceSpec:
    """The history encoder: sequence blocks over the last ``max_len`` events, pooled."""

    max_len: int
    layers: tuple[LayerSpec, ...]
    pooling: str = "last"

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_len": self.max_len,
            "layers": [layer.to_dict() for layer in self.layers],
            "pooling": self.pooling,
        }

    def layer_configs(self, dim: int) -> list[BlockConfig]:
        configs = []
        for i, layer in enumerate(self.layers):
            try:
                configs.append(layer.config(TokenShape(self.max_len, dim)))
            except ConfigError as err:
                raise err.within(f"sequence.layers[{i}]") from None
        return configs

    @classmethod
    def from_dict(cls, data: Any) -> SequenceSpec:
        if not isinstance(data, dict):
            raise ConfigError(
                "sequence",
                f'must be an object like {{"max_len": 32, "layers": '
                f'[{{"block": "hstu"}}]}}, got {shown(data)}',
            )
        _check_fields(data, SEQUENCE_FIELDS, ("max_len", "layers"), "sequence.")
        check_int("sequence.max_len", data["max_len"])
        pooling = data.get("pooling", "last")
        check_choice("sequence.pooling", pooling, POOLINGS)
        layers = data["layers"]
        if not isinstance(layers, list):
            raise ConfigError("sequence.layers", f"must be a list of layers, got {shown(layers)}")
        return cls(
            max_len=data["max_len"],
            layers=tuple(
                _layer_from_dict(layer, f"sequence.layers[{i}]", kind="sequence")
                for i, layer in enumerate(layers)
            ),
            pooling=pooling,
        )


@dataclass(frozen=True)
class ArchSpec:
    embedding_dim: int
    interaction: tuple[LayerSpec, ...]
    top_mlp: tuple[int, ...]
    top_input: str = "last"
    bottom_mlp: tuple[int, ...] = ()
    sequence: SequenceSpec | None = None
    name: str | None = None  # a label; not part of the architecture or its arch_id

    # --- construction -------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> ArchSpec:
        """Validate a plain mapping (parsed JSON) into a spec; errors name the field."""
        try:
            return cls._from_dict(data)
        except ConfigError as err:
            raise err.within(source=source) from None

    @classmethod
    def _from_dict(cls, data: Any) -> ArchSpec:
        if not isinstance(data, dict):
            raise ConfigError("", f"a spec must be a JSON object, got {type(data).__name__}")
        _check_fields(data, SPEC_FIELDS, ("embedding_dim", "interaction", "top_mlp"))
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise ConfigError("name", f"must be a string, got {shown(name)}")
        check_int("embedding_dim", data["embedding_dim"])
        top_input = data.get("top_input", "last")
        check_choice("top_input", top_input, TOP_INPUTS)
        layers = data["interaction"]
        if not isinstance(layers, list):
            raise ConfigError("interaction", f"must be a list of layers, got {shown(layers)}")
        return cls(
            name=name,
            embedding_dim=data["embedding_dim"],
            interaction=tuple(
                _layer_from_dict(layer, f"interaction[{i}]") for i, layer in enumerate(layers)
            ),
            top_mlp=check_widths("top_mlp", data["top_mlp"], allow_empty=True),
            top_input=top_input,
            bottom_mlp=check_widths("bottom_mlp", data.get("bottom_mlp", []), allow_empty=True),
            sequence=None
            if data.get("sequence") is None
            else SequenceSpec.from_dict(data["sequence"]),
        )

    @classmethod
    def from_json(cls, text: str, source: str | None = None) -> ArchSpec:
        from nas.core.user_files import parse_json

        return cls.from_dict(parse_json(text, source or "spec"), source=source)

    @classmethod
    def load(cls, path: str | Path) -> ArchSpec:
        from nas.core.user_files import read_text

        path = Path(path)
        return cls.from_json(read_text(path, "spec"), source=str(path))

    # --- serialisation ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name} if self.name is not None else {}
        out.update(
            embedding_dim=self.embedding_dim,
            interaction=[layer.to_dict() for layer in self.interaction],
            top_mlp=list(self.top_mlp),
            top_input=self.top_input,
            bottom_mlp=list(self.bottom_mlp),
        )
        if self.sequence is not None:  # absent, not null: older specs keep their arch_id
            out["sequence"] = self.sequence.to_dict()
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def canonical_json(self) -> str:
        data = self.to_dict()
        data.pop("name", None)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @property
    def arch_id(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]

    # --- shapes -------------------------------------------------------------------------

    def layer_configs(self, input_tokens: int, num_request: int = 0) -> list[BlockConfig]:
        """Each interaction layer's config, chained from ``input_tokens`` embedding tokens
        (the history's included), the first ``num_request`` of them request-side.

        Checks every parameter value and every shape; an error names the layer's field.
        """
        shape = TokenShape(input_tokens, self.embedding_dim, num_request)
        memory = TokenShape(self.sequence.max_len, self.embedding_dim) if self.sequence else None
        configs = []
        for i, layer in enumerate(self.interaction):
            try:
                config = layer.config(shape, memory)
            except ConfigError as err:
                raise err.within(f"interaction[{i}]") from None
            configs.append(config)
            shape = config.out_shape()
        return configs


def _check_fields(
    data: dict, valid: tuple[str, ...], required: tuple[str, ...], prefix: str = ""
) -> None:
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ConfigError(
            f"{prefix}{unknown[0]}", f"unknown field; valid fields: {', '.join(valid)}"
        )
    for field in required:
        if field not in data:
            raise ConfigError(f"{prefix}{field}", "is required")


def _layer_from_dict(data: Any, field: str, kind: str = "interaction") -> LayerSpec:
    if not isinstance(data, dict) or "block" not in data:
        example = "mlp" if kind == "interaction" else "hstu"
        raise ConfigError(
            field, f'must be an object like {{"block": "{example}", ...}}, got {shown(data)}'
        )
    params = {k: v for k, v in data.items() if k != "block"}
    entry = blocks.get_block(data["block"], kind=kind, field=f"{field}.block")
    try:
        entry.config_cls.check_param_names(params)
    except ConfigError as err:
        raise err.within(field) from None
    for key, value in params.items():
        if not _is_json_value(value):
            raise ConfigError(
                f"{field}.{key}", f"must be a number, string, bool or list, got {shown(value)}"
            )
    defaults = entry.config_cls.default_params()
    merged = {**defaults, **params}
    return LayerSpec(entry.name, tuple(sorted((k, _freeze(v)) for k, v in merged.items())))


def _is_json_value(value: Any) -> bool:
    if isinstance(value, list):
        return all(_is_json_value(v) for v in value)
    return value is None or isinstance(value, int | float | str | bool)


def _freeze(value: Any) -> JSONValue:
    return tuple(_freeze(v) for v in value) if isinstance(value, list | tuple) else value


def _to_json(value: JSONValue) -> Any:
    return [_to_json(v) for v in value] if isinstance(value, tuple) else value
