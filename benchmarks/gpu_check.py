"""The trainer on a GPU against the same trainer on the CPU, on MovieLens-1M, without Ray.

    python benchmarks/gpu_check.py --out DIR    # on a machine with a CUDA GPU (gpu_check.sh)
    python benchmarks/gpu_check.py --smoke      # here: the CPU only, a few steps

First the embeddings' optimizers: the trainer's ``RowwiseAdam`` against
``torch.optim.SparseAdam`` on each device (ms per step, how far their weights end apart).
Per spec (DCNv2, Wukong, HSTU): the GPU's training examples/s in fp32, bf16 and fp8 (every
GEMM's forward in row-wise FP8, ``torch._scaled_mm``) at a large batch, against the CPU's at
the same batch (DCNv2 also at ``--large-batch``, 65,536 rows: a GPU's step at 8,192 is
mostly kernel launches); and, at a short budget in fp32, the NE the GPU reaches against the CPU's
from the same seed (the same weights at the start; float rounding apart, the same
training); and DCNv2's bf16 throughput with its rows kept on the host
(each batch copied on a side stream while the step before computes). Then per spec where
a training step still makes the host wait for the GPU (each sync counted at its line of
Python), and how long its kernels run against the step's wall time. Last, the setup jobs
of one-shot and DNAS searches (a supernet trained and its members scored; a DNAS job, its
draws read back) on the GPU and on the CPU from the same seed: steps/s and the members
they pick. Prints tables; with ``--out``, writes ``gpu_check.json`` there.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import time
from pathlib import Path

import torch

from nas.cli.flags import whole_number

REPO = Path(__file__).resolve().parents[1]
SPECS = ("dcnv2.json", "modern/wukong.json", "modern/hstu_seq.json")
PARTS = ("optimizers", "training", "jobs", "syncs")


def _trained(spec, data, steps: int, batch: int, precision: str, device: str) -> dict:
    from workers.train import TrainConfig
    from workers.trial import evaluate

    config = TrainConfig(
        steps=steps, batch_size=batch, precision=precision, warmup_steps=min(100, steps // 5)
    )
    began = time.perf_counter()
    result = evaluate(spec, data, config, device=device)
    return {
        "device": device,
        "precision": precision,
        "steps": steps,
        "batch_size": batch,
        "examples_per_s": result.train_examples_per_s,
        "ne": result.ne,
        "auc": result.auc,
        "seconds": time.perf_counter() - began,
    }


def _host_syncs(spec, data, batch: int, device: str, steps: int = 20, warm: int = 3) -> dict:
    """Where a training step makes the host wait for the GPU: ``steps`` steps, after
    ``warm`` (first-step set-up), under ``torch.cuda.set_sync_debug_mode("warn")``, each
    warning counted at the line of Python that made it. The end of training reads the loss
    back (one sync, ``Losses.read``). On the CPU nothing is counted (the same path runs)."""
    import warnings

    from nas.arch.model import build_model
    from workers.train import TrainConfig, train

    torch.manual_seed(0)
    model = build_model(spec, data.schema).to(device)
    rows = data.features("train", model.reads_history)
    config = TrainConfig(steps=warm + steps, batch_size=batch, warmup_steps=1)
    debug = device == "cuda"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counted_from = []

        def on_step(done: int, _loss: float) -> bool:
            if done == warm:
                counted_from.append(len(caught))
                if debug:
                    torch.cuda.set_sync_debug_mode("warn")
            return False

        try:
            train(model, rows, config, on_step)
        finally:
            if debug:
                torch.cuda.set_sync_debug_mode("default")
    places: dict[str, int] = {}
    for found in caught[counted_from[0] :]:
        if "synchroniz" in str(found.message):
            where = f"{Path(found.filename).name}:{found.lineno}"
            places[where] = places.get(where, 0) + 1
    config = TrainConfig(steps=steps, batch_size=batch, warmup_steps=1)
    return {
        "steps": steps,
        "batch_size": batch,
        "syncs": sum(places.values()),
        "places": dict(sorted(places.items(), key=lambda kv: -kv[1])),
        **_busy(model, rows, config, device),
    }


def _busy(model, rows, config, device: str) -> dict:
    """A step's wall time, and on a GPU the time its kernels ran (the profiler's device
    time, summed): their ratio says how much of a step the GPU waits for the host (kernel
    launches, Python), the examples/s a step would reach if it never did."""
    from workers.train import train

    _sync(device)
    began = time.perf_counter()
    train(model, rows, config)
    _sync(device)
    wall_ms = (time.perf_counter() - began) / config.steps * 1e3
    if device != "cuda":
        return {"wall_ms_per_step": wall_ms, "kernel_ms_per_step": None}
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        train(model, rows, config)
        _sync(device)
    microseconds = sum(
        getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        for e in prof.key_averages()
    )
    return {"wall_ms_per_step": wall_ms, "kernel_ms_per_step": microseconds / config.steps / 1e3}


SPACE = {"name": "ctr_stack", "options": {"embedding_dims": [8, 16, 32], "max_depth": 2}}


def _job_settings(kind: str, steps: int) -> dict:
    """A setup job's settings as the oneshot and dnas strategies write them (their defaults,
    the quick examples' space), at ``steps``."""
    common = {"space": SPACE, "seed": 0, "threads": 1, "batch_size": 1024, "lr": 2e-3}
    common |= {"embedding_lr": 1e-2, "steps": steps, "checkpoint_every": 10**9}
    if kind == "supernet":
        return common | {
            "objectives": ["ne", "flops"],
            "sampling": "uniform",
            "sandwich_paths": 2,
            "subnet_search": "evolution",
            "subnet_budget": 30,
            "eval_rows": 8192,
            "picks": 3,
        }
    return common | {
        "penalty": 0.05,
        "relaxation": "straight_through",
        "bilevel": True,
        "tau_start": 2.0,
        "tau_end": 0.2,
        "alpha_lr": 0.02,
        "arch_batch_size": 1024,
        "warmup": 0.2,
        "cost_reference": None,
        "log_every": 50,
    }


def _setup_job(kind: str, data, steps: int, device: str) -> dict:
    from workers import dnas, oneshot

    began = time.perf_counter()
    run = oneshot.run if kind == "supernet" else dnas.run
    result = run(_job_settings(kind, steps), data, None, lambda *_: None, torch.device(device))
    seconds = time.perf_counter() - began
    if kind == "supernet":
        picked = [p["spec"] for p in result["picks"]]
        trained = result["train_seconds"]
    else:
        picked, trained = [result["decoded"]], result["seconds"]
    from nas.arch.spec import ArchSpec

    return {
        "job": kind,
        "device": device,
        "steps": steps,
        "steps_per_s": steps / trained,
        "seconds": seconds,
        "picked": [ArchSpec.from_dict(p).arch_id[:10] for p in picked],
    }


# The embedding tables of the optimizer measurement: MovieLens-1M's largest two, and one of the
# size an ads or feed model carries (rows x width).
TABLES = {"user": (6_041, 16), "item": (3_707, 16), "large": (1_000_000, 64)}


def _embedding_optimizers(device: str, batch: int, steps: int, tables: dict) -> list[dict]:
    """Ms per step (lookup, backward, optimizer step) of the trainer's lazy Adam
    (``workers.optimizers.RowwiseAdam``, its PyTorch path on a GPU) against
    ``torch.optim.SparseAdam`` over the same tables, ids and gradients from one start, and
    how far their weights end apart: the issue's "measure before choosing" for the GPU's
    embedding optimizer (FBGEMM's table-batched embeddings do not install on the GPU
    machine, which has no network; see benchmarks/README.md)."""
    from workers.optimizers import RowwiseAdam

    generator = torch.Generator(device=device).manual_seed(0)
    rows = []
    for name, (count, width) in tables.items():
        start = torch.nn.Embedding(count, width, sparse=True)
        ids = [
            torch.randint(0, count, (batch,), generator=generator, device=device)
            for _ in range(steps + 3)
        ]
        ends = {}
        for optimizer_name in ("RowwiseAdam", "SparseAdam"):
            table = copy.deepcopy(start).to(device)
            make = RowwiseAdam if optimizer_name == "RowwiseAdam" else torch.optim.SparseAdam
            optimizer = make(table.parameters(), lr=1e-2)
            began = 0.0
            for step, batch_ids in enumerate(ids):
                if step == 3:  # warmed up
                    _sync(device)
                    began = time.perf_counter()
                optimizer.zero_grad()
                table(batch_ids).square().sum().backward()
                optimizer.step()
            _sync(device)
            ms = (time.perf_counter() - began) / steps * 1e3
            ends[optimizer_name] = table.weight.detach()
            rows.append(
                {
                    "table": name,
                    "rows x width": f"{count:,} x {width}",
                    "device": device,
                    "optimizer": optimizer_name,
                    "ms_per_step": ms,
                }
            )
        gap = (ends["RowwiseAdam"] - ends["SparseAdam"]).abs().max().item()
        rows[-1]["max_weight_gap"] = rows[-2]["max_weight_gap"] = gap
    return rows


@contextlib.contextmanager
def _profiled(on: bool):
    """With ``on``, the run's top ops by GPU time, printed after it."""
    if not on:
        yield
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        yield
    print(
        prof.key_averages().table(sort_by="cuda_time_total", row_limit=20, max_name_column_width=60)
    )


def _optimizer_rows(device: str, args, tables: dict) -> dict:
    return {"rows": _embedding_optimizers(device, args.batch, args.optimizer_steps, tables)}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _attempt(labels: dict, measure, *args) -> dict:
    """``measure(*args)`` under ``labels``, or what stopped it: the check goes on, and the
    report says."""
    try:
        return labels | measure(*args)
    except Exception as err:  # noqa: BLE001 - any failure on the device is a finding
        return labels | {"error": f"{type(err).__name__}: {err}"[:300]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="movielens-1m")
    count = whole_number(1)
    parser.add_argument("--batch", type=count, default=8192, help="the throughput runs' batch")
    parser.add_argument(
        "--large-batch", type=count, default=65536, help="DCNv2's throughput at a GPU's batch too"
    )
    parser.add_argument("--steps", type=count, default=300, help="GPU throughput steps")
    parser.add_argument("--cpu-steps", type=count, default=20, help="CPU throughput steps")
    parser.add_argument("--agree-steps", type=count, default=40, help="the CPU/GPU NE runs")
    parser.add_argument("--job-steps", type=count, default=200, help="each setup job's steps")
    parser.add_argument("--optimizer-steps", type=count, default=50, help="per optimizer, table")
    parser.add_argument("--specs", nargs="+", default=list(SPECS), help="under examples/specs")
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure"
    )
    parser.add_argument(
        "--profile", action="store_true", help="print the GPU's top ops of each spec's fp32 run"
    )
    parser.add_argument("--smoke", action="store_true", help="the CPU only, a few steps")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    found = sorted(
        str(p.relative_to(REPO / "examples/specs"))
        for p in (REPO / "examples/specs").rglob("*.json")
    )
    if missing := [s for s in args.specs if s not in found]:
        parser.error(
            f"--specs: no {', '.join(missing)} under examples/specs; one of {', '.join(found)}"
        )

    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from workers.trial_data import TrialData

    cuda = torch.cuda.is_available() and not args.smoke
    tables = TABLES
    if args.smoke:
        args.batch, args.steps, args.cpu_steps, args.agree_steps = 256, 3, 3, 3
        args.large_batch = 1024
        args.job_steps, args.optimizer_steps = 4, 2
        tables = TABLES | {"large": (10_000, 64)}
    devices = ["cuda", "cpu"] if cuda else ["cpu"]
    report = {
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "torch": torch.__version__,
        "dataset": args.dataset,
        "rows": [],
        "embedding_optimizers": [],
        "setup_jobs": [],
        "host_syncs": [],
    }

    def keep(section: str, entries: list[dict]) -> None:  # written as it goes: a run cut
        report[section] += entries  # short by its time limit still brings back the rest
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")

    for device in devices if "optimizers" in args.parts else ():
        found = _attempt({"device": device}, _optimizer_rows, device, args, tables)
        keep("embedding_optimizers", found.get("rows") or [found])
    if {"training", "jobs", "syncs"} & set(args.parts):
        data = TrialData.from_prepared(load_dataset(args.dataset), "valid", mapped=True)
    for name in args.specs if "training" in args.parts else ():
        spec = ArchSpec.load(REPO / "examples" / "specs" / name)
        for device in devices:
            steps = args.steps if device == "cuda" else args.cpu_steps
            for precision in ("fp32", "bf16", "fp8") if device == "cuda" else ("fp32",):
                labels = {"spec": name, "kind": "throughput", "device": device}
                labels["precision"] = precision
                run = (spec, data, steps, args.batch, precision, device)
                with _profiled(args.profile and device == "cuda" and precision == "fp32"):
                    keep("rows", [_attempt(labels, _trained, *run)])
        if name == "dcnv2.json":  # a batch of the size GPUs train ranking models at
            for device in devices:
                steps = max(3, (args.steps if device == "cuda" else args.cpu_steps) // 4)
                for precision in ("fp32", "bf16") if device == "cuda" else ("fp32",):
                    labels = {"spec": name, "kind": "throughput, large batch", "device": device}
                    labels["precision"] = precision
                    run = (spec, data, steps, args.large_batch, precision, device)
                    keep("rows", [_attempt(labels, _trained, *run)])
        if cuda and name == "dcnv2.json":  # the rows kept on the host, copied on a side stream
            labels = {"spec": name, "kind": "throughput, rows on host", "device": "cuda"}
            labels["precision"] = "bf16"
            os.environ["RECNAS_GPU_ROWS"] = "host"
            try:
                run = (spec, data, args.steps, args.batch, "bf16", "cuda")
                keep("rows", [_attempt(labels, _trained, *run)])
            finally:
                del os.environ["RECNAS_GPU_ROWS"]
        for device in devices:  # the same seed, the same short budget: do they agree?
            labels = {"spec": name, "kind": "agreement", "device": device, "precision": "fp32"}
            run = (spec, data, args.agree_steps, 1024, "fp32", device)
            keep("rows", [_attempt(labels, _trained, *run)])
    for name in args.specs if "syncs" in args.parts else ():
        spec = ArchSpec.load(REPO / "examples" / "specs" / name)
        device = devices[0]
        labels = {"spec": name, "device": device}
        keep("host_syncs", [_attempt(labels, _host_syncs, spec, data, args.batch, device)])
    for kind in ("supernet", "dnas") if "jobs" in args.parts else ():
        for device in devices:
            labels = {"job": kind, "device": device}
            keep("setup_jobs", [_attempt(labels, _setup_job, kind, data, args.job_steps, device)])
    _print(report)


def _print(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=140)
    gpu = report["gpu"]
    table = Table(title=f"{report['dataset']} on {gpu or 'the CPU only'} (torch {report['torch']})")
    for column in ("spec", "kind", "device", "precision", "steps x batch", "examples/s", "NE"):
        table.add_column(column, justify="left" if column in ("spec", "kind") else "right")
    for r in report["rows"]:
        if "error" in r:
            table.add_row(r["spec"], r["kind"], r["device"], r["precision"], "", r["error"][:60])
            continue
        table.add_row(
            r["spec"],
            r["kind"],
            r["device"],
            r["precision"],
            f"{r['steps']} x {r['batch_size']}",
            f"{r['examples_per_s']:,.0f}",
            f"{r['ne']:.5f}",
        )
    console.print(table)
    table = Table(title="embedding optimizers: lookup + backward + step, the same ids")
    for column in ("table", "rows x width", "device", "optimizer", "ms/step", "max weight gap"):
        table.add_column(column)
    for r in report["embedding_optimizers"]:
        if "error" in r:
            table.add_row("", "", r["device"], "", "", r["error"][:60])
            continue
        table.add_row(
            r["table"],
            r["rows x width"],
            r["device"],
            r["optimizer"],
            f"{r['ms_per_step']:.2f}",
            f"{r['max_weight_gap']:.1e}",
        )
    console.print(table)
    table = Table(title="setup jobs: the same settings and seed on each device")
    for column in ("job", "device", "steps", "steps/s", "picked (arch ids)"):
        table.add_column(column)
    for j in report["setup_jobs"]:
        if "error" in j:
            table.add_row(j["job"], j["device"], "", "", j["error"][:80])
            continue
        table.add_row(
            j["job"], j["device"], str(j["steps"]), f"{j['steps_per_s']:.1f}", " ".join(j["picked"])
        )
    console.print(table)
    table = Table(title="host syncs in training steps (torch.cuda.set_sync_debug_mode)")
    columns = ("spec", "device", "steps x batch", "syncs", "where (file:line x count)")
    for column in (*columns, "ms/step", "kernels ms/step"):
        table.add_column(column)
    for r in report["host_syncs"]:
        if "error" in r:
            table.add_row(r["spec"], r["device"], "", "", r["error"][:80])
            continue
        places = ", ".join(f"{where} x{n}" for where, n in r["places"].items())
        kernels = r["kernel_ms_per_step"]
        table.add_row(
            r["spec"],
            r["device"],
            f"{r['steps']} x {r['batch_size']}",
            str(r["syncs"]),
            places,
            f"{r['wall_ms_per_step']:.2f}",
            "-" if kernels is None else f"{kernels:.2f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
