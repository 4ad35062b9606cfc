"""GLM and DCA: request-side outputs never read candidate-side inputs, inside every operator
and every layer; computing the request side once per request gives the per-candidate result;
the masked operators are the masked forms of the plain ones (checked by hand)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import blocks
from blocks.dhen import MODULES as DHEN_MODULES
from blocks.glm import (
    MaskedAttention,
    MaskedConv,
    MaskedCross,
    MaskedDense,
    MaskedDot,
    MaskedFlatNorm,
    MaskedFM,
    MaskedMLP,
    MaskedTokenLinear,
    Memory,
    Split,
)
from blocks.glm_layers import GLMBlock
from nas.core.errors import ConfigError

N_R, N_C, D = 3, 4, 8

GLM_LAYERS = [
    ("glm_linear", {}),
    ("glm_linear", {"out_tokens": 5, "request_out_tokens": 2}),
    ("glm_mlp", {"widths": [12, 6]}),
    ("glm_wukong", {}),
    ("glm_wukong", {"num_fm_tokens": 3, "num_lc_tokens": 4, "widths": [16]}),  # identity residual
    *[("glm_dhen", {"modules": [m], "num_heads": 2}) for m in DHEN_MODULES],
    ("glm_dhen", {"modules": list(DHEN_MODULES), "ensemble": "concat", "out_tokens": 4}),
    ("glm_dhen", {"modules": ["conv", "dcn"], "ensemble": "weighted_sum", "kernel_size": 5}),
    ("dca", {"num_heads": 2}),
]

OPERATORS = {
    "token_linear": lambda: MaskedTokenLinear(N_R, N_C, 2, 5),
    "fm": lambda: MaskedFM(N_R, N_C, 3),
    "attention": lambda: MaskedAttention(D, 2),
    "conv": lambda: MaskedConv(D, 5),
}
FLAT_OPERATORS = {
    "dense": lambda: MaskedDense(N_R * D, N_C * D, 5, 7),
    "mlp": lambda: MaskedMLP(N_R * D, N_C * D, [(6, 10)], (3, 4)),
    "flat_norm": lambda: MaskedFlatNorm(N_R * D, N_C * D),
    "cross": lambda: MaskedCross(N_R * D, N_C * D, 4),
    "dot": lambda: MaskedDot(N_R, N_C),
}


def _layer(name: str, params: dict) -> GLMBlock:
    torch.manual_seed(0)
    context = {"num_tokens": N_R + N_C, "dim": D, "num_request_tokens": N_R}
    if name == "dca":
        context.update(memory_tokens=6, memory_dim=D)
    return blocks.build_block(blocks.get_block(name).config(params, **context)).eval()


def _split(batch: int = 5, seed: int = 0, memory: bool = False) -> Split:
    g = torch.Generator().manual_seed(seed)
    mem = None
    if memory:
        lengths = torch.tensor([6, 0, 3, 1, 6][:batch])
        mem = Memory(torch.randn(batch, 6, D, generator=g), lengths)
    return Split(
        torch.randn(batch, N_R, D, generator=g), torch.randn(batch, N_C, D, generator=g), None, mem
    )


def _perturbed_candidates(x: Split) -> Split:
    return x.replace(x.request, x.candidate + 3 * torch.randn_like(x.candidate))


def _check_isolation(run, x: Split) -> None:
    """``run(split) -> split``: request outputs unmoved by candidate inputs; candidate outputs
    do read the request side (DCA's through the history: its tokens stay on their side)."""
    base = run(x)
    moved = run(_perturbed_candidates(x))
    torch.testing.assert_close(moved.request, base.request, rtol=0, atol=0)
    assert not torch.allclose(moved.candidate, base.candidate)
    if x.memory is None:
        changed = run(x.replace(x.request + torch.randn_like(x.request), x.candidate))
    else:
        values = x.memory.values + torch.randn_like(x.memory.values)
        changed = run(dataclasses.replace(x, memory=Memory(values, x.memory.lengths)))
        assert not torch.allclose(changed.request, base.request)
    assert not torch.allclose(changed.candidate, base.candidate)


@pytest.mark.parametrize("name", list(OPERATORS) + list(FLAT_OPERATORS))
def test_every_masked_operator_isolates_the_request_side(name):
    torch.manual_seed(0)
    op = (OPERATORS | FLAT_OPERATORS)[name]()
    x = _split() if name in OPERATORS else _split().flat()
    if name == "dot":
        x = _split()
    _check_isolation(op, x)


@pytest.mark.parametrize(("name", "params"), GLM_LAYERS)
def test_every_glm_layer_isolates_the_request_side(name, params):
    layer = _layer(name, params)
    _check_isolation(layer.forward_split, _split(memory=name == "dca"))


@pytest.mark.parametrize(("name", "params"), GLM_LAYERS)
def test_request_side_once_per_request_equals_per_candidate(name, params):
    """Two requests with 3 and 2 candidates: the shared request side, computed once, gives
    what each candidate gets when it carries its own copy."""
    layer = _layer(name, params)
    x = _split(batch=2, memory=name == "dca")
    owner = torch.tensor([0, 0, 0, 1, 1])
    candidates = torch.randn(5, N_C, D, generator=torch.Generator().manual_seed(3))
    shared = layer.forward_split(Split(x.request, candidates, owner, x.memory))
    memory = None
    if x.memory is not None:
        memory = Memory(x.memory.values[owner], x.memory.lengths[owner])
    per_candidate = layer.forward_split(Split(x.request[owner], candidates, None, memory))
    torch.testing.assert_close(shared.candidate, per_candidate.candidate)
    torch.testing.assert_close(shared.request[owner], per_candidate.request)


def test_masked_token_linear_is_the_block_triangular_matrix():
    op = MaskedTokenLinear(N_R, N_C, 2, 5)
    x = _split()
    full = torch.zeros(7, N_R + N_C)
    full[:2, :N_R] = op.rr
    full[2:, :N_R], full[2:, N_R:] = op.cr, op.cc
    expected = torch.einsum("mn,bnd->bmd", full, torch.cat([x.request, x.candidate], 1))
    out = op(x)
    torch.testing.assert_close(torch.cat([out.request, out.candidate], 1), expected)


def test_masked_fm_rows_sum_over_the_visible_tokens():
    op = MaskedFM(N_R, N_C, 3)
    x = _split(batch=1)
    tokens = torch.cat([x.request, x.candidate], 1)[0]  # [n, d]
    y = torch.cat([op.y_r, op.y_c])  # [n, k]
    out = op(x)
    rows = torch.cat([out.request, out.candidate], 1)[0]
    for i in range(N_R + N_C):
        visible = range(N_R) if i < N_R else range(N_R + N_C)
        p = sum(torch.outer(tokens[j], y[j]) for j in visible)  # [d, k]
        torch.testing.assert_close(rows[i], tokens[i] @ p)


def test_masked_flat_norm_uses_the_visible_statistics():
    op = MaskedFlatNorm(N_R * D, N_C * D)
    x = _split().flat()
    out = op(x)
    torch.testing.assert_close(out.request, F.layer_norm(x.request, (N_R * D,)))
    everything = F.layer_norm(torch.cat([x.request, x.candidate], 1), ((N_R + N_C) * D,))
    torch.testing.assert_close(out.candidate, everything[:, N_R * D :], rtol=1e-4, atol=1e-5)


def test_masked_flat_norm_is_float32_under_autocast():
    op = MaskedFlatNorm(N_R * D, N_C * D)
    x = _split().flat()
    rounded = x.replace(x.request.bfloat16(), x.candidate.bfloat16())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(rounded)
    assert out.request.dtype == out.candidate.dtype == torch.float32
    expected = op(rounded.replace(rounded.request.float(), rounded.candidate.float()))
    torch.testing.assert_close(out.candidate, expected.candidate)
    torch.testing.assert_close(out.request, expected.request)


def test_masked_attention_is_attention_under_the_mask():
    op = MaskedAttention(D, 2)
    x = _split(batch=2)
    tokens = torch.cat([x.request, x.candidate], 1)
    q, k, v = op._heads(tokens)
    n = N_R + N_C
    allowed = torch.ones(n, n, dtype=torch.bool)
    allowed[:N_R, N_R:] = False  # request queries never see candidate keys
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    expected = torch.relu(attended.transpose(1, 2).flatten(2) + op.res(tokens))
    out = op(x)
    torch.testing.assert_close(torch.cat([out.request, out.candidate], 1), expected)


def test_masked_attention_without_request_tokens_attends_among_candidates():
    op = MaskedAttention(D, 2)
    x = _split(batch=2)
    no_request = x.replace(x.request[:, :0], x.candidate)  # a GLM layer with no request output
    q, k, v = op._heads(x.candidate)
    attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
    out = op(no_request)
    assert out.request.shape == (2, 0, D)
    torch.testing.assert_close(out.candidate, torch.relu(attended + op.res(x.candidate)))


def test_dca_without_history_leaves_the_tokens_alone():
    layer = _layer("dca", {})
    x = _split(memory=True)
    out = layer.forward_split(x)
    empty = x.memory.lengths == 0
    torch.testing.assert_close(out.request[empty], x.request[empty])
    torch.testing.assert_close(out.candidate[empty], x.candidate[empty])
    assert not torch.allclose(out.candidate[~empty], x.candidate[~empty])


def test_dca_needs_a_history_and_glm_outputs_need_request_inputs():
    entry = blocks.get_block("dca")
    with pytest.raises(ConfigError, match="sequence"):
        entry.config({}, num_tokens=4, dim=8, num_request_tokens=2, memory_tokens=0, memory_dim=8)
    wukong = blocks.get_block("glm_wukong")
    with pytest.raises(ConfigError, match="no request-side tokens"):
        wukong.config({"request_fm_tokens": 2}, num_tokens=4, dim=8, num_request_tokens=0)
    with pytest.raises(ConfigError, match="no candidate-side output"):
        wukong.config(
            {
                "num_fm_tokens": 2,
                "num_lc_tokens": 1,
                "request_fm_tokens": 2,
                "request_lc_tokens": 1,
            },
            num_tokens=4,
            dim=8,
            num_request_tokens=2,
        )
    # Without request-side input a GLM layer is a plain layer: all outputs candidate-side.
    plain = wukong.config({}, num_tokens=4, dim=8, num_request_tokens=0)
    assert plain.out_shape().num_request == 0
