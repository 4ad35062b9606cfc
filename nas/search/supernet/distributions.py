"""Distributions over a space's decisions, as DNAS learns them: whether a relaxation is
affordable in a supernet, several runs' distributions made one (DistDNAS's shards), and the
member a distribution decodes to."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.supernet.stack import StackSupernet

MAX_RELAXED_EVALUATIONS = 160  # candidates one relaxed step may evaluate
MIXTURES = ("gumbel", "softmax")


def check_relaxation(net: StackSupernet, relaxation: str) -> None:
    """A mixture relaxation must be affordable: say so before anything runs."""
    count = net.relaxed_evaluations()
    if relaxation in MIXTURES and count > MAX_RELAXED_EVALUATIONS:
        raise ConfigError(
            "strategy.options.relaxation",
            f"{relaxation} mixes every candidate each step, {count} in this space, more than "
            f"{MAX_RELAXED_EVALUATIONS}; use relaxation: straight_through (one path a step) "
            "or fewer choices in space.options",
        )


def aggregate(results: list[Mapping], decisions, how: str = "mean") -> dict[str, list[float]]:
    """One distribution per decision from several DNAS runs (DistDNAS's shards): the mean of
    their probabilities, or (``vote``) each run's most likely choice counted, ties broken by
    the mean. Either way, the decoded member takes each decision's largest entry."""
    out = {}
    for d in decisions:
        mean = torch.tensor([r["probabilities"][d.name] for r in results]).mean(0)
        if how == "vote":
            votes = torch.zeros(len(d.choices))
            for r in results:
                votes[int(torch.tensor(r["probabilities"][d.name]).argmax())] += 1
            mean = votes + mean / 2  # a vote outweighs any mean (which sums to 1)
            mean = mean / mean.sum()
        out[d.name] = mean.tolist()
    return out


def decode(space, scores: Mapping[str, list[float]]) -> ArchSpec:
    """The member taking each active decision's highest-scoring choice."""
    values: dict[str, Any] = {}
    for d in space.decisions:
        if d.active(values):
            values[d.name] = d.choices[int(torch.tensor(scores[d.name]).argmax())]
    return space.decode(values)


def most_likely(space, probabilities: Mapping[str, list[float]], k: int) -> list[ArchSpec]:
    """The ``k`` members of highest probability under independent per-decision
    distributions (a member's probability: the product over its active decisions), most
    likely first; fewer where the space has fewer. (The first need not be ``decode``'s: a
    member whose choices leave some decisions inactive can be likelier than the one of
    every highest choice.)

    A beam search over the decisions in declaration order, keeping the ``beam`` likeliest
    partial assignments after each: its work is bounded (decisions x beam x choices) where
    an exact best-first search would visit every partial assignment of a flat distribution
    (DNAS's logits early on). It misses a member only when more than ``beam`` partial
    assignments are likelier than that member's at some decision, which the peaked
    distributions DNAS learns do not give for small ``k`` (tested against brute force)."""
    beam = max(64, 16 * k)
    partial: list[tuple[float, dict[str, Any]]] = [(0.0, {})]
    for d in space.decisions:
        grown = []
        for cost, values in partial:
            if not d.active(values):
                grown.append((cost, values))
                continue
            for choice, p in zip(d.choices, probabilities[d.name], strict=True):
                step = math.inf if p <= 0 else -math.log(p)
                grown.append((cost + step, {**values, d.name: choice}))
        # sorted() is stable: among equal probabilities the earlier choice stays first
        partial = sorted(grown, key=lambda c: c[0])[:beam]
    return [space.decode(values) for _, values in partial[:k]]
