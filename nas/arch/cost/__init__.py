"""Pricing an architecture: hardware targets (``targets``), the roofline (``roofline``) over
the GEMM records blocks declare (``blocks.gemm``), and whole candidates (``candidate``). See
``roofline`` for what is counted."""

from nas.arch.cost.candidate import batch_estimate, request_estimate
from nas.arch.cost.roofline import Estimate, gemm_estimate
from nas.arch.cost.targets import PRECISIONS, TARGET_NAMES, Target, calibrate, get_target

__all__ = [
    "PRECISIONS",
    "TARGET_NAMES",
    "Estimate",
    "Target",
    "batch_estimate",
    "calibrate",
    "gemm_estimate",
    "get_target",
    "request_estimate",
]
