"""Registered models scoring a team's rows offline (``nas predict``, ``nas models
compare``): each row's probabilities, batch by batch, and, where the rows carry their
labels, what those say of the model (NE, AUC, logloss) and of two models' difference, with
intervals that take rows, or groups of rows (a user's), as the draws."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nas.core.errors import ConfigError, NasError, shown
from nas.data.labels import LabelRule, RawLabels, raw_labels, table_labels
from nas.data.raw import RawInputError
from nas.data.row_files import RowBatch
from nas.service.serving import open_model


@dataclass(frozen=True)
class Measured:
    """What scored rows' own labels say of the model, if they carry them."""

    # per label: its NE (against the training rate), AUC and logloss on the rows, and the
    # rule it was read by; None when the rows carry no labels
    figures: dict[str, dict[str, Any]] | None = None
    unmeasured: str | None = None  # why rows some of which carry labels were not measured


class Scoring:
    """A registered model scoring raw rows a batch at a time (a file's ``RowBatch``es): a
    column ``probability``, or one per label (``output_columns``). Where every row carries
    its labels (a day of logs scored after the fact), ``measured`` says what they say of
    the model. Its model scores as the pyfunc's ``predict`` does, without the frame of
    strings its signature asks for and the second reading of it (``tests/test_retrain.py``
    holds the scores to MLflow's own loader's; the time saved: ``benchmarks/README.md``)."""

    def __init__(self, tracking_uri: str, model_uri: str):
        self.model_uri = model_uri
        _, self.loaded = open_model(tracking_uri, model_uri)
        self.rules = [LabelRule.of(r) for r in self.loaded.info.get("labels") or ()]
        self._labels: list[RawLabels] = []
        self._scores: list[dict[str, np.ndarray]] | None = [] if self.rules else None
        self._lacking_in: Path | None = None  # the file of the first row without its labels

    @property
    def outputs(self) -> list[str]:
        return self.loaded.outputs

    def score(self, batch: RowBatch) -> dict[str, np.ndarray]:
        """Each output column's probability for each row of ``batch`` (``RawInputError``
        names a bad row, its file and its column)."""
        try:
            if self.rules:
                self._labels.append(self._labels_of(batch))
            scores = self.loaded.scored(self.loaded.features_of(batch))
        except RawInputError as err:
            raise err.in_file(batch.file) from None
        if self._scores is not None:
            self._scores.append(scores)
            if self._labels[-1].lacking:  # nothing to measure: keep no more scores
                self._scores = None
                self._lacking_in = batch.file
        return scores

    def _labels_of(self, batch: RowBatch) -> RawLabels:
        """The batch's labels: a Parquet batch's by its columns where their types allow."""
        if batch.table is not None:
            labels = table_labels(batch.table, self.rules, batch.first)
            if labels is not None:
                return labels
        rows = batch.rows_of(list(dict.fromkeys(rule.column for rule in self.rules)))
        return raw_labels(rows, self.rules, batch.first)

    def measured(self) -> Measured:
        """The rows scored so far, measured by their labels where every one carries them."""
        if not self._labels:
            return Measured()
        labels = RawLabels.joined(self._labels)
        if labels.lacking or self._scores is None:
            why = labels.unmeasured
            return Measured(
                unmeasured=f"{self._lacking_in} {why}" if why and self._lacking_in else why
            )
        scores = {name: np.concatenate([s[name] for s in self._scores]) for name in self.outputs}
        rates = self.loaded.info["train_rates"]
        return Measured(_measured(scores, labels.values, self.rules, rates))

    def labelled(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Every row's labels [R, K] and probabilities so far; ``NasError`` where the model
        has no labels to read or a row lacks its own."""
        if not self.rules:
            raise NasError(
                f"{self.model_uri} does not say how its labels are read (registered from a "
                "dataset prepared before 2026-12-06: prepare it again with --force and "
                "register again)"
            )
        labels = RawLabels.joined(self._labels) if self._labels else None
        if labels is None or labels.lacking or self._scores is None:
            why = self.measured().unmeasured or "the rows carry no labels"
            raise NasError(f"the rows cannot measure {self.model_uri}: {why}")
        scores = {name: np.concatenate([s[name] for s in self._scores]) for name in self.outputs}
        return labels.values, scores


class RowGroups:
    """Each scored row's group, batch by batch: the distinct values of one column (a user's
    id, a request's), numbered as first seen. A row without a value (or with a list or an
    object for one) is refused, naming it: a row of no group cannot be drawn with its own."""

    def __init__(self, column: str, flag: str = "--by"):
        self.column, self.flag = column, flag
        self._ids: dict[Any, int] = {}
        self._parts: list[np.ndarray] = []

    def add(self, batch: RowBatch) -> None:
        column = self.column
        if batch.table is not None and column in batch.table.column_names:
            values = batch.table.column(column).to_pylist()
        else:
            values = [row.get(column) for row in batch.rows_of([column])]
        lacking = next((i for i, v in enumerate(values) if v is None or v == "" or v != v), None)
        if lacking is None:
            ids = self._ids
            try:
                found = [ids.setdefault(v, len(ids)) for v in values]
                self._parts.append(np.array(found, dtype=np.int64))
                return
            except TypeError:  # a list or an object: not a group's name
                lacking = next(i for i, v in enumerate(values) if not _hashable(v))
        where = f"row {batch.first + lacking}" + (f" of {batch.file}" if batch.file else "")
        value = values[lacking]
        found = "no value" if value is None or value == "" else shown(value)
        raise ConfigError(
            self.flag,
            f"{where} has {found} for {column!r}: rows are grouped by a column that names "
            "each row's group (a user's or a request's id), and every row needs one",
        )

    @property
    def ids(self) -> np.ndarray:
        """Each row's group id so far (from 0), in the order the rows were scored."""
        return np.concatenate(self._parts) if self._parts else np.zeros(0, dtype=np.int64)

    @property
    def count(self) -> int:
        return len(self._ids)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def compare(
    scorings: list[Scoring], groups: np.ndarray | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Models that scored the same labelled rows, label by label: each one's NE, AUC and
    logloss, and its difference from the first's in NE (each row's normalized logloss,
    paired) and in AUC (DeLong), with 95% intervals: the rows taken as independent draws,
    or the ``groups`` (``RowGroups.ids``) where given. ``NasError`` where the models read
    their labels otherwise, or the rows do not carry them."""
    from workers.metrics import paired_auc_difference, paired_ne_difference

    first = scorings[0]
    rules = first.rules
    for other in scorings[1:]:
        if rules and other.rules and other.rules != rules:
            theirs = ", ".join(f"{r.name}: {r}" for r in other.rules)
            ours = ", ".join(f"{r.name}: {r}" for r in rules)
            raise NasError(
                f"{other.model_uri} reads its labels as {theirs}, {first.model_uri} as "
                f"{ours}: they are measured on different labels"
            )
    labels, base = first.labelled()
    each = [(first, base, first.measured().figures)]  # each once: the rows may be millions
    each += [(s, s.labelled()[1], s.measured().figures) for s in scorings[1:]]
    compared: dict[str, list[dict[str, Any]]] = {}
    for j, name in enumerate(rule.name for rule in rules):
        rows = []
        for scoring, scores, figures in each:
            row = {"model_uri": scoring.model_uri} | {
                k: figures[name][k] for k in ("ne", "auc", "logloss", "rule", "train_rate")
            }
            if scoring is not first:
                pair = (base[first.outputs[j]], scores[scoring.outputs[j]])
                rates = (rows[0]["train_rate"], row["train_rate"])
                ne = paired_ne_difference(labels[:, j], *pair, rates, groups)
                auc = paired_auc_difference(labels[:, j], *pair, groups)
                row |= {"ne_difference": _interval(*ne), "auc_difference": _interval(*auc)}
            rows.append(row)
        compared[name] = rows
    return compared


def _interval(mean: float, error: float) -> dict[str, float]:
    """A difference and its 95% interval (normal: the rows are many)."""
    return {"mean": mean, "low": mean - 1.96 * error, "high": mean + 1.96 * error}


def _measured(scores: dict, labels: np.ndarray, rules: list[LabelRule], rates: dict) -> dict:
    """Each label's figures from its probabilities (as logits: the pyfunc returns those)."""
    from workers.metrics import binary_metrics

    measured = {}
    for j, (rule, output) in enumerate(zip(rules, scores, strict=True)):
        p = np.clip(scores[output].astype(np.float64), 1e-12, 1 - 1e-12)
        logits = torch.from_numpy(np.log(p) - np.log1p(-p))
        figures = binary_metrics(torch.from_numpy(labels[:, j]), logits, rates[rule.name])
        measured[rule.name] = {**figures, "rule": str(rule), "train_rate": rates[rule.name]}
    return measured
