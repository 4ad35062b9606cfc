"""Hardware targets the cost model prices on: published peaks for GPUs, measured ones for
this machine's CPU.

GPU figures are NVIDIA's published dense (no sparsity) peaks for the SXM parts, and the HBM
bandwidth; ``launch_s`` is a typical CUDA kernel launch plus its tail (about 4 us on
H100-class parts with CUDA graphs off). Peaks are never reached by small GEMMs: the
roofline takes the slower of compute and memory, and the launch bounds the smallest.

The ``cpu`` target is this machine at the thread count it is asked for: ``calibrate``
times a float32 GEMM, a large copy and an empty op, and caches the figures (keyed by the
CPU model, the thread count and torch's version) under the runs folder.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from nas.core.catalog import Registry
from nas.core.errors import UnknownNameError

PRECISIONS = ("fp32", "bf16", "fp8")
GPU_PRECISIONS = ("bf16", "fp8")  # what the GPU targets price (fp32: the cpu target)
BYTES = {"fp32": 4, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    peak_flops: dict[str, float]  # precision -> dense FLOP/s it can run at
    memory_bytes_per_s: float
    launch_s: float  # per kernel
    matmul_s: float = 0.0  # per matrix of a batched GEMM (CPUs loop over them; GPUs do not)
    tile: tuple[int, int, int] = (1, 1, 1)  # (m, n, k) a GEMM's dimensions are padded to

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(self.peak_flops)

    def to_dict(self) -> dict:
        return asdict(self)


# A thread block's output tile and k step on Hopper tensor cores (CUTLASS's 64x64x64 class
# for small problems): a 13 x 13 attention score matrix still occupies a whole tile.
TENSOR_CORE_TILE = (64, 64, 64)
GPU_TARGETS: Registry[Target] = Registry.of(
    "target",
    "target",
    (
        Target(
            "h100-sxm",
            "NVIDIA H100 SXM: 989 TFLOP/s BF16, 1979 TFLOP/s FP8 (dense), 3.35 TB/s HBM3",
            {"bf16": 989e12, "fp8": 1979e12},
            3.35e12,
            4e-6,
            tile=TENSOR_CORE_TILE,
        ),
        Target(
            "h200",
            "NVIDIA H200 SXM: H100's tensor cores (989 / 1979 TFLOP/s), 4.8 TB/s HBM3e",
            {"bf16": 989e12, "fp8": 1979e12},
            4.8e12,
            4e-6,
            tile=TENSOR_CORE_TILE,
        ),
    ),
)
TARGET_NAMES = (*GPU_TARGETS.names(), "cpu")


def get_target(name: str, threads: int = 1, field: str = "target") -> Target:
    """A named target; ``cpu`` is measured on this machine at ``threads`` threads."""
    if name == "cpu":
        return calibrate(threads)
    if name not in GPU_TARGETS:  # the message lists cpu too
        raise UnknownNameError(field, "target", name, TARGET_NAMES)
    return GPU_TARGETS.get(name)


def _cache_file(threads: int) -> Path:
    from nas.core.paths import calibration_file

    cpu = platform.processor() or platform.machine()
    key = f"{cpu}-{os.cpu_count()}cpus-{threads}threads-torch{torch.__version__}"
    return calibration_file(key)


def calibrate(threads: int = 1, refresh: bool = False) -> Target:
    """This CPU as a target: float32 GEMM FLOP/s (a 512^3 matmul, best of 5), copy bandwidth
    (64 MiB, best of 5), the cost of an empty op and of each matrix in a batch of tiny ones;
    cached after the first measurement."""
    path = _cache_file(threads)
    if path.exists() and not refresh:
        try:
            data = json.loads(path.read_text())
            return Target(**{**data, "tile": tuple(data["tile"])})
        except (ValueError, TypeError, KeyError):
            pass  # a torn or old cache: measure again
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(512, 512), torch.randn(512, 512)
        flops = 2 * 512**3 / _best(lambda: a @ b)
        big = torch.empty(16 * 2**20)  # 64 MiB
        out = torch.empty_like(big)
        bandwidth = 2 * big.numel() * 4 / _best(lambda: out.copy_(big))
        tiny = torch.ones(1)
        launch = _best(lambda: tiny.add(1), repeat=200)
        # A batched GEMM of many tiny matrices: its time beyond compute and launch, per matrix.
        x = torch.randn(4096, 8, 8)
        batched = _best(lambda: torch.bmm(x, x))
        matmul = max(0.0, (batched - launch - 2 * 8**3 * 4096 / flops) / 4096)
    finally:
        torch.set_num_threads(before)
    target = Target(
        "cpu",
        f"this machine's CPU at {threads} thread(s), measured",
        {"fp32": flops},
        bandwidth,
        launch,
        matmul,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(target.to_dict(), indent=2) + "\n")
    os.replace(temporary, path)
    return target


def _best(fn, repeat: int = 5) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
