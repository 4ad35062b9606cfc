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
    assert found == {
        "spec": "dcnv2.json",
        "device": "cpu",
        "steps": 20,
        "batch_size": 256,
        "syncs": 0,
        "places": {},
    }
    assert "host syncs in training steps" in done.stdout


def test_kernels_are_chosen_by_device_or_by_name():
    cpu = torch.zeros(2)
    assert not triton_chosen("auto", cpu)  # the reference on the CPU
    assert triton_chosen("triton", cpu) and not triton_chosen("torch", cpu)
