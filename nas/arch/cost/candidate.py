"""A whole candidate priced on a target: per example at a serving batch, and per request.

The GEMMs and output shapes come from the model's block configs (``nas.arch.model
.model_configs``): a candidate is priced from its spec, without building it.
"""

from __future__ import annotations

from dataclasses import replace

from blocks.gemm import Gemm
from nas.arch.cost.roofline import Estimate, gemm_estimate, parts_estimate
from nas.arch.cost.targets import Target
from nas.arch.model import REQUEST_PARTS, model_configs, top_request_features


def _whole_request(name: str) -> bool:
    return name in REQUEST_PARTS or name.startswith("sequence")


def per_example_latency(target: Target, precision: str, batch: int):
    """A cost function for the supernet (``nas.search.supernet.CostFn``): a part's GEMMs for one
    example -> its estimated microseconds per example at a serving batch of ``batch``. The
    batch goes where the block put it: a linear layer's rows, or a batched GEMM's count."""

    def cost(gemms: list[Gemm]) -> float:
        scaled = [
            replace(g, m=g.m * batch) if g.weight == "b" else replace(g, count=g.count * batch)
            for g in gemms
        ]
        return sum(gemm_estimate(g, target, precision).seconds for g in scaled) / batch * 1e6

    return cost


def batch_estimate(spec, schema, target: Target, precision: str, batch: int) -> Estimate:
    """The model on ``batch`` examples, each with its own copy of the request."""
    parts = [
        (cfg.gemms(batch), cfg.out_shape().numel * batch)
        for cfg in model_configs(spec, schema).values()
    ]
    return parts_estimate(parts, target, precision)


def request_parts(spec, schema, candidates: int) -> list[tuple[list[Gemm], int]]:
    """The GEMMs and output sizes of one request of ``candidates`` candidates: request-side
    work at one request, the rest at ``candidates`` (the request features' share of the top
    MLP's first layer once, as ``RankingModel`` runs it)."""
    configs = model_configs(spec, schema)
    parts = []
    for name, cfg in configs.items():
        if _whole_request(name):
            parts.append((cfg.gemms(1), cfg.out_shape().numel))
            continue
        one, many = cfg.gemms(1), cfg.gemms(candidates)
        gemms = [a if a.request_side else b for a, b in zip(one, many, strict=True)]
        shared = top_request_features(configs, spec, schema) if name == "top" else 0
        if shared:
            first = gemms[0]
            gemms[:1] = [
                replace(first, m=1, k=shared, request_side=True),
                replace(first, k=first.k - shared),
            ]
        parts.append((gemms, cfg.out_shape().numel * candidates))
    return parts


def request_estimate(spec, schema, target: Target, precision: str, candidates: int) -> Estimate:
    """One request of ``candidates`` candidates, its request side computed once."""
    return parts_estimate(request_parts(spec, schema, candidates), target, precision)
