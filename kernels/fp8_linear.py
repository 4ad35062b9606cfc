"""FP8 (e4m3) row-wise scaled linear: what an FP8 dispatch plan runs at its FP8 sites.

    y = (x_q * s_x) @ (W_q * s_w).T + b,   x_q = e4m3(x / s_x),  s_x = max|x_row| / 448

Weights are quantised once, per output row (``Fp8Linear.from_linear``); activations on
every call, per row, by ``quantise_rows``: a Triton kernel
(``kernels/triton/triton_fp8_linear.py``: one pass per row, amax, scale and cast fused) for
CUDA tensors, else the PyTorch reference (``kernels/pytorch/pt_fp8_linear.py``). The GEMM
is ``torch._scaled_mm`` with the two row-wise scales, accumulating in float32 (it runs on
CPU too). Where ``_scaled_mm`` cannot take the shapes (on CUDA, dimensions that are
not multiples of 16), the dequantised operands are multiplied instead: the same values.

A GEMM site is a weight the model's ``F.linear`` calls use: an ``nn.Linear``'s, a bare
parameter's (a GLM masked dense layer), or a column slice of one (the top MLP's first layer,
split into its request and candidate shares). ``LinearSites`` sees every such call while it is
active (a ``TorchFunctionMode``: no module needs to be an ``nn.Linear``), and
``Fp8Dispatch`` runs the sites a plan names as FP8 GEMMs.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from kernels.backends import triton_chosen
from kernels.pytorch import pt_fp8_linear


def quantise_rows(x: torch.Tensor, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    if triton_chosen(backend, x):
        from kernels.triton.triton_fp8_linear import quantise_rows as kernel

        return kernel(x)
    return pt_fp8_linear.quantise_rows(x)


def scaled_matmul(
    x_q: torch.Tensor,
    x_scale: torch.Tensor,
    w_q: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """(x_q [M, K], scales [M]) @ (w_q [N, K], scales [N]).T + bias -> [M, N]."""
    m, k = x_q.shape
    n = w_q.shape[0]
    if not x_q.is_cuda or (k % 16 == 0 and n % 16 == 0):
        out = torch._scaled_mm(
            x_q,
            w_q.t(),
            scale_a=x_scale[:, None],
            scale_b=w_scale[None, :],
            # CUDA's row-wise scaled GEMM writes BF16 only; the CPU's, float32.
            out_dtype=torch.bfloat16 if x_q.is_cuda else torch.float32,
        )
    else:  # shapes _scaled_mm refuses on CUDA: the same values, dequantised
        out = (x_q.float() * x_scale[:, None]) @ (w_q.float() * w_scale[:, None]).t()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def fp8_linear(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """``x`` [..., K] through a row-wise FP8 weight ``w_q`` [N, K] (scales [N]) -> [..., N]."""
    flat = x.reshape(-1, x.shape[-1])
    x_q, x_scale = quantise_rows(flat, backend)
    out = scaled_matmul(x_q, x_scale, w_q, w_scale, bias, x.dtype)
    return out.reshape(*x.shape[:-1], w_q.shape[0])


class Fp8Linear(nn.Module):
    """An inference-only ``nn.Linear`` in FP8: weight quantised per output row, once."""

    def __init__(self, w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("w_q", w_q)
        self.register_buffer("w_scale", w_scale)
        self.register_buffer("bias", bias)
        self.in_features, self.out_features = w_q.shape[1], w_q.shape[0]

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Fp8Linear:
        with torch.no_grad():
            w_q, w_scale = pt_fp8_linear.quantise_rows(linear.weight)
            bias = None if linear.bias is None else linear.bias.detach().clone()
        return cls(w_q, w_scale, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.w_q, self.w_scale, self.bias)


def parameter_names(model: nn.Module) -> dict[int, str]:
    """id of each parameter -> its name, less a trailing ``.weight`` (an ``nn.Linear``'s
    site is named by its module)."""
    return {id(p): name.removesuffix(".weight") for name, p in model.named_parameters()}


def site_name(weight: torch.Tensor, names: dict[int, str]) -> str | None:
    """The site a linear call's ``weight`` is: a parameter by its name, a column slice of one
    as ``name[:, a:b]``; None for anything else (a weight computed on the fly)."""
    if id(weight) in names:
        return names[id(weight)]
    base = weight._base
    if base is None or id(base) not in names or base.dim() != 2 or weight.dim() != 2:
        return None
    if weight.shape[0] != base.shape[0] or weight.stride() != base.stride():
        return None
    start = weight.storage_offset() - base.storage_offset()
    if start == 0 and weight.shape[1] == base.shape[1]:
        return names[id(base)]  # the whole weight, as a view
    return f"{names[id(base)]}[:, {start}:{start + weight.shape[1]}]"


class LinearSites(TorchFunctionMode):
    """While active, every ``F.linear`` call on one of ``model``'s sites goes through
    ``at_site`` (which, here, runs it as it is); other calls are untouched, and so is a call
    with no work (an empty weight or input: a GLM side with no tokens), which has nothing to
    quantise or price."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.names = parameter_names(model)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight, bias = _linear_args(*args, **kwargs)
            name = site_name(weight, self.names)
            if name is not None and weight.numel() and x.numel():
                return self.at_site(name, x, weight, bias)
        return func(*args, **kwargs)

    def at_site(self, name: str, x, weight, bias) -> torch.Tensor:
        return F.linear(x, weight, bias)


def _linear_args(input, weight, bias=None):
    return input, weight, bias


class _Fp8LinearFn(torch.autograd.Function):
    """Forward: the row-wise FP8 GEMM (weight quantised on every call: it changes each
    step). Backward: straight through, in the inputs' precision, as if the forward had
    been exact (the gradient FP8-aware training takes: the loss sees FP8's rounding, the
    weights move by the full-precision gradient)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        w_q, w_scale = quantise_rows(weight.detach())
        return fp8_linear(x.detach(), w_q, w_scale, None if bias is None else bias.detach())

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        rows = grad.reshape(-1, grad.shape[-1]).to(weight.dtype)
        grad_x = (rows @ weight).reshape(x.shape).to(x.dtype)
        grad_w = rows.t() @ x.reshape(-1, x.shape[-1]).to(weight.dtype)
        grad_b = rows.sum(0) if ctx.has_bias else None
        return grad_x, grad_w, grad_b


class Fp8Training(LinearSites):
    """The forward of every site in ``fp8_sites`` (None: every site) as a row-wise FP8 GEMM,
    its backward straight through (``_Fp8LinearFn``): training that sees FP8's rounding where
    a plan serves FP8. Other sites run as they are (in bf16, under training's autocast)."""

    def __init__(self, model: nn.Module, fp8_sites: Iterable[str] | None = None):
        super().__init__(model)
        self.fp8_sites = None if fp8_sites is None else frozenset(fp8_sites)

    def at_site(self, name: str, x, weight, bias) -> torch.Tensor:
        if self.fp8_sites is not None and name not in self.fp8_sites:
            return F.linear(x, weight, bias)
        return _Fp8LinearFn.apply(x, weight, bias)


class Dispatched(nn.Module):
    """``module`` run with the FP8 sites of ``owner`` (a model whose parameters ``module``
    reaches) as row-wise FP8 GEMMs: a plan served. ``torch.export`` traces those GEMMs into
    the program. Weights are quantised on first use and kept: for serving, not training."""

    def __init__(self, module: nn.Module, owner: nn.Module, fp8_sites: Iterable[str]):
        super().__init__()
        self.module = module
        self._owner = [owner]  # not a submodule: ``module`` holds it
        self.fp8_sites = tuple(fp8_sites)
        self.weights: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, *args):
        # A mode made in forward: torch.export traces one made here (not one kept).
        with Fp8Dispatch(self._owner[0], self.fp8_sites, self.weights):
            return self.module(*args)


class Fp8Dispatch(LinearSites):
    """Runs the sites named in ``fp8_sites`` (None: every site) as row-wise FP8 GEMMs (each
    weight quantised once, on its first call), the rest as they are: an FP8 dispatch plan,
    run for real."""

    def __init__(self, model: nn.Module, fp8_sites: Iterable[str] | None, weights=None):
        super().__init__(model)
        self.fp8_sites = None if fp8_sites is None else set(fp8_sites)
        # each site's quantised weight and scales, by site (``weights``: kept between uses)
        self.weights: dict[str, tuple[torch.Tensor, torch.Tensor]] = (
            {} if weights is None else weights
        )

    def at_site(self, name: str, x, weight, bias) -> torch.Tensor:
        if self.fp8_sites is not None and name not in self.fp8_sites:
            return F.linear(x, weight, bias)
        quantised = self.weights.get(name)
        if quantised is None:
            quantised = pt_fp8_linear.quantise_rows(weight.detach())
            if type(weight) in (torch.Tensor, nn.Parameter):  # not while export traces it
                self.weights[name] = quantised
        return fp8_linear(x, *quantised, bias)
