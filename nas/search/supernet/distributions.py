"""Distributions over a space's decisions, as DNAS learns them: whether a relaxation is
affordable in a supernet, several runs' distributions made one (DistDNAS's shards), and the
member a distribution decodes to."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

import torch

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.supernet.stack import StackSupernet

MAX_RELAXED_EVALUATIONS = 160  # candidates one relaxed step may evaluate
MIXTURES = ("gumbel", "softmax")
MIXED_DRAWS = 64  # random draws of k choices a decision, to size a step of mixed_choices: k


def check_relaxation(net: StackSupernet, relaxation: str, mixed_choices: int | None = None) -> None:
    """A mixture relaxation must be affordable: say so before anything runs. Mixing every
    choice, a step evaluates every candidate; mixing ``mixed_choices`` (k) a decision, the
    candidates whose every choice is among its decisions' k: sized by the most that
    ``MIXED_DRAWS`` random draws of k choices a decision evaluate (seeded: the same space gets
    the same answer)."""
    if relaxation not in MIXTURES:
        return
    if mixed_choices is None:
        count = net.relaxed_evaluations()
        field = "strategy.options.relaxation"
        how = f"{relaxation} mixes every candidate each step, {count} in this space"
    else:
        rng = random.Random(0)
        draws = (_some_choices(net.space.decisions, mixed_choices, rng) for _ in range(MIXED_DRAWS))
        count = max(net.relaxed_evaluations(mass) for mass in draws)
        field = "strategy.options.mixed_choices"
        how = (
            f"{relaxation} with mixed_choices: {mixed_choices} evaluates up to {count} "
            f"candidates a step in this space (the most of {MIXED_DRAWS} random draws)"
        )
    if count > MAX_RELAXED_EVALUATIONS:
        smaller = "a smaller mixed_choices, " if (mixed_choices or 0) > 2 else ""
        raise ConfigError(
            field,
            f"{how}, more than {MAX_RELAXED_EVALUATIONS}; use {smaller}relaxation: "
            "straight_through (one path a step) or fewer choices in space.options",
        )


def _some_choices(decisions, k: int, rng: random.Random) -> dict[str, list[bool]]:
    """``k`` choices of each decision drawn at random (all of a decision with k or fewer)."""
    out = {}
    for d in decisions:
        kept = set(rng.sample(range(len(d.choices)), min(k, len(d.choices))))
        out[d.name] = [i in kept for i in range(len(d.choices))]
    return out


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


def decoded_by_step(space, trajectory: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(step, arch_id) that a DNAS job's logits decode at each logged step. ``trajectory``:
    ``{"step": [...], "alpha": {decision: {choice: [its logit at each step]}}}``, the
    choices in the decision's order (what ``workers/dnas.py`` logs)."""
    alpha = trajectory["alpha"]
    return [
        (step, decode(space, {d: [v[i] for v in c.values()] for d, c in alpha.items()}).arch_id)
        for i, step in enumerate(trajectory["step"])
    ]


def settled_from(decoded: list[tuple[int, str]]) -> int | None:
    """The first step from which every logged step decodes what the last one does (DARTS+'s
    sign that the search converged: late in a job means its decode was still moving); None
    if nothing was logged."""
    settled = None
    for step, arch_id in reversed(decoded):
        if arch_id != decoded[-1][1]:
            break
        settled = step
    return settled


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
