"""Does the cost model rank candidates as their measured latency does?

Method: the four baselines and ``--candidates`` members of ``ctr_stack`` (uniform draws,
seeded) are built on the MovieLens-1M schema. Each is timed scoring ``--batch`` real test
rows (forward under ``torch.inference_mode``, float32, ``--threads`` threads; the median
of ``--repeats`` calls after a warm-up, the candidates interleaved round by round so that
machine noise hits all of them alike). Each is also priced by the cost model on the
``cpu`` target (this machine, measured by ``kernels.cost.calibrate``) at the same batch.
The figure is the Spearman rank correlation between estimate and measurement, with FLOPs'
own correlation beside it as the reference (what the search ranked by before). Target on
CPU: Spearman >= 0.8.

On CUDA the same comparison against ``h200`` in BF16 and FP8 is not built yet: this
machine has no GPU to check it on.

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

from kernels.cost import batch_estimate, calibrate
from nas.data import load_dataset
from nas.model import build_model
from nas.spec import ArchSpec
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


if __name__ == "__main__":
    main()
