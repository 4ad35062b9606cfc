"""What a prepared dataset offers a model: its feature fields, and batches of them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

KINDS = ("categorical", "multi_hot", "dense")


@dataclass(frozen=True)
class Field:
    """A feature field. Categorical and multi-hot ids are 1..cardinality-1; 0 is unknown/padding."""

    name: str
    kind: str
    cardinality: int = 0  # categorical, multi_hot
    max_len: int = 0  # multi_hot: ids per example, padded with 0

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "cardinality": self.cardinality,
            "max_len": self.max_len,
        }


@dataclass(frozen=True)
class Schema:
    fields: tuple[Field, ...]

    def of_kind(self, kind: str) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind == kind)

    @property
    def num_tokens(self) -> int:
        """Tokens a model starts from: one per categorical or multi-hot field, one for dense."""
        dense = 1 if self.of_kind("dense") else 0
        return len(self.of_kind("categorical")) + len(self.of_kind("multi_hot")) + dense

    def to_list(self) -> list[dict]:
        return [f.to_dict() for f in self.fields]

    @classmethod
    def from_list(cls, items: list[dict]) -> Schema:
        return cls(tuple(Field(**item) for item in items))


@dataclass(frozen=True)
class Features:
    """Rows of a dataset as tensors; indexing with a tensor of row ids gathers a batch."""

    categorical: torch.Tensor  # [R, F] int64
    multi_hot: torch.Tensor  # [R, M, L] int64, 0-padded
    dense: torch.Tensor  # [R, Dn] float32
    label: torch.Tensor  # [R] float32 (0/1)

    def __len__(self) -> int:
        return self.label.shape[0]

    def __getitem__(self, rows: torch.Tensor | slice) -> Features:
        return Features(
            self.categorical[rows], self.multi_hot[rows], self.dense[rows], self.label[rows]
        )

    def inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The model's positional inputs."""
        return self.categorical, self.multi_hot, self.dense
