"""Differentiable NAS's job (Rankitect's DNAS with DistDNAS's cost-aware loss): one penalty,
one slice of the training data.

Architecture logits alpha, one vector per decision of the space, are trained with the
supernet's weights on

    logloss + penalty * E_alpha[cost] / cost_reference

where E_alpha[cost] is the supernet's expected cost (FLOPs by default) under
softmax(alpha), exact and differentiable, and cost_reference is that expectation under
uniform logits unless set (so a penalty of 1 trades one unit of logloss for the whole
average cost).

Each step has two halves:

- weights: one member drawn from softmax(alpha) (Gumbel-max), trained on a training batch,
  as one-shot training trains a path (cheap: one path);
- logits: the relaxed logloss of a smaller batch (``arch_batch_size``) plus the penalty,
  with the weights held fixed. The relaxation, on a temperature tau annealed geometrically
  from ``tau_start`` to ``tau_end``:
    ``gumbel`` (default)  every candidate mixed with a Gumbel-softmax sample of the logits,
                          softmax((alpha + g) / tau) (FBNet, SNAS);
    ``softmax``           every candidate mixed with softmax(alpha / tau) (DARTS);
    ``straight_through``  one member drawn by Gumbel-max, each decision's output scaled by
                          its straight-through Gumbel-softmax gate (GDAS): one path, so any
                          supernet, but a weaker signal (a gate's gradient says whether
                          scaling its output helps, not which choice is better).
  The mixtures evaluate every candidate at every token shape with mass
  (``StackSupernet.relaxed``, exact at one-hot); a space whose step would evaluate more
  than ``nas.search.supernet.distributions.MAX_RELAXED_EVALUATIONS`` candidates is refused
  for them. With ``mixed_choices: k`` (gumbel only), each decision mixes only the k
  choices its Gumbel-perturbed logits rank highest (k draws without replacement from
  softmax(alpha), the Gumbel-top-k trick), renormalised; the rest weigh exactly zero and
  are not evaluated. ProxylessNAS mixes two paths so: the step costs a fraction of the full
  mixture's, each logit still moves whenever its choice is drawn, and the penalty's exact
  expected cost moves them all.

Bilevel by default (DARTS, first order): the logits step on held-out batches. Single-level
(logits on training batches too) lets them prefer whatever fits the training batches best,
which favours larger candidates; the held-out split gives them a signal about
generalisation. The first ``warmup`` fraction of steps trains the weights only, on members
drawn uniformly, so the logits do not follow an untrained supernet.

The decoded architecture takes each active decision's most likely choice. The job
checkpoints every ``checkpoint_every`` steps and, run again on its checkpoint, ends exactly
as an unbroken run would (all randomness comes from generators saved with it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from nas.arch.spec import ArchSpec
from nas.search.supernet import StackSupernet
from nas.search.supernet.distributions import (
    check_relaxation,
    decode,
    decoded_by_step,
    settled_from,
)
from search_spaces.decisions import label
from workers import checkpoint as checkpoints
from workers.optimizers import Adam
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


@dataclass(frozen=True)
class DnasSettings:
    space: dict[str, Any]
    seed: int
    threads: int
    batch_size: int
    lr: float
    embedding_lr: float
    penalty: float  # lambda
    steps: int
    relaxation: str  # gumbel | softmax | straight_through
    bilevel: bool
    tau_start: float
    tau_end: float
    alpha_lr: float
    arch_batch_size: int
    warmup: float  # fraction of steps before the logits move
    cost_reference: float | None
    checkpoint_every: int
    log_every: int
    shard: list[int] | None = None  # [index, count]: this job's chronological training slice
    cost: str = "flops"  # or "latency": the supernet's cost (workers/supernet_job.py builds it)
    cost_target: str = "h100-sxm"
    cost_precision: str | None = None
    cost_batch: int = 4096
    mixed_choices: int | None = None  # gumbel: choices mixed per decision (None: all)


def run(
    settings: dict,
    data: TrialData,
    checkpoint: str | None,
    progress: Progress,
    device: torch.device = CPU,
) -> dict:
    s = DnasSettings(**settings)
    net = job_supernet(settings, data, device)
    check_relaxation(net, s.relaxation, s.mixed_choices)
    return Dnas(net, data, s).run(checkpoint, progress)


class Dnas:
    def __init__(self, net: StackSupernet, data: TrialData, s: DnasSettings):
        self.net, self.s = net, s
        self.decisions = list(net.space.decisions)
        history, device = net.reads_history, device_of(net)
        if s.shard is None:
            train = data.features("train", history)
        else:
            train = data.shard(*s.shard, history=history)
        self.train = DeviceRows(train, device)
        # The logits' batches: held-out rows (bilevel) or training rows (single-level).
        self.arch_rows = (
            DeviceRows(data.features(data.split, history), device) if s.bilevel else self.train
        )
        self.losses = Losses(s.steps, read_every(device))
        config = TrainConfig(
            steps=s.steps,
            batch_size=s.batch_size,
            lr=s.lr,
            embedding_lr=s.embedding_lr,
            seed=s.seed,
        )
        self.optimizers = Optimizers(net, config)
        self.alpha = torch.nn.ParameterDict(
            {
                _name(d.name): torch.nn.Parameter(torch.zeros(len(d.choices), device=device))
                for d in self.decisions
            }
        )
        self.alpha_optimizer = Adam(
            self.alpha.parameters(), lr=s.alpha_lr, betas=(0.5, 0.999), weight_decay=1e-3
        )
        self.train_batches = self.train.batches(s.batch_size, s.seed)
        self.arch_batches = self.arch_rows.batches(s.arch_batch_size, s.seed + 1)
        # on the host, whatever the device: the same draws (and resumes) everywhere
        self.noise = torch.Generator().manual_seed(s.seed + 2)
        self.uniform = np.random.default_rng(s.seed + 3)  # members of the warm-up
        with torch.no_grad():
            uniform = net.expected_cost(self.probabilities())
        self.cost_reference = s.cost_reference or float(uniform)
        self.step, self.seconds = 0, 0.0
        self.trajectory: dict[str, Any] = {"step": [], "alpha": {}, "expected_cost": [], "loss": []}

    # --- the architecture distribution ---------------------------------------------------------

    def logits(self, name: str) -> torch.Tensor:
        return self.alpha[_name(name)]

    def probabilities(self, tau: float = 1.0) -> dict[str, torch.Tensor]:
        return {d.name: torch.softmax(self.logits(d.name) / tau, 0) for d in self.decisions}

    def tau(self) -> float:
        progress = self.step / max(1, self.s.steps - 1)
        return self.s.tau_start * (self.s.tau_end / self.s.tau_start) ** progress

    def decoded(self) -> ArchSpec:
        return decode(
            self.net.space, {d.name: self.logits(d.name).tolist() for d in self.decisions}
        )

    def penalty_term(self) -> torch.Tensor:
        return self.s.penalty * self.net.expected_cost(self.probabilities()) / self.cost_reference

    # --- one step -------------------------------------------------------------------------------

    def draw(self, tau: float) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """A member by Gumbel-max on the logits (its active decisions' values), and each
        decision's Gumbel-softmax sample softmax((alpha + g) / tau), for the same noise (with
        ``mixed_choices: k``, over its k largest alpha + g only, the others at zero)."""
        soft: dict[str, torch.Tensor] = {}
        for d in self.decisions:
            u = torch.rand(len(d.choices), generator=self.noise).clamp(1e-10, 1 - 1e-10)
            u = u.to(self.logits(d.name).device)
            perturbed = (self.logits(d.name) - torch.log(-torch.log(u))) / tau
            k = self.s.mixed_choices
            if k is not None and k < len(d.choices):
                kept = perturbed.topk(k).indices
                weights = torch.softmax(perturbed[kept], 0)
                soft[d.name] = torch.zeros_like(perturbed).scatter(0, kept, weights)
            else:
                soft[d.name] = torch.softmax(perturbed, 0)
        # every decision's choice read back at once: one wait for the device a draw
        chosen = torch.stack([soft[d.name].argmax() for d in self.decisions]).tolist()
        values: dict[str, Any] = {}
        for d, index in zip(self.decisions, chosen, strict=True):
            if d.active(values):
                values[d.name] = d.choices[index]
        return values, soft

    def weights_loss(self, inputs, label: torch.Tensor) -> torch.Tensor:
        """The logloss of one member on a training batch: drawn from softmax(alpha), or
        uniformly during the warm-up."""
        if self.moving:
            values, _ = self.draw(1.0)
            spec = self.net.space.decode(values)
        else:
            spec = self.net.space.sample(self.uniform)
        return F.binary_cross_entropy_with_logits(self.net(spec, *inputs), label)

    def arch_loss(self, inputs, label: torch.Tensor) -> torch.Tensor:
        """The relaxed logloss of a batch (see the module docstring)."""
        tokens = self.net.embed(*inputs)
        tau = self.tau()
        if self.s.relaxation == "softmax":
            logits = self.net.relaxed(self.probabilities(tau), tokens)
        elif self.s.relaxation == "gumbel":
            logits = self.net.relaxed(self.draw(tau)[1], tokens)
        else:
            values, soft = self.draw(tau)
            logits = self.net.logits(
                self.net.space.decode(values), tokens, self.gates(values, soft)
            )
        return F.binary_cross_entropy_with_logits(logits, label)

    def gates(self, values: Mapping, soft: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Straight-through gates (value 1, the gradient of each active decision's soft
        sample at its choice), multiplied per output they scale."""
        gates: dict[str, torch.Tensor] = {}
        for d in self.decisions:
            if d.name in values:
                y = soft[d.name][d.index(values[d.name])]
                g = y - y.detach() + 1.0
                where = _gated(d.name)
                gates[where] = gates[where] * g if where in gates else g
        return gates

    @property
    def moving(self) -> bool:
        return self.step >= self.s.warmup * self.s.steps

    def one_step(self) -> None:
        inputs, label = self.train.batch(self.train_batches.next())
        self.optimizers.zero_grad(self.step)
        loss = self.weights_loss(inputs, label)
        self.losses.add(loss, self.step)  # on the CPU, read (and checked) before the step
        loss.backward()
        self.optimizers.step()
        if self.moving:
            inputs, label = self.arch_rows.batch(self.arch_batches.next())
            self.alpha_optimizer.zero_grad()
            self.net.requires_grad_(False)  # the logits' half: no weight gradients to compute
            try:
                loss = self.arch_loss(inputs, label)
                if self.s.penalty:  # at 0 the expected cost adds nothing: not built
                    loss = loss + self.penalty_term()
                loss.backward()
            finally:
                self.net.requires_grad_(True)
            self.alpha_optimizer.step()
        self.step += 1

    # --- the job --------------------------------------------------------------------------------

    def run(self, path: str | None, progress: Progress) -> dict:
        self.load(path)
        self.net.train()
        while self.step < self.s.steps:
            began = time.perf_counter()
            self.one_step()
            self.seconds += time.perf_counter() - began
            last = self.step == self.s.steps
            if self.step % self.s.log_every == 0 or last:
                self.losses.read()  # a wait for the device every log_every steps
                self.record(self.losses.tail[-1])
            progress("dnas training", self.step, self.s.steps)
            if path and (self.step % self.s.checkpoint_every == 0 or last):
                self.losses.read()  # a diverged loss fails before its weights are kept
                self.save(path)
        return self.result()

    @torch.no_grad()
    def result(self) -> dict:
        probabilities = self.probabilities()
        spec = self.decoded()
        return {
            "penalty": self.s.penalty,
            "shard": self.s.shard,
            "probabilities": {k: v.tolist() for k, v in probabilities.items()},
            "decoded": spec.to_dict(),
            "arch_id": spec.arch_id,
            "expected_cost": float(self.net.expected_cost(probabilities)),
            "decoded_cost": float(self.net.expected_cost(self.net.one_hot(spec))),
            "cost_reference": self.cost_reference,
            "trajectory": self.trajectory,
            "settled_from_step": settled_from(decoded_by_step(self.net.space, self.trajectory)),
            "seconds": self.seconds,
            "steps": self.s.steps,
        }

    @torch.no_grad()
    def record(self, loss: float) -> None:
        t = self.trajectory
        t["step"].append(self.step)
        t["loss"].append(loss)
        t["expected_cost"].append(float(self.net.expected_cost(self.probabilities())))
        for d in self.decisions:
            per_choice = t["alpha"].setdefault(d.name, {str(label(c)): [] for c in d.choices})
            for c, value in zip(d.choices, self.logits(d.name).tolist(), strict=True):
                per_choice[str(label(c))].append(value)

    def save(self, path: str) -> None:
        checkpoints.save(
            path,
            {
                "model": self.net.state_dict(),
                "alpha": self.alpha.state_dict(),
                "optimizers": self.optimizers.state_dict(),
                "alpha_optimizer": self.alpha_optimizer.state_dict(),
                "train_batches": self.train_batches.state_dict(),
                "arch_batches": self.arch_batches.state_dict(),
                "noise": self.noise.get_state(),
                "uniform": self.uniform.bit_generator.state,
                "step": self.step,
                "seconds": self.seconds,
                "trajectory": self.trajectory,
                "cost_reference": self.cost_reference,
            },
        )

    def load(self, path: str | None) -> None:
        state = checkpoints.load(path) if path else None
        if state is None:
            return
        self.net.load_state_dict(state["model"])
        self.alpha.load_state_dict(state["alpha"])
        self.optimizers.load_state_dict(state["optimizers"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.train_batches.load_state_dict(state["train_batches"])
        self.arch_batches.load_state_dict(state["arch_batches"])
        self.noise.set_state(state["noise"])
        self.uniform.bit_generator.state = state["uniform"]
        self.step, self.seconds = state["step"], state["seconds"]
        self.trajectory, self.cost_reference = state["trajectory"], state["cost_reference"]


def _name(decision: str) -> str:
    return decision.replace(".", "__")  # ParameterDict keys cannot hold dots


def _gated(decision: str) -> str:
    """Which output a decision's gate scales: tokens_0 (the width and the history encoder), a
    position (its block and parameters; the depth scales the last layer's), or the logit
    (the top)."""
    if decision == "embedding_dim" or decision.startswith("sequence."):
        return "tokens"
    if decision == "depth":
        return "last"
    if decision in ("top_mlp", "top_input"):
        return "logit"
    return decision.split(".", 1)[0]
