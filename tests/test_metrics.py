"""AUC, logloss and NE against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from workers.metrics import auc, base_entropy, binary_metrics


def _brute_auc(labels, scores):
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_pair_counting_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 300)
    scores = rng.integers(0, 20, 300).astype(float) + labels * rng.random(300)  # many ties
    assert auc(labels, scores) == pytest.approx(_brute_auc(labels, scores), abs=1e-12)


def test_auc_matches_sklearn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    labels, scores = rng.integers(0, 2, 5000), rng.normal(size=5000).round(2)
    assert auc(labels, scores) == pytest.approx(
        sklearn_metrics.roc_auc_score(labels, scores), abs=1e-12
    )


def test_auc_of_one_class_is_nan():
    assert math.isnan(auc(np.ones(4), np.arange(4.0)))


def test_ne_of_the_base_rate_predictor_is_one():
    labels = torch.tensor([1.0, 0, 0, 1, 1, 0, 1, 1])
    p = labels.mean().item()
    logits = torch.full((8,), math.log(p / (1 - p)))
    metrics = binary_metrics(labels, logits, train_positive_rate=p)
    assert metrics["ne"] == pytest.approx(1.0)
    assert metrics["logloss"] == pytest.approx(base_entropy(p))
    assert metrics["auc"] == pytest.approx(0.5)


def test_base_entropy_rejects_degenerate_rates():
    with pytest.raises(ValueError):
        base_entropy(1.0)
