"""A LoKA-style FP8 probe: where in a trained model is FP8 (e4m3) safe, and where is it fast?

A GEMM site is each weight the model's forward runs an ``F.linear`` on
(``kernels.fp8_linear.LinearSites``): every ``nn.Linear`` (MLPs, cross layers, attention
projections), a GLM masked dense layer's weights, and the top MLP's first layer as its two
column slices (the request features' share, computed once per request, and the
candidates'). Batched matmuls over tokens (attention scores, GLM token mixing) are not
sites. On real batches the probe:

1. records each site's input activations and weight: absolute max, RMS, the median
   nonzero magnitude, and the max over that median (an outlier measure: FP8's 3 mantissa bits
   and a scale set by the largest value lose the small values next to it);
2. computes the FP8 GEMM's relative error against FP32 with per-tensor and per-row scales,
   through ``torch._scaled_mm`` (which runs on CPU);
3. measures the model's NE with that site alone in simulated FP8 (inputs and weight
   quantised and dequantised, per-row scales), and with every safe site at once;
4. calls a site safe when its NE moves by at most ``threshold``;
5. plans dispatch: FP8 only at a safe site where the cost model (``nas.arch.cost``) predicts
   it faster than BF16 at the serving batch. The plan's predicted latency is the sum of
   its sites' GEMM estimates in the precision chosen for each;
6. runs the plan for real (``kernels.fp8_linear.Fp8Dispatch``: its FP8 sites as row-wise
   FP8 GEMMs through ``torch._scaled_mm``) and measures that NE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from blocks.gemm import Gemm
from kernels.fp8_linear import Fp8Dispatch, LinearSites
from kernels.pytorch.pt_fp8_linear import E4M3, fp8_scales
from nas.arch.cost.roofline import gemm_estimate
from nas.arch.cost.targets import Target
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.core.errors import NasError
from workers.metrics import Rates
from workers.train import TrainConfig, evaluate, train
from workers.trial_data import TrialData


def _scale(x: torch.Tensor, scaling: str) -> torch.Tensor:
    return fp8_scales(x, per_row=scaling == "row")


def quantise_dequantise(x: torch.Tensor, scaling: str = "row") -> torch.Tensor:
    """``x`` through e4m3 and back, with a per-tensor or per-row (last axis) scale."""
    scale = _scale(x, scaling)
    return (x / scale).to(E4M3).to(x.dtype) * scale


def fp8_gemm_error(x: torch.Tensor, weight: torch.Tensor, scaling: str) -> float:
    """Relative error ||y8 - y|| / ||y|| of ``x @ weight.T`` in FP8 (``torch._scaled_mm``,
    FP32 accumulation) against FP32."""
    x, weight = x.float().reshape(-1, x.shape[-1]), weight.float()
    exact = x @ weight.t()
    sx, sw = _scale(x, scaling), _scale(weight, scaling)
    if scaling == "row":
        scale_a, scale_b = sx, sw.t()
    elif not x.is_cuda:
        # On the CPU a per-tensor scale goes as the same scale for every row: the CPU's
        # per-tensor _scaled_mm is over 100 times slower than its row-wise one (19 s for a
        # 4096 x 400 x 256 GEMM, measured; a search on latency probes every trial so), and
        # the values are the same to float rounding.
        scale_a = sx.reshape(1, 1).repeat(x.shape[0], 1)
        scale_b = sw.reshape(1, 1).repeat(1, weight.shape[0])
    else:
        scale_a, scale_b = sx.reshape(()), sw.reshape(())
    y = torch._scaled_mm(
        (x / sx).to(E4M3),
        (weight / sw).to(E4M3).t(),
        scale_a=scale_a,
        scale_b=scale_b,
        out_dtype=torch.float32,
    )
    return float((y - exact).norm() / exact.norm().clamp(min=1e-30))


@dataclass
class Site:
    name: str
    in_features: int
    out_features: int
    rows_per_example: float  # input rows per example (tokens through this layer)
    activation_amax: float = 0.0
    activation_rms: float = 0.0
    activation_median: float = 0.0  # of the nonzero |x|
    weight_amax: float = 0.0
    weight_rms: float = 0.0
    error_tensor: float = 0.0  # FP8 GEMM relative error, per-tensor scales
    error_row: float = 0.0  # ... per-row scales
    ne_delta: float = 0.0  # NE with this site alone in FP8, minus FP32's
    safe: bool = False
    precision: str = "bf16"  # the dispatch plan's choice
    bf16_us: float = 0.0  # estimated at the serving batch
    fp8_us: float = 0.0
    # its input rows in one request of C candidates, scored request-oriented (as served):
    # request_rows + candidate_rows * C
    request_rows: float = 0.0
    candidate_rows: float = 0.0

    @property
    def outlier_ratio(self) -> float:
        """The largest input over the typical nonzero one (1 when all are zero)."""
        if self.activation_median == 0:
            return 1.0
        return self.activation_amax / self.activation_median

    def gemm(self, batch: int) -> Gemm:
        rows = max(1, round(self.rows_per_example * batch))
        return Gemm(rows, self.out_features, self.in_features)

    def to_dict(self) -> dict:
        return asdict(self) | {"outlier_ratio": self.outlier_ratio}


@dataclass
class ProbeResult:
    ne: float  # FP32
    ne_all_safe_fp8: float  # every safe site in simulated FP8
    threshold: float
    sites: list[Site] = field(default_factory=list)
    target: str = ""
    batch: int = 0
    latency_bf16_us: float = 0.0  # the probed sites' GEMMs, all BF16, per batch
    latency_fp8_us: float = 0.0  # all FP8 (safe or not)
    latency_dispatch_us: float = 0.0  # the plan
    ne_dispatched: float = 0.0  # NE with the plan run for real (FP8 GEMMs at its FP8 sites)
    sites_in_fp8: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["sites"] = [s.to_dict() for s in self.sites]
        return data


class _Recorder(LinearSites):
    """Keeps each site's inputs (as rows) and weight."""

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.inputs: dict[str, list[torch.Tensor]] = {}
        self.weights: dict[str, torch.Tensor] = {}

    def at_site(self, name: str, x, weight, bias) -> torch.Tensor:
        self.inputs.setdefault(name, []).append(x.detach().reshape(-1, x.shape[-1]))
        self.weights[name] = weight.detach()
        return F.linear(x, weight, bias)


class SimulatedFp8(LinearSites):
    """Runs the named sites with inputs and weights quantised to e4m3 and back."""

    def __init__(self, model: nn.Module, sites, scaling: str = "row"):
        super().__init__(model)
        self.sites, self.scaling = set(sites), scaling

    def at_site(self, name: str, x, weight, bias) -> torch.Tensor:
        if name in self.sites:
            x = quantise_dequantise(x, self.scaling)
            weight = quantise_dequantise(weight, self.scaling)
        return F.linear(x, weight, bias)


def probe(
    model: nn.Module,
    batches: Sequence[tuple[torch.Tensor, ...]],
    evaluate_ne: Callable[[nn.Module], float],
    threshold: float,
    target: Target,
    batch: int,
) -> ProbeResult:
    """Probe ``model``'s GEMM sites on ``batches`` (its positional inputs);
    ``evaluate_ne(m)`` measures a model's NE as it runs now (under whatever dispatch mode
    is active). The plan is then run for real (``kernels.fp8_linear.Fp8Dispatch``)."""
    model.eval()
    recorder, examples = _Recorder(model), 0
    with torch.no_grad(), recorder:
        for inputs in batches:
            model(*inputs)
            examples += inputs[0].shape[0]
    sites = {}
    for name, xs in recorder.inputs.items():
        x, w = torch.cat(xs), recorder.weights[name]
        site = sites[name] = Site(name, w.shape[1], w.shape[0], x.shape[0] / examples)
        site.activation_amax, site.activation_rms = float(x.abs().max()), _rms(x)
        magnitudes = x.abs().flatten()[: 1 << 20]
        nonzero = magnitudes[magnitudes > 0]  # after a ReLU, most may be exact zeros
        site.activation_median = float(nonzero.median()) if nonzero.numel() else 0.0
        site.weight_amax, site.weight_rms = float(w.abs().max()), _rms(w)
        site.error_tensor = fp8_gemm_error(x, w, "tensor")
        site.error_row = fp8_gemm_error(x, w, "row")
    with torch.no_grad():
        base = evaluate_ne(model)
        for name, site in sites.items():
            with SimulatedFp8(model, [name]):
                site.ne_delta = evaluate_ne(model) - base
            site.safe = site.ne_delta <= threshold
        with SimulatedFp8(model, [n for n, site in sites.items() if site.safe]):
            all_safe = evaluate_ne(model)
    for name, (per_request, per_candidate) in serving_rows(model, batches[0]).items():
        if name in sites:
            sites[name].request_rows, sites[name].candidate_rows = per_request, per_candidate
    result = ProbeResult(base, all_safe, threshold, list(sites.values()))
    plan_dispatch(result, target, batch)
    result.sites_in_fp8 = [s.name for s in result.sites if s.precision == "fp8"]
    with torch.no_grad(), Fp8Dispatch(model, result.sites_in_fp8):
        result.ne_dispatched = evaluate_ne(model)
    return result


def serving_rows(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, tuple]:
    """Each site's input rows in one request of C candidates, as (a, b): a + b C. Recorded
    with request-oriented scoring on 2 requests of 1, then of 2 candidates each (from the
    first 4 rows of ``inputs``); empty for a model that does not score requests."""
    if not hasattr(model, "split_inputs") or inputs[0].shape[0] < 4:
        return {}
    request, candidates = model.split_inputs(*inputs)
    requests = 2
    first = type(request)(
        request.categorical[:requests],
        request.multi_hot[:requests],
        None if request.history is None else request.history[:requests],
    )
    counts = []
    for each in (1, 2):
        n = requests * each
        chosen = type(candidates)(
            candidates.categorical[:n], candidates.multi_hot[:n], candidates.dense[:n]
        )
        recorder = _Recorder(model)
        with torch.no_grad(), recorder:
            model.score_requests(first, chosen, torch.arange(n) % requests)
        counts.append({k: sum(x.shape[0] for x in xs) for k, xs in recorder.inputs.items()})
    out = {}
    for name in counts[0].keys() & counts[1].keys():
        per_candidate = (counts[1][name] - counts[0][name]) / requests
        out[name] = (counts[0][name] / requests - per_candidate, per_candidate)
    return out


def plan_dispatch(result: ProbeResult, target: Target, batch: int) -> None:
    """FP8 at a site only where it is safe and estimated faster; fills in the latencies."""
    result.target, result.batch = target.name, batch
    totals = {"bf16": 0.0, "fp8": 0.0, "dispatch": 0.0}
    for site in result.sites:
        gemm = site.gemm(batch)
        site.bf16_us = gemm_estimate(gemm, target, "bf16").seconds * 1e6
        site.fp8_us = gemm_estimate(gemm, target, "fp8").seconds * 1e6
        site.precision = "fp8" if site.safe and site.fp8_us < site.bf16_us else "bf16"
        totals["bf16"] += site.bf16_us
        totals["fp8"] += site.fp8_us
        totals["dispatch"] += site.fp8_us if site.precision == "fp8" else site.bf16_us
    result.latency_bf16_us = totals["bf16"]
    result.latency_fp8_us = totals["fp8"]
    result.latency_dispatch_us = totals["dispatch"]


def _rms(x: torch.Tensor) -> float:
    return float(x.float().pow(2).mean().sqrt())


PROBE_BATCHES = 4  # batches of the train split whose activations are recorded


def probe_candidate(
    spec: ArchSpec,
    data: TrialData,
    config: TrainConfig,
    weights: Path | None,
    rows: int,
    threshold: float,
    target: Target,
    batch: int,
) -> ProbeResult:
    """``spec`` trained for ``config.steps`` (or loaded from ``weights``, a state dict) and
    probed: NE on the first ``rows`` rows of ``data.split``."""
    torch.manual_seed(config.seed)
    model = build_model(spec, data.schema)
    train_rows = data.features("train", model.reads_history)
    if weights is not None:
        try:
            model.load_state_dict(torch.load(weights, weights_only=True))
        except (OSError, RuntimeError, ValueError) as err:
            first = str(err).splitlines()[0][:300]
            raise NasError(f"{weights}: not this architecture's weights ({first})") from None
    else:
        train(model, train_rows, config)
    held_out = data.features(data.split, model.reads_history)
    return probe_trained(
        model,
        train_rows,
        held_out[:rows],
        data.train_rates,
        config,
        threshold,
        target,
        batch,
    )


def probe_trained(
    model, train_rows, held_out, rates: Rates, config: TrainConfig, threshold, target, batch
) -> ProbeResult:
    """Probe a trained ``model``: activations from the first batches of ``train_rows``, NE
    on ``held_out``."""
    model.eval()
    probe_rows = train_rows[: PROBE_BATCHES * config.batch_size]
    batches = [
        probe_rows[i : i + config.batch_size].inputs()
        for i in range(0, len(probe_rows), config.batch_size)
    ]

    def ne(candidate) -> float:
        return evaluate(candidate, held_out, rates, config.eval_batch_size)["ne"]

    return probe(model, batches, ne, threshold, target, batch)


def fp8_plan_sites(metrics: dict | None) -> list[str] | None:
    """The sites a trial's FP8 probe planned in FP8 (None: the trial was not probed)."""
    plan = (metrics or {}).get("fp8")
    if not plan:
        return None
    return [site["name"] for site in plan["sites"] if site["precision"] == "fp8"]
