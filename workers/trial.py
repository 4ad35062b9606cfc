"""One candidate, start to finish: build -> train -> evaluate (NE, AUC, logloss) -> FLOPs,
on a ``TrialData`` (``workers.trial_data``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import torch

from nas.arch.flops import measure_flops_per_example
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.data.schema import Features
from nas.search.objectives import PER_LABEL, SERVING_CANDIDATES, split_label
from workers import checkpoint
from workers.metrics import Groups
from workers.train import StepCallback, TrainConfig, train
from workers.train import evaluate as evaluate_model
from workers.trial_data import TrialData

FLOPS_BATCH = 8


def is_validation_figure(key: str) -> bool:
    """Whether ``key`` (``ne``, ``ne:<label>``...) is one of the quality figures a rung or a
    check measures (``nas.search.objectives.PER_LABEL``)."""
    return split_label(key)[0] in PER_LABEL


@dataclass(frozen=True)
class TrialResult:
    arch_id: str
    name: str | None
    dataset: str
    split: str  # where the metrics were measured
    ne: float  # with several labels: the mean over labels, as are auc, logloss and gauc
    auc: float
    logloss: float
    gauc: float | None  # AUC per user, weighted by rows (None: the dataset has no users)
    gauc_request: float | None  # AUC per request, likewise (None: no requests)
    flops: float  # per example, measured (fvcore; 2 per multiply-add)
    serving_flops: float  # per candidate, request side shared by SERVING_CANDIDATES (analytic)
    params: int
    train_examples_per_s: float
    train_loss: float  # mean over the last 10% of steps
    seconds: float  # the whole trial: build, train, evaluate, count
    train_seconds: float
    eval_seconds: float
    flops_seconds: float
    steps: int  # trained (fewer than the budget for a trial stopped at a rung)
    batch_size: int
    seed: int
    # NE, AUC and logloss on the rung subsample at each rung (and at the end), when it has rungs;
    # when it selects its best weights, those of the best check so far (and its best_step)
    rungs: list[dict[str, float]] = field(default_factory=list)
    # budget.select_best: every check's own figures, and the step whose weights it kept
    checks: list[dict[str, float]] = field(default_factory=list)
    best_step: int | None = None
    # the FP8 probe's plan (a search with an fp8-dispatch objective): its latencies, sites
    fp8: dict | None = None
    # validation checks while training (rungs, select_best) and each rung report's hand-over
    # to Tune: neither train_seconds nor eval_seconds
    check_seconds: float = 0.0
    # several labels: each one's figures, "ne:<label>", "auc:<label>"... (objectives name them)
    per_label: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Its fields, each label's figures among them as ``ne:<label>``... keys."""
        out = asdict(self)
        return out | out.pop("per_label")


@dataclass(frozen=True)
class Rungs:
    """Where a trial pauses to measure itself while it trains: at ``steps``, on ``rows``
    validation rows (the same rows for every trial with the same seed). ``report`` hears the
    figures as a ``TrialResult`` of the steps so far, its metrics on those rows (in a search:
    a Tune report, after which the scheduler may end the trial)."""

    steps: tuple[int, ...]
    rows: int
    report: Callable[[TrialResult], None]


@dataclass(frozen=True)
class SelectBest:
    """A trial checks itself every ``every_steps`` steps (and at each rung, and at its last
    step) on ``rows`` validation rows and keeps the weights of its best check; with
    ``patience``, training ends after that many checks without a new best."""

    every_steps: int
    rows: int
    patience: int | None = None
    metric: str = "ne"  # the figure a check is best by: ne, or one label's (ne:click)


class _Validation:
    """Measures a training model on a fixed validation subsample (the same rows for every
    trial with the same seed) at its rungs and checks; keeps the best check's weights."""

    def __init__(
        self,
        rows: Features,
        groups: Groups,
        count: int,
        seed: int,
        select: SelectBest | None,
    ):
        order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))
        kept = order[: min(count, len(rows))].sort().values
        self.rows = rows[kept]
        self.groups = {name: keys[kept.numpy()] for name, keys in groups.items()}
        self.select = select
        self.rungs: list[dict[str, float]] = []  # the figures reported at each rung
        self.checks: list[dict[str, float]] = []  # every check's own figures (selecting)
        self.best: dict[str, float] | None = None
        self.best_state: dict[str, torch.Tensor] | None = None
        self.stale = 0  # checks since the best one
        self.paused = 0.0  # seconds training stood still for measuring and reporting

    def measure(self, model, step: int, data: TrialData, config: TrainConfig) -> dict:
        metrics = evaluate_model(
            model, self.rows, data.train_rates, config.eval_batch_size, self.groups
        )
        model.train()
        return {"step": step, **{k: v for k, v in metrics.items() if is_validation_figure(k)}}

    def check(self, model, step: int, data: TrialData, config: TrainConfig) -> dict:
        """The figures at ``step``: the model's own, or when selecting, those of the best
        check so far (what the trial would end with), with its ``best_step``."""
        figures = self.measure(model, step, data, config)
        if self.select is None:
            return figures
        self.checks.append(figures)
        metric = self.select.metric
        if self.best is None or figures[metric] < self.best[metric]:
            self.best, self.stale = figures, 0
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            self.stale += 1
        return self.kept(step)

    def kept(self, step: int) -> dict:
        """At ``step``, the figures of the weights kept so far (the best check's)."""
        return {**self.best, "step": step, "best_step": self.best["step"]}

    def due(self, step: int) -> bool:
        return self.select is not None and step % self.select.every_steps == 0

    def patience_ran_out(self) -> bool:
        patience = self.select.patience if self.select else None
        return patience is not None and self.stale >= patience

    def finish(self, model, steps: int, data: TrialData, config: TrainConfig) -> None:
        """After training: check the last step (if not yet), then load the best weights."""
        if self.select is None:
            return
        if not self.checks or self.checks[-1]["step"] != steps:
            self.check(model, steps, data, config)
        model.load_state_dict(self.best_state)


def evaluate(
    spec: ArchSpec,
    data: TrialData,
    config: TrainConfig,
    on_step: StepCallback | None = None,
    rungs: Rungs | None = None,
    save_weights: str | None = None,
    fp8_probe: dict | None = None,
    select: SelectBest | None = None,
    device: torch.device | str = "cpu",
) -> TrialResult:
    """Train ``spec`` on the train split of ``data`` and measure it on ``data.split``
    (and, with ``rungs``, on a validation subsample at each rung while it trains); with
    ``save_weights``, keep the trained state dict at that path; with ``fp8_probe`` (target,
    batch, threshold, rows), probe the trained model and plan its FP8 dispatch; with
    ``select``, keep the weights of its best validation check, and stop on its patience).
    It trains on ``device`` (the model is made on the CPU first: the same weights for a
    seed wherever it trains)."""
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    model = build_model(spec, data.schema).to(device)
    train_rows = data.features("train", model.reads_history)
    held_out = data.features(data.split, model.reads_history)
    counted: dict[str, float] = {}

    def flops() -> float:  # once per trial: at the first rung, or at the end
        if "flops" not in counted:
            begin = time.perf_counter()
            example = tuple(t.to(device) for t in held_out[:FLOPS_BATCH].inputs())
            counted["flops"] = measure_flops_per_example(model, example)
            counted["seconds"] = time.perf_counter() - begin
        return counted["flops"]

    def result(steps: int, metrics: dict, train_seconds: float, train_loss: float, **kw):
        return TrialResult(
            arch_id=spec.arch_id,
            name=spec.name,
            dataset=data.name,
            split=kw.pop("split", data.split),
            ne=metrics["ne"],
            auc=metrics["auc"],
            logloss=metrics["logloss"],
            gauc=metrics.get("gauc"),
            gauc_request=metrics.get("gauc_request"),
            per_label={k: v for k, v in metrics.items() if split_label(k)[1] is not None},
            flops=flops(),
            serving_flops=model.flops_per_request(SERVING_CANDIDATES) / SERVING_CANDIDATES,
            params=sum(p.numel() for p in model.parameters()),
            train_examples_per_s=steps * config.batch_size / train_seconds,
            train_loss=train_loss,
            train_seconds=train_seconds,
            steps=steps,
            batch_size=config.batch_size,
            seed=config.seed,
            flops_seconds=counted["seconds"],
            **kw,
        )

    validation = None
    if rungs is not None or select is not None:
        count = rungs.rows if rungs is not None else select.rows
        rows = data.validation(model.reads_history)
        validation = _Validation(rows, data.groups("valid"), count, config.seed, select)
    rung_steps = set(rungs.steps) if rungs is not None else set()

    def callback(step: int, loss: float) -> bool:
        if on_step is not None:
            on_step(step, loss)
        if validation is None or not (step in rung_steps or validation.due(step)):
            return False
        began = time.perf_counter()
        trained = began - train_started - validation.paused
        figures = validation.check(model, step, data, config)
        if step in rung_steps:
            validation.rungs.append(figures)
            flops()
            now = time.perf_counter()
            rungs.report(
                result(
                    step,
                    figures,
                    trained,
                    loss,
                    split=f"{data.split} ({len(validation.rows)} rows)",
                    seconds=now - start,
                    eval_seconds=now - began,
                    rungs=list(validation.rungs),
                    checks=list(validation.checks),
                    best_step=figures.get("best_step"),
                    check_seconds=validation.paused + now - began,
                )
            )
        validation.paused += time.perf_counter() - began  # a rung report waits for Tune
        return validation.patience_ran_out()

    train_started = time.perf_counter()
    stats = train(model, train_rows, config, callback)
    paused = 0.0
    if validation is not None:
        validation.finish(model, stats.steps, data, config)
        paused = validation.paused
    if save_weights is not None:  # host tensors: they load on a machine without a GPU
        checkpoint.save(save_weights, {k: v.cpu() for k, v in model.state_dict().items()})
    eval_start = time.perf_counter()
    metrics = evaluate_model(
        model, held_out, data.train_rates, config.eval_batch_size, data.groups()
    )
    eval_seconds = time.perf_counter() - eval_start
    if rungs is not None:  # the end: the kept weights' figures, or the last step's
        if validation.best is not None:
            end = validation.kept(stats.steps)
        else:
            end = validation.measure(model, stats.steps, data, config)
        validation.rungs.append(end)
    flops()
    fp8 = None
    if fp8_probe is not None:  # the probe simulates FP8 on the host
        fp8 = _probe(model.cpu(), train_rows, held_out, data, config, fp8_probe)
    final = result(
        stats.steps,
        metrics,
        stats.seconds - paused,
        stats.final_loss,
        seconds=0.0,
        eval_seconds=eval_seconds,
        rungs=validation.rungs if rungs is not None else [],
        checks=validation.checks if validation is not None else [],
        best_step=validation.best["step"] if validation and validation.best else None,
        fp8=fp8,
        check_seconds=paused,
    )
    return replace(final, seconds=time.perf_counter() - start)


def _probe(model, train_rows, held_out, data: TrialData, config: TrainConfig, settings) -> dict:
    """The FP8 probe's plan for a trained candidate, as plain data."""
    from nas.arch.cost.targets import get_target
    from workers.fp8_probe import probe_trained

    result = probe_trained(
        model,
        train_rows,
        held_out[: settings["rows"]],
        data.train_rates,
        config,
        settings["threshold"],
        get_target(settings["target"]),
        settings["batch"],
    )
    keep = ("name", "safe", "precision", "ne_delta", "bf16_us", "fp8_us")
    keep += ("in_features", "out_features", "request_rows", "candidate_rows")
    return {
        "target": result.target,
        "batch": result.batch,
        "ne_all_safe_fp8": result.ne_all_safe_fp8,
        "latency_bf16_us": result.latency_bf16_us,
        "latency_dispatch_us": result.latency_dispatch_us,
        "sites": [{k: getattr(s, k) for k in keep} for s in result.sites],
    }
