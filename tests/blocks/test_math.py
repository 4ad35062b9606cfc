"""Each block computes the equation in its docstring (checked against a direct computation)."""

from __future__ import annotations

import itertools

import pytest
import torch

import blocks
from blocks.attention import attend
from blocks.base import LayerNorm
from nas.core.errors import ConfigError


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))


def test_dot_is_every_pair_once(x):
    out = blocks.create_block("dot", num_tokens=5, dim=4)(x)
    expected = [(x[:, i] * x[:, j]).sum(-1) for i, j in itertools.combinations(range(5), 2)]
    torch.testing.assert_close(out.squeeze(1), torch.stack(expected, dim=1))


def test_dot_self_interaction_adds_the_diagonal(x):
    out = blocks.create_block("dot", num_tokens=5, dim=4, self_interaction=True)(x)
    assert out.shape == (3, 1, 15)


def test_fm_equals_the_pair_sum(x):
    out = blocks.create_block("fm", num_tokens=5, dim=4)(x)
    expected = sum(x[:, i] * x[:, j] for i, j in itertools.combinations(range(5), 2))
    torch.testing.assert_close(out.squeeze(1), expected)


@pytest.mark.parametrize("rank", [None, 2])
def test_dcnv2_cross_formula(x, rank):
    layer = blocks.create_block("dcnv2", num_tokens=5, dim=4, num_layers=2, rank=rank)
    x0 = x.flatten(1)
    h = x0
    for cross in layer.layers:
        if rank is None:
            w, b = cross.project.weight, cross.project.bias
            h = x0 * (h @ w.T + b) + h
        else:
            v, u = cross.project[0].weight, cross.project[1]
            h = x0 * ((h @ v.T) @ u.weight.T + u.bias) + h
    torch.testing.assert_close(layer(x), h.view(3, 5, 4))


def test_self_attention_matches_autoint(x):
    layer = blocks.create_block("self_attention", num_tokens=5, dim=4, num_heads=2, head_dim=3)
    wq, wk, wv = layer.qkv.weight.view(3, 2, 3, 4)  # [qkv, head, d, D]
    heads = []
    for h in range(2):
        q, k, v = x @ wq[h].T, x @ wk[h].T, x @ wv[h].T
        weights = torch.softmax(q @ k.transpose(1, 2) / 3**0.5, dim=-1)
        heads.append(weights @ v)
    expected = torch.relu(torch.cat(heads, dim=-1) + x @ layer.res.weight.T)
    torch.testing.assert_close(layer(x), expected)


def test_attention_under_cpu_autocast_is_the_same_attention_in_bfloat16():
    """bf16 training's attention path (bf16 matmuls, float32 softmax over the keys) against
    float32 SDPA, with more keys than queries as GLM's candidate tokens have."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(6, 2, n, 8, generator=g, requires_grad=True) for n in (5, 9, 9))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attend(q, k, v)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)
    out.float().sum().backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (q, k, v))


def test_layer_norm_is_float32_under_autocast(x):
    norm = LayerNorm(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = norm(x.bfloat16())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x.bfloat16().float(), (4,)))
    torch.testing.assert_close(norm(x), torch.nn.LayerNorm(4)(x))  # float32: nn.LayerNorm


def test_mlp_flattens_tokens(x):
    layer = blocks.create_block("mlp", num_tokens=5, dim=4, widths=[6], activate_last=False)
    torch.testing.assert_close(layer(x), layer.layers[0](x.flatten(1)).unsqueeze(1))


def test_embedding_fields_use_separate_rows():
    layer = blocks.create_block("embedding", cardinalities=(3, 3), dim=2)
    out = layer(torch.tensor([[1, 1]]))
    assert not torch.equal(out[0, 0], out[0, 1]), "id 1 of field 0 and of field 1 share a row"
    torch.testing.assert_close(out[0, 1], layer.table.weight[3 + 1])


def test_embedding_bag_mean_ignores_padding():
    layer = blocks.create_block("embedding_bag", cardinality=5, max_len=3, dim=2)
    w = layer.bag.weight
    out = layer(torch.tensor([[2, 4, 0], [0, 0, 0]]))
    torch.testing.assert_close(out[0, 0], (w[2] + w[4]) / 2)
    torch.testing.assert_close(out[1, 0], torch.zeros(2))


@pytest.mark.parametrize("mode", ["mean", "sum"])
def test_the_bag_a_gpu_runs_is_the_bag_and_leaves_padding_rows_alone(mode):
    """``weighted_sum`` (a GPU's way: no boolean indexing in its backward) against
    ``nn.EmbeddingBag``: the same tokens and, on every row but padding's, the same gradient;
    padding's is zero, so lazy Adam moves neither the row nor its moments."""
    layer = blocks.create_block("embedding_bag", cardinality=6, max_len=4, dim=3, mode=mode)
    ids = torch.tensor([[2, 4, 0, 0], [0, 0, 0, 0], [5, 5, 1, 0], [3, 2, 4, 5]])
    upstream = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    grads = []
    for bag in (layer.bag, layer.weighted_sum):
        layer.zero_grad(set_to_none=True)
        out = bag(ids)
        (out * upstream).sum().backward()
        grads.append(layer.bag.weight.grad.coalesce().to_dense())
        if bag is layer.bag:
            want = out.detach()
        else:
            torch.testing.assert_close(out.detach(), want)
    plain, weighted = grads
    torch.testing.assert_close(weighted[1:], plain[1:])
    assert not weighted[0].any()


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("dot", {"num_tokens": 1, "dim": 4}, "num_tokens"),
        ("fm", {"num_tokens": 1, "dim": 4}, "num_tokens"),
        ("self_attention", {"num_tokens": 3, "dim": 5, "num_heads": 2}, "num_heads"),
        ("dcnv2", {"num_tokens": 3, "dim": 4, "rank": 0}, "rank"),
        ("dcnv2", {"num_tokens": 3, "dim": 4, "num_layers": True}, "num_layers"),
        ("mlp", {"num_tokens": 3, "dim": 4, "widths": []}, "widths"),
        ("mlp", {"num_tokens": 3, "dim": 4, "activation": "tanh"}, "activation"),
        ("embedding", {"cardinalities": (), "dim": 4}, "cardinalities"),
    ],
)
def test_invalid_configs_name_the_field(name, params, field):
    with pytest.raises(ConfigError) as err:
        blocks.create_block(name, **params)
    assert err.value.field == field


def _layer_norm(t: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(t, t.shape[-1:])


def test_wukong_is_ln_of_fmb_and_lcb_plus_the_input(x):
    layer = blocks.create_block(
        "wukong", num_tokens=5, dim=4, num_fm_tokens=2, num_lc_tokens=3, rank=3, widths=[6]
    )
    b = x.shape[0]
    fm = x @ (x.transpose(1, 2) @ layer.y)  # X (X^T Y): [B, n, k]
    pairwise = (x @ x.transpose(1, 2)) @ layer.y  # the same, through the full X X^T
    torch.testing.assert_close(fm, pairwise)
    fmb = layer.fm_mlp(layer.fm_norm(fm.flatten(1))).view(b, 2, 4)
    lcb = layer.lcb.weight @ x
    expected = _layer_norm(torch.cat([fmb, lcb], dim=1) + x)  # 2 + 3 tokens: identity residual
    torch.testing.assert_close(layer(x), expected)


def test_wukong_projects_the_residual_when_the_token_count_changes(x):
    layer = blocks.create_block("wukong", num_tokens=5, dim=4, num_fm_tokens=4, num_lc_tokens=4)
    assert layer.residual is not None and layer(x).shape == (3, 8, 4)


@pytest.mark.parametrize("ensemble", ["sum", "weighted_sum", "concat"])
def test_dhen_is_ln_of_the_ensemble_plus_the_shortcut(x, ensemble):
    layer = blocks.create_block(
        "dhen", num_tokens=5, dim=4, modules=["linear", "conv", "dcn"], ensemble=ensemble
    )
    outputs = [branch(x) for branch in layer.branches]
    torch.testing.assert_close(outputs[0], layer.branches[0].weight @ x)
    if ensemble == "concat":
        combined = torch.cat(outputs, dim=1)
        expected = _layer_norm(combined + layer.shortcut.weight @ x)  # 15 tokens: projected
    else:
        weights = layer.weights if ensemble == "weighted_sum" else torch.ones(3)
        expected = _layer_norm(sum(w * o for w, o in zip(weights, outputs, strict=True)) + x)
    torch.testing.assert_close(layer(x), expected)


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"modules": []}, "modules", "non-empty"),
        ({"modules": ["dot", "dot"]}, "modules", "twice"),
        ({"modules": ["gru"]}, "modules", "must be one of linear, dot"),
        ({"kernel_size": 4}, "kernel_size", "odd"),
        ({"modules": ["self_attention"], "num_heads": 3}, "num_heads", "do not divide"),
        ({"ensemble": "max"}, "ensemble", "concat, sum, weighted_sum"),
    ],
)
def test_dhen_rejects_bad_configs(params, field, words):
    with pytest.raises(ConfigError) as caught:
        blocks.create_block("dhen", num_tokens=5, dim=4, **params)
    assert caught.value.field == field and words in str(caught.value)
