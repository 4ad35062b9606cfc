"""The history encoder as a gene, shared by the ``hstu_seq`` and ``rocs`` spaces.

    sequence = {"max_len": L, "layers": [{"block": "hstu", **params}] * depth, "pooling": p}

Every layer of one encoder takes the same HSTU parameters (a stack of identical layers, as
HSTU models are built). The gene is the spec's own ``sequence`` mapping, so moving between
specs and genes loses nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, field_validator

import blocks
from nas.catalog import Options
from nas.errors import ConfigError
from nas.spec import POOLINGS
from search_spaces.base import SpaceInputs, pick

Gene = dict[str, Any]


class SequenceOptions(Options):
    """Choices for the history encoder."""

    max_lens: list[int] = Field(default=[16, 32], min_length=1)  # events encoded
    depths: list[int] = Field(default=[1, 2], min_length=1)  # HSTU layers
    hstu_params: dict[str, list[Any]] = {
        "num_heads": [1, 2],
        "qk_dim": [8, 16],
        "value_dim": [8, 16],
    }
    poolings: list[str] = Field(default=list(POOLINGS), min_length=1)

    @field_validator("max_lens", "depths")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values) or len(set(values)) != len(values):
            raise ValueError(f"must be distinct positive integers, got {values}")
        return values

    @field_validator("poolings")
    @classmethod
    def _poolings(cls, values: list[str]) -> list[str]:
        if not set(values) <= set(POOLINGS) or len(set(values)) != len(values):
            raise ValueError(f"must be distinct values from {', '.join(POOLINGS)}; got {values}")
        return values

    @field_validator("hstu_params")
    @classmethod
    def _params(cls, params: dict[str, list[Any]]) -> dict[str, list[Any]]:
        names = blocks.get_block("hstu").config_cls.param_names()
        for name, choices in params.items():
            if name not in names:
                raise ValueError(f"hstu has no parameter {name!r}; valid: {', '.join(names)}")
            if not choices:
                raise ValueError(f"hstu_params.{name}: needs at least one choice")
        return params


def check_history(options: SequenceOptions, inputs: SpaceInputs, space: str) -> None:
    """The dataset must keep a history at least as long as every ``max_lens`` choice."""
    if not inputs.history_len:
        raise ConfigError(
            "space.name",
            f"space {space!r} encodes the user history, and this dataset has none "
            "(no sequence field); use a dataset with one, such as movielens-1m",
        )
    longest = max(options.max_lens)
    if longest > inputs.history_len:
        raise ConfigError(
            "space.options.sequence.max_lens",
            f"{longest} is more than the {inputs.history_len} events the dataset's history keeps",
        )


def _gene(max_len: int, depth: int, params: dict[str, Any], pooling: str) -> Gene:
    return {
        "max_len": max_len,
        "layers": [{"block": "hstu", **params} for _ in range(depth)],
        "pooling": pooling,
    }


def _params(gene: Gene, options: SequenceOptions) -> dict[str, Any]:
    first = gene["layers"][0]
    return {k: first[k] for k in options.hstu_params}


def sample(options: SequenceOptions, rng: np.random.Generator) -> Gene:
    params = {k: pick(rng, v) for k, v in options.hstu_params.items()}
    return _gene(
        pick(rng, options.max_lens),
        pick(rng, options.depths),
        params,
        pick(rng, options.poolings),
    )


def mutate(gene: Gene, options: SequenceOptions, rng: np.random.Generator) -> Gene:
    """One of: the length, the depth, one HSTU parameter, the pooling (may repeat a value;
    the caller retries until the spec changes)."""
    max_len, depth = gene["max_len"], len(gene["layers"])
    params, pooling = _params(gene, options), gene["pooling"]
    move = pick(rng, ["max_len", "depth", "param", "pooling"])
    if move == "max_len":
        max_len = pick(rng, options.max_lens)
    elif move == "depth":
        depth = pick(rng, options.depths)
    elif move == "param" and options.hstu_params:
        name = pick(rng, sorted(options.hstu_params))
        params[name] = pick(rng, options.hstu_params[name])
    else:
        pooling = pick(rng, options.poolings)
    return _gene(max_len, depth, params, pooling)


def suggest(options: SequenceOptions, trial) -> Gene:
    params = {
        k: trial.suggest_categorical(f"sequence.{k}", v) for k, v in options.hstu_params.items()
    }
    return _gene(
        trial.suggest_categorical("sequence.max_len", options.max_lens),
        trial.suggest_categorical("sequence.depth", options.depths),
        params,
        trial.suggest_categorical("sequence.pooling", options.poolings),
    )


def size(options: SequenceOptions) -> int:
    params = int(np.prod([len(v) for v in options.hstu_params.values()]))
    return len(options.max_lens) * len(options.depths) * len(options.poolings) * params
