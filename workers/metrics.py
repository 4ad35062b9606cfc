"""Ranking metrics: logloss, normalized entropy (NE), AUC and grouped AUC (gAUC).

NE (He et al. 2014, "Practical lessons from predicting clicks on ads at Facebook") is the
logloss divided by the entropy of the training positive rate p:
    NE = logloss / -(p log p + (1 - p) log(1 - p))
so a model that predicts the base rate scores 1.0, and lower is better.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


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
    group whose rows are all of one class has no AUC and is left out (NaN if all are)."""
    labels, scores = np.asarray(labels).astype(bool), np.asarray(scores, dtype=np.float64)
    order = np.argsort(groups, kind="stable")
    sorted_groups = np.asarray(groups)[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    ends = np.r_[starts[1:], len(order)]
    positives = np.add.reduceat(labels[order].astype(np.int64), starts) if len(order) else []
    total, weight = 0.0, 0
    for start, end, hits in zip(starts, ends, positives, strict=True):
        if 0 < hits < end - start:
            rows = order[start:end]
            total += auc(labels[rows], scores[rows]) * (end - start)
            weight += end - start
    return total / weight if weight else float("nan")


def binary_metrics(
    labels: torch.Tensor,
    logits: torch.Tensor,
    train_positive_rate: float,
    groups: np.ndarray | None = None,
) -> dict:
    """logloss, NE and AUC; with ``groups`` (each row's user), gAUC too."""
    labels = labels.float()  # memory-mapped labels are stored as int8
    loss = logloss(labels, logits)
    metrics = {
        "logloss": loss,
        "ne": loss / base_entropy(train_positive_rate),
        "auc": auc(labels.numpy(), logits.double().numpy()),
    }
    if groups is not None:
        metrics["gauc"] = grouped_auc(labels.numpy(), logits.double().numpy(), groups)
    return metrics
