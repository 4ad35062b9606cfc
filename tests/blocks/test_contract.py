"""Every registered block: builds from its example config, right output shape, gradients flow,
no NaN, and its analytic FLOPs equal the FLOPs fvcore measures. A new block is covered the
moment it is registered."""

from __future__ import annotations

import pytest
import torch

import blocks
from blocks.dhen import MODULES as DHEN_MODULES
from nas.arch.flops import measure_flops_per_example
from nas.core.errors import ConfigError, UnknownNameError

ALL = blocks.list_blocks()

# Non-default configurations, so the analytic cost is checked beyond the examples.
VARIANTS = [
    ("dcnv2", {"rank": None, "num_layers": 1}),
    ("dcnv2", {"rank": 3, "num_layers": 4}),
    ("dot", {"self_interaction": True}),
    ("mlp", {"widths": [7, 5, 1], "activate_last": False, "activation": "gelu"}),
    ("self_attention", {"num_heads": 4, "head_dim": 6}),
    ("self_attention", {"num_heads": 1, "residual": False}),
    ("wukong", {"num_fm_tokens": 2, "num_lc_tokens": 3, "widths": []}),  # identity residual
    ("wukong", {"num_fm_tokens": 1, "num_lc_tokens": 1, "rank": 3, "widths": [16, 4]}),
    ("dhen", {"modules": list(DHEN_MODULES), "ensemble": "concat", "out_tokens": 3}),
    ("dhen", {"modules": ["conv", "self_attention"], "ensemble": "weighted_sum"}),
    ("dhen", {"modules": ["linear"], "out_tokens": 2, "ensemble": "sum"}),
    ("dhen", {"modules": ["dcn", "dot"], "out_tokens": 7, "rank": 4, "kernel_size": 5}),
    ("glm_linear", {"out_tokens": 6, "request_out_tokens": 4}),
    ("glm_linear", {"request_out_tokens": 0}),
    ("glm_mlp", {"widths": [6, 3], "request_output": False, "activation": "silu"}),
    ("glm_wukong", {"num_fm_tokens": 1, "num_lc_tokens": 1, "request_fm_tokens": 0}),
    ("glm_wukong", {"num_fm_tokens": 2, "num_lc_tokens": 3, "widths": [], "rank": 2}),
    ("glm_wukong", {"request_fm_tokens": 3, "request_lc_tokens": 1, "widths": [9, 4]}),
    ("glm_dhen", {"modules": list(DHEN_MODULES), "ensemble": "concat", "out_tokens": 3}),
    ("glm_dhen", {"modules": ["conv", "self_attention"], "ensemble": "weighted_sum"}),
    ("glm_dhen", {"modules": ["linear"], "out_tokens": 2, "request_out_tokens": 1}),
    ("glm_dhen", {"modules": ["dcn", "dot"], "out_tokens": 7, "rank": 4, "kernel_size": 5}),
    ("dca", {"num_heads": 2}),
]


def _build(name: str, params: dict | None = None) -> blocks.Block:
    entry = blocks.get_block(name)
    config = entry.config_cls.example()
    if params:
        context = {k: getattr(config, k) for k in entry.config_cls.context_fields}
        config = entry.config(params, **context)
    return blocks.build_block(config)


def test_registry_has_the_foundation_blocks():
    assert set(ALL) >= {"embedding", "embedding_bag", "mlp", "dot", "fm", "dcnv2", "self_attention"}


@pytest.mark.parametrize("name", ALL)
def test_forward_shape_backward_and_finite(name):
    torch.manual_seed(0)
    block = _build(name)
    inputs = block.example_input(4, torch.Generator().manual_seed(1))
    if inputs[0].is_floating_point():
        inputs[0].requires_grad_(True)
    out = block(*inputs)
    shape = block.out_shape
    assert out.shape == (4, shape.num_tokens, shape.dim)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    grads = [p.grad for p in block.parameters()]
    assert all(g is not None for g in grads), f"{name}: a parameter got no gradient"
    assert all(torch.isfinite(g.to_dense()).all() for g in grads)
    assert any(g.to_dense().abs().sum() > 0 for g in grads) or not grads
    if inputs[0].requires_grad:
        assert inputs[0].grad is not None and torch.isfinite(inputs[0].grad).all()


@pytest.mark.parametrize(("name", "params"), [(n, None) for n in ALL] + VARIANTS)
def test_analytic_flops_equal_measured(name, params):
    block = _build(name, params)
    inputs = block.example_input(3, torch.Generator().manual_seed(0))
    assert block.config.flops() == measure_flops_per_example(block, inputs)


@pytest.mark.parametrize("name", ALL)
def test_gemm_shapes_scale_with_batch(name):
    config = blocks.get_block(name).config_cls.example()
    per_example = config.flops()
    assert sum(g.flops for g in config.gemms(16)) == 16 * per_example


def test_unknown_block_lists_close_matches():
    with pytest.raises(UnknownNameError) as err:
        blocks.get_block("dcn_v2")
    assert "dcnv2" in str(err.value) and "Valid blocks" in str(err.value)


def test_duplicate_registration_is_an_error():
    entry = blocks.get_block("fm")
    with pytest.raises(ValueError, match="already registered"):
        blocks.register_block("fm", kind="interaction", config=entry.config_cls)(entry.module_cls)


def test_create_block_needs_the_input_shape():
    with pytest.raises(ConfigError, match="num_tokens"):
        blocks.create_block("dcnv2", rank=4)
    layer = blocks.create_block("dcnv2", num_tokens=3, dim=4, rank=2)
    assert layer(torch.randn(2, 3, 4)).shape == (2, 3, 4)
