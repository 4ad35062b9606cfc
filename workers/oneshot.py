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

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nas.arch.model import RankingModel
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.objectives import SERVING_CANDIDATES, CostSettings, cost_values, get_objective
from nas.search.strategies import SpaceExhausted, StrategyContext, create_strategy
from nas.search.strategies.oneshot import pick_front
from nas.search.supernet import StackSupernet
from nas.search.supernet.few_shot import FewShotSplit
from search_spaces.base import SearchSpace
from workers import checkpoint as checkpoints
from workers.metrics import binary_metrics
from workers.supernet_job import Progress, job_supernet
from workers.train import (
    CPU,
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
    few_shot: tuple[str, ...] = ()  # decisions whose values split the space into families
    few_shot_steps: int = 0  # each family's sub-supernet, after the shared training
    calibration: list = field(default_factory=list)  # members (dicts) to score for the ranker
    costs: list = field(default_factory=list)  # the latency objectives (CostSettings as dicts)
    cost_threads: int = 1  # the threads a trial is priced on (target cpu)


def run(
    settings: dict,
    data: TrialData,
    checkpoint: str | None,
    progress: Progress,
    device: torch.device = CPU,
) -> dict:
    s = OneShotSettings(**settings)
    net = job_supernet(settings, data, device)
    trained, train_seconds = train_supernet(net, data, s, checkpoint, progress)
    start = time.perf_counter()
    costs = [CostSettings(**c) for c in s.costs]
    score = trained.scorer(data, s.eval_rows, s.seed, costs, s.cost_threads)
    scored = search_subnets(net.space, score, s, progress)
    picks = pick_front(scored, s.objectives, s.picks)
    result = {
        "picks": [{"spec": spec.to_dict(), "estimate": metrics} for spec, metrics in picks],
        "subnets": [{"arch_id": spec.arch_id, **metrics} for spec, metrics in scored],
        "evaluated": len(scored),
        "train_seconds": train_seconds,
        "search_seconds": time.perf_counter() - start,
        "supernet_params": sum(p.numel() for p in net.parameters()),
        "steps": s.steps,
    }
    if s.calibration:  # what the strategy's ranker fits on, and every member it re-ranks
        result["calibration"] = [score(ArchSpec.from_dict(spec)) for spec in s.calibration]
        result["pool"] = [{"spec": spec.to_dict(), "estimate": m} for spec, m in scored]
    return result


# --- supernet training ---------------------------------------------------------------------


@dataclass
class Supernets:
    """A one-shot job's trained weights: the shared supernet and, with ``few_shot``, one
    sub-supernet per family of ``split`` (``states[i]``: family i's weights, the shared
    supernet's shape). A member is scored with its family's weights."""

    shared: StackSupernet
    split: FewShotSplit | None = None
    states: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def net(self, family: int | None) -> StackSupernet:
        """The supernet of ``family`` (None: the shared one), a copy holding its weights."""
        if family is None:
            return self.shared
        net = copy.deepcopy(self.shared)
        net.load_state_dict(self.states[family])
        return net

    def scorer(
        self,
        data: TrialData,
        rows: int,
        seed: int,
        costs: Sequence[CostSettings] = (),
        threads: int = 1,
    ) -> Callable[[ArchSpec], dict]:
        """Scores members as ``SubnetScorer`` does, each with its family's weights (a
        family's scorer made when one of its members is first scored)."""
        made: dict[int | None, SubnetScorer] = {}

        def score(spec: ArchSpec) -> dict[str, float]:
            family = None if self.split is None else self.split.index(spec)
            if family not in made:
                made[family] = SubnetScorer(self.net(family), data, rows, seed, costs, threads)
            return made[family](spec)

        return score


def train_supernet(
    net: StackSupernet, data: TrialData, s: OneShotSettings, path: str | None, progress: Progress
) -> tuple[Supernets, float]:
    """Train ``net`` for ``s.steps`` steps on the device it is on, then, with ``few_shot``,
    a copy of it per family for ``few_shot_steps`` each (resuming from ``path``, where each
    phase's progress is kept); the trained weights (``net`` ends as the shared supernet) and
    the training seconds."""
    split = FewShotSplit(net.space, s.few_shot) if s.few_shot else None
    phases = 1 + (len(split.families) if split else 0)
    state = checkpoints.load(path) if path else None
    phase = 0 if state is None else state.get("phase", 0)
    shared = None if state is None else state.get("shared")
    states = [] if state is None else list(state.get("families", []))
    seconds = 0.0 if state is None else state["seconds"]
    if state is not None and state.get("finished"):
        net.load_state_dict(state["model"])
        return Supernets(net, split, states), seconds
    rows = DeviceRows(data.features("train", net.reads_history), device_of(net))
    while phase < phases:
        if phase > 0 and (state is None or state.get("phase", 0) != phase):
            net.load_state_dict(shared)  # a family's sub-supernet starts as the shared one
        if phase == 0:
            draw = _path_draw(net, s)
            name, steps, total, done = "supernet training", s.steps, s.steps, 0
        else:
            family = phase - 1
            draw = lambda _rng, f=family: [split.sample(f, _rng)]  # noqa: E731
            name, steps = "few-shot training", s.few_shot_steps
            total, done = len(split.families) * steps, family * steps

        def keep(extra, phase=phase, shared=shared, before=seconds) -> None:
            context = {"phase": phase, "shared": shared, "families": states}
            checkpoints.save(path, extra | context | {"seconds": before + extra["seconds"]})

        seconds += _train_phase(
            net,
            rows,
            s,
            steps,
            s.seed + phase,
            draw,
            state if state is not None and state.get("phase", 0) == phase else None,
            keep if path else None,
            lambda step, done=done, total=total, name=name: progress(name, done + step, total),
        )
        if phase == 0:
            shared = {k: v.detach().clone() for k, v in net.state_dict().items()}
        else:
            states.append({k: v.detach().clone() for k, v in net.state_dict().items()})
        state, phase = None, phase + 1
    if shared is not None and split is not None:
        net.load_state_dict(shared)
    if path:
        checkpoints.save(
            path,
            {"finished": True, "model": net.state_dict(), "families": states, "seconds": seconds},
        )
    return Supernets(net, split, states), seconds


def _path_draw(net: StackSupernet, s: OneShotSettings):
    """The members one step of the shared supernet trains: one uniform draw, or the
    sandwich (the largest, the smallest and ``sandwich_paths`` random ones)."""
    extremes = sandwich_extremes(net) if s.sampling == "sandwich" else []
    paths = s.sandwich_paths if s.sampling == "sandwich" else 1
    return lambda rng: extremes + [net.space.sample(rng) for _ in range(paths)]


def sandwich_extremes(net: StackSupernet) -> list[ArchSpec]:
    """The largest and the smallest member by FLOPs among a fixed draw of members."""
    rng = np.random.default_rng(0)
    drawn = {spec.arch_id: spec for spec in (net.space.sample(rng) for _ in range(EXTREME_DRAWS))}
    by_cost = sorted(drawn.values(), key=lambda spec: (analytic(spec, net)["flops"], spec.arch_id))
    return [by_cost[-1], by_cost[0]]


def _train_phase(net, rows, s, steps, seed, draw, state, keep, progress) -> float:
    """``steps`` steps of ``net`` on the members ``draw(rng)`` gives each step, with a fresh
    schedule (warm-up, cosine decay), from ``state`` when resuming; the seconds it took.
    ``keep(state)`` checkpoints every ``checkpoint_every`` steps and at the end."""
    config = TrainConfig(
        steps=steps, batch_size=s.batch_size, lr=s.lr, embedding_lr=s.embedding_lr, seed=seed
    )
    losses = Losses(steps, read_every(device_of(net)))
    batches = rows.batches(s.batch_size, seed)
    optimizers = Optimizers(net, config)
    rng = np.random.default_rng(seed)
    step, seconds = 0, 0.0
    if state is not None:
        net.load_state_dict(state["model"])
        optimizers.load_state_dict(state["optimizers"])
        batches.load_state_dict(state["batches"])
        rng.bit_generator.state = state["rng"]
        step = state["step"]
    net.train()
    while step < steps:
        began = time.perf_counter()
        inputs, label = rows.batch(batches.next())
        optimizers.zero_grad(step)
        paths = draw(rng)
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
        progress(step)
        if keep is not None and (step % s.checkpoint_every == 0 or step == steps):
            losses.read()  # a diverged loss fails before its weights are kept
            keep(
                {
                    "model": net.state_dict(),
                    "optimizers": optimizers.state_dict(),
                    "batches": batches.state_dict(),
                    "rng": rng.bit_generator.state,
                    "step": step,
                    "seconds": seconds,
                }
            )
    losses.read()
    return seconds


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
    """Members scored with a supernet's weights: NE, AUC, logloss (and AUC per user or
    request, where the data has them) on a fixed sample of the held-out split (embedded once
    for all of them); FLOPs, parameters and the latency objectives' ``costs`` from their
    configs, as a trial's are."""

    def __init__(
        self,
        net: StackSupernet,
        data: TrialData,
        rows: int,
        seed: int,
        costs: Sequence[CostSettings] = (),
        threads: int = 1,
    ):
        held = data.features(data.split, net.reads_history)
        order = torch.randperm(len(held), generator=torch.Generator().manual_seed(seed))
        kept = order[:rows]
        batch = held[kept]
        self.label = batch.label
        self.groups = {name: keys[kept.numpy()] for name, keys in data.groups().items()}
        self.net, self.rates = net, data.train_rates
        self.costs, self.threads = costs, threads
        with torch.no_grad():
            self.tokens = net.embed(*batch.to(device_of(net)).inputs())

    @torch.no_grad()
    def __call__(self, spec: ArchSpec) -> dict[str, float]:
        self.net.eval()
        logits = self.net.logits(spec, self.tokens).cpu()  # one copy back per member
        metrics = binary_metrics(self.label, logits, self.rates, self.groups)
        costs = cost_values(self.costs, spec, self.net.schema, self.threads)
        return metrics | analytic(spec, self.net) | costs


def search_subnets(
    space: SearchSpace,
    score: Callable[[ArchSpec], dict[str, float]],
    s: OneShotSettings,
    progress: Progress,
) -> list[tuple[ArchSpec, dict[str, float]]]:
    """Members of ``space`` the subnet search scored with ``score``, in the order it asked
    for them."""
    objectives = tuple(get_objective(name) for name in s.objectives)
    name, options = {
        "evolution": ("evolution", {"population_size": 32, "sample_size": 8}),
        "nsga2": ("optuna", {"sampler": "nsga2", "population_size": 32}),
    }[s.subnet_search]
    if len(objectives) == 1 and name == "optuna":
        options = {"sampler": "tpe"}
    strategy = create_strategy(name, options, StrategyContext(space, objectives, s.seed))
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


def load_supernets(settings: dict, data: TrialData, checkpoint: str) -> Supernets:
    """The supernets a finished one-shot job trained, from its checkpoint."""
    s = OneShotSettings(**settings)
    net = job_supernet(settings, data)
    state = checkpoints.load(checkpoint)
    if state is not None and state.get("finished"):
        return train_supernet(net, data, s, checkpoint, lambda *_: None)[0]
    if state is not None and "phase" not in state and state["step"] == s.steps:
        net.load_state_dict(state["model"])  # written before few-shot supernets
        return Supernets(net)
    raise ConfigError("checkpoint", f"{checkpoint} holds no finished supernet")
