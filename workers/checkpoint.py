"""Checkpoints of long jobs (supernet and DNAS training): written atomically, read safely.

A checkpoint is a plain mapping of tensors, numbers, strings, lists and dicts (model and
optimizer state dicts, generator states, the step), written to a temporary file that
replaces the old one only when complete, so a ``kill -9`` mid-write leaves the previous
checkpoint intact. It is read with ``torch.load(weights_only=True)``: no pickled code runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from nas.core.disk import torch_file
from nas.core.errors import NasError


def save(path: str | Path, state: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with torch_file(temporary) as file:
        torch.save(state, file)
    os.replace(temporary, path)


def load(path: str | Path) -> dict[str, Any] | None:
    """The checkpoint at ``path``, or None when there is none yet."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        # on the host: a job trained on a GPU resumes, or is read back, on any machine
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a torn or foreign file: say which, do not guess
        raise NasError(
            f"{path}: cannot read this checkpoint ({type(err).__name__}: {err}); "
            "delete it to start that job over"
        ) from None
