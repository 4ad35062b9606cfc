"""The FP8 row-wise linear: the Triton quantisation kernel (interpreter, CPU) bit-exact
against its reference, the FP8 GEMM close to FP32, and a probe's plan run for real."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from kernels.fp8_linear import (
    Fp8Linear,
    apply_plan,
    fp8_linear,
    quantise_rows,
    quantise_rows_reference,
)


@pytest.mark.parametrize("k", [1, 10, 100, 1024, 1500])
def test_the_quantisation_kernel_is_bit_exact_against_the_reference(k) -> None:
    g = torch.Generator().manual_seed(k)
    x = torch.randn(9, k, generator=g) * torch.logspace(-6, 6, 9)[:, None]
    x[0, 0] = 0.0
    got, got_scale = quantise_rows(x, backend="triton")
    want, want_scale = quantise_rows_reference(x)
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


def test_a_plan_swaps_only_its_fp8_sites(ml100k) -> None:
    from kernels.cost.fp8_probe import Site
    from nas.model import build_model
    from nas.spec import ArchSpec

    torch.manual_seed(0)
    model = build_model(ArchSpec.load("examples/specs/dcnv2.json"), ml100k.schema).eval()
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    plan = [Site(n, 1, 1, 1.0, precision="fp8" if i % 2 else "bf16") for i, n in enumerate(names)]
    batch = ml100k.features("valid")[:256].without_history()
    with torch.no_grad():
        before = model(*batch.inputs())
        swapped = apply_plan(model, plan)
        after = model(*batch.inputs())
    assert swapped == [s.name for s in plan if s.precision == "fp8"] and swapped
    kinds = {n: type(m).__name__ for n, m in model.named_modules() if n in names}
    assert {kinds[s.name] for s in plan if s.precision == "fp8"} == {"Fp8Linear"}
    assert {kinds[s.name] for s in plan if s.precision == "bf16"} == {"Linear"}
    assert float((after - before).abs().max()) < 0.1 * float(before.abs().max())
