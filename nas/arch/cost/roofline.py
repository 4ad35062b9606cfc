"""A roofline estimate of a candidate's latency on a target, in a precision.

Per GEMM: ``max(compute, memory) + launch``, where compute is FLOPs over the precision's
peak, each dimension padded to the target's tile (a tensor core computes a whole tile), and
memory is the bytes of its operands (a weight read once, activations, the output) over the
memory bandwidth; on a CPU, a batched GEMM adds a cost per matrix (it loops over them).
Each GEMM's epilogue (bias, activation, softmax) reads and writes its output once more.

In FP8 the weights are quantised ahead of time, but every
activation operand is quantised on each call: a read of it in BF16, a write in FP8 and a
row-wise scale, as its own memory-bound kernel with its own launch. So a GEMM too small to
amortise that comes out slower in FP8 than in BF16, as it is on the hardware.

Work that is not a GEMM (activations, norms, residual adds, embedding gathers, pooling) is
memory-bound: every block's output is counted as written once and read once, at the
precision's element size, plus one launch per block.

Per example at a serving batch of B: the whole model at batch B, divided by B. Per request
of N candidates: the request side (request embeddings, the history encoder, the request
half of every GLM layer) at one request, plus the candidate side at N candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

from blocks.gemm import Gemm
from nas.arch.cost.targets import BYTES, Target
from nas.core.errors import ConfigError

OUTPUT_BYTES = {"fp32": 4, "bf16": 2, "fp8": 2}  # FP8 GEMMs write BF16
SCALE_BYTES = 4  # one float32 scale per row of a quantised activation


@dataclass(frozen=True)
class Estimate:
    seconds: float
    gemm_seconds: float
    quantise_seconds: float
    other_seconds: float
    launches: int

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(
            self.seconds + other.seconds,
            self.gemm_seconds + other.gemm_seconds,
            self.quantise_seconds + other.quantise_seconds,
            self.other_seconds + other.other_seconds,
            self.launches + other.launches,
        )


NOTHING = Estimate(0.0, 0.0, 0.0, 0.0, 0)


def check_precision(target: Target, precision: str, field: str = "precision") -> None:
    if precision not in target.precisions:
        raise ConfigError(
            field,
            f"target {target.name} prices {', '.join(target.precisions)}; got {precision!r}",
        )


def gemm_estimate(gemm: Gemm, target: Target, precision: str) -> Estimate:
    """One GEMM record (its ``count`` multiplies as one batched kernel)."""
    check_precision(target, precision)
    element = BYTES[precision]
    bytes_moved = (
        gemm.activation_elements + gemm.weight_elements
    ) * element + gemm.output_elements * OUTPUT_BYTES[precision]
    compute = _padded_flops(gemm, target.tile) / target.peak_flops[precision]
    gemm_s = max(compute, bytes_moved / target.memory_bytes_per_s) + target.launch_s
    gemm_s += gemm.count * target.matmul_s if gemm.count > 1 else 0.0
    quantise_s, launches = 0.0, 1
    if precision == "fp8":
        rows = gemm.count * {"b": gemm.m, "a": gemm.n, "none": gemm.m + gemm.n}[gemm.weight]
        quantised = gemm.activation_elements * (BYTES["bf16"] + BYTES["fp8"]) + rows * SCALE_BYTES
        quantise_s = quantised / target.memory_bytes_per_s + target.launch_s
        launches += 1
    # Its epilogue (bias, activation, softmax, scaling): the output read and written again.
    epilogue = memory_estimate(gemm.output_elements, target, precision)
    return Estimate(gemm_s + quantise_s, gemm_s, quantise_s, 0.0, launches) + epilogue


def _padded_flops(gemm: Gemm, tile: tuple[int, int, int]) -> int:
    """FLOPs as the hardware runs them: each dimension padded up to its tile."""
    m, n, k = (-(-size // t) * t for size, t in zip((gemm.m, gemm.n, gemm.k), tile, strict=True))
    return 2 * m * n * k * gemm.count


def memory_estimate(elements: int, target: Target, precision: str) -> Estimate:
    """Memory-bound work over ``elements`` values: written once and read once."""
    element = OUTPUT_BYTES[precision]
    seconds = 2 * elements * element / target.memory_bytes_per_s + target.launch_s
    return Estimate(seconds, 0.0, 0.0, seconds, 1)


def parts_estimate(parts: list[tuple[list[Gemm], int]], target: Target, precision: str):
    """The sum over parts, each (its GEMMs, the elements of its output)."""
    total = NOTHING
    for gemms, elements in parts:
        for gemm in gemms:
            total = total + gemm_estimate(gemm, target, precision)
        total = total + memory_estimate(elements, target, precision)
    return total
