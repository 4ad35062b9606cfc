"""Ranking metrics: logloss, normalized entropy (NE), AUC and grouped AUC (gAUC).

NE (He et al. 2014, "Practical lessons from predicting clicks on ads at Facebook") is the
logloss divided by the entropy of the training positive rate p:
    NE = logloss / -(p log p + (1 - p) log(1 - p))
so a model that predicts the base rate scores 1.0, and lower is better. With several labels
each is measured on its own (against its own training rate), and the plain figures are
their mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from nas.search.objectives import LABEL_SEP


def base_entropy(positive_rate: float) -> float:
    p = positive_rate
    if not 0.0 < p < 1.0:
        raise ValueError(f"NE needs a positive rate strictly between 0 and 1, got {p}")
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def logloss(labels: torch.Tensor, logits: torch.Tensor) -> float:
    return float(F.binary_cross_entropy_with_logits(logits.double(), labels.double()))


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the Mann-Whitney U statistic, ties given average ranks."""
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    # Average rank (1-based) of each run of tied scores.
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    run_rank = (starts + ends + 1) / 2.0
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(run_rank, ends - starts)
    rank_sum = ranks[labels].sum()
    return float((rank_sum - positives * (positives + 1) / 2) / (positives * negatives))


def grouped_auc(labels: np.ndarray, scores: np.ndarray, groups: np.ndarray) -> float:
    """gAUC: the AUC within each group (a user), averaged weighted by the group's rows. A
    group whose rows are all of one class has no AUC and is left out (NaN if all are).

    Vectorised (one sort by group then score, ranks within each group), so that measuring
    it at every rung and check costs about what the AUC does."""
    labels, scores = np.asarray(labels).astype(bool), np.asarray(scores, dtype=np.float64)
    if not len(labels):
        return float("nan")
    _, group = np.unique(np.asarray(groups), return_inverse=True)
    order = np.lexsort((scores, group))
    group, scores, labels = group[order], scores[order], labels[order]
    n = len(order)
    # runs of one group and one score share their average rank within the group
    starts = np.flatnonzero(np.r_[True, (group[1:] != group[:-1]) | (scores[1:] != scores[:-1])])
    ends = np.r_[starts[1:], n]
    group_start = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    run_rank = (starts + ends + 1) / 2.0 - group_start[group[starts]]
    ranks = np.repeat(run_rank, ends - starts)
    size = np.bincount(group)
    positives = np.bincount(group, weights=labels)
    rank_sum = np.bincount(group, weights=ranks * labels)
    negatives = size - positives
    both = (positives > 0) & (negatives > 0)
    if not both.any():
        return float("nan")
    p, q = positives[both], negatives[both]
    aucs = (rank_sum[both] - p * (p + 1) / 2) / (p * q)
    return float((aucs * size[both]).sum() / size[both].sum())


# The training positive rate a model's NE is measured against: one figure for one label,
# each label's by name for several (their order: the logits').
Rates = float | Mapping[str, float]
# The AUCs per group: each figure's name and the key its groups are (PreparedDataset.groups).
GROUPED = {"gauc": "user", "gauc_request": "request"}
Groups = Mapping[str, np.ndarray]  # a GROUPED figure's name -> each row's group


def binary_metrics(
    labels: torch.Tensor, logits: torch.Tensor, rates: Rates, groups: Groups | None = None
) -> dict:
    """logloss, NE and AUC; with ``groups`` (each row's user, or request), ``gauc`` (or
    ``gauc_request``): the AUC per group.

    Several labels (``labels`` and ``logits`` [R, K], ``rates`` by label name): each label's
    figures as ``ne:<name>``..., and ``ne``... their mean."""
    if labels.dim() == 1:
        rate = rates if isinstance(rates, int | float) else next(iter(rates.values()))
        return _one_label(labels, logits, rate, groups)
    if isinstance(rates, int | float) or not len(rates) == labels.shape[1] == logits.shape[1]:
        raise ValueError(
            f"{labels.shape[1]} labels and {logits.shape[1]} logits per row need one "
            f"positive rate each, by label name; got {rates!r}"
        )
    each = {
        name: _one_label(labels[:, j], logits[:, j], rate, groups)
        for j, (name, rate) in enumerate(rates.items())
    }
    first = next(iter(each.values()))
    metrics = {key: float(np.mean([m[key] for m in each.values()])) for key in first}
    for name, figures in each.items():
        metrics |= {f"{key}{LABEL_SEP}{name}": value for key, value in figures.items()}
    return metrics


def _one_label(
    labels: torch.Tensor, logits: torch.Tensor, positive_rate: float, groups: Groups | None
) -> dict:
    labels = labels.float()  # memory-mapped labels are stored as int8
    loss = logloss(labels, logits)
    scores = logits.double().numpy()
    metrics = {
        "logloss": loss,
        "ne": loss / base_entropy(positive_rate),
        "auc": auc(labels.numpy(), scores),
    }
    for name, keys in (groups or {}).items():
        metrics[name] = grouped_auc(labels.numpy(), scores, keys)
    return metrics


# --- two models on the same rows --------------------------------------------------------------


def paired_ne_difference(
    labels: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    rates: tuple[float, float],
    groups: np.ndarray | None = None,
) -> tuple[float, float]:
    """NE(second) - NE(first) on the same rows (probabilities; each model's training rate in
    ``rates``) and its standard error: each row's difference of normalized logloss, the
    rows taken as independent draws, or the ``groups`` (each row's group id: one user's
    rows) where given (``clustered_error``)."""
    y = np.asarray(labels, dtype=np.float64)

    def row_ne(p: np.ndarray, rate: float) -> np.ndarray:
        p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
        return -(y * np.log(p) + (1 - y) * np.log1p(-p)) / base_entropy(rate)

    d = row_ne(second, rates[1]) - row_ne(first, rates[0])
    if groups is not None:
        return float(d.mean()), clustered_error((d - d.mean()) / len(d), groups)
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
    return float(d.mean()), se


def paired_auc_difference(
    labels: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    groups: np.ndarray | None = None,
) -> tuple[float, float]:
    """AUC(second) - AUC(first) on the same rows and its standard error by DeLong's method
    (DeLong, DeLong and Clarke-Pearson 1988; the O(n log n) form of Sun and Xu 2014): the
    two AUCs' variances and covariance from each row's placement among the other class.
    With ``groups`` (each row's group id), the placements summed over each group's rows
    and the groups taken as the independent draws (Obuchowski 1997, clustered ROC data).
    NaN with one class, and an error of NaN with fewer than two rows of either."""
    from scipy.stats import rankdata

    y = np.asarray(labels).astype(bool)
    m, n = int(y.sum()), int((~y).sum())
    if m == 0 or n == 0:
        return math.nan, math.nan
    aucs, v01, v10 = [], [], []
    for scores in (first, second):
        s = np.asarray(scores, dtype=np.float64)
        positives, negatives = s[y], s[~y]
        tx, ty = rankdata(positives), rankdata(negatives)
        tz = rankdata(np.concatenate([positives, negatives]))
        aucs.append((tz[:m].sum() - m * (m + 1) / 2) / (m * n))
        v01.append((tz[:m] - tx) / n)  # each positive: the share of negatives below it
        v10.append(1.0 - (tz[m:] - ty) / m)  # each negative: the share of positives above it
    if m < 2 or n < 2:
        return float(aucs[1] - aucs[0]), math.nan
    if groups is not None:  # each row's share of the difference, about its mean
        influence = np.empty(len(y))
        influence[y] = ((v01[1] - aucs[1]) - (v01[0] - aucs[0])) / m
        influence[~y] = ((v10[1] - aucs[1]) - (v10[0] - aucs[0])) / n
        return float(aucs[1] - aucs[0]), clustered_error(influence, groups)
    s = np.cov(np.vstack(v01)) / m + np.cov(np.vstack(v10)) / n
    variance = s[0, 0] + s[1, 1] - 2 * s[0, 1]
    return float(aucs[1] - aucs[0]), math.sqrt(max(float(variance), 0.0))


def clustered_error(influence: np.ndarray, groups: np.ndarray) -> float:
    """The standard error of an estimate whose rows moved it by ``influence`` (each row's
    share, about the estimate), the rows of a group (``groups``: ids from 0) drawn
    together: the sandwich estimate over groups, ``sqrt(G / (G - 1) * sum_g (sum of the
    group's influence)^2)``. With one row a group it is the rows' own error. NaN below two
    groups."""
    sums = np.bincount(groups, weights=influence)
    count = int(np.count_nonzero(np.bincount(groups)))
    if count < 2:
        return math.nan
    return math.sqrt(count / (count - 1) * float(np.square(sums).sum()))
