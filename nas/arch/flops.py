"""FLOPs measured with fvcore, in recnas's convention: 2 FLOPs per multiply-add of contractions.

fvcore counts one per multiply-add for linear/matmul/bmm/einsum and skips ops it has no
handler for. We register a handler for scaled-dot-product attention (two batched matmuls),
count embedding lookups as 0, and name the elementwise ops that are deliberately not
counted. Any other op fvcore cannot count is an error: a contraction must never be missed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

# Ops that are not contractions: free in our convention (see blocks/base.py).
NOT_COUNTED = (
    "aten::add",
    "aten::add_",
    "aten::sub",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::neg",
    "aten::sum",
    "aten::mean",
    "aten::pow",
    "aten::square",
    "aten::sqrt",
    "aten::rsqrt",
    "aten::relu",
    "aten::relu_",
    "aten::gelu",
    "aten::silu",
    "aten::sigmoid",
    "aten::tanh",
    "aten::softmax",
    "aten::exp",
    "aten::log",
    "aten::embedding",
    "aten::embedding_bag",
    "aten::numel",
    "aten::index",
    "aten::index_select",
    "aten::gather",
    "aten::layer_norm",
    "aten::clone",
    "aten::rsub",
    "aten::triu_indices",
    "aten::view_as",
    "aten::abs",
    "aten::log1p",
    "aten::lt",
    "aten::le",
    "aten::ge",
    "aten::ne",
    "aten::bitwise_not",
    "aten::__and__",
    "aten::clamp",
    "aten::clamp_min",
)


def _sdpa_macs(inputs: list[Any], outputs: list[Any]) -> int:
    """softmax(Q K^T) V: B*H*N*S*(d_qk + d_v) multiply-adds."""
    from fvcore.nn.jit_handles import get_shape

    q, k, v = (get_shape(x) for x in inputs[:3])
    *batch, n, d_qk = q
    s, d_v = k[-2], v[-1]
    count = 1
    for b in batch:
        count *= b
    return count * n * s * (d_qk + d_v)


def _free(inputs: list[Any], outputs: list[Any]) -> int:
    return 0


def measure_flops(module: nn.Module, inputs: Sequence[torch.Tensor]) -> int:
    """FLOPs of one forward pass of ``module`` on ``inputs`` (the whole batch)."""
    was_training = module.training
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fvcore's TorchScript deprecations, tracer chatter
        from fvcore.nn import FlopCountAnalysis

        analysis = FlopCountAnalysis(module.eval(), tuple(inputs))
        analysis.set_op_handle("aten::scaled_dot_product_attention", _sdpa_macs)
        # A zero handle, not None: fvcore keeps its default handle (layer_norm has one) for
        # an op set to None, and only ignores ops that have no handle.
        analysis.set_op_handle(**dict.fromkeys(NOT_COUNTED, _free))
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        try:
            macs = analysis.total()
        finally:
            module.train(was_training)
        unknown = analysis.unsupported_ops()
    if unknown:
        raise RuntimeError(
            f"fvcore cannot count ops {dict(unknown)}; give them a handler in nas/arch/flops.py "
            "or, if they are not contractions, add them to NOT_COUNTED"
        )
    return int(2 * macs)


def measure_flops_per_example(module: nn.Module, inputs: Sequence[torch.Tensor]) -> float:
    """Measured FLOPs divided by the batch size (the first dimension of the first input)."""
    return measure_flops(module, inputs) / inputs[0].shape[0]
