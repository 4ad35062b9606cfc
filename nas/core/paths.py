"""Every place recnas keeps files: the runs folder and what lives under it, and the data cache.

    $RECNAS_RUNS_DIR (default ./nas-runs)
        registry.db            the search registry (sqlite, unless --registry-url)
        mlflow.db, mlartifacts/  the local MLflow store and its artifacts
        data/                  prepared datasets (unless $RECNAS_CACHE_DIR)
        tune/                  Ray Tune's experiment storage
        ray/                   Ray's session files (private, 0700)
        checkpoints/SEARCH/    setup jobs' checkpoints (supernet, DNAS)
        weights/RETRAIN/       retrained weights
        cost/                  CPU cost-model calibrations
        dashboards/            pages and logs that ``nas dashboard`` writes

On a Ray cluster the runs folder must be shared by the nodes, as Tune's storage is.
"""

from __future__ import annotations

import os
from pathlib import Path

from nas.core.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
BASELINES_DIR = REPO_ROOT / "examples" / "specs"


def runs_dir() -> Path:
    """$RECNAS_RUNS_DIR or ./nas-runs, refused when a file stands where a folder must be."""
    path = Path(os.environ.get("RECNAS_RUNS_DIR") or "nas-runs").resolve()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ConfigError(
            "RECNAS_RUNS_DIR",
            f"{existing} is a file, not a folder: the runs folder {path} "
            "cannot be made there; set RECNAS_RUNS_DIR to a folder",
        )
    return path


def data_cache_dir() -> Path:
    """Prepared datasets: $RECNAS_CACHE_DIR, else the runs folder's ``data/``."""
    configured = os.environ.get("RECNAS_CACHE_DIR")
    return Path(configured).resolve() if configured else runs_dir() / "data"


def registry_file() -> Path:
    return runs_dir() / "registry.db"


def tracking_file() -> Path:
    """The local MLflow store, made on first use."""
    return runs_dir() / "mlflow.db"


def artifacts_dir() -> Path:
    return runs_dir() / "mlartifacts"


def tune_dir() -> Path:
    return runs_dir() / "tune"


def ray_dir() -> Path:
    return runs_dir() / "ray"


def ray_errors_file() -> Path:
    """What Ray's driver would print on stdout: the errors its cluster publishes."""
    return ray_dir() / "errors.log"


def checkpoint_file(search_id: str, job: str) -> Path:
    return runs_dir() / "checkpoints" / search_id / f"{job}.pt"


def weights_file(retrain_id: str, arch_id: str, seed: int) -> Path:
    """A retrain trial's trained weights."""
    return runs_dir() / "weights" / retrain_id / f"{arch_id}-s{seed}.pt"


def calibration_file(key: str) -> Path:
    """A CPU cost-model calibration; ``key`` names the machine, threads and torch."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in key)
    return runs_dir() / "cost" / f"cpu-{safe}.json"


def dashboards_dir() -> Path:
    return runs_dir() / "dashboards"
