"""A prepared dataset on disk: one ``.npy`` per array and a ``manifest.json`` that checksums them.

Every dataset is written in the same layout, so trainers never care where it came from:

    categorical [R, F] int32    multi_hot [R, M, L] int32    dense [R, Dn] float32
    label [R] int8              split [R] int8 (0 train, 1 valid, 2 test)
    source_row [R] int64        the row's place in the source (0-based over its files in the
                                order read, header excluded; rows source.where passed by
                                counted, files it passed by not)

plus what some datasets add: their keys (``timestamp``, ``user_key``, ``request_key``), and
with a sequence field the events (``event_item``, ``event_action``, ``event_time``) with each
row's ``history_start`` and ``history_end`` into them; a history made of the rows themselves
(MovieLens) also has ``user_offsets``, each user's events.

Beside them, ``raw_form.json`` keeps the vocabularies and recipes that turn rows in the
dataset's raw form (as a serving system sends them) into the same ids (``nas/data/raw.py``).

Writing goes to a temporary folder that replaces the old one only when complete, so an
interrupted ``prepare`` never leaves a half-written cache.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import glob
import hashlib
import json
import mmap
import os
import shutil
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nas.data.raw import RawForm
from nas.data.schema import Features, Schema

FORMAT_VERSION = 3  # 2: field sides and the history view; 3: the raw form
SPLITS = ("train", "valid", "test")
MANIFEST = "manifest.json"
RAW_FORM = "raw_form.json"  # the vocabularies and recipes that encode serving rows
HASHED_VALUES = "hashed_values.json"  # a hashed field's ids, each with a value that has it


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


CHUNK_ROWS = 1 << 20  # rows read at a time from (mapped) arrays


def row_chunks(rows: int):
    """Slices of at most ``CHUNK_ROWS`` rows covering ``rows``: per-row work on a large
    (mapped) array without a full-size temporary."""
    for start in range(0, rows, CHUNK_ROWS):
        yield slice(start, min(start + CHUNK_ROWS, rows))


def unlearnable(
    sizes: Mapping[str, int], train_rates: Mapping[str, float], split_column: str | None = None
) -> str | None:
    """Why no model can be trained and ranked on data of these split sizes and training label
    rates, or None: a split without rows (candidates are ranked on valid rows, retrains
    report on test rows), or a label of one value on every training row (nothing to learn;
    NE divides by the entropy of the training rate). ``split_column``: the column that
    split the rows, if one did."""
    rows = sum(sizes.values())
    empty = [name for name in SPLITS if not sizes[name]]
    if empty:
        counts = ", ".join(f"{name} {sizes[name]:,}" for name in SPLITS)
        leave = "its one row leaves" if rows == 1 else f"its {rows:,} rows leave"
        fix = (
            f"rows whose {split_column} is {empty[0]}"
            if split_column
            else "a larger share of the rows: split in a schema file; or more rows"
        )
        return (
            f"{leave} the {empty[0]} split empty ({counts}): candidates are ranked on valid rows "
            f"and retrains report on test rows, so each split needs rows ({fix})"
        )
    train = sizes["train"]
    on = "the only training row" if train == 1 else f"all {train:,} training rows"
    for name, rate in train_rates.items():
        if rate in (0.0, 1.0):
            return (
                f"label {name!r} is {int(rate)} on {on}: a model has nothing to learn from it, "
                "and NE (which divides by the entropy of the training rate) is undefined; each "
                "label needs both 0s and 1s in train"
            )
    return None


def split_checksum(split: np.ndarray, source_row: np.ndarray) -> str:
    """Hash of which source rows land in which split, in order: the split's identity."""
    digest = hashlib.sha256()
    for code, name in enumerate(SPLITS):
        digest.update(name.encode())
        for part in row_chunks(len(split)):
            mine = source_row[part][split[part] == code]
            digest.update(np.ascontiguousarray(mine, dtype=np.int64).tobytes())
    return digest.hexdigest()


def split_figures(split: np.ndarray, label: np.ndarray) -> tuple[dict, dict]:
    """Rows and positive rate per split, a chunk at a time (the rate: the exact count of
    positives over the rows, as ``np.mean`` of 0/1 labels gives it)."""
    rows, positives = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    for part in row_chunks(len(split)):
        codes = np.asarray(split[part], dtype=np.int64)
        rows += np.bincount(codes, minlength=3)[:3]
        positives += np.bincount(codes, weights=np.asarray(label[part]), minlength=3)[:3].astype(
            np.int64
        )
    sizes = {name: int(rows[i]) for i, name in enumerate(SPLITS)}
    rates = {
        name: float(positives[i] / rows[i]) if rows[i] else 0.0 for i, name in enumerate(SPLITS)
    }
    return sizes, rates


def drop_pages(array: np.ndarray) -> None:
    """Drop a memory-mapped array's pages from this process's memory (written pages must be
    flushed first); the file keeps them, and the OS its cache of them."""
    mapping = getattr(array, "_mmap", None)  # numpy has no public madvise
    if mapping is not None:
        mapping.madvise(mmap.MADV_DONTNEED)


@dataclass
class PreparedDataset:
    root: Path
    manifest: dict
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def schema(self) -> Schema:
        return Schema.from_list(self.manifest["schema"])

    @property
    def version(self) -> str:
        """What these prepared files are: a digest of their checksums. Preparing the same
        schema and source files again gives the same version; any change in what was
        prepared (a schema's field, a source file, recnas's format) gives another."""
        files = json.dumps(self.manifest["files"], sort_keys=True).encode()
        return hashlib.sha256(files).hexdigest()[:16]

    def array(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = np.load(self.root / f"{name}.npy", mmap_mode="r")
        return self._cache[name]

    def release(self) -> None:
        """Drop the pages of its mapped files this process has read from its memory (the
        OS keeps them cached): a pass over a dataset larger than RAM then holds only what
        it reads next, and its resident size says so."""
        for array in self._cache.values():
            drop_pages(array)

    def split_rows(self, split: str) -> np.ndarray:
        if self.contiguous:
            return np.arange(*self.manifest["split_ranges"][split])
        return np.flatnonzero(self.array("split") == SPLITS.index(split))

    @property
    def contiguous(self) -> bool:
        """Whether each split is one range of rows (schema-file datasets): trainers then map
        a split's files instead of reading its rows into memory (``mapped_features``)."""
        return "split_ranges" in self.manifest

    def mapped_features(self, splits: tuple[str, ...]) -> Features:
        """The rows of adjacent ``splits`` (in ``SPLITS`` order, e.g. train+valid) as
        tensors over the memory-mapped files: nothing is read until a batch gathers its
        rows, and every process mapping them shares the OS page cache. Ids and labels keep
        their stored types; ``Features`` widens each batch it gathers."""
        ranges = [self.manifest["split_ranges"][s] for s in splits]
        if any(a[1] != b[0] for a, b in zip(ranges, ranges[1:], strict=False)):
            raise ValueError(f"splits {splits} are not adjacent")
        rows = slice(ranges[0][0], ranges[-1][1])
        arrays = {name: self.array(name)[rows] for name in ("categorical", "multi_hot", "dense")}
        arrays["label"] = self.label_array()[rows]
        if self.schema.history is not None:
            for name in ("history_start", "history_end"):
                arrays[name] = self.array(name)[rows]
            arrays["history_now"] = self.array(self._now)[rows]
        events = {}
        if self.schema.history is not None:
            events = {
                "item": self.array("event_item"),
                "action": self.array("event_action"),
                "time": self.array("event_time"),
            }
        return Features.from_arrays(arrays, events, self.schema)

    def features(self, split: str) -> Features:
        """One split's rows as tensors in memory (cache order; trainers shuffle)."""
        return Features.from_arrays(self.feature_arrays(split), self.event_arrays(), self.schema)

    def event_arrays(self) -> dict[str, np.ndarray]:
        """The events histories point into (empty without a sequence field)."""
        if self.schema.history is None:
            return {}
        return {
            "item": self.array("event_item").astype(np.int64),
            "action": self.array("event_action").astype(np.int64),
            "time": self.array("event_time").astype(np.int64),
        }

    @property
    def _now(self) -> str:
        """The array of each row's time, histories' ages are counted from: its own time
        (a history from rows), else ``history_now`` (zeros: a list column has no times)."""
        return "history_now" if self.has("history_now") else "timestamp"

    def groups(self, split: str, by: str = "user") -> np.ndarray | None:
        """Each row's user (``by="user"``) or request (``by="request"``) in ``split``, for
        AUC per group: the schema file's ``keys.user`` / ``keys.request`` (hashed); for
        MovieLens, its ``user`` field / its requests (a user's ratings at one timestamp).
        None when the dataset has no such key."""
        rows = self.split_rows(split)
        if self.has(f"{by}_key"):
            return np.asarray(self.array(f"{by}_key")[rows])
        if by == "request" and self.has("request_offsets"):  # rows in request order
            offsets = np.asarray(self.array("request_offsets"))
            return np.searchsorted(offsets, rows, side="right") - 1
        names = [f.name for f in self.schema.of_kind("categorical")]
        if by == "user" and "user" in names:
            return np.asarray(self.array("categorical")[rows, names.index("user")], np.int64)
        return None

    def has(self, name: str) -> bool:
        return f"{name}.npy" in self.manifest["files"]

    def feature_arrays(self, split: str) -> dict[str, np.ndarray]:
        """One split's row arrays, typed as ``Features`` wants them."""
        return self._row_arrays(self.split_rows(split))

    def raw_rows(self, split: str, count: int, start: int = 0) -> list[dict]:
        """``count`` rows of ``split`` from its ``start``-th in the raw form, as a serving
        system would send them (``nas/data/raw.py``)."""
        rows = self.split_rows(split)[start : start + count]
        features = Features.from_arrays(self._row_arrays(rows), self.event_arrays(), self.schema)
        times = self.array("timestamp")[rows] if self.has("timestamp") else None
        return self.raw_form().decode(features, times, self.hashed_values)

    @functools.cached_property
    def hashed_values(self) -> dict[str, dict[int, str]]:
        """Per hashed field, a value seen with each of its ids (none in a dataset prepared
        before 2026-12-06)."""
        if not (self.root / HASHED_VALUES).exists():
            return {}
        found = json.loads((self.root / HASHED_VALUES).read_text())
        return {name: {int(i): v for i, v in ids.items()} for name, ids in found.items()}

    def _row_arrays(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        out = {
            "categorical": self.array("categorical")[rows].astype(np.int64),
            "multi_hot": self.array("multi_hot")[rows].astype(np.int64),
            "dense": np.asarray(self.array("dense")[rows], dtype=np.float32),
            "label": self.label_array()[rows].astype(np.float32),
        }
        if self.schema.history is not None:
            out |= {
                "history_start": self.array("history_start")[rows].astype(np.int64),
                "history_end": self.array("history_end")[rows].astype(np.int64),
                "history_now": self.array(self._now)[rows].astype(np.int64),
            }
        return out

    def raw_form(self) -> RawForm:
        """How rows in the dataset's raw form (as a serving system sends them) become
        features: its vocabularies and recipes."""
        return RawForm.from_dict(json.loads((self.root / RAW_FORM).read_text()))

    @property
    def label_names(self) -> tuple[str, ...]:
        """Its labels by name: a schema file's several, else the one its manifest names."""
        return self.schema.labels or tuple(self.manifest.get("labels") or ("label",))

    def positive_rate(self, split: str = "train") -> float:
        """The (first) label's rate in ``split``."""
        return self.manifest["positive_rate"][split]

    def positive_rates(self, split: str = "train") -> tuple[float, ...]:
        """Each label's rate in ``split``, in ``schema.labels`` order (one for one label)."""
        by_label = self.manifest.get("label_rates")
        if not by_label or not self.schema.labels:
            return (self.positive_rate(split),)
        return tuple(by_label[name][split] for name in self.schema.labels)

    def unlearnable(self) -> str | None:
        """Why no model can be trained on it (``unlearnable``), or None. ``nas data prepare``
        refuses such data; a cache an older recnas prepared may hold it."""
        names = self.schema.labels or ["label"]
        rates = dict(zip(names, self.positive_rates("train"), strict=True))
        return unlearnable(self.manifest["split_sizes"], rates)

    def label_array(self) -> np.ndarray:
        """Every row's labels: [R] for one label, [R, K] for K (``schema.labels``)."""
        return self.array("labels" if self.schema.labels else "label")

    def problems(self, checksums: bool = True) -> list[str]:
        """Files that are missing, or not of their size, or that do not match their checksum
        (every byte read, seconds per GB): with ``checksums`` every file is checked so,
        else only a file whose modification time is not the one recorded as it was written
        (changed in place: a training would read other ids than were prepared). Empty when
        intact."""
        found = []
        sizes, mtimes = self.manifest.get("sizes", {}), self.manifest.get("mtimes", {})
        for name, expected in self.manifest["files"].items():
            path = self.root / name
            if not path.exists():
                found.append(f"{path} is missing")
                continue
            stat = path.stat()
            touched = name in mtimes and stat.st_mtime_ns != mtimes[name]
            if name in sizes and stat.st_size != sizes[name]:
                found.append(f"{path} is not of its size ({sizes[name]:,} bytes)")
            elif (checksums or touched) and sha256_file(path) != expected:
                found.append(f"{path} does not match its checksum")
        return found


def _exchanged(new: Path, root: Path) -> bool:
    """Swap the folders ``new`` and ``root`` in one step, where the system can (Linux's
    ``renameat2(RENAME_EXCHANGE)`` on a local file system): a search reading ``root`` while
    its dataset is prepared again then never finds it missing between two renames. Whether
    it was done (not where ``root`` does not exist yet, nor on NFS, nor off Linux)."""
    if not sys.platform.startswith("linux") or not root.exists():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)  # glibc 2.28 and later
    if renameat2 is None:
        return False
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    return renameat2(at_cwd, bytes(new), at_cwd, bytes(root), exchange) == 0


def open_prepared(root: Path) -> PreparedDataset | None:
    """The dataset at ``root``, or None when there is none of this format version."""
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("format_version") != FORMAT_VERSION:
        return None
    return PreparedDataset(root, manifest)


# a writer's folders beside a dataset's (NAME.tmp-HOST-PID), and its source decoded for it
# while it reads it (NAME.decoded-HOST-PID: ``scratch_folder``)
WORK_SUFFIXES = (".tmp-", ".old-", ".decoded-")


def cached_names(cache_dir: Path) -> list[str]:
    """The datasets in a cache, by folder: each folder holding a manifest (readable or not),
    less the folders a writer fills or sets aside before it moves them into place."""
    if not cache_dir.is_dir():
        return []
    return sorted(
        path.parent.name
        for path in cache_dir.glob(f"*/{MANIFEST}")
        if not any(suffix in path.parent.name for suffix in WORK_SUFFIXES)
    )


@contextlib.contextmanager
def preparing(root: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Held while the dataset at ``root`` is prepared: one process at a time, on this host or
    any other sharing the cache. Two at once (two searches on a fresh cache, a `nas data
    prepare` beside a search) would both read the source and write the whole dataset, the
    later replacing the earlier under whoever reads it. The later one waits here (calling
    ``waiting()`` first), then finds the cache ready.

    A ``.NAME.lock`` file beside the dataset, flock-ed, and removed by its holder on release,
    so that a refused prepare leaves the cache as it found it (the ``filelock`` package
    leaves its files behind on purpose: removing one races with the next locker, which
    ``_lock`` handles by locking again when the file it locked is no longer the one there)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    path = root.with_name(f".{root.name}.lock")
    fd = _lock(path, waiting)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)  # and with it the lock


def _lock(path: Path, waiting: Callable[[], None] | None) -> int:
    """An open descriptor of ``path`` holding its exclusive flock."""
    import fcntl

    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None:
                    waiting()
                    waiting = None
                fcntl.flock(fd, fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        except FileNotFoundError:
            pass  # its holder removed it as this process locked it: lock the new one
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def _remove_abandoned(parent: Path, prefix: str) -> None:
    """The temporary folders (``prefix`` + a pid) of writers on this host that died unable to
    clean up (kill -9, a lost machine): a dataset's worth of disk each."""
    for folder in parent.glob(f"{glob.escape(prefix)}*"):
        pid = folder.name.removeprefix(prefix)
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def scratch_folder(root: Path) -> Iterator[Path]:
    """A folder beside the dataset at ``root`` for what its prepare decodes of the source
    once and reads again (Avro: ``source_rows.Rows``), removed when the block ends however
    it ends (and by the next prepare on this host where its process was killed)."""
    prefix = f"{root.name}{WORK_SUFFIXES[2]}{socket.gethostname()}-"
    _remove_abandoned(root.parent, prefix)
    folder = root.with_name(f"{prefix}{os.getpid()}")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class PreparedWriter:
    """Writes a prepared dataset into a temporary folder beside ``root`` that replaces
    ``root`` only when ``finish`` completes; leaving the ``with`` block any other way removes
    it. Arrays are memory-mapped ``.npy`` files, filled in place (a dataset larger than RAM
    is written batch by batch)."""

    def __init__(self, root: Path):
        self.root = root
        self.tmp = root.with_name(f"{self._tmp_prefix()}{os.getpid()}")
        self.arrays: dict[str, np.memmap] = {}
        self.done = False

    def _tmp_prefix(self) -> str:
        """The temporary folders' names, less the writer's pid: by host, since a cache on a
        shared disk is written from several machines."""
        return f"{self.root.name}{WORK_SUFFIXES[0]}{socket.gethostname()}-"

    def __enter__(self) -> PreparedWriter:
        self._remove_abandoned()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        return self

    def _remove_abandoned(self) -> None:
        _remove_abandoned(self.root.parent, self._tmp_prefix())

    def __exit__(self, *exc) -> None:
        self.arrays.clear()
        if not self.done:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def array(self, name: str, shape: tuple[int, ...], dtype) -> np.memmap:
        """A new array file of this shape, zero-filled, to write into. Its disk blocks are
        reserved at once: on a disk without room for them that fails here, with ENOSPC,
        where writing into the map of a sparse file would kill the process with SIGBUS."""
        path = self.tmp / f"{name}.npy"
        self.arrays[name] = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
        with path.open("r+b") as file:
            try:
                os.posix_fallocate(file.fileno(), 0, os.fstat(file.fileno()).st_size)
            except OSError as err:
                if err.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
                    return self.arrays[name]  # a file system that reserves nothing
                err.filename = str(path)
                raise
        return self.arrays[name]

    def release(self) -> None:
        """Write the arrays' changed pages to their files and drop them from this process's
        memory: a large dataset is written with the memory of a few batches."""
        for array in self.arrays.values():
            array.flush()
            drop_pages(array)

    def finish(self, manifest: dict) -> PreparedDataset:
        """Flush the arrays, write the raw form (``manifest["raw_form"]``, kept in its own
        file), the checksums and the completed manifest, then put the folder at ``root``."""
        for array in self.arrays.values():
            array.flush()
        manifest = dict(manifest)
        split, label = self.arrays["split"], self.arrays["label"]
        sizes, rates = split_figures(split, label)
        if "labels" in self.arrays:  # several labels: each one's rate per split
            stacked = self.arrays["labels"]
            manifest["label_rates"] = {
                name: split_figures(split, stacked[:, j])[1]
                for j, name in enumerate(manifest["labels"])
            }
        raw_form = json.dumps(manifest.pop("raw_form"), separators=(",", ":"))
        hashed_values = manifest.pop("hashed_values", None)
        manifest = {
            "format_version": FORMAT_VERSION,
            **manifest,
            "rows": int(len(label)),
            "split_sizes": sizes,
            "positive_rate": rates,
            "split_checksum": split_checksum(split, self.arrays["source_row"]),
        }
        self.arrays.clear()  # closes the maps before the files are hashed and moved
        (self.tmp / RAW_FORM).write_text(raw_form)
        if hashed_values:
            (self.tmp / HASHED_VALUES).write_text(json.dumps(hashed_values, separators=(",", ":")))
        names = sorted(p.name for p in self.tmp.iterdir())
        manifest["files"] = {name: sha256_file(self.tmp / name) for name in names}
        stats = {name: (self.tmp / name).stat() for name in names}
        manifest["sizes"] = {name: stat.st_size for name, stat in stats.items()}
        manifest["mtimes"] = {name: stat.st_mtime_ns for name, stat in stats.items()}
        (self.tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if _exchanged(self.tmp, self.root):  # the old dataset is now at self.tmp
            old = self.tmp
        else:
            old = self.root.with_name(f"{self.root.name}{WORK_SUFFIXES[1]}{os.getpid()}")
            if self.root.exists():
                self.root.rename(old)
            self.tmp.rename(self.root)
        self.done = True
        shutil.rmtree(old, ignore_errors=True)
        return PreparedDataset(self.root, manifest)
