"""The cost model: GEMM records (``gemm``), hardware targets (``targets``), the roofline
(``roofline``) and whole candidates (``candidate``). See ``roofline`` for what is counted."""

from kernels.cost.candidate import batch_estimate, request_estimate
from kernels.cost.gemm import Gemm
from kernels.cost.roofline import Estimate, gemm_estimate
from kernels.cost.targets import PRECISIONS, TARGET_NAMES, Target, calibrate, get_target

__all__ = [
    "PRECISIONS",
    "TARGET_NAMES",
    "Estimate",
    "Gemm",
    "Target",
    "batch_estimate",
    "calibrate",
    "gemm_estimate",
    "get_target",
    "request_estimate",
]
