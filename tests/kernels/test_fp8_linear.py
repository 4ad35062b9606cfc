"""The FP8 row-wise linear: the Triton quantisation kernel (interpreter, CPU) bit-exact
against its reference, the FP8 GEMM close to FP32, and a plan run for
real on exactly its sites, functional linears included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernels.fp8_linear import (
    Fp8Dispatch,
    Fp8Linear,
    LinearSites,
    fp8_linear,
    quantise_rows,
)
from kernels.pytorch import pt_fp8_linear


@pytest.mark.parametrize("k", [1, 10, 100, 1024, 1500])
def test_the_quantisation_kernel_is_bit_exact_against_the_reference(k) -> None:
    g = torch.Generator().manual_seed(k)
    x = torch.randn(9, k, generator=g) * torch.logspace(-6, 6, 9)[:, None]
    x[0, 0] = 0.0
    got, got_scale = quantise_rows(x, backend="triton")
    want, want_scale = pt_fp8_linear.quantise_rows(x)
    assert torch.equal(got.float(), want.float()) and torch.equal(got_scale, want_scale)
    zeros, scale = quantise_rows(torch.zeros(2, k), backend="triton")
    assert zeros.float().abs().sum() == 0 and bool((scale > 0).all())


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_an_fp8_linear_is_close_to_its_fp32_one(backend) -> None:
    torch.manual_seed(0)
    linear = nn.Linear(96, 40)
    fp8 = Fp8Linear.from_linear(linear)
    x = torch.randn(3, 17, 96)
    with torch.no_grad():
        exact, got = linear(x), fp8_linear(x, fp8.w_q, fp8.w_scale, fp8.bias, backend)
    assert got.shape == exact.shape
    assert float((got - exact).norm() / exact.norm()) < 0.06  # e4m3: 3 mantissa bits
    torch.testing.assert_close(got, fp8(x))  # the module is the same path


class SlicedWeight(nn.Module):
    """One weight, used as two column slices (as the top MLP's first layer is)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 8))

    def forward(self, x):
        return F.linear(x[:, :3], self.w[:, :3]) + F.linear(x[:, 3:], self.w[:, 3:])


def test_fp8_dispatch_runs_exactly_the_named_sites_in_fp8() -> None:
    torch.manual_seed(0)
    model, x = SlicedWeight(), torch.randn(6, 8)
    with torch.no_grad():
        plain = model(x)
        with Fp8Dispatch(model, ["w[:, 3:8]"]):
            got = model(x)
        want = F.linear(x[:, :3], model.w[:, :3]) + fp8_linear(
            x[:, 3:], *pt_fp8_linear.quantise_rows(model.w[:, 3:])
        )
        with Fp8Dispatch(model, []):
            untouched = model(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert torch.equal(untouched, plain) and not torch.equal(got, plain)


@pytest.mark.parametrize("spec", ["dcnv2.json", "modern/rocs.json"])
def test_a_models_sites_include_its_functional_linears(ml100k, spec: str) -> None:
    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec

    torch.manual_seed(0)
    model = build_model(ArchSpec.load(f"examples/specs/{spec}"), ml100k.schema).eval()
    seen = []

    class Names(LinearSites):
        def at_site(self, name, x, weight, bias):
            seen.append(name)
            return F.linear(x, weight, bias)

    batch = ml100k.features("valid")[:256]
    batch = batch if model.reads_history else batch.without_history()
    with torch.no_grad():
        before = model(*batch.inputs())
        with Names(model):
            model(*batch.inputs())
        with Fp8Dispatch(model, None):
            after = model(*batch.inputs())
    linears = {n for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    weights = {n.removesuffix(".weight") for n, p in model.named_parameters() if p.dim() == 2}
    assert set(seen) <= weights | {n for n in seen if "[" in n}
    if model.top_request_features:  # the top MLP's first layer: request and candidate shares
        width, split = model.top.layers[0].in_features, model.top_request_features
        assert {f"top.layers.0[:, 0:{split}]", f"top.layers.0[:, {split}:{width}]"} <= set(seen)
        assert "top.layers.0" not in seen
        masked = {n for n in seen if n.rsplit(".", 1)[-1] in ("rr", "cr", "cc")}
        assert masked and not masked & linears  # GLM's masked weights: bare parameters
    else:
        assert set(seen) == linears
    assert not torch.equal(after, before)
    assert float((after - before).abs().max()) < 0.05  # logits: FP8 moves them, slightly


def test_fp8_training_rounds_the_forward_and_passes_the_gradient_straight_through() -> None:
    from kernels.fp8_linear import Fp8Training, fp8_linear, quantise_rows

    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 16)
    x = torch.randn(8, 32, requires_grad=True)
    with Fp8Training(layer):
        y = layer(x)
    w_q, w_scale = quantise_rows(layer.weight.detach())
    assert torch.equal(y.detach(), fp8_linear(x.detach(), w_q, w_scale, layer.bias.detach()))
    assert not torch.equal(y, torch.nn.functional.linear(x, layer.weight, layer.bias))
    grad = torch.randn_like(y)
    y.backward(grad)
    got = (x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone())
    x.grad = None
    layer.zero_grad()
    torch.nn.functional.linear(x, layer.weight, layer.bias).backward(grad)  # the exact GEMM's
    for a, b in zip(got, (x.grad, layer.weight.grad, layer.bias.grad), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_model_trains_in_fp8_close_to_fp32(ml100k) -> None:
    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from workers.train import TrainConfig, evaluate, train

    spec = ArchSpec.load("examples/specs/dcnv2.json")
    rows, held = ml100k.features("train").without_history(), ml100k.features("valid")
    ne = {}
    for precision in ("fp32", "fp8"):
        torch.manual_seed(0)
        model = build_model(spec, ml100k.schema)
        train(model, rows, TrainConfig(steps=60, batch_size=512, precision=precision))
        ne[precision] = evaluate(model, held.without_history(), ml100k.positive_rate(), 4096)["ne"]
    assert ne["fp8"] != ne["fp32"] and abs(ne["fp8"] - ne["fp32"]) < 0.01


@pytest.mark.parametrize("shape", [(0, 4), (4, 0)])
def test_a_linear_with_no_work_runs_as_it_is_in_fp8_training_and_dispatch(shape) -> None:
    """An empty weight (a GLM layer's side with no tokens) has nothing to quantise."""
    from kernels.fp8_linear import Fp8Training

    with pytest.warns(UserWarning, match="zero-element"):
        layer = torch.nn.Linear(shape[1], shape[0])
    x = torch.randn(8, shape[1], requires_grad=True)
    for mode in (Fp8Training(layer), Fp8Dispatch(layer, None)):  # every site in FP8
        with mode:
            y = layer(x)
        assert torch.equal(y, F.linear(x, layer.weight, layer.bias))
    y.sum().backward()


def test_fp8_training_keeps_to_the_plans_sites() -> None:
    from kernels.fp8_linear import Fp8Training, fp8_linear, quantise_rows

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.Linear(16, 4))
    x = torch.randn(8, 32)
    with Fp8Training(model, ["1"]):  # the plan: the second layer only
        y = model(x)
    hidden = model[0](x)  # the first layer as it is
    w_q, w_scale = quantise_rows(model[1].weight.detach())
    want = fp8_linear(hidden.detach(), w_q, w_scale, model[1].bias.detach())
    assert torch.equal(y.detach(), want)


def test_fp8_sites_apply_to_fp8_training_only() -> None:
    from nas.core.errors import ConfigError
    from workers.train import TrainConfig

    assert TrainConfig(precision="fp8", fp8_sites=["top.0"]).fp8_sites == ("top.0",)
    with pytest.raises(ConfigError, match="fp8_sites"):
        TrainConfig(precision="bf16", fp8_sites=["top.0"])
