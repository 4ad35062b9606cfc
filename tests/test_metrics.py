"""AUC, logloss and NE against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from workers.metrics import auc, base_entropy, binary_metrics, grouped_auc


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
    metrics = binary_metrics(labels, logits, rates=p)
    assert metrics["ne"] == pytest.approx(1.0)
    assert metrics["logloss"] == pytest.approx(base_entropy(p))
    assert metrics["auc"] == pytest.approx(0.5)


def test_base_entropy_rejects_degenerate_rates():
    with pytest.raises(ValueError):
        base_entropy(1.0)


@pytest.mark.parametrize("seed", range(3))
def test_gauc_is_each_users_auc_weighted_by_rows(seed):
    """Against pair counting per user, with pandas grouping; users with one class left out."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = 2000
    frame = pd.DataFrame(
        {
            "user": rng.integers(0, 60, rows),
            "label": rng.integers(0, 2, rows),
            "score": rng.integers(0, 10, rows).astype(float),
        }
    )
    frame.loc[frame["user"] == 7, "label"] = 1  # one class only: no AUC, left out
    total = weight = 0.0
    for _, part in frame.groupby("user"):
        if part["label"].nunique() == 2:
            total += _brute_auc(part["label"].to_numpy(), part["score"].to_numpy()) * len(part)
            weight += len(part)
    got = grouped_auc(
        frame["label"].to_numpy(), frame["score"].to_numpy(), frame["user"].to_numpy()
    )
    assert got == pytest.approx(total / weight, abs=1e-12)
    metrics = binary_metrics(
        torch.tensor(frame["label"].to_numpy(), dtype=torch.int8),
        torch.tensor(frame["score"].to_numpy()),
        0.5,
        {"gauc": frame["user"].to_numpy()},
    )
    assert metrics["gauc"] == got and "gauc" not in binary_metrics(
        torch.tensor(frame["label"].to_numpy()), torch.tensor(frame["score"].to_numpy()), 0.5
    )
    assert math.isnan(grouped_auc(np.ones(4), np.arange(4.0), np.zeros(4)))


def _two_models(seed: int, rows: int = 2000):
    """Labels and two correlated models' probabilities, the second a little sharper."""
    rng = np.random.default_rng(seed)
    y = rng.random(rows) < 0.3
    noise = rng.normal(0, 1.2, rows)
    first = 1 / (1 + np.exp(-(y * 1.0 + noise)))
    second = 1 / (1 + np.exp(-(y * 1.3 + noise + rng.normal(0, 0.4, rows))))
    return y, first, second


@pytest.mark.parametrize("seed", [0, 1])
def test_paired_differences_match_the_figures_and_a_bootstrap_of_the_rows(seed) -> None:
    """The differences are NE's and AUC's own; their errors are what resampling the rows
    gives (DeLong's for AUC), within the bootstrap's own noise."""
    from workers.metrics import paired_auc_difference, paired_ne_difference

    y, first, second = _two_models(seed)
    d_auc, se_auc = paired_auc_difference(y, first, second)
    assert d_auc == pytest.approx(auc(y, second) - auc(y, first), abs=1e-12)
    d_ne, se_ne = paired_ne_difference(y, first, second, (0.3, 0.3))

    def ne(p):
        logits = torch.logit(torch.from_numpy(p))
        return binary_metrics(torch.from_numpy(y.astype(np.float32)), logits, 0.3)["ne"]

    assert d_ne == pytest.approx(ne(second) - ne(first), abs=1e-9)
    rng = np.random.default_rng(100 + seed)
    draws = [rng.integers(0, len(y), len(y)) for _ in range(300)]
    boot_auc = [auc(y[i], second[i]) - auc(y[i], first[i]) for i in draws]
    boot_ne = [paired_ne_difference(y[i], first[i], second[i], (0.3, 0.3))[0] for i in draws]
    assert se_auc == pytest.approx(np.std(boot_auc), rel=0.15)
    assert se_ne == pytest.approx(np.std(boot_ne), rel=0.15)


def test_paired_differences_of_a_model_with_itself_and_of_one_class() -> None:
    from workers.metrics import paired_auc_difference, paired_ne_difference

    y, first, _ = _two_models(0, 200)
    assert paired_auc_difference(y, first, first) == (0.0, 0.0)
    assert paired_ne_difference(y, first, first, (0.3, 0.3)) == (0.0, 0.0)
    d, se = paired_auc_difference(np.zeros(5), first[:5], first[:5])
    assert math.isnan(d) and math.isnan(se)
    d, se = paired_auc_difference(np.array([1, 0, 0]), first[:3], first[:3] + 0.1)
    assert d == 0.0 and math.isnan(se)  # one positive: no spread to go on


def _two_models_of_users(seed: int, users: int = 150):
    """Rows of users (5 to 30 each) whose taste moves their labels and both models alike,
    and whom the second model suits more or less than the first: a user's rows go
    together."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(users), rng.integers(5, 30, users))
    rows = len(groups)
    taste = rng.normal(0, 1, users)[groups]
    y = rng.random(rows) < 1 / (1 + np.exp(-(taste - 0.8)))
    noise = rng.normal(0, 1.2, rows)
    first = 1 / (1 + np.exp(-(y * 1.0 + 0.5 * taste + noise)))
    suits = rng.normal(0, 1.0, users)[groups]
    second = 1 / (1 + np.exp(-(y * 1.3 + 0.5 * taste + noise + suits + rng.normal(0, 0.3, rows))))
    return y, first, second, groups


@pytest.mark.parametrize("seed", [0, 1])
def test_grouped_errors_are_a_bootstrap_of_the_groups_where_the_rows_errors_are_too_small(
    seed,
) -> None:
    """Rows of one user drawn together: the errors by group are what resampling the users
    gives; the rows' own errors are well below it. The differences are the same."""
    from workers.metrics import paired_auc_difference, paired_ne_difference

    y, first, second, groups = _two_models_of_users(seed)
    d_auc, se_auc = paired_auc_difference(y, first, second, groups)
    d_ne, se_ne = paired_ne_difference(y, first, second, (0.3, 0.3), groups)
    row_auc, row_se_auc = paired_auc_difference(y, first, second)
    row_ne, row_se_ne = paired_ne_difference(y, first, second, (0.3, 0.3))
    assert (d_auc, d_ne) == (row_auc, row_ne)
    rng = np.random.default_rng(100 + seed)
    rows_of = [np.flatnonzero(groups == g) for g in range(groups.max() + 1)]
    boot_auc, boot_ne = [], []
    for _ in range(300):
        i = np.concatenate([rows_of[g] for g in rng.integers(0, len(rows_of), len(rows_of))])
        boot_auc.append(auc(y[i], second[i]) - auc(y[i], first[i]))
        boot_ne.append(paired_ne_difference(y[i], first[i], second[i], (0.3, 0.3))[0])
    assert se_auc == pytest.approx(np.std(boot_auc), rel=0.2)
    assert se_ne == pytest.approx(np.std(boot_ne), rel=0.2)
    assert row_se_auc < 0.7 * se_auc and row_se_ne < 0.7 * se_ne


def test_one_row_a_group_gives_the_rows_own_errors_and_one_group_none() -> None:
    from workers.metrics import clustered_error, paired_auc_difference, paired_ne_difference

    y, first, second = _two_models(0)
    singles = np.random.default_rng(0).permutation(len(y))  # ids in any order
    ne, auc_ = paired_ne_difference, paired_auc_difference
    assert ne(y, first, second, (0.3, 0.3), singles)[1] == pytest.approx(
        ne(y, first, second, (0.3, 0.3))[1], rel=1e-9
    )
    assert auc_(y, first, second, singles)[1] == pytest.approx(auc_(y, first, second)[1], rel=0.01)
    assert math.isnan(auc_(y, first, second, np.zeros(len(y), dtype=np.int64))[1])
    assert math.isnan(clustered_error(np.ones(3), np.array([4, 4, 4])))
