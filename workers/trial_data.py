"""What a trial needs from a dataset: its schema, the rows to train on and one held-out split.

Two ways to carry the rows:
- as plain numpy arrays, which go through Ray's object store without a copy: a search puts
  one ``TrialData`` there and every trial reads the same memory (the built-in datasets);
- as the prepared dataset's folder (``root``), whose splits are contiguous ranges: each
  trial maps the files (``PreparedDataset.mapped_features``), nothing large goes through
  the object store, and every trial on a node shares the OS page cache. Data larger than
  RAM trains this way. The folder must be readable at the same path on every node, and
  hold the dataset as the search found it (``version``): each read checks its manifest, so a
  dataset prepared again under a search stops it (``DatasetChanged``) rather than train
  some candidates on other data.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nas.core.errors import NasError, TrainingError
from nas.data.prepared import PreparedDataset, open_prepared
from nas.data.schema import Features, Schema
from workers.metrics import GROUPED, Groups, Rates


class DatasetUnavailable(NasError):
    """The prepared dataset a trial reads is gone or unreadable where the trial runs: the
    search's environment, not its candidate (the controller stops the search, resumable)."""


class DatasetChanged(DatasetUnavailable):
    """The prepared dataset a trial reads is another than the search started on: prepared
    again under it (the search stops; its resume waits for the data as it was)."""


@dataclass(frozen=True)
class TrialData:
    name: str
    schema: Schema
    train_rates: Rates  # the rows trained on: the label rate, or each label's by name
    split: str  # the held-out split metrics are measured on
    # {"train": {...}, split: {...}, "events": {...}}, and "groups": {part: Groups} for the
    # held-out split and the validation rows (a dataset with users or requests)
    arrays: dict[str, Any]
    root: str | None = None  # mapped: the prepared folder (then ``arrays`` is empty)
    train_on: tuple[str, ...] = ("train",)
    version: str | None = None  # mapped: the dataset's ``PreparedDataset.version``

    @classmethod
    def from_prepared(
        cls,
        dataset: PreparedDataset,
        split: str = "valid",
        train_on: tuple[str, ...] = ("train",),
        mapped: bool = False,
    ) -> TrialData:
        """The rows of ``train_on`` (concatenated, in that order) to train on, ``split`` to
        measure on; ``mapped``: each trial maps them from the dataset's folder (a dataset
        whose splits are contiguous ranges)."""
        if mapped and dataset.contiguous:
            rate = _train_rates(dataset, train_on)
            root = str(dataset.root)
            return cls(
                dataset.name, dataset.schema, rate, split, {}, root, train_on, dataset.version
            )
        parts = [dataset.feature_arrays(part) for part in train_on]
        arrays = {
            "train": {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
            if len(parts) > 1
            else parts[0],
            split: dataset.feature_arrays(split),
            "events": dataset.event_arrays(),
        }
        if split != "valid" and "valid" not in train_on:  # rows to select weights on
            arrays["valid"] = dataset.feature_arrays("valid")
        arrays["groups"] = {part: _groups(dataset, part) for part in {split, "valid"} & set(arrays)}
        return cls(dataset.name, dataset.schema, _train_rates(dataset, train_on), split, arrays)

    def features(self, part: str, history: bool = True) -> Features:
        """The rows of ``part``; ``history=False`` for a model that does not read the user
        history (gathering it builds a [batch, max_len, 3] tensor every step)."""
        with warnings.catch_warnings():
            # Arrays from Ray's object store, and mapped files, are read-only; training only
            # reads them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            if self.root is not None:
                rows = self._mapped().mapped_features(self.train_on if part == "train" else (part,))
            else:
                rows = Features.from_arrays(self.arrays[part], self.arrays["events"], self.schema)
        return rows if history else rows.without_history()

    def groups(self, part: str | None = None) -> Groups:
        """Each row's group in ``part`` (default: the held-out split; or "valid") for every
        AUC per group the dataset has keys for (``workers.metrics.GROUPED``)."""
        part = part or self.split
        if self.root is not None:
            return _groups(self._mapped(), part)
        return self.arrays.get("groups", {}).get(part, {})

    @property
    def parts(self) -> set[str]:
        if self.root is not None:
            return {"train", self.split} | ({"valid"} - set(self.train_on))
        return set(self.arrays) - {"events", "groups"}

    def validation(self, history: bool = True) -> Features:
        """The validation rows a trial measures itself on while it trains (rungs, checks):
        never the split it is finally measured on, unless that is the validation split."""
        if "valid" not in self.parts:
            raise TrainingError(
                "no validation rows to check on while training: they were trained on "
                "(train+valid); train on the train split only, or keep the last weights"
            )
        return self.features("valid", history)

    def shard(self, index: int, count: int, history: bool = True) -> Features:
        """Training rows of chronological slice ``index`` of ``count`` (by each row's time
        when the data has one, else in file order), standing in for a day of logs."""
        train = self.features("train", history)
        times = self._train_times()
        order = (
            torch.from_numpy(np.argsort(times, kind="stable"))
            if times is not None
            else torch.arange(len(train))
        )
        bounds = [len(train) * i // count for i in range(count + 1)]
        return train[order[bounds[index] : bounds[index + 1]]]

    def _train_times(self) -> np.ndarray | None:
        if self.root is None:
            return self.arrays["train"].get("history_now")
        dataset = self._mapped()
        if not dataset.has("timestamp"):
            return None
        rows = np.concatenate([dataset.split_rows(part) for part in self.train_on])
        return np.asarray(dataset.array("timestamp")[rows])

    def _mapped(self) -> PreparedDataset:
        """The mapped dataset, once its manifest on disk (a few KB, read at every call) says
        it is the one the search started on."""
        on_disk = open_prepared(Path(self.root))
        if on_disk is not None and self.version is not None and on_disk.version != self.version:
            raise DatasetChanged(
                f"the prepared dataset {self.name} at {self.root} was prepared again after the "
                f"training started (version {on_disk.version}, not {self.version}: another "
                "schema, or changed source files)"
            )
        return _mapped(self.root, self.version)

    def unavailable(self, err: BaseException) -> str | None:
        """Why ``err``, raised in a trial, means this data is gone where the trial runs (a
        file of the mapped folder missing or unreadable), or None: the candidate's failure."""
        if isinstance(err, DatasetUnavailable):
            return str(err)
        if self.root is None or not isinstance(err, OSError) or not err.filename:
            return None
        if not Path(err.filename).is_relative_to(self.root):
            return None
        return (
            f"the prepared dataset {self.name} at {self.root} cannot be read: "
            f"{Path(err.filename).name}: {err.strerror}"
        )

    @property
    def nbytes(self) -> int:
        """Bytes carried through the object store (none when mapped)."""

        def total(value) -> int:
            if isinstance(value, dict):
                return sum(total(v) for v in value.values())
            return value.nbytes

        return total(self.arrays)


def _groups(dataset: PreparedDataset, part: str) -> Groups:
    found = {name: dataset.groups(part, by) for name, by in GROUPED.items()}
    return {name: keys for name, keys in found.items() if keys is not None}


def _train_rates(dataset: PreparedDataset, train_on: tuple[str, ...]) -> Rates:
    """The label rate of the rows trained on (each label's, by name, for several): the
    manifest's for one split, else the mean of their labels (as float32, in order: one
    figure whichever way the rows travel)."""
    if len(train_on) == 1:
        rates = dataset.positive_rates(train_on[0])
    else:
        labels = np.concatenate(
            [np.asarray(dataset.label_array()[dataset.split_rows(p)], np.float32) for p in train_on]
        )
        rates = tuple(np.atleast_1d(labels.mean(axis=0)).tolist())
    names = dataset.schema.labels
    return dict(zip(names, rates, strict=True)) if names else float(rates[0])


@functools.lru_cache(maxsize=4)
def _mapped(root: str, version: str | None) -> PreparedDataset:
    """The prepared dataset at ``root``, opened once per process and ``version``."""
    dataset = open_prepared(Path(root))
    if dataset is None:
        what = "no manifest of this recnas version" if Path(root).is_dir() else "no such folder"
        raise DatasetUnavailable(
            f"the prepared dataset at {root} cannot be read on this machine: {what} (on a "
            "cluster every node needs it at that path: RECNAS_CACHE_DIR on a shared disk)"
        )
    return dataset
