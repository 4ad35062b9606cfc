"""HSTU attention in PyTorch (``kernels.hstu_attention``): the padded [B, H, N, N] scores,
masked by ``attention_mask``."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attention_mask(lengths: torch.Tensor, max_len: int, num_targets: int = 0) -> torch.Tensor:
    """[B, N, N] bool: may position i attend to j. Causal over the history; with T targets
    (the last T valid positions of each row), a target sees the history and itself only."""
    positions = torch.arange(max_len, device=lengths.device)
    i, j = positions.view(-1, 1), positions.view(1, -1)
    valid = positions.view(1, -1) < lengths.view(-1, 1)  # [B, N]
    mask = (j <= i).unsqueeze(0) & valid.unsqueeze(1) & valid.unsqueeze(2)  # [B, N, N]
    if num_targets:
        first_target = (lengths - num_targets).view(-1, 1, 1)
        j_is_target = j.unsqueeze(0) >= first_target
        i_is_target = i.unsqueeze(0) >= first_target
        mask = mask & ~(i_is_target & j_is_target & (i != j).unsqueeze(0))
    return mask


def reference(q, k, v, rab, lengths, num_targets: int = 0, norm: float | None = None):
    n = q.shape[2]
    scores = torch.matmul(q, k.transpose(-1, -2)) + rab.unsqueeze(1)  # [B, H, N, N]
    mask = attention_mask(lengths, n, num_targets).unsqueeze(1)
    weights = F.silu(scores) * mask / (norm or n)
    return torch.matmul(weights, v)
