"""The Triton kernels against their PyTorch references, on CUDA, in one run.

IKBO (``kernels/ikbo.py``): the first layer of a ranking model's top MLP over a request's
features (``--request-features``, default 1024) beside each candidate's (512), 512 outputs,
bf16, for 1, 10, 100 and 1000 candidates per request and 8192 candidates in all (8192 / N
requests). Twice as many request features as candidate features is the high end of
recnas's models on MovieLens-1M: at their top MLP's first layer DeepFM reads 128 request
features beside 64, DLRM 128 beside 103, ROCS 128 beside 128, and models whose interaction
mixes both sides (DCNv2, Wukong, AutoInt) none from the request alone. Three ways to compute
it:

- repeat: the request's features repeated beside each candidate's, one GEMM over both: what
  scoring row by row does (``RankingModel.forward``). The target's reference;
- gather: IKBO's split in PyTorch: the request's share of the GEMM once per request, then
  the candidates' GEMM plus each one's request term gathered (``index_select``) and added;
- kernel: the same split with ``broadcast_linear(..., backend="triton")``, the gathered
  terms added inside the GEMM's epilogue, never written.

Each figure is the median of ``--repeats`` CUDA-event-timed calls after a warm-up; it prints
the speed-ups, the FLOPs bound on them (repeat's FLOPs over the split's), and the kernel's
achieved TFLOP/s against the H200's peak (989 TFLOP/s BF16 dense). Target: the kernel >= 3x
repeat at 100 candidates per request. Without CUDA (and without ``--smoke``) it times repeat
and gather on the CPU at the same shapes in float32, and nothing else. It exits 1 when a
kernel's output (or a gradient) differs from its reference's by more than rounding
(``TOLERANCE``).

FP8 row-wise linear (``kernels/fp8_linear.py``): at every distinct ``nn.Linear`` shape of
the four baselines and of a 10x wider Wukong (``examples/specs/modern/wukong.json`` with
its MLP and top widths times 10), at M = 4096 rows, ``fp8_linear`` (row quantisation
kernel + ``torch._scaled_mm``, weights quantised ahead) against BF16 ``torch.mm``.

HSTU attention (``kernels/hstu_attention.py``): forward + backward at L = 256, 1024 and
4096, bf16, 2 heads of 64, lengths drawn uniformly between L/4 and L (a realistic
spread), 32 sequences (8 at 4096), against the PyTorch reference on the same padded
tensors. Target: >= 2x at 1024.

    .venv/bin/python benchmarks/triton_kernels.py            # CUDA (IKBO's PyTorch half without)
    TRITON_INTERPRET=1 .venv/bin/python benchmarks/triton_kernels.py --smoke   # CPU, tiny shapes
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from kernels.ikbo import broadcast_linear
from kernels.pytorch.pt_ikbo import reference
from nas.cli.flags import whole_number

H200_TFLOPS, H200_TBPS = 989.0, 4.8
# A kernel's largest difference from its reference, over the largest value, that is rounding:
# float32 sums in another order; bf16 rounding each side's intermediates differently.
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2}


def _time(fn, repeats: int, cuda: bool) -> float:
    """Median seconds of ``fn()``."""
    fn()
    times = []
    for _ in range(repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        else:
            begin = time.perf_counter()
            fn()
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


def ikbo_rows(
    device: str, dtype, total: int, shape: tuple[int, int, int], repeats: int, kernel: bool
) -> list[dict]:
    """Repeat, gather and (with ``kernel``) the kernel at 1-1000 candidates per request, for
    ``shape`` (request features, candidate features, outputs); see the module's docstring."""
    return [
        ikbo_row(device, dtype, max(1, total // n), n, shape, repeats, kernel)
        for n in (1, 10, 100, 1000)
    ]


def ikbo_row(device, dtype, requests: int, per_request: int, shape, repeats, kernel) -> dict:
    cuda = device == "cuda"
    k_request, k_candidate, n = shape
    c = requests * per_request
    g = torch.Generator(device=device).manual_seed(0)
    request = torch.randn(requests, k_request, device=device, dtype=dtype, generator=g)
    candidate = torch.randn(c, k_candidate, device=device, dtype=dtype, generator=g)
    w = torch.randn(n, k_request + k_candidate, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, device=device, dtype=dtype, generator=g)
    w_request, w_candidate = w[:, :k_request].contiguous(), w[:, k_request:].contiguous()
    owner = torch.arange(c, device=device) // per_request

    def repeat():
        return F.linear(torch.cat([request.index_select(0, owner), candidate], 1), w, b)

    def split(backend: str):
        term = F.linear(request, w_request)
        if backend == "torch":
            return reference(candidate, w_candidate, b, term, owner)
        return broadcast_linear(candidate, w_candidate, b, term, owner, backend=backend)

    with torch.no_grad():
        row = {
            "per_request": per_request,
            "candidates": c,
            "repeat_us": _time(repeat, repeats, cuda) * 1e6,
            "gather_us": _time(partial(split, "torch"), repeats, cuda) * 1e6,
            "bound": (k_request + k_candidate) / (k_candidate + k_request / per_request),
        }
        if kernel:
            seconds = _time(partial(split, "triton"), repeats, cuda)
            want, got = repeat().float(), split("triton").float()
            row |= {
                "kernel_us": seconds * 1e6,
                "tflops": 2 * n * (c * k_candidate + requests * k_request) / seconds / 1e12,
                "relative_error": float((got - want).abs().max() / want.abs().max()),
            }
    return row


def linear_shapes(wide: int = 10) -> list[tuple[str, int, int]]:
    """(model, in, out) of every distinct linear layer of the baselines and a wide Wukong."""
    import json

    from torch import nn

    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset

    root = Path(__file__).resolve().parent.parent / "examples" / "specs"
    schema = load_dataset("movielens-1m").schema
    wukong = json.loads((root / "modern" / "wukong.json").read_text())
    for layer in wukong["interaction"]:
        layer["widths"] = [w * wide for w in layer["widths"]]
    wukong["top_mlp"] = [w * wide for w in wukong["top_mlp"]]
    specs = [(p.stem, ArchSpec.load(p)) for p in sorted(root.glob("*.json"))]
    specs.append((f"wukong x{wide}", ArchSpec.from_dict(wukong)))
    shapes, seen = [], set()
    for name, spec in specs:
        for module in build_model(spec, schema).modules():
            if isinstance(module, nn.Linear):
                key = (module.in_features, module.out_features)
                if key not in seen:
                    seen.add(key)
                    shapes.append((name, *key))
    return shapes


def fp8_rows(device: str, m: int, shapes, repeats: int) -> list[dict]:
    from kernels.fp8_linear import Fp8Linear, fp8_linear

    cuda = device == "cuda"
    rows = []
    for name, k, n in shapes:
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=g)
        linear = torch.nn.Linear(k, n, bias=False).to(device)
        fp8 = Fp8Linear.from_linear(linear)
        w = linear.weight.detach().to(torch.bfloat16)
        with torch.no_grad():
            bf16 = _time(partial(torch.mm, x, w.t()), repeats, cuda)
            run = partial(fp8_linear, x, fp8.w_q, fp8.w_scale, None, "triton")
            kernel = _time(run, repeats, cuda)
            exact = x.float() @ w.float().t()
            error = float((run().float() - exact).norm() / exact.norm())
        rows.append(
            {
                "model": name,
                "shape": f"{m}x{k} @ {k}x{n}",
                "bf16_us": bf16 * 1e6,
                "fp8_us": kernel * 1e6,
                "speedup": bf16 / kernel,
                "tflops": 2 * m * k * n / kernel / 1e12,
                "relative_error": error,
            }
        )
    return rows


def hstu_rows(device: str, dtype, sizes, batch: int, repeats: int) -> list[dict]:
    from kernels.hstu_attention import hstu_attention

    cuda = device == "cuda"
    rows = []
    for length in sizes:
        b = batch if length < 4096 else max(1, batch // 4)
        g = torch.Generator(device=device).manual_seed(0)
        lengths = torch.randint(length // 4, length + 1, (b,), device=device, generator=g)
        shape = (b, 2, length, 64)
        q, k, v = (torch.randn(shape, device=device, dtype=dtype, generator=g) for _ in range(3))
        rab = torch.randn(1, length, length, device=device, dtype=dtype, generator=g)
        leaves = [t.requires_grad_() for t in (q, k, v, rab)]

        def step(backend: str, leaves=leaves, lengths=lengths, length=length) -> None:
            out = hstu_attention(*leaves, lengths, 0, float(length), backend=backend)
            out.sum().backward()

        def results(backend: str, leaves=leaves, lengths=lengths, length=length) -> list:
            out = hstu_attention(*leaves, lengths, 0, float(length), backend=backend)
            grad = torch.ones_like(out)  # the timed step's gradient (of out.sum())
            return [out, *torch.autograd.grad(out, leaves, grad)]

        reference = _time(partial(step, "torch"), repeats, cuda)
        kernel = _time(partial(step, "triton"), repeats, cuda)
        errors = [
            float((got.detach().float() - want.float()).abs().max() / want.float().abs().max())
            for got, want in zip(results("triton"), results("torch"), strict=True)
        ]
        rows.append(
            {
                "length": length,
                "sequences": b,
                "mean_length": float(lengths.float().mean()),
                "reference_ms": reference * 1e3,
                "kernel_ms": kernel * 1e3,
                "speedup": reference / kernel,
                "relative_error": max(errors),  # of the output, dq, dk, dv, d(rab)
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=whole_number(1), default=50)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny shapes (interpreter)")
    parser.add_argument(
        "--request-features", type=whole_number(1), default=1024, help="IKBO: the request's K"
    )
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 170)  # files keep the columns
    cuda = torch.cuda.is_available() and not args.smoke
    kernel = cuda or args.smoke  # the smoke run's kernels run in Triton's interpreter
    if args.smoke:
        device, dtype, total, repeats, shape = "cpu", torch.float32, 64, 2, (24, 16, 16)
    else:
        device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
        total, shape = 8192, (args.request_features, 512, 512)
        repeats = args.repeats if cuda else min(args.repeats, 10)
    table = Table(
        title=f"IKBO: the top MLP's first layer on {device} ({dtype}), {shape[0]} request + "
        f"{shape[1]} candidate features -> {shape[2]}"
    )
    rows = ikbo_rows(device, dtype, total, shape, repeats, kernel)
    errors = {f"IKBO at {r['per_request']}": r.get("relative_error", 0.0) for r in rows}
    columns = ["per request", "candidates", "repeat us", "gather us", "gather / repeat"]
    if kernel:
        columns += ["kernel us", "kernel / repeat", "kernel / gather", "TFLOP/s", "rel. error"]
    for column in (*columns, "FLOPs bound"):
        table.add_column(column, justify="right")
    for r in rows:
        cells = [
            str(r["per_request"]),
            str(r["candidates"]),
            f"{r['repeat_us']:.1f}",
            f"{r['gather_us']:.1f}",
            f"{r['repeat_us'] / r['gather_us']:.2f}x",
        ]
        if kernel:
            cells += [
                f"{r['kernel_us']:.1f}",
                f"{r['repeat_us'] / r['kernel_us']:.2f}x",
                f"{r['gather_us'] / r['kernel_us']:.2f}x",
                f"{r['tflops']:.1f}",
                f"{r['relative_error']:.1e}",
            ]
        table.add_row(*cells, f"{r['bound']:.2f}x")
    console.print(table)
    if not kernel:
        console.print("no CUDA device: the Triton kernels need one (--smoke checks them here)")
        return
    shapes = linear_shapes()
    m = 4096
    if args.smoke:
        shapes, m = shapes[:3], 8
    table = Table(title=f"FP8 row-wise linear vs BF16 torch.mm on {device}, M = {m}")
    for column in ("model", "GEMM", "bf16 us", "fp8 us", "speed-up", "TFLOP/s", "rel. error"):
        table.add_column(column, justify="left" if column in ("model", "GEMM") else "right")
    for r in fp8_rows(device, m, shapes, repeats):
        table.add_row(
            r["model"],
            r["shape"],
            f"{r['bf16_us']:.1f}",
            f"{r['fp8_us']:.1f}",
            f"{r['speedup']:.2f}x",
            f"{r['tflops']:.1f}",
            f"{r['relative_error']:.3f}",
        )
    console.print(table)
    sizes, batch = ((32, 64), 2) if args.smoke else ((256, 1024, 4096), 32)
    table = Table(title=f"HSTU attention forward + backward on {device} ({dtype})")
    columns = ("L", "sequences", "mean length", "reference ms", "kernel ms", "speed-up")
    for column in (*columns, "rel. error (out, grads)"):
        table.add_column(column, justify="right")
    for r in hstu_rows(device, dtype, sizes, batch, repeats):
        errors[f"HSTU attention at L = {r['length']}"] = r["relative_error"]
        table.add_row(
            str(r["length"]),
            str(r["sequences"]),
            f"{r['mean_length']:.0f}",
            f"{r['reference_ms']:.2f}",
            f"{r['kernel_ms']:.2f}",
            f"{r['speedup']:.2f}x",
            f"{r['relative_error']:.1e}",
        )
    console.print(table)
    console.print(f"H200 peaks: {H200_TFLOPS:.0f} TFLOP/s BF16 dense, {H200_TBPS} TB/s HBM")
    if wrong := {k: e for k, e in errors.items() if not e <= TOLERANCE[dtype]}:
        console.print(
            "FAILED: the kernel disagrees with its reference by more than "
            f"{TOLERANCE[dtype]:g} of the largest value: "
            + ", ".join(f"{k} ({e:.1e})" for k, e in wrong.items())
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
