"""Ranking metrics: logloss, normalized entropy (NE) and AUC.

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


def binary_metrics(labels: torch.Tensor, logits: torch.Tensor, train_positive_rate: float) -> dict:
    labels = labels.float()  # memory-mapped labels are stored as int8
    loss = logloss(labels, logits)
    return {
        "logloss": loss,
        "ne": loss / base_entropy(train_positive_rate),
        "auc": auc(labels.numpy(), logits.double().numpy()),
    }
