"""What a trial needs from a dataset: its schema, the train split and one held-out split, as
plain numpy arrays. Numpy arrays go through Ray's object store without a copy, so a search
puts one ``TrialData`` there and every trial reads the same memory.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from nas.core.errors import TrainingError
from nas.data.prepared import PreparedDataset
from nas.data.schema import Features, Schema


@dataclass(frozen=True)
class TrialData:
    name: str
    schema: Schema
    train_positive_rate: float
    split: str  # the held-out split metrics are measured on
    arrays: dict[str, dict[str, np.ndarray]]  # {"train": {...}, split: {...}, "events": {...}}

    @classmethod
    def from_prepared(
        cls, dataset: PreparedDataset, split: str = "valid", train_on: tuple[str, ...] = ("train",)
    ) -> TrialData:
        """The rows of ``train_on`` (concatenated, in that order) to train on, ``split`` to
        measure on."""
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
        rate = float(arrays["train"]["label"].mean()) if len(parts) > 1 else None
        rate = dataset.positive_rate(train_on[0]) if rate is None else rate
        return cls(dataset.name, dataset.schema, rate, split, arrays)

    def features(self, part: str, history: bool = True) -> Features:
        """The rows of ``part``; ``history=False`` for a model that does not read the user
        history (gathering it builds a [batch, max_len, 3] tensor every step)."""
        with warnings.catch_warnings():
            # Arrays from Ray's object store are read-only; training only reads them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            rows = Features.from_arrays(self.arrays[part], self.arrays["events"], self.schema)
        return rows if history else rows.without_history()

    def validation(self, history: bool = True) -> Features:
        """The validation rows a trial measures itself on while it trains (rungs, checks):
        never the split it is finally measured on, unless that is the validation split."""
        if "valid" not in self.arrays:
            raise TrainingError(
                "no validation rows to check on while training: they were trained on "
                "(train+valid); train on the train split only, or keep the last weights"
            )
        return self.features("valid", history)

    def shard(self, index: int, count: int, history: bool = True) -> Features:
        """Training rows of chronological slice ``index`` of ``count`` (by each row's time
        when the data has one, else in file order), standing in for a day of logs."""
        train = self.features("train", history)
        times = self.arrays["train"].get("history_now")
        order = (
            torch.from_numpy(np.argsort(times, kind="stable"))
            if times is not None
            else torch.arange(len(train))
        )
        bounds = [len(train) * i // count for i in range(count + 1)]
        return train[order[bounds[index] : bounds[index + 1]]]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for part in self.arrays.values() for a in part.values())
