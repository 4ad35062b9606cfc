"""The layer gene, written once for every space that stacks blocks: which block, and each of
its searched parameters.

    {prefix}.block            one of ``pool``
    {prefix}.{block}.{param}  one of ``block_params[block][param]``, active when ``block`` is
                              the chosen one (parameters not listed keep the block's default)

The names are the Optuna parameter names too, so ``layer0.dcnv2.rank`` keeps one
distribution across trials whatever ``layer0.block`` was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from search_spaces.decisions import Decision, Values

BlockParams = Mapping[str, Mapping[str, Sequence[Any]]]


def decisions(
    prefix: str,
    pool: Sequence[str],
    block_params: BlockParams,
    requires: tuple[tuple[str, tuple], ...] = (),
) -> list[Decision]:
    out = [Decision(f"{prefix}.block", tuple(pool), requires)]
    for block in pool:
        for param, choices in block_params.get(block, {}).items():
            out.append(
                Decision(
                    f"{prefix}.{block}.{param}", tuple(choices), ((f"{prefix}.block", (block,)),)
                )
            )
    return out


def layer(values: Mapping[str, Any], prefix: str, block_params: BlockParams) -> dict[str, Any]:
    """The layer (``{"block": ..., **params}``) the values of ``prefix`` describe."""
    block = values[f"{prefix}.block"]
    params = block_params.get(block, {})
    return {"block": block, **{p: values[f"{prefix}.{block}.{p}"] for p in params}}


def values(prefix: str, layer: Mapping[str, Any], block_params: BlockParams) -> Values:
    """The values of ``prefix`` for a layer (its searched parameters only)."""
    block = layer["block"]
    out: Values = {f"{prefix}.block": block}
    for param in block_params.get(block, {}):
        out[f"{prefix}.{block}.{param}"] = layer[param]
    return out
