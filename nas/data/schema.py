"""What a prepared dataset offers a model: its feature fields, and batches of them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

KINDS = ("categorical", "multi_hot", "dense", "sequence")  # the model's inputs
LABEL = "label"  # the kind of a field the model predicts, one head each (not an input)
SIDES = ("request", "candidate")


@dataclass(frozen=True)
class Field:
    """A feature field. Categorical and multi-hot ids are 1..cardinality-1; 0 is unknown/padding.

    ``side``: request-side fields (the user, the context, the history) are the same for every
    candidate of a request; candidate-side fields (the item) are not. A ``sequence`` field is
    a row's history of (item, action, time) events, its last ``max_len`` at most. A dataset
    of several labels lists each as a field of kind ``label`` (``Schema.labels``)."""

    name: str
    kind: str
    cardinality: int = 0  # categorical, multi_hot, sequence (its item ids)
    max_len: int = 0  # multi_hot: ids per example, padded with 0; sequence: events kept
    side: str = "candidate"
    actions: int = 0  # sequence: action ids 1..actions-1 (0 is padding)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Schema:
    fields: tuple[Field, ...]

    def of_kind(self, kind: str, side: str | None = None) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind == kind and side in (None, f.side))

    @property
    def num_tokens(self) -> int:
        """Tokens a model starts from: one per categorical or multi-hot field, one for dense
        (a spec's sequence encoder adds one for the history)."""
        dense = 1 if self.of_kind("dense") else 0
        return len(self.of_kind("categorical")) + len(self.of_kind("multi_hot")) + dense

    @property
    def num_request_tokens(self) -> int:
        """Of those, the request-side ones (dense features count as candidate-side)."""
        return len(self.of_kind("categorical", "request")) + len(
            self.of_kind("multi_hot", "request")
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels a model predicts, one head each, when the dataset names several (a
        schema file's ``labels``); empty for a dataset of one label (one logit per row)."""
        return tuple(f.name for f in self.fields if f.kind == LABEL)

    @property
    def heads(self) -> int:
        """Logits per row: one per label."""
        return max(1, len(self.labels))

    @property
    def history(self) -> Field | None:
        found = self.of_kind("sequence")
        return found[0] if found else None

    def to_list(self) -> list[dict]:
        return [f.to_dict() for f in self.fields]

    @classmethod
    def from_list(cls, items: list[dict]) -> Schema:
        return cls(tuple(Field(**item) for item in items))


_ROW_IDS = (torch.int64, torch.int32)


def take_rows(tensor: torch.Tensor, rows: torch.Tensor | slice) -> torch.Tensor:
    """``tensor[rows]``. A 1-D tensor of row ids goes through ``index_select``, which copies
    whole rows, where advanced indexing gathers element by element (the figures:
    ``benchmarks/README.md``)."""
    if isinstance(rows, torch.Tensor) and rows.dim() == 1 and rows.dtype in _ROW_IDS:
        return tensor.index_select(0, rows)  # ids in [0, rows): no negative ids
    return tensor[rows]


@dataclass(frozen=True)
class History:
    """Each row's past events, as bounds into event arrays shared by every row (so a row's
    history is not copied until a batch asks for it)."""

    item: torch.Tensor  # [E] int64 events, ordered per user by time
    action: torch.Tensor  # [E] int64
    time: torch.Tensor  # [E] int64 seconds
    start: torch.Tensor  # [R] int64: the row's first past event
    end: torch.Tensor  # [R] int64: one past its last (events at the row's own time excluded)
    now: torch.Tensor  # [R] int64: the row's timestamp
    max_len: int

    def to(self, device: torch.device | str, non_blocking: bool = False) -> History:
        """The same history with every tensor on ``device``."""
        return History(
            *(
                t.to(device, non_blocking=non_blocking)
                for t in (self.item, self.action, self.time, self.start, self.end, self.now)
            ),
            self.max_len,
        )

    def __getitem__(self, rows: torch.Tensor | slice) -> History:
        return History(
            self.item,
            self.action,
            self.time,
            take_rows(self.start, rows),
            take_rows(self.end, rows),
            take_rows(self.now, rows),
            self.max_len,
        )

    def tensor(self) -> torch.Tensor:
        """[R, max_len, 3] int64 (item, action, age): the last ``max_len`` events, oldest first,
        left-aligned; padding rows are all 0 (item 0)."""
        length = (self.end - self.start).clamp(max=self.max_len)  # [R]
        positions = torch.arange(self.max_len, device=length.device)
        valid = positions.view(1, -1) < length.view(-1, 1)  # [R, L]
        index = ((self.end - length).view(-1, 1) + positions).clamp(max=len(self.item) - 1)
        age = self.now.view(-1, 1) - self.time[index]
        out = torch.stack([self.item[index].long(), self.action[index].long(), age], dim=-1)
        return out * valid.unsqueeze(-1)


@dataclass(frozen=True)
class Features:
    """Rows of a dataset as tensors; indexing with a tensor of row ids (each in [0, rows))
    gathers a batch, with a slice takes a view."""

    categorical: torch.Tensor  # [R, F] int64
    multi_hot: torch.Tensor  # [R, M, L] int64, 0-padded
    dense: torch.Tensor  # [R, Dn] float32
    label: torch.Tensor  # [R] float32 (0/1); [R, K] with K labels (``Schema.labels``)
    history: History | None = None  # datasets with a sequence field

    @classmethod
    def from_arrays(
        cls, rows: Mapping[str, np.ndarray], events: Mapping[str, np.ndarray], schema: Schema
    ) -> Features:
        """From ``PreparedDataset.feature_arrays`` and ``event_arrays`` (without a copy)."""
        t = {k: torch.from_numpy(v) for k, v in rows.items()}
        history = None
        if schema.history is not None:
            e = {k: torch.from_numpy(v) for k, v in events.items()}
            history = History(
                e["item"],
                e["action"],
                e["time"],
                t["history_start"],
                t["history_end"],
                t["history_now"],
                schema.history.max_len,
            )
        return cls(t["categorical"], t["multi_hot"], t["dense"], t["label"], history)

    def __len__(self) -> int:
        return self.label.shape[0]

    def __getitem__(self, rows: torch.Tensor | slice) -> Features:
        """Rows as the model reads them: ids int64, labels float32 (memory-mapped rows are
        stored narrower; widening a gathered batch costs nothing on rows already wide)."""
        return Features(
            take_rows(self.categorical, rows).long(),
            take_rows(self.multi_hot, rows).long(),
            take_rows(self.dense, rows).float(),
            take_rows(self.label, rows).float(),
            None if self.history is None else self.history[rows],
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Features:
        """The same rows with every tensor on ``device`` (pinned host rows copy without
        blocking with ``non_blocking``)."""
        return Features(
            *(
                t.to(device, non_blocking=non_blocking)
                for t in (self.categorical, self.multi_hot, self.dense, self.label)
            ),
            None if self.history is None else self.history.to(device, non_blocking),
        )

    @property
    def nbytes(self) -> int:
        """Bytes of its tensors (the history's events included)."""
        tensors = [self.categorical, self.multi_hot, self.dense, self.label]
        if self.history is not None:
            h = self.history
            tensors += [h.item, h.action, h.time, h.start, h.end, h.now]
        return sum(t.numel() * t.element_size() for t in tensors)

    def without_history(self) -> Features:
        """The same rows without the history, for a model that does not read it: gathering
        it builds a [batch, max_len, 3] tensor every step (about 12% of a small model's)."""
        return dataclasses.replace(self, history=None)

    def inputs(self) -> tuple[torch.Tensor, ...]:
        """The model's positional inputs: categorical, multi_hot, dense[, history]."""
        if self.history is None:
            return self.categorical, self.multi_hot, self.dense
        return self.categorical, self.multi_hot, self.dense, self.history.tensor()
