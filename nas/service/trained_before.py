"""Baselines a registry has trained before, under the same settings, are not trained again.

Every search trains the same hand-designed baselines (``examples/specs/*.json``) beside its
candidates, and training is deterministic: the same spec, data, settings, seed, thread count
and code give the same figures. So a baseline's figures are filed with a *training key*, a
hash of everything that decides them, and a later search of the same registry whose baseline
has that key records the earlier figures (rungs, checks, FP8 plan and all) instead of
training it again. On two cores the four default baselines hold both workers for about a
minute and a half of every search.

What the key covers:
- the spec (its canonical form) and the trial's settings as the worker reads them (steps,
  batch, learning rates, precision, seed, threads, the rungs' steps and rows, best-weights
  selection, the FP8 probe's settings);
- the prepared data's file checksums (a rebuilt dataset is a new one);
- the code that trains and measures (a hash of recnas's Python sources) and torch's version.

The search's own objectives are worked out again from the figures, so a search with other
objectives (a latency target, say) can reuse them. ``reuse_baselines: false`` in the search
YAML trains them anyway.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from nas.core.paths import REPO_ROOT

PACKAGES = ("nas", "blocks", "workers", "kernels", "search_spaces")


@functools.cache
def code_fingerprint() -> str:
    """A hash of the Python sources of recnas's packages and of torch's version."""
    import torch

    digest = hashlib.sha256(torch.__version__.encode())
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(REPO_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def training_key(spec: dict[str, Any], settings: dict[str, Any], data_files: dict) -> str:
    """The key of training ``spec`` with ``settings`` (a trial's Tune config less its ids) on
    the prepared data whose files have the checksums ``data_files``."""
    whole = {"spec": spec, "settings": settings, "data": data_files, "code": code_fingerprint()}
    return hashlib.sha256(json.dumps(whole, sort_keys=True).encode()).hexdigest()
