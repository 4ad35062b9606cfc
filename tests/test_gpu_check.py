"""The prepared GPU check's scripts, run here on the CPU in their smoke modes: a script that
no longer imports or runs is found here, not in a lent GPU's few minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from kernels.backends import triton_chosen

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_triton_kernels_benchmark_runs_in_the_interpreter():
    """Exit 0 also says each kernel agreed with its reference (the script checks)."""
    done = _run("benchmarks/triton_kernels.py", "--smoke", TRITON_INTERPRET="1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    for title in ("IKBO: the top MLP", "FP8 row-wise linear", "HSTU attention"):
        assert title in done.stdout


def test_gpu_check_times_both_embedding_optimizers_to_the_same_weights(tmp_path):
    done = _run("benchmarks/gpu_check.py", "--smoke", "--parts", "optimizers", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    rows = report["embedding_optimizers"]
    assert {(r["table"], r["optimizer"]) for r in rows} == {
        (table, optimizer)
        for table in ("user", "item", "large")
        for optimizer in ("RowwiseAdam", "SparseAdam")
    }
    assert all(r["ms_per_step"] > 0 and r["max_weight_gap"] < 1e-5 for r in rows)
    assert report["rows"] == [] and report["setup_jobs"] == []  # only the part asked for


def test_gpu_check_counts_host_syncs_of_training_steps(tmp_path, ml100k, cache_dir):
    """On the CPU the same path runs (model, trainer, warm-up steps, the count from then on)
    and finds none: the CUDA debug mode is set only on a GPU."""
    done = _run(
        *("benchmarks/gpu_check.py", "--smoke", "--parts", "syncs", "--specs", "dcnv2.json"),
        *("--dataset", "movielens-100k", "--out", str(tmp_path)),
        RECNAS_CACHE_DIR=str(cache_dir),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    (found,) = report["host_syncs"]
    wall = found.pop("wall_ms_per_step")
    assert found == {
        "spec": "dcnv2.json",
        "device": "cpu",
        "steps": 20,
        "batch_size": 256,
        "syncs": 0,
        "places": {},
        "kernel_ms_per_step": None,  # the profiler's device time: a GPU's only
    }
    assert 0 < wall < 1000
    assert "host syncs in training steps" in done.stdout


# Installed here, absent on the lent GPU machine (its package list: the device tool's
# KINDS.md) and not among the wheels `gpu_check.sh pack` carries there.
NOT_ON_THE_GPU_MACHINE = (
    "ray", "mlflow", "psycopg", "plotly", "playwright", "flask", "fastapi", "uvicorn",
    "starlette", "docker", "tensorboardX", "skops", "cryptography", "opentelemetry",
)  # fmt: skip


def test_gpu_check_imports_nothing_the_gpu_machine_lacks(tmp_path, ml100k, cache_dir):
    """Every part of the check, on the CPU, with those packages made unimportable: one
    that needs them fails here, not in a lent GPU's few minutes."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path, target=None):\n"
        f"        if name.split('.')[0] in {NOT_ON_THE_GPU_MACHINE!r}:\n"
        "            raise ModuleNotFoundError(f'not on the GPU machine: {name}')\n"
        "sys.meta_path.insert(0, Absent())\n"
    )
    done = _run(
        *("benchmarks/gpu_check.py", "--smoke", "--specs", "dcnv2.json"),
        *("--dataset", "movielens-100k", "--out", str(tmp_path / "out")),
        RECNAS_CACHE_DIR=str(cache_dir),
        PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(REPO)]),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    entries = [e for key in ("rows", "embedding_optimizers", "setup_jobs", "host_syncs")
               for e in report[key]]  # fmt: skip
    assert {e["kind"] for e in report["rows"]} >= {"throughput", "agreement"}
    assert len(report["setup_jobs"]) == 2 and report["host_syncs"]
    assert not [e["error"] for e in entries if "error" in e]


def test_kernels_are_chosen_by_device_or_by_name():
    cpu = torch.zeros(2)
    assert not triton_chosen("auto", cpu)  # the reference on the CPU
    assert triton_chosen("triton", cpu) and not triton_chosen("torch", cpu)
