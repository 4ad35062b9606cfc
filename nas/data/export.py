"""A prepared dataset's splits as one Parquet file: the rows exactly as recnas's models read
them, for another library, a GBDT or a team's own model to train and test on the same rows.

A column per feature field and per label, in the prepared form (not the source's text):

    categorical   int32 id (0 missing, 1 out of vocabulary; below the cardinality)
    multi_hot     list<int32> of ids (the padding left out)
    dense         float32, after the field's transform and fill, as a model reads it
    sequence      list<int32> of the row's last ``max_len`` event items, oldest first, with
                  ``NAME.action`` (list<int32>) and ``NAME.time`` (list<int64>, unix seconds;
                  a history given as a list of items has action 1 and time 0)
    labels        int8, 0 or 1, one column each

and beside them ``split`` ("train", "valid", "test"), ``source_row`` (the row's place in the
source, over its files in the order read, header excluded: joins back to the user's own
data), and where the dataset
has them ``timestamp``, ``user_key`` and ``request_key`` (groups for GAUC). The file's
metadata (key ``recnas``) holds the dataset's name, version, split rule and checksum, label
rule and schema (each field's cardinality: the size of an embedding table).

Written ``EXPORT_ROWS`` rows at a time (a dataset larger than RAM is read through its maps,
the pages read released after each batch) to a temporary file that takes the asked name only
when complete.

``export_raw_rows`` writes a split the other way round: as JSON lines or Parquet in the raw
form a registered model scores (``RawForm.decode``: the columns a serving system sends),
each row with its labels' columns as prepare read them, for ``nas predict`` and ``nas
models compare`` to be tried on, and to give back the test NE a retrain measured.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from nas.core.disk import new_file
from nas.core.errors import ConfigError
from nas.data.labels import LabelRule, column_value
from nas.data.prepared import SPLITS, PreparedDataset
from nas.data.raw import EVENT_KEYS, RawForm, event_fields
from nas.data.raw_table import events_type

EXPORT_ROWS = 1 << 18  # rows a batch (a row group): about 0.4 GB with a 32-event history
RAW_ROWS = 1 << 14  # raw rows decoded at a time: Python objects, a few hundred MB at most
KEY_COLUMNS = ("timestamp", "user_key", "request_key")  # arrays copied as they are, if present
META_KEY = b"recnas"

Progress = Callable[[int], None]  # rows written since the last call


@dataclass(frozen=True)
class Exported:
    path: Path
    rows: dict[str, int]  # per split written
    columns: list[str]
    bytes: int

    def to_dict(self) -> dict:
        return {
            "path": str(self.path),
            "rows": self.rows,
            "columns": self.columns,
            "bytes": self.bytes,
        }


def column_names(dataset: PreparedDataset) -> list[str]:
    """The file's columns, in order."""
    schema = dataset.schema
    names = ["split", "source_row"] + [k for k in KEY_COLUMNS if dataset.has(k)]
    names += list(dataset.label_names)
    for f in schema.fields:
        if f.kind == "sequence":
            names += [f.name, f"{f.name}.action", f"{f.name}.time"]
        elif f.kind != "label":
            names.append(f.name)
    return names


def export_splits(
    dataset: PreparedDataset,
    path: Path,
    splits: tuple[str, ...] = SPLITS,
    progress: Progress | None = None,
    chunk_rows: int = EXPORT_ROWS,
) -> Exported:
    """Write ``splits`` of ``dataset`` (each has rows: ``load_dataset`` refuses a dataset
    with an empty split) to the Parquet file ``path``, which must not exist; its missing
    folders are made once the file is complete."""
    names = column_names(dataset)
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ConfigError(
            "",
            f"dataset {dataset.name!r} has a field named like a column export adds "
            f"({', '.join(clash)}); rename the field in its schema file to export it",
        )
    written = {}
    with new_file(path) as tmp:
        writer = None
        try:
            for split in splits:
                written[split] = 0
                for rows in _chunks(dataset, split, chunk_rows):
                    batch = _batch(dataset, split, rows, names)
                    written[split] += batch.num_rows
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, _with_metadata(batch.schema, dataset))
                    writer.write_batch(batch)
                    dataset.release()
                    if progress is not None:
                        progress(batch.num_rows)
        finally:
            if writer is not None:
                writer.close()
    return Exported(path, written, names, path.stat().st_size)


def export_raw_rows(
    dataset: PreparedDataset,
    split: str,
    path: Path,
    count: int | None = None,
    progress: Progress | None = None,
) -> Exported:
    """The first ``count`` rows of ``split`` (all: None) in the raw form, as JSON lines or
    (``path`` NAME.parquet) Parquet (``raw_rows_schema``: a history of events as structs),
    each with its labels' columns, a value each that reads back as its labels
    (``column_value``: the source's value is not kept). A hashed field's column holds a
    value seen with its id, or is written empty in a dataset prepared before they were
    kept (``hashed_columns``)."""
    rules = [LabelRule.of(r) for r in dataset.manifest.get("label_columns") or ()]
    if not rules:
        raise ConfigError(
            "",
            f"{dataset.name} was prepared before recnas recorded how its labels are read: "
            f"prepare it again with: nas data prepare {dataset.name} --force",
        )
    by_column: dict[str, list[int]] = {}  # each label column's rules (they read it alike)
    for j, rule in enumerate(rules):
        by_column.setdefault(rule.column, []).append(j)
    order = dataset.split_rows(split)
    total = len(order) if count is None else min(count, len(order))
    labels = dataset.label_array()
    form = dataset.raw_form()
    schema = raw_rows_schema(form, rules) if path.suffix.lower() == ".parquet" else None
    with new_file(path) as tmp, contextlib.ExitStack() as stack:
        if schema is None:
            file = stack.enter_context(open(tmp, "w"))
        else:
            file = stack.enter_context(pq.ParquetWriter(tmp, schema))
        for start in range(0, total, RAW_ROWS):
            rows = dataset.raw_rows(split, min(RAW_ROWS, total - start), start)
            values = np.asarray(labels[order[start : start + len(rows)]])
            values = values.reshape(len(rows), len(rules)).astype(bool)
            for row, value in zip(rows, values, strict=True):
                for column, held in by_column.items():
                    row[column] = column_value([rules[j] for j in held], list(value[held]))
            if schema is None:
                file.writelines(json.dumps(row, default=str) + "\n" for row in rows)
            else:
                file.write_table(_raw_table(form, rows, schema))
            dataset.release()
            if progress is not None:
                progress(len(rows))
    columns = [*form.columns, *by_column]
    return Exported(path, {split: total}, columns, path.stat().st_size)


def raw_rows_schema(form: RawForm, rules: list[LabelRule]) -> pa.Schema:
    """The Parquet columns of raw rows as ``RawForm.decode`` makes them: text, int64 times
    and integers, float64 numbers, a multi-hot column as its joined text, a history of items
    as a list of text and one of events as a list of ``{item, action, time}`` structs (by
    the column's field names), then the labels' columns (int64 0/1, float64 read by a
    threshold, text read by values)."""
    history = form.history or {}
    fields = []
    for name, column in form.columns.items():
        kind = column["type"]
        if kind == "events":
            fields.append(pa.field(name, events_type(column.get("fields", EVENT_KEYS))))
        elif kind == "strings":
            plain = history.get("plain") and history.get("column") == name
            fields.append(pa.field(name, pa.list_(pa.string()) if plain else pa.string()))
        else:
            types = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64()}
            fields.append(pa.field(name, types[kind]))
    types = {"label": pa.int64(), "number": pa.float64(), "text": pa.string()}
    for rule in {rule.column: rule for rule in rules}.values():
        fields.append(pa.field(rule.column, types[rule.reads]))
    return pa.schema(fields)


def _raw_table(form: RawForm, rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Decoded rows as a table of ``schema``: events, given as triples, as structs."""
    for name, column in form.columns.items():
        if column["type"] == "events":
            keys = event_fields(column.get("fields", EVENT_KEYS))  # (decode's pairs: no action)
            for row in rows:
                row[name] = [dict(zip(keys, event, strict=True)) for event in row[name]]
    return pa.Table.from_pylist(rows, schema)


def hashed_columns(dataset: PreparedDataset) -> list[str]:
    """The raw columns of hashed fields ``export_raw_rows`` cannot read back: a dataset
    prepared before recnas kept a value for each hashed id (2026-12-06)."""
    form = dataset.raw_form()
    recipes = form.categorical + form.multi_hot
    kept = dataset.hashed_values
    return sorted({r["column"] for r in recipes if "hash" in r and r["field"] not in kept})


def _chunks(dataset: PreparedDataset, split: str, chunk_rows: int):
    """A split's rows (one range of the arrays), ``chunk_rows`` at a time."""
    first, end = dataset.manifest["split_ranges"][split]
    for start in range(first, end, chunk_rows):
        yield slice(start, min(start + chunk_rows, end))


def _with_metadata(schema: pa.Schema, dataset: PreparedDataset) -> pa.Schema:
    m = dataset.manifest
    about = {
        "dataset": dataset.name,
        "version": dataset.version,
        "split_rule": m["split_rule"],
        "split_checksum": m["split_checksum"],
        "label_rule": m.get("label_rule"),
        "labels": list(dataset.label_names),
        "ids": "0: a missing value (and the padding of lists); 1: a value out of the vocabulary",
        "schema": m["schema"],
    }
    return schema.with_metadata({META_KEY: json.dumps(about).encode()})


def _batch(dataset: PreparedDataset, split: str, rows: slice, names: list[str]):
    """One chunk of a split's rows as a record batch of ``names``."""
    source_row = np.asarray(dataset.array("source_row")[rows], np.int64)
    n = len(source_row)
    columns: dict[str, pa.Array] = {
        "split": pa.DictionaryArray.from_arrays(
            np.full(n, SPLITS.index(split), np.int8), pa.array(SPLITS)
        ),
        "source_row": pa.array(source_row),
    }
    for key in KEY_COLUMNS:
        if dataset.has(key):
            columns[key] = pa.array(np.asarray(dataset.array(key)[rows], np.int64))
    labels = np.asarray(dataset.label_array()[rows], np.int8).reshape(n, -1)
    for j, name in enumerate(dataset.label_names):
        columns[name] = pa.array(labels[:, j])
    schema = dataset.schema
    kinds = {"categorical": [], "multi_hot": [], "dense": []}
    for f in schema.fields:
        if f.kind in kinds:
            kinds[f.kind].append(f.name)
    if kinds["categorical"]:
        ids = np.asarray(dataset.array("categorical")[rows], np.int32)
        for j, name in enumerate(kinds["categorical"]):
            columns[name] = pa.array(ids[:, j])
    if kinds["multi_hot"]:
        bags = np.asarray(dataset.array("multi_hot")[rows], np.int32)
        for j, name in enumerate(kinds["multi_hot"]):
            columns[name] = _lists(bags[:, j, :])
    if kinds["dense"]:
        dense = np.asarray(dataset.array("dense")[rows], np.float32)
        for j, name in enumerate(kinds["dense"]):
            columns[name] = pa.array(dense[:, j])
    if schema.history is not None:
        columns |= _history(dataset, rows, schema.history.name, schema.history.max_len)
    return pa.RecordBatch.from_pydict({name: columns[name] for name in names})


def _lists(ids: np.ndarray) -> pa.ListArray:
    """Rows of ids padded with 0 as lists of their non-zero ids, in order."""
    kept = ids > 0
    offsets = np.zeros(len(ids) + 1, np.int32)
    np.cumsum(kept.sum(axis=1), out=offsets[1:])
    return pa.ListArray.from_arrays(offsets, ids[kept])


def _history(dataset: PreparedDataset, rows: slice, name: str, max_len: int) -> dict:
    """Each row's last ``max_len`` events (what a model reads) as three list columns."""
    end = np.asarray(dataset.array("history_end")[rows], np.int64)
    begin = np.maximum(np.asarray(dataset.array("history_start")[rows], np.int64), end - max_len)
    lengths = np.maximum(end - begin, 0)
    offsets = np.zeros(len(end) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lengths)
    events = np.repeat(begin, lengths) + within
    offsets = offsets.astype(np.int32)
    out = {}
    for suffix, array, dtype in (
        ("", "event_item", np.int32),
        (".action", "event_action", np.int32),
        (".time", "event_time", np.int64),
    ):
        values = np.asarray(dataset.array(array)[events], dtype)
        out[f"{name}{suffix}"] = pa.ListArray.from_arrays(offsets, values)
    return out


def read_metadata(path: Path) -> dict:
    """What ``export_splits`` wrote about the dataset into the file's metadata."""
    return json.loads(pq.read_schema(path).metadata[META_KEY])
