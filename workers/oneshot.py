"""One-shot NAS's setup job (Rankitect, NASRec): train a supernet, then search its members.

    supernet training   each step trains one member drawn uniformly from the space (single
                        path), or, with ``sampling: sandwich``, the largest and the smallest
                        member plus ``sandwich_paths`` random ones (BigNAS's sandwich rule)
    subnet search       evolution or NSGA-II over the space, each member scored with the
                        supernet's weights on a fixed sample of the held-out split (NE, AUC,
                        logloss) and by its analytic cost (FLOPs, serving FLOPs, parameters)
    picks               the best ``picks`` members: the front of those scores, spread along
                        its first objective, then the next fronts

The job checkpoints the supernet every ``checkpoint_every`` steps; run again with the same
checkpoint path, it continues from there and ends as an unbroken run would. The subnet
search is deterministic and short, so it runs again rather than being checkpointed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nas.arch.model import RankingModel
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.objectives import SERVING_CANDIDATES, get_objective
from nas.search.pareto import nondominated_ranks
from nas.search.strategies import SpaceExhausted, StrategyContext, create_strategy
from nas.search.supernet import StackSupernet
from workers import checkpoint as checkpoints
from workers.metrics import binary_metrics
from workers.supernet_job import Progress, job_supernet
from workers.train import (
    CPU,
    Batches,
    DeviceRows,
    Losses,
    Optimizers,
    TrainConfig,
    device_of,
    read_every,
)
from workers.trial_data import TrialData

EXTREME_DRAWS = 256  # members drawn to find the sandwich's largest and smallest


@dataclass(frozen=True)
class OneShotSettings:
    space: dict[str, Any]  # {"name": ..., "options": ...}
    objectives: list[str]
    seed: int
    threads: int
    batch_size: int
    lr: float
    embedding_lr: float
    steps: int
    sampling: str  # uniform | sandwich
    sandwich_paths: int
    checkpoint_every: int
    subnet_search: str  # evolution | nsga2
    subnet_budget: int
    eval_rows: int
    picks: int


def run(
    settings: dict,
    data: TrialData,
    checkpoint: str | None,
    progress: Progress,
    device: torch.device = CPU,
) -> dict:
    s = OneShotSettings(**settings)
    net = job_supernet(settings, data, device)
    train_seconds = train_supernet(net, data, s, checkpoint, progress)
    start = time.perf_counter()
    scored = search_subnets(net, data, s, progress)
    picks = pick_front(scored, s.objectives, s.picks)
    return {
        "picks": [{"spec": spec.to_dict(), "estimate": metrics} for spec, metrics in picks],
        "subnets": [{"arch_id": spec.arch_id, **metrics} for spec, metrics in scored],
        "evaluated": len(scored),
        "train_seconds": train_seconds,
        "search_seconds": time.perf_counter() - start,
        "supernet_params": sum(p.numel() for p in net.parameters()),
        "steps": s.steps,
    }


# --- supernet training ---------------------------------------------------------------------


def train_supernet(
    net: StackSupernet, data: TrialData, s: OneShotSettings, path: str | None, progress: Progress
) -> float:
    """Train ``net`` for ``s.steps`` steps on the device it is on (resuming from ``path``);
    the training seconds."""
    device = device_of(net)
    rows = DeviceRows(data.features("train", net.reads_history), device)
    losses = Losses(s.steps, read_every(device))
    config = TrainConfig(
        steps=s.steps, batch_size=s.batch_size, lr=s.lr, embedding_lr=s.embedding_lr, seed=s.seed
    )
    batches = Batches(len(rows.data), s.batch_size, s.seed)
    optimizers = Optimizers(net, config)
    rng = np.random.default_rng(s.seed)
    extremes = sandwich_extremes(net) if s.sampling == "sandwich" else []
    step, seconds = 0, 0.0
    state = checkpoints.load(path) if path else None
    if state is not None:
        net.load_state_dict(state["model"])
        optimizers.load_state_dict(state["optimizers"])
        batches.load_state_dict(state["batches"])
        rng.bit_generator.state = state["rng"]
        step, seconds = state["step"], state["seconds"]
    net.train()
    while step < s.steps:
        began = time.perf_counter()
        inputs, label = rows.batch(batches.next())
        optimizers.zero_grad(step)
        paths = extremes + [net.space.sample(rng) for _ in range(_random_paths(s))]
        tokens = net.embed(*inputs)
        loss = sum(
            torch.nn.functional.binary_cross_entropy_with_logits(net.logits(spec, tokens), label)
            for spec in paths
        ) / len(paths)
        losses.add(loss, step)  # on the CPU, read (and checked) before the step is taken
        loss.backward()
        optimizers.step()
        step += 1
        seconds += time.perf_counter() - began
        progress("supernet training", step, s.steps)
        if path and (step % s.checkpoint_every == 0 or step == s.steps):
            losses.read()  # a diverged loss fails before its weights are kept
            checkpoints.save(
                path,
                {
                    "model": net.state_dict(),
                    "optimizers": optimizers.state_dict(),
                    "batches": batches.state_dict(),
                    "rng": rng.bit_generator.state,
                    "step": step,
                    "seconds": seconds,
                },
            )
    losses.read()
    return seconds


def _random_paths(s: OneShotSettings) -> int:
    return s.sandwich_paths if s.sampling == "sandwich" else 1


def sandwich_extremes(net: StackSupernet) -> list[ArchSpec]:
    """The largest and the smallest member by FLOPs among a fixed draw of members."""
    rng = np.random.default_rng(0)
    drawn = {spec.arch_id: spec for spec in (net.space.sample(rng) for _ in range(EXTREME_DRAWS))}
    by_cost = sorted(drawn.values(), key=lambda spec: (analytic(spec, net)["flops"], spec.arch_id))
    return [by_cost[-1], by_cost[0]]


# --- subnet search -------------------------------------------------------------------------


def analytic(spec: ArchSpec, net: StackSupernet) -> dict[str, float]:
    """A member's FLOPs, serving FLOPs and parameters, from its configs alone."""
    with torch.device("meta"):  # shapes only: nothing allocated
        model = RankingModel(spec, net.schema)
    return {
        "flops": float(model.flops()),
        "serving_flops": model.flops_per_request(SERVING_CANDIDATES) / SERVING_CANDIDATES,
        "params": float(sum(p.numel() for p in model.parameters())),
    }


class SubnetScorer:
    """Members scored with a supernet's weights: NE, AUC and logloss on a fixed sample of the
    held-out split (embedded once for all of them), cost from their configs."""

    def __init__(self, net: StackSupernet, data: TrialData, rows: int, seed: int):
        held = data.features(data.split, net.reads_history)
        order = torch.randperm(len(held), generator=torch.Generator().manual_seed(seed))
        batch = held[order[:rows]]
        self.label = batch.label
        self.net, self.rates = net, data.train_rates
        with torch.no_grad():
            self.tokens = net.embed(*batch.to(device_of(net)).inputs())

    @torch.no_grad()
    def __call__(self, spec: ArchSpec) -> dict[str, float]:
        self.net.eval()
        logits = self.net.logits(spec, self.tokens).cpu()  # one copy back per member
        metrics = binary_metrics(self.label, logits, self.rates)
        return metrics | analytic(spec, self.net)


def search_subnets(
    net: StackSupernet, data: TrialData, s: OneShotSettings, progress: Progress
) -> list[tuple[ArchSpec, dict[str, float]]]:
    """Members the subnet search scored, in the order it asked for them."""
    score = SubnetScorer(net, data, s.eval_rows, s.seed)
    objectives = tuple(get_objective(name) for name in s.objectives)
    name, options = {
        "evolution": ("evolution", {"population_size": 32, "sample_size": 8}),
        "nsga2": ("optuna", {"sampler": "nsga2", "population_size": 32}),
    }[s.subnet_search]
    if len(objectives) == 1 and name == "optuna":
        options = {"sampler": "tpe"}
    strategy = create_strategy(name, options, StrategyContext(net.space, objectives, s.seed))
    scored = []
    for i in range(s.subnet_budget):
        try:
            spec = strategy.ask()
        except SpaceExhausted:  # a small space: every member was scored
            break
        metrics = score(spec)
        strategy.tell(spec, [float(metrics[o.name]) for o in objectives])
        scored.append((spec, metrics))
        progress("subnet search", i + 1, s.subnet_budget)
    if not scored:
        raise ConfigError("strategy.options.subnet_budget", "scored no member of the space")
    return scored


def load_supernet(settings: dict, data: TrialData, checkpoint: str) -> StackSupernet:
    """The supernet a finished one-shot job trained, from its checkpoint."""
    s = OneShotSettings(**settings)
    net = job_supernet(settings, data)
    state = checkpoints.load(checkpoint)
    if state is None or state["step"] != s.steps:
        raise ConfigError("checkpoint", f"{checkpoint} holds no finished supernet")
    net.load_state_dict(state["model"])
    return net


def pick_front(
    scored: list[tuple[ArchSpec, dict[str, float]]], objectives: list[str], k: int
) -> list[tuple[ArchSpec, dict[str, float]]]:
    """Up to ``k`` members: the non-dominated ones spread evenly along the first objective,
    then the next fronts the same way."""
    directions = [get_objective(name).direction for name in objectives]
    values = np.array([[m[name] for name in objectives] for _, m in scored])
    ranks = nondominated_ranks(values, directions)
    sign = 1.0 if directions[0] == "min" else -1.0
    picked: list[int] = []
    for rank in range(int(ranks.max()) + 1):
        front = sorted(np.flatnonzero(ranks == rank), key=lambda i: sign * values[i][0])
        room = k - len(picked)
        if len(front) > room:
            spots = np.unique(np.linspace(0, len(front) - 1, room).round().astype(int))
            front = [front[j] for j in spots]
        picked += [int(i) for i in front]
        if len(picked) >= k:
            break
    return [scored[i] for i in picked]
