"""HSTU attention: the Triton forward and backward kernels (interpreter, CPU) against the
PyTorch reference, on jagged lengths, with and without targets; and the HSTU block through
the kernels as through the reference."""

from __future__ import annotations

import pytest
import torch

from kernels.hstu_attention import hstu_attention
from kernels.pytorch.pt_hstu_attention import reference


@pytest.mark.parametrize(
    ("lengths", "heads", "d_qk", "d_v", "targets", "shared_rab"),
    [
        ([20, 7, 13], 2, 8, 6, 0, False),
        ([20, 7, 13], 2, 8, 6, 2, False),
        ([5, 1], 1, 4, 4, 0, True),
        ([40, 33, 1, 17], 3, 16, 8, 3, True),
    ],
)
def test_the_kernels_match_the_reference_forward_and_backward(
    lengths, heads, d_qk, d_v, targets, shared_rab
) -> None:
    g = torch.Generator().manual_seed(len(lengths) * 10 + targets)
    b, n = len(lengths), max(lengths)
    q, k = (torch.randn(b, heads, n, d_qk, generator=g).requires_grad_() for _ in range(2))
    v = torch.randn(b, heads, n, d_v, generator=g).requires_grad_()
    rab = torch.randn(1 if shared_rab else b, n, n, generator=g).requires_grad_()
    lengths = torch.tensor(lengths)
    got = hstu_attention(q, k, v, rab, lengths, targets, float(n), backend="triton")
    want = reference(q, k, v, rab, lengths, targets, float(n))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    grad = torch.randn(got.shape, generator=g)
    got_grads = torch.autograd.grad(got, (q, k, v, rab), grad)
    want_grads = torch.autograd.grad(want, (q, k, v, rab), grad)
    for name, a, e in zip(["q", "k", "v", "rab"], got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5, msg=f"d{name}")
    padding = torch.arange(n).view(1, -1) >= lengths.view(-1, 1)
    assert got.detach().permute(0, 2, 1, 3)[padding].abs().max() == 0


def test_the_hstu_block_gives_the_same_outputs_and_gradients_through_the_kernels(
    monkeypatch,
) -> None:
    import blocks
    import blocks.hstu
    from kernels import hstu_attention as front_end

    torch.manual_seed(0)
    block = blocks.create_block("hstu", num_tokens=12, dim=8, num_heads=2, qk_dim=4, value_dim=4)
    x, lengths, stamps = block.example_input(3, torch.Generator().manual_seed(1))
    x.requires_grad_()
    want = block(x, lengths, stamps, num_targets=2)
    want_grads = torch.autograd.grad(want.sum(), [x, *block.parameters()])

    def through_kernels(*args, **kwargs):
        return front_end.hstu_attention(*args, **kwargs, backend="triton")

    monkeypatch.setattr(blocks.hstu, "hstu_attention", through_kernels)
    got = block(x, lengths, stamps, num_targets=2)
    got_grads = torch.autograd.grad(got.sum(), [x, *block.parameters()])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for a, e in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
