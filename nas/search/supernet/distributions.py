"""Distributions over a space's decisions, as DNAS learns them: whether a relaxation is
affordable in a supernet, several runs' distributions made one (DistDNAS's shards), and the
member a distribution decodes to."""

from __future__ import annotations

import heapq
import itertools
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

    Best-first search over partial assignments in declaration order: each choice multiplies
    the probability by at most 1, so no completion of a partial assignment is more likely
    than it, and members leave the queue in order of probability. Ties go to the earlier
    choice."""
    decisions = space.decisions
    order = itertools.count()
    queue: list[tuple[float, int, int, dict[str, Any]]] = [(0.0, next(order), 0, {})]
    out: list[ArchSpec] = []
    while queue and len(out) < k:
        cost, _, at, values = heapq.heappop(queue)
        while at < len(decisions) and not decisions[at].active(values):
            at += 1
        if at == len(decisions):
            out.append(space.decode(values))
            continue
        d = decisions[at]
        for i, p in sorted(enumerate(probabilities[d.name]), key=lambda c: (-c[1], c[0])):
            step = math.inf if p <= 0 else -math.log(p)
            heapq.heappush(
                queue, (cost + step, next(order), at + 1, {**values, d.name: d.choices[i]})
            )
    return out
