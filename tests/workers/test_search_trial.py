"""The trainable's own limits, checked without Ray: a candidate too large for the per-trial
memory is refused before anything is allocated; a short trial is still measured."""

from __future__ import annotations

import time

import pytest

from nas.arch.model import TRAINING_BYTES_PER_PARAM, training_bytes
from nas.arch.spec import ArchSpec
from nas.core.errors import TrainingError
from workers.messages import TrialRequest, TrialSettings
from workers.search_trial import _run
from workers.train import TrainConfig
from workers.trial_data import TrialData

HUGE = {
    "embedding_dim": 4096,
    "interaction": [{"block": "mlp", "widths": [65536, 65536]}],
    "top_mlp": [65536],
}


def _config(spec: dict, steps: int, memory_gb: float) -> TrialRequest:
    train = TrainConfig(steps=steps, batch_size=64, lr=2e-3, embedding_lr=1e-2, seed=0)
    return TrialRequest(0, 0, spec, TrialSettings(train, threads=1), int(memory_gb * 2**30))


def test_the_parameter_count_is_known_before_allocation(ml100k) -> None:
    spec = ArchSpec.from_dict(HUGE)
    started = time.monotonic()
    needed = training_bytes(spec, ml100k.schema)
    assert time.monotonic() - started < 5
    # the two 65,536-wide layers alone hold over 4 billion weights
    assert needed > TRAINING_BYTES_PER_PARAM * 65536 * 65536


def test_a_candidate_too_large_for_the_trial_memory_fails_before_training(ml100k) -> None:
    data = TrialData.from_prepared(ml100k, "valid")
    with pytest.raises(TrainingError, match="GiB to train .* over the limit of 4.00 GiB"):
        _run(_config(HUGE, steps=10, memory_gb=4), data)


def test_the_memory_limit_holds_in_trials_shorter_than_the_check_interval(ml100k) -> None:
    data = TrialData.from_prepared(ml100k, "valid")
    small = {"embedding_dim": 8, "interaction": [{"block": "fm"}], "top_mlp": []}
    with pytest.raises(TrainingError, match="over the limit of 10.2 MiB per trial"):
        _run(_config(small, steps=3, memory_gb=0.01), data)  # any process uses more
