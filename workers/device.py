"""Where a candidate trains: the CPU, or a CUDA GPU.

``nas train --device auto|cpu|cuda`` picks one; a search's trials train on the GPU Ray gives
them when ``resources.gpus_per_trial`` is above 0 (Ray sets ``CUDA_VISIBLE_DEVICES``, so
the trial's GPU is always ``cuda:0`` inside it).
"""

from __future__ import annotations

import torch

from nas.core.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")


def gpu_count() -> int:
    """CUDA GPUs this process sees (0 with a CPU-only torch)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(asked: str, field: str = "--device") -> torch.device:
    """``auto`` (a GPU when one is visible, else the CPU), ``cpu`` or ``cuda``; asking for
    ``cuda`` without a GPU is a ``ConfigError`` naming ``field``."""
    if asked not in DEVICES:
        raise ConfigError(field, f"must be one of {', '.join(DEVICES)}, got {asked!r}")
    if asked == "auto":
        return torch.device("cuda" if gpu_count() else "cpu")
    if asked == "cuda" and not gpu_count():
        raise ConfigError(
            field,
            "no CUDA GPU is visible to this process (torch "
            f"{torch.__version__}: {'a CPU-only build' if not torch.version.cuda else 'CUDA'}"
            "); use cpu",
        )
    return torch.device(asked)
