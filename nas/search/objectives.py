"""Named objectives a search can optimise, each with a direction.

An objective reads one number from a trial's result (``workers.trial.TrialResult``). Its
default reference point bounds the hypervolume: a value no candidate should be worse than.
NE 1.0 is "no better than predicting the training positive rate"; AUC 0.5 is chance. FLOPs
and parameter counts have no natural bound, so their reference is 1.1x the worst value seen
unless the search config states one.

On a dataset of several labels the quality objectives (``PER_LABEL``) name a label after a
colon, ``ne:click`` or ``auc:like``; without one they are the mean over the labels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from nas.core.catalog import Registry
from nas.core.errors import ConfigError, UnknownNameError

SERVING_CANDIDATES = 100  # candidates per request that ``serving_flops`` assumes


@dataclass(frozen=True)
class CostSettings:
    """A latency objective as a search config states it (``cost_values`` reads these), in a
    form a job can carry: a one-shot job prices the members it scores itself."""

    name: str  # latency or serving_latency
    target: str | None = None
    precision: str | None = None
    batch: int | None = None
    candidates: int | None = None


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "min" | "max"
    description: str
    reference: float | None = None  # the natural bound, when there is one

    def worst_reference(self, seen: Iterable[float]) -> float:
        """A reference slightly worse than every value seen (for objectives without one)."""
        if self.direction == "min":
            worst = float(max(seen))
            return worst * 1.1 if worst > 0 else worst + 1.0
        worst = float(min(seen))
        return worst * 0.9 if worst > 0 else worst - 1.0


OBJECTIVES: Registry[Objective] = Registry.of(
    "objective",
    "objectives",
    (
        Objective("ne", "min", "normalized entropy on the held-out split", 1.0),
        Objective("auc", "max", "ROC AUC on the held-out split", 0.5),
        Objective("logloss", "min", "log loss on the held-out split"),
        Objective(
            "gauc",
            "max",
            "AUC per user on the held-out split, weighted by rows (a dataset with users: "
            "keys.user in its schema file, or MovieLens)",
            0.5,
        ),
        Objective(
            "gauc_request",
            "max",
            "AUC per request on the held-out split, weighted by rows (a dataset with requests: "
            "keys.request in its schema file, or MovieLens: a user's ratings at one time)",
            0.5,
        ),
        Objective("flops", "min", "FLOPs per example (2 per multiply-add, fvcore)"),
        Objective(
            "serving_flops",
            "min",
            f"FLOPs per candidate when each request scores {SERVING_CANDIDATES} candidates and "
            "its request side runs once (request-oriented inference; analytic)",
        ),
        Objective("params", "min", "trainable parameters"),
        Objective(
            "latency",
            "min",
            "estimated microseconds per example at a serving batch, on a target GPU or this "
            "CPU, in a precision (nas/arch/cost: roofline)",
        ),
        Objective(
            "serving_latency",
            "min",
            "estimated microseconds per request of N candidates, the request side once",
        ),
    ),
)
COST_OBJECTIVES = ("latency", "serving_latency")
DEFAULT_BATCH = 1024
DEFAULT_PRECISION = {"cpu": "fp32"}  # a GPU target's default: bf16
COST_FIELDS = ("target", "precision", "batch", "candidates")
FP8_DISPATCH = "fp8-dispatch"  # FP8 where each candidate's probe finds it safe and faster
PROBE_THRESHOLD = 1e-3  # the FP8 probe's default: the largest NE increase a safe site may cause
PROBE_ROWS = 20_000  # ... and the validation rows it measures NE on


def check_cost_options(objective, where: str) -> None:
    """An objective config's cost fields (target, precision, batch, candidates): only on
    latency objectives, with a known target and a precision it prices; ``ConfigError``."""
    from nas.arch.cost.targets import GPU_PRECISIONS, TARGET_NAMES

    given = [f for f in COST_FIELDS if getattr(objective, f) is not None]
    if objective.name not in COST_OBJECTIVES:
        if given:
            raise ConfigError(
                f"{where}.{given[0]}", f"only {' and '.join(COST_OBJECTIVES)} take it"
            )
        return
    if objective.target is None:
        raise ConfigError(
            f"{where}.target", f"{objective.name} needs a target: one of {', '.join(TARGET_NAMES)}"
        )
    if objective.target not in TARGET_NAMES:
        raise UnknownNameError(f"{where}.target", "target", objective.target, TARGET_NAMES)
    wrong = {"latency": "candidates", "serving_latency": "batch"}[objective.name]
    if getattr(objective, wrong) is not None:
        raise ConfigError(f"{where}.{wrong}", f"{objective.name} does not take it")
    offered = ("fp32",) if objective.target == "cpu" else GPU_PRECISIONS
    precision = objective.precision or DEFAULT_PRECISION.get(objective.target, "bf16")
    if precision == FP8_DISPATCH:
        if objective.target == "cpu":
            raise ConfigError(
                f"{where}.precision",
                "fp8-dispatch (each candidate probed, FP8 where safe and faster) prices "
                f"on a GPU target only; {objective.name} on cpu prices {', '.join(offered)}",
            )
        return
    if precision not in offered:
        raise ConfigError(
            f"{where}.precision",
            f"target {objective.target} prices {', '.join(offered)}; got {precision!r}",
        )


def fp8_probe_settings(objectives, asked: bool = False) -> dict | None:
    """What a trial's FP8 probe needs: on an ``fp8-dispatch`` objective's target and batch,
    else (``asked``: the search's ``fp8_probe: true``) on h100-sxm at the default batch;
    None when no probe is wanted."""
    settings = {"threshold": PROBE_THRESHOLD, "rows": PROBE_ROWS}
    for o in objectives:
        if o.precision == FP8_DISPATCH:
            return settings | {"target": o.target, "batch": o.batch or DEFAULT_BATCH}
    if asked:
        return settings | {"target": "h100-sxm", "batch": DEFAULT_BATCH}
    return None


def cost_values(objectives, spec, schema, threads: int = 1, metrics=None) -> dict[str, float]:
    """The latency objectives among ``objectives`` (checked configs) for ``spec``, in
    microseconds: per example at the batch, or per request of N candidates. ``fp8-dispatch``
    is the BF16 estimate less what the trial's FP8 plan (``metrics["fp8"]``) saves; without
    a plan (a trial stopped early), the BF16 estimate."""
    from nas.arch.cost import batch_estimate, get_target, request_estimate

    values = {}
    for o in objectives:
        if o.name not in COST_OBJECTIVES:
            continue
        target = get_target(o.target, threads)
        precision = o.precision or DEFAULT_PRECISION.get(o.target, "bf16")
        plan = (metrics or {}).get("fp8")
        if precision == FP8_DISPATCH and o.name == "serving_latency":
            candidates = o.candidates or SERVING_CANDIDATES
            seconds = request_estimate(spec, schema, target, "bf16", candidates).seconds
            if plan:
                seconds -= serving_fp8_saving(plan["sites"], target, candidates)
        elif precision == FP8_DISPATCH:
            batch = o.batch or DEFAULT_BATCH
            seconds = batch_estimate(spec, schema, target, "bf16", batch).seconds / batch
            if plan:
                seconds -= (plan["latency_bf16_us"] - plan["latency_dispatch_us"]) / 1e6 / batch
        elif o.name == "latency":
            batch = o.batch or DEFAULT_BATCH
            seconds = batch_estimate(spec, schema, target, precision, batch).seconds / batch
        else:
            seconds = request_estimate(
                spec, schema, target, precision, o.candidates or SERVING_CANDIDATES
            ).seconds
        values[o.name] = seconds * 1e6
    return values


def serving_fp8_saving(sites: list[dict], target, candidates: int) -> float:
    """Seconds FP8 saves on one request of ``candidates``: at each site the probe found safe
    and the cost model prices faster in FP8 at the request's own sizes (its request-side
    rows once, its candidate-side rows per candidate). A plan from before the probe
    recorded those rows saves nothing."""
    from blocks.gemm import Gemm
    from nas.arch.cost.roofline import gemm_estimate

    saved = 0.0
    for site in sites:
        if not site["safe"] or "candidate_rows" not in site:
            continue
        rows = site["request_rows"] + site["candidate_rows"] * candidates
        gemm = Gemm(max(1, round(rows)), site["out_features"], site["in_features"])
        bf16, fp8 = (gemm_estimate(gemm, target, p).seconds for p in ("bf16", "fp8"))
        saved += max(0.0, bf16 - fp8)
    return saved


PER_LABEL = ("ne", "auc", "logloss", "gauc", "gauc_request")  # measured per label: "ne:click"
LABEL_SEP = ":"


def split_label(name: str) -> tuple[str, str | None]:
    """``ne:click`` -> (``ne``, ``click``); ``ne`` -> (``ne``, None)."""
    base, sep, label = name.partition(LABEL_SEP)
    return base, (label if sep else None)


def is_objective(name: str) -> bool:
    """Whether ``name`` is an objective's name (``ne:click`` among them)."""
    base, label = split_label(name)
    return base in OBJECTIVES.names() and (label is None or (base in PER_LABEL and bool(label)))


def get_objective(name: str, field: str = "objectives") -> Objective:
    """The objective ``name``: a registered one, or a quality objective of one label
    (``ne:click``; whether the dataset has that label is the search plan's check)."""
    base, label = split_label(name)
    if label is None:
        return OBJECTIVES.get(name, field)
    objective = OBJECTIVES.get(base, field)
    if base not in PER_LABEL or not label.strip():
        raise ConfigError(
            field,
            f"{name!r}: only {', '.join(PER_LABEL)} name a label (e.g. ne:click, a label of "
            "the dataset's schema file)",
        )
    return replace(objective, name=name, description=f"{objective.description}, of label {label}")
