"""The IKBO broadcast linear: the Triton kernel (under TRITON_INTERPRET=1, on CPU) against
its PyTorch reference, and a GLM model scoring requests through the kernel as through the
reference."""

from __future__ import annotations

import pytest
import torch

from kernels import ikbo
from kernels.pytorch import pt_ikbo
from nas.arch.model import RequestInputs, build_model
from nas.arch.spec import ArchSpec
from tests.test_glm_model import STACKED


@pytest.mark.parametrize(
    ("c", "k", "n", "r"), [(1, 1, 1, 1), (7, 5, 3, 2), (40, 33, 70, 5), (100, 64, 32, 10)]
)
@pytest.mark.parametrize("parts", ["all", "no bias", "no request", "aligned"])
def test_the_kernel_matches_the_reference(c, k, n, r, parts) -> None:
    g = torch.Generator().manual_seed(c * 1000 + k)
    x, w = torch.randn(c, k, generator=g), torch.randn(n, k, generator=g)
    bias = None if parts == "no bias" else torch.randn(n, generator=g)
    rows = c if parts == "aligned" else r
    term = None if parts == "no request" else torch.randn(rows, n, generator=g)
    owner = None if parts == "aligned" else torch.randint(0, r, (c,), generator=g)
    got = ikbo.broadcast_linear(x, w, bias, term, owner, backend="triton")
    want = pt_ikbo.reference(x, w, bias, term, owner)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_kernel_multiplies_half_precision_inputs_with_a_float_weight(dtype) -> None:
    """Serving in bf16: the candidate rows in half precision, the layer's weight in float32
    (cast to the rows' precision, as autocast would); the result rounds as one half-precision
    output of the float32 sums would."""
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(70, 40, generator=g), torch.randn(33, 40, generator=g)
    bias, term = torch.randn(33, generator=g), torch.randn(5, 33, generator=g)
    owner = torch.randint(0, 5, (70,), generator=g)
    x, bias, term = x.to(dtype), bias.to(dtype), term.to(dtype)
    got = ikbo.broadcast_linear(x, w, bias, term, owner, backend="triton")
    want = pt_ikbo.reference(x.float(), w.to(dtype).float(), bias.float(), term.float(), owner)
    assert got.dtype == dtype
    ulp = torch.finfo(dtype).eps * want.abs().max()
    torch.testing.assert_close(got.float(), want, atol=float(ulp), rtol=0)


def test_the_front_end_uses_the_reference_where_gradients_flow() -> None:
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(2, 3, requires_grad=True)
    out = ikbo.broadcast_linear(x, w, None, torch.randn(2, 2), torch.tensor([0, 1, 1, 0]))
    out.sum().backward()  # the reference path: autograd works
    assert x.grad is not None and w.grad is not None
    with pytest.raises(ValueError, match="backend must be one of"):
        ikbo.broadcast_linear(x, w, backend="cuda")


def test_a_glm_model_scores_requests_through_the_kernel_as_through_the_reference(
    ml100k, monkeypatch
) -> None:
    import blocks.glm
    import nas.arch.model

    torch.manual_seed(0)
    model = build_model(ArchSpec.from_dict(STACKED), ml100k.schema).eval()
    batch = ml100k.features("valid")[torch.arange(0, 4000, 400)]
    request, candidates = model.split_inputs(*batch.inputs())
    owner = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    requests = RequestInputs(request.categorical[:3], request.multi_hot[:3], request.history[:3])
    with torch.no_grad():
        want = model.score_requests(requests, candidates, owner)
        calls = []

        def through_kernel(*args, **kwargs):
            calls.append(1)
            return ikbo.broadcast_linear(*args, backend="triton")

        monkeypatch.setattr(blocks.glm, "broadcast_linear", through_kernel)
        monkeypatch.setattr(nas.arch.model, "broadcast_linear", through_kernel)
        got = model.score_requests(requests, candidates, owner)
    assert calls  # the GLM dense layers and the top MLP went through it
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
