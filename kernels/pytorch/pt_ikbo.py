"""The IKBO broadcast linear in PyTorch (``kernels.ikbo``): the request term gathered per
candidate, then added."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reference(
    candidate: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    request_term: torch.Tensor | None,
    owner: torch.Tensor | None,
) -> torch.Tensor:
    out = F.linear(candidate, weight, bias)
    if request_term is None:
        return out
    return out + (request_term if owner is None else request_term.index_select(0, owner))
