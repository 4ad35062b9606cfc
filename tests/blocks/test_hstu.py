"""HSTU: causal, target-aware, padding-blind; the jagged and padded paths agree; the formula."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import blocks
from blocks.hstu import jagged_to_padded, padded_to_jagged
from kernels.pytorch.pt_hstu_attention import attention_mask

N, D = 8, 6


@pytest.fixture
def layer():
    torch.manual_seed(0)
    block = blocks.create_block("hstu", num_tokens=N, dim=D, num_heads=2, qk_dim=4, value_dim=3)
    with torch.no_grad():  # non-zero biases, so the tests see them
        block.position_bias.normal_()
        block.time_bias.normal_()
    return block.eval()


def inputs(batch: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, N, D, generator=g)
    times = torch.randint(0, 5000, (batch, N), generator=g).cumsum(1)
    return x, times


def test_causal_later_tokens_do_not_change_earlier_outputs(layer) -> None:
    x, times = inputs()
    base = layer(x, timestamps=times)
    for i in range(N - 1):
        changed = x.clone()
        changed[:, i + 1 :] += torch.randn_like(changed[:, i + 1 :])
        out = layer(changed, timestamps=times)
        torch.testing.assert_close(out[:, : i + 1], base[:, : i + 1])
        assert not torch.allclose(out[:, i + 1 :], base[:, i + 1 :])


def test_target_aware_candidates_see_the_history_not_each_other(layer) -> None:
    x, times = inputs()
    targets = 3
    base = layer(x, timestamps=times, num_targets=targets)
    for t in range(N - targets, N):
        others = [j for j in range(N - targets, N) if j != t]
        changed = x.clone()
        changed[:, others] += 5 * torch.randn_like(changed[:, others])
        out = layer(changed, timestamps=times, num_targets=targets)
        torch.testing.assert_close(out[:, t], base[:, t])  # unmoved by the other candidates
        torch.testing.assert_close(out[:, : N - targets], base[:, : N - targets])
    history = x.clone()
    history[:, 0] += torch.randn(D)  # not a constant: the input LayerNorm removes that
    out = layer(history, timestamps=times, num_targets=targets)
    assert not torch.allclose(out[:, N - targets :], base[:, N - targets :])


def test_padding_is_invisible_and_comes_back_zero(layer) -> None:
    x, times = inputs()
    lengths = torch.tensor([N, 5, 2])
    base = layer(x, lengths, times)
    noisy = x.clone()
    noisy[1, 5:] = 100.0
    noisy[2, 2:] = -100.0
    out = layer(noisy, lengths, times)
    torch.testing.assert_close(out, base)
    assert out[1, 5:].abs().sum() == 0 and out[2, 2:].abs().sum() == 0


def test_jagged_and_padded_paths_agree(layer) -> None:
    x, times = inputs()
    lengths = torch.tensor([N, 5, 2])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    valid = torch.arange(N).view(1, -1) < lengths.view(-1, 1)
    values, value_times = x[valid], times[valid]  # [15, D], [15]
    queries = times + 300
    jagged = layer.forward_jagged(values, offsets, value_times, 1, queries[valid])
    padded = layer(x, lengths, times, num_targets=1, query_timestamps=queries)
    torch.testing.assert_close(jagged, padded[valid])
    back, got = jagged_to_padded(values, offsets, N)
    assert torch.equal(got, lengths) and torch.equal(padded_to_jagged(back, got), values)


def test_a_jagged_row_longer_than_the_layer_is_refused() -> None:
    with pytest.raises(ValueError, match="exceeds max_len"):
        jagged_to_padded(torch.zeros(10, 2), torch.tensor([0, 10]), 8)


def test_time_gaps_change_the_output(layer) -> None:
    x, times = inputs()
    assert not torch.allclose(layer(x, timestamps=times), layer(x, timestamps=times * 50))


def test_mask_layout() -> None:
    mask = attention_mask(torch.tensor([5]), 6, num_targets=2)[0].int()
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [1, 1, 1, 1, 0, 0],  # a candidate: the history and itself
            [1, 1, 1, 0, 1, 0],  # the other candidate: not position 3
            [0, 0, 0, 0, 0, 0],  # padding
        ]
    )
    assert torch.equal(mask, expected)


@pytest.mark.parametrize("query_gap", [None, 700], ids=["own-time", "query-times"])
def test_the_formula_by_hand(layer, query_gap) -> None:
    """With query times (the time of the event each position predicts), the time bias is
    measured from the query's time; by default from the position's own timestamp."""
    x, times = inputs(batch=1)
    queries = times if query_gap is None else times + query_gap
    c = layer.config
    normed = F.layer_norm(x[0], (D,), layer.input_norm.weight, layer.input_norm.bias)
    u, v, q, k = F.silu(layer.f1(normed)).split([6, 6, 8, 8], dim=-1)  # h=2: d_v 3, d_qk 4
    out = torch.zeros(N, 2 * 3)
    for head in range(2):
        qh, kh = q[:, head * 4 : (head + 1) * 4], k[:, head * 4 : (head + 1) * 4]
        vh = v[:, head * 3 : (head + 1) * 3]
        for i in range(N):
            for j in range(i + 1):
                gap = abs(float(queries[0, i] - times[0, j]))
                bucket = min(int(math.log1p(gap) / math.log(c.time_base)), c.time_buckets - 1)
                rab = layer.position_bias[i - j] + layer.time_bias[bucket]
                a = F.silu(qh[i] @ kh[j] + rab) / N
                out[i, head * 3 : (head + 1) * 3] += a * vh[j]
    expected = x[0] + layer.f2(layer.norm(out) * u)
    query_times = None if query_gap is None else queries
    out = layer(x, timestamps=times, query_timestamps=query_times)[0]
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
