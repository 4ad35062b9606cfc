"""Does the cost model rank candidates as their measured latency does?

Method: the four baselines and ``--candidates`` members of ``ctr_stack`` (uniform draws,
seeded) are built on the MovieLens-1M schema. Each is timed scoring ``--batch`` real test
rows (forward under ``torch.inference_mode``, float32, ``--threads`` threads; the median
of ``--repeats`` calls after a warm-up, the candidates interleaved round by round so that
machine noise hits all of them alike). Each is also priced by the cost model on the
``cpu`` target (this machine, measured by ``nas.arch.cost.calibrate``) at the same batch.
The figure is the Spearman rank correlation between estimate and measurement, with FLOPs'
own correlation beside it as the reference (what the search ranked by before). Target on
CPU: Spearman >= 0.8.

With ``--cuda`` (on a GPU), the same candidates are timed on the GPU at ``--gpu-batch``
(default 4096) in BF16, and in FP8 (every linear site as ``kernels.fp8_linear.Fp8Linear``:
row-wise FP8 GEMMs through ``torch._scaled_mm``), against the ``h200`` target in each
precision. Target: Spearman >= 0.9. (Written without a GPU to run it on: unmeasured.)

    .venv/bin/python benchmarks/cost_model.py [--candidates 24] [--batch 1024] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from scipy.stats import spearmanr

from nas.arch.cost import batch_estimate, calibrate
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from search_spaces import SpaceInputs, create_space

SPECS = Path(__file__).resolve().parent.parent / "examples" / "specs"


def candidates(schema, count: int, seed: int) -> list[tuple[str, ArchSpec]]:
    out = [(p.stem, ArchSpec.load(p)) for p in sorted(SPECS.glob("*.json"))]
    space = create_space("ctr_stack", {}, SpaceInputs.of(schema))
    rng, seen = np.random.default_rng(seed), {s.arch_id for _, s in out}
    while len(out) < count + 4:
        spec = space.sample(rng)
        if spec.arch_id not in seen:
            seen.add(spec.arch_id)
            out.append((spec.arch_id[:12], spec))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=24)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cuda", action="store_true", help="also time on the GPU vs h200")
    parser.add_argument("--gpu-batch", type=int, default=4096)
    args = parser.parse_args()
    console = Console()
    torch.set_num_threads(args.threads)
    data = load_dataset("movielens-1m")
    target = calibrate(args.threads, refresh=True)
    console.print(
        f"cpu target at {args.threads} thread(s): {target.peak_flops['fp32'] / 1e9:.1f} GFLOP/s "
        f"fp32, {target.memory_bytes_per_s / 1e9:.1f} GB/s, {target.launch_s * 1e6:.1f} us/op"
    )
    rows = data.features("test")[: args.batch]
    specs = candidates(data.schema, args.candidates, args.seed)
    models, inputs = [], []
    for _, spec in specs:
        torch.manual_seed(0)
        model = build_model(spec, data.schema).eval()
        models.append(model)
        inputs.append((rows if model.reads_history else rows.without_history()).inputs())
    times: list[list[float]] = [[] for _ in specs]
    with torch.inference_mode():
        for model, x in zip(models, inputs, strict=True):  # warm up
            model(*x)
        for _ in range(args.repeats):
            for i, (model, x) in enumerate(zip(models, inputs, strict=True)):
                start = time.perf_counter()
                model(*x)
                times[i].append(time.perf_counter() - start)
    measured = [statistics.median(t) / args.batch * 1e6 for t in times]
    estimated = [
        batch_estimate(spec, data.schema, target, "fp32", args.batch).seconds / args.batch * 1e6
        for _, spec in specs
    ]
    flops = [build.flops() for build in models]
    table = Table(title=f"{len(specs)} candidates, batch {args.batch}, us per example")
    for column in ("candidate", "measured", "estimated", "FLOPs"):
        table.add_column(column, justify="left" if column == "candidate" else "right")
    for (label, _), m, e, f in sorted(
        zip(specs, measured, estimated, flops, strict=True), key=lambda r: r[1]
    ):
        table.add_row(label, f"{m:.3f}", f"{e:.3f}", f"{f:,}")
    console.print(table)
    rho = spearmanr(estimated, measured).statistic
    rho_flops = spearmanr(flops, measured).statistic
    verdict = "met" if rho >= 0.8 else "missed"
    console.print(
        f"Spearman(estimate, measured) = {rho:.3f}  (target >= 0.8: {verdict});  "
        f"Spearman(FLOPs, measured) = {rho_flops:.3f} (the reference)"
    )
    if args.cuda:
        gpu(console, data, specs, models, args.gpu_batch, args.repeats)


def gpu(console, data, specs, models, batch: int, repeats: int) -> None:
    """BF16 and FP8 latency on the GPU against the h200 target's estimates."""
    import contextlib
    import copy

    from kernels.fp8_linear import Fp8Dispatch
    from nas.arch.cost import get_target

    if not torch.cuda.is_available():
        console.print("--cuda: no CUDA device here")
        return
    rows = data.features("test")[:batch]
    target = get_target("h200")
    for precision in ("bf16", "fp8"):
        measured, estimated = [], []
        for (_, spec), model in zip(specs, models, strict=True):
            run = copy.deepcopy(model).to("cuda", torch.bfloat16).eval()
            # FP8: every GEMM site (each F.linear on a weight) as a row-wise FP8 GEMM.
            mode = Fp8Dispatch(run, None) if precision == "fp8" else contextlib.nullcontext()
            x = tuple(
                t.to("cuda") if t.dtype != torch.float32 else t.to("cuda", torch.bfloat16)
                for t in (rows if run.reads_history else rows.without_history()).inputs()
            )
            with torch.inference_mode(), mode:
                for _ in range(3):
                    run(*x)
                torch.cuda.synchronize()
                times = []
                for _ in range(repeats):
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    run(*x)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end) / 1000)
            measured.append(statistics.median(times) / batch * 1e6)
            estimate = batch_estimate(spec, data.schema, target, precision, batch)
            estimated.append(estimate.seconds / batch * 1e6)
        rho = spearmanr(estimated, measured).statistic
        verdict = "met" if rho >= 0.9 else "missed"
        console.print(
            f"CUDA {precision}, batch {batch}: Spearman(h200 estimate, measured) = {rho:.3f} "
            f"(target >= 0.9: {verdict}); measured {min(measured):.4f}-{max(measured):.4f} "
            f"us/example"
        )


if __name__ == "__main__":
    main()
