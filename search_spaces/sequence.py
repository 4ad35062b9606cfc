"""The history encoder as a gene, shared by the ``hstu_seq`` and ``rocs`` spaces.

    sequence = {"max_len": L, "layers": [{"block": "hstu", **params}] * depth, "pooling": p}

Every layer of one encoder takes the same HSTU parameters (a stack of identical layers, as
HSTU models are built). The gene is the spec's own ``sequence`` mapping; its decisions are
named ``sequence.*``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field, PositiveInt, field_validator

import blocks
from nas.arch.spec import POOLINGS
from nas.core.errors import ConfigError
from search_spaces.base import ChoiceOptions, SpaceInputs
from search_spaces.decisions import Decision, Values

Gene = dict[str, Any]


@dataclass(frozen=True)
class SequencePlan:
    """The encoder's choices, as ``hstu_seq`` declares them (``sequence.*`` decisions)."""

    max_lens: tuple[int, ...]
    depths: tuple[int, ...]
    hstu_params: dict[str, tuple]
    poolings: tuple[str, ...]


class SequenceOptions(ChoiceOptions):
    """Choices for the history encoder."""

    max_lens: list[PositiveInt] = Field(default=[16, 32], min_length=1)  # events encoded
    depths: list[PositiveInt] = Field(default=[1, 2], min_length=1)  # HSTU layers
    hstu_params: dict[str, list[Any]] = {
        "num_heads": [1, 2],
        "qk_dim": [8, 16],
        "value_dim": [8, 16],
    }
    poolings: list[str] = Field(default=list(POOLINGS), min_length=1)

    @field_validator("poolings")
    @classmethod
    def _poolings(cls, values: list[str]) -> list[str]:
        if not set(values) <= set(POOLINGS):
            raise ValueError(f"must be values from {', '.join(POOLINGS)}; got {values}")
        return values

    @field_validator("hstu_params")
    @classmethod
    def _params(cls, params: dict[str, list[Any]]) -> dict[str, list[Any]]:
        hstu = blocks.get_block("hstu")
        names = hstu.config_cls.param_names()
        for name, choices in params.items():
            if name not in names:
                raise ValueError(f"hstu has no parameter {name!r}; valid: {', '.join(names)}")
            for choice in choices:  # each alone: HSTU's checks do not depend on the shape
                try:
                    hstu.config({name: choice}, num_tokens=1, dim=1)
                except ConfigError as err:
                    raise ValueError(str(err)) from None
        return params


def fitted(options: SequenceOptions, inputs: SpaceInputs, space: str) -> SequenceOptions:
    """The options, checked against the dataset's history: it must keep every ``max_lens``
    choice a user gave; of the default choices, those it keeps (its own length where it
    keeps none: a history of 8 events searches 8)."""
    if not inputs.history_len:
        raise ConfigError(
            "space.name",
            f"space {space!r} encodes the user history, and this dataset has none "
            "(no sequence field); use a dataset with one, such as movielens-1m",
        )
    kept = [n for n in options.max_lens if n <= inputs.history_len]
    if "max_lens" not in options.model_fields_set:
        return options.model_copy(update={"max_lens": kept or [inputs.history_len]})
    if len(kept) < len(options.max_lens):
        raise ConfigError(
            "space.options.sequence.max_lens",
            f"{max(options.max_lens)} is more than the {inputs.history_len} events the "
            f"dataset's history keeps; give choices up to {inputs.history_len}, or prepare the "
            "dataset with a longer sequence max_len",
        )
    return options


def decisions(options: SequenceOptions) -> list[Decision]:
    """``sequence.<hstu param>`` for each searched HSTU parameter, then ``sequence.max_len``,
    ``sequence.depth`` and ``sequence.pooling`` (the order the gene was always drawn in)."""
    out = [Decision(f"sequence.{k}", tuple(v)) for k, v in options.hstu_params.items()]
    out.append(Decision("sequence.max_len", tuple(options.max_lens)))
    out.append(Decision("sequence.depth", tuple(options.depths)))
    out.append(Decision("sequence.pooling", tuple(options.poolings)))
    return out


def gene(values: Mapping[str, Any], options: SequenceOptions) -> Gene:
    """The spec's ``sequence`` section that the values describe."""
    params = {k: values[f"sequence.{k}"] for k in options.hstu_params}
    return {
        "max_len": values["sequence.max_len"],
        "layers": [{"block": "hstu", **params} for _ in range(values["sequence.depth"])],
        "pooling": values["sequence.pooling"],
    }


def values(gene: Gene, options: SequenceOptions) -> Values:
    first = gene["layers"][0]
    out: Values = {f"sequence.{k}": first[k] for k in options.hstu_params}
    out["sequence.max_len"] = gene["max_len"]
    out["sequence.depth"] = len(gene["layers"])
    out["sequence.pooling"] = gene["pooling"]
    return out
