"""The Triton kernels against their PyTorch references, on CUDA, in one run.

Built so far: IKBO (``kernels/ikbo.py``). For N = 1, 10, 100, 1000 candidates per request
and 8192 candidates in all (8192 / N requests), it times the request-side broadcast linear
of a ranking model's top layer (K = 512 candidate features, N_out = 512, bf16):

- naive: the request term repeated per candidate (``index_select``), then GEMM + add;
- kernel: ``broadcast_linear(..., backend="triton")``, the repeat never written.

Each figure is the median of ``--repeats`` CUDA-event-timed calls after a warm-up; it prints
the speed-up and the kernel's achieved TFLOP/s and GB/s against the H200's peaks (989
TFLOP/s BF16 dense, 4.8 TB/s). Target: >= 3x the naive path at 100 candidates per request.

FP8 row-wise linear (``kernels/fp8_linear.py``): at every distinct ``nn.Linear`` shape of
the four baselines and of a 10x wider Wukong (``examples/specs/modern/wukong.json`` with
its MLP and top widths times 10), at M = 4096 rows, ``fp8_linear`` (row quantisation
kernel + ``torch._scaled_mm``, weights quantised ahead) against BF16 ``torch.mm``.

HSTU attention (``kernels/hstu_attention.py``): forward + backward at L = 256, 1024 and
4096, bf16, 2 heads of 64, lengths drawn uniformly between L/4 and L (a realistic
spread), 32 sequences (8 at 4096), against the PyTorch reference on the same padded
tensors. Target: >= 2x at 1024.

    .venv/bin/python benchmarks/triton_kernels.py            # CUDA
    TRITON_INTERPRET=1 .venv/bin/python benchmarks/triton_kernels.py --smoke   # CPU, tiny shapes
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from kernels.ikbo import broadcast_linear
from kernels.pytorch.pt_ikbo import reference

H200_TFLOPS, H200_TBPS = 989.0, 4.8


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


def ikbo_rows(device: str, dtype, total: int, k: int, n: int, repeats: int) -> list[dict]:
    cuda = device == "cuda"
    rows = []
    for per_request in (1, 10, 100, 1000):
        requests = max(1, total // per_request)
        c = requests * per_request
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(c, k, device=device, dtype=dtype, generator=g)
        w = torch.randn(n, k, device=device, dtype=dtype, generator=g)
        b = torch.randn(n, device=device, dtype=dtype, generator=g)
        term = torch.randn(requests, n, device=device, dtype=dtype, generator=g)
        owner = torch.arange(c, device=device) // per_request
        with torch.no_grad():
            naive = _time(partial(reference, x, w, b, term, owner), repeats, cuda)
            fused = partial(broadcast_linear, x, w, b, term, owner, backend="triton")
            kernel = _time(fused, repeats, cuda)
            got = broadcast_linear(x, w, b, term, owner, backend="triton")
            error = float((got.float() - reference(x, w, b, term, owner).float()).abs().max())
        flops = 2 * c * k * n
        moved = (c * k + n * k + requests * n + c * n) * x.element_size()
        rows.append(
            {
                "per_request": per_request,
                "candidates": c,
                "naive_us": naive * 1e6,
                "kernel_us": kernel * 1e6,
                "speedup": naive / kernel,
                "tflops": flops / kernel / 1e12,
                "gbps": moved / kernel / 1e9,
                "max_error": error,
            }
        )
    return rows


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

        reference = _time(partial(step, "torch"), repeats, cuda)
        kernel = _time(partial(step, "triton"), repeats, cuda)
        rows.append(
            {
                "length": length,
                "sequences": b,
                "mean_length": float(lengths.float().mean()),
                "reference_ms": reference * 1e3,
                "kernel_ms": kernel * 1e3,
                "speedup": reference / kernel,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny shapes (interpreter)")
    args = parser.parse_args()
    console = Console()
    if args.smoke:
        device, dtype, total, k, n, repeats = "cpu", torch.float32, 64, 16, 16, 2
    elif torch.cuda.is_available():
        device, dtype, total, k, n, repeats = "cuda", torch.bfloat16, 8192, 512, 512, args.repeats
    else:
        console.print("no CUDA device: run with --smoke (TRITON_INTERPRET=1) for a CPU check")
        return
    table = Table(title=f"IKBO broadcast linear on {device} ({dtype}), K={k}, N={n}")
    columns = ("per request", "candidates", "naive us", "kernel us", "speed-up")
    for column in (*columns, "TFLOP/s", "GB/s", "max error"):
        table.add_column(column, justify="right")
    for r in ikbo_rows(device, dtype, total, k, n, repeats):
        table.add_row(
            str(r["per_request"]),
            str(r["candidates"]),
            f"{r['naive_us']:.1f}",
            f"{r['kernel_us']:.1f}",
            f"{r['speedup']:.2f}x",
            f"{r['tflops']:.1f}",
            f"{r['gbps']:.0f}",
            f"{r['max_error']:.2e}",
        )
    console.print(table)
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
    for column in ("L", "sequences", "mean length", "reference ms", "kernel ms", "speed-up"):
        table.add_column(column, justify="right")
    for r in hstu_rows(device, dtype, sizes, batch, repeats):
        table.add_row(
            str(r["length"]),
            str(r["sequences"]),
            f"{r['mean_length']:.0f}",
            f"{r['reference_ms']:.2f}",
            f"{r['kernel_ms']:.2f}",
            f"{r['speedup']:.2f}x",
        )
    console.print(table)
    console.print(f"H200 peaks: {H200_TFLOPS:.0f} TFLOP/s BF16 dense, {H200_TBPS} TB/s HBM")


if __name__ == "__main__":
    main()
