"""A schema file's source rows -> the prepared layout, in bounded memory.

Three passes over the files, each in record batches (pyarrow), none holding the rows:

1. the labels and keys: every row's split (``time`` and ``user_time`` need every timestamp
   first), and each label checked;
2. every declared column checked against its type (a wrong one fails here, before anything
   is written, naming the file, the row and the column), and on the training split only:
   the vocabularies (value counts, kept by ``min_freq`` and ``max_size``) and the dense
   statistics;
3. the rows encoded into memory-mapped ``.npy`` files (``nas/data/prepared.py``).

Memory holds one batch, a few bytes per row (the split, the timestamps or user hashes the
split needs) and the vocabularies' distinct values.

The files are read by ``nas/data/source_rows.py``, split by ``nas/data/split.py`` and
encoded by ``nas/data/encoding.py``'s encoders (where the ids are described).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nas.core.errors import DataError, shown
from nas.data.chronology import Chronology
from nas.data.encoding import (
    FIRST_ID,
    OOV,
    PAD,
    DenseStats,
    Encoder,
    ValueCounts,
    check_dense,
    hashed,
    last_entries,
    padded,
    stored_dense,
)
from nas.data.joined_labels import JoinedEvents
from nas.data.labels import common_values
from nas.data.prepared import SPLITS, PreparedWriter, scratch_folder, unlearnable
from nas.data.raw import DERIVED, EVENT_KEYS, RawForm
from nas.data.row_filter import described, passed_text
from nas.data.schema import LABEL, Field
from nas.data.schema import Schema as ModelSchema
from nas.data.schema_file import SchemaFile, SourceFiles, utc_text
from nas.data.source_rows import (
    ACTION_MAX,
    Batch,
    Rows,
    event_names,
    first_row,
    with_last_resolved,
)
from nas.data.split import assign_split, split_codes

DEFAULT_MAX_LEN = {"multi_hot": 16, "sequence": 64}
RELEASE_ROWS = 1 << 20  # rows written between two releases of the written pages


@dataclass
class Plan:
    """What pass 2 fitted: each field's encoder."""

    categorical: list[Encoder]
    multi_hot: list[Encoder]
    dense: list[Encoder]
    sequence: Encoder | None
    multi_hot_width: int
    sequence_len: int
    events: int = 0  # history events kept over every row
    actions: int = 2  # a history's kinds of action, 0 (unknown) included
    items: int = 0  # a history from rows: distinct items over every row
    events_in_column: bool = False  # a history column of {item, action, time} events

    def encoder(self, field: str) -> Encoder:
        return next(e for e in self.categorical if e.field == field)


def prepare_schema_file(
    schema: SchemaFile,
    files: list[Path],
    root: Path,
    source: dict,
    progress=None,
    extra: dict | None = None,
    partitions: dict[Path, dict[str, str | None]] | None = None,
    views: dict | None = None,
    passed_by: int = 0,
    joined: dict[str, SourceFiles] | None = None,
) -> None:
    """Read the source (three passes), then write the prepared dataset at ``root`` (with
    ``extra`` entries in its manifest). ``partitions``: each file's partition columns'
    values; ``views``: how a Delta or Iceberg table's files are read; ``passed_by``: the
    files ``source.where`` left out by a table's metadata (``SourceFiles``); ``joined``:
    each joined label's other log's files, by the label's name."""
    listed = SourceFiles(files, partitions or {}, None, views or {}, passed_by)
    schema = schema.model_copy(update={"source": with_last_resolved(schema.source, listed)})
    avro = schema.source.format == "avro"  # (decoded once for prepare's three passes)
    with scratch_folder(root) if avro else contextlib.nullcontext() as scratch:
        rows = Rows(schema, files, partitions, scratch, views, passed_by)
        _prepare(schema, rows, files, root, source, progress, extra, joined or {})


def _prepare(
    schema: SchemaFile,
    reader: Rows,
    files: list[Path],
    root: Path,
    source: dict,
    progress,
    extra: dict | None,
    joined_files: dict[str, SourceFiles],
) -> None:
    reader.check_columns()
    joined = {
        label.name: JoinedEvents.read(label.joined, joined_files[label.name], progress)
        for label in schema.labels
        if label.joined is not None
    }
    rows, split, chronology, labels = _first_pass(schema, reader, progress, joined)
    if rows == 0:
        if reader.filters and (reader.rows_passed_by or reader.files_passed_by):
            passed = passed_text(reader.rows_passed_by, reader.files_passed_by)
            raise DataError(
                schema.source.path,
                f"has no rows where {described(reader.filters)} (source.where): "
                f"{'; '.join(filter(None, [passed, reader.unmet()]))}",
            )
        if reader.skipped:  # (under on_bad_lines: skip)
            path, passed = next(iter(reader.skipped.items()))
            raise DataError(
                path,
                f"has no rows: its {passed.lines:,} lines were passed by as not rows "
                f"(on_bad_lines: skip), the first {passed.first}",
            )
        raise DataError(files[0], "has no rows")
    plan = _fit(schema, reader, split, progress)  # every column checked: malformed rows first
    reader.check_keys()
    where = files[0] if len(files) == 1 else schema.source.path
    _check_values_held(schema, reader, labels, where)
    _check_learnable(schema, split, labels, where)
    absent: dict[str, list[str]] = {}  # a feature column: the files that lack it
    for path, columns in reader.absent.items():
        for column in columns:
            absent.setdefault(column, []).append(path.name)
    extra = {**(extra or {}), **({"absent_columns": absent} if absent else {})}
    if reader.filters:  # source.where: what it read, and what it passed by
        extra["where"] = {
            "rule": described(reader.filters),
            "rows_passed_by": reader.rows_passed_by,
            "files_passed_by": reader.files_passed_by,
        }
    if joined:  # each joined label's other log: the rows of it read
        extra["joined"] = {
            name: {"rule": str(events.joined), "rows": events.rows}
            for name, events in joined.items()
        }
    if reader.by_line:  # (a JSON writer's types mixed: said, so that it may be mended)
        extra["read_by_line"] = {path.name: why for path, why in reader.by_line.items()}
    if reader.skipped:  # on_bad_lines: skip
        extra["skipped_lines"] = {
            path.name: {"lines": passed.lines, "first": passed.first}
            for path, passed in reader.skipped.items()
        }
    if schema.source.format == "csv" and not schema.source.header:  # served files read so
        extra["csv_columns"] = list(schema.source.columns or ())
    if schema.source.encoding != "utf-8":  # (csv) served files read so
        extra["csv_encoding"] = schema.source.encoding
    if schema.source.format == "csv" and schema.source.delimiter != ",":  # served files: first
        extra["csv_delimiter"] = schema.source.delimiter
    if schema.source.format == "csv" and schema.source.decimal != ".":  # served files read so
        extra["csv_decimal"] = schema.source.decimal
    if schema.source.thousands is not None:  # (csv) served files read so
        extra["csv_thousands"] = schema.source.thousands
    if not schema.source.quoting:  # (csv) served files read so
        extra["csv_quoting"] = False
    if schema.source.escape is not None:  # (csv) served files read so
        extra["csv_escape"] = schema.source.escape
    _write(schema, reader, split, plan, chronology, root, source, progress, extra or {}, joined)


def _tick(progress, what: str, rows: int, total: int | None = None) -> None:
    if progress is not None:
        progress(what, rows, total)


def _label_values(
    schema: SchemaFile, batch: Batch, joined: dict[str, JoinedEvents]
) -> list[np.ndarray]:
    """Each label of the batch's rows as 0/1, by its rule (its column read as the rule
    reads it: a 0/1 column's values checked as it was read), or from its other log."""
    out = []
    for label, rule in zip(schema.labels, schema.label_rules(), strict=True):
        if label.joined is not None:
            keys = [batch.columns[ours] for ours, _ in label.joined.pairs()]
            times = batch.columns[schema.keys.timestamp] if label.joined.time else None
            times = None if times is None else times.to_numpy(zero_copy_only=False)
            out.append(joined[label.name].labels(keys, times))
            continue
        values, empty = rule.of_array(batch.columns[rule.column])
        if empty.any():
            wants = "a number" if rule.at_least is not None else "a value"
            fill = " (fill the empty values, none for instance)" if rule.one_of else ""
            raise batch.bad(
                rule.column,
                first_row(empty),
                f"is empty; label {rule.name!r} ({rule}) needs {wants} on every row{fill}",
            )
        out.append(values.astype(np.int8))
    return out


def _split_values(batch: Batch, column: str) -> np.ndarray:
    """The split codes a ``column`` split's column gives the batch's rows."""
    values = batch.columns[column]
    codes = pc.index_in(values, value_set=pa.array(SPLITS))
    if codes.null_count:
        index = first_row(np.asarray(codes.is_null()))
        value = values[index].as_py()
        found = "is empty" if value is None else f"is {shown(value)}"
        raise batch.bad(column, index, f"{found}; split.column's values are {', '.join(SPLITS)}")
    return codes.to_numpy(zero_copy_only=False).astype(np.int8)


def _check_values_held(schema: SchemaFile, reader: Rows, labels: np.ndarray, where) -> None:
    """A label by values that no row holds (misspelt, most likely) refused, naming the
    values its column holds (in the first batch of rows: read again only to say so)."""
    for j, rule in enumerate(schema.label_rules()):
        if rule.one_of and not labels[:, j].any():
            batch = next(reader.batches([rule.column]))
            raise DataError(
                where,
                f"no row has {rule.column} {' or '.join(map(shown, rule.one_of))} (label "
                f"{rule.name!r}); its values in the first {len(batch):,} rows, the most held "
                f"first: {common_values(batch.columns[rule.column])}",
            )


def _check_learnable(schema: SchemaFile, split: np.ndarray, labels: np.ndarray, where) -> None:
    """``unlearnable`` data refused, before anything is written."""
    sizes = np.bincount(split, minlength=3)
    train = split == 0
    rates = {
        name: float(labels[train, j].mean()) if sizes[0] else 0.5
        for j, name in enumerate(schema.label_names)
    }
    why = unlearnable(dict(zip(SPLITS, sizes.tolist(), strict=True)), rates, schema.split.column)
    if why:
        raise DataError(where, why)


def _first_pass(
    schema: SchemaFile, reader: Rows, progress, joined: dict[str, JoinedEvents]
) -> tuple[int, np.ndarray, Chronology | None, np.ndarray]:
    """Every row's split, and for a history from rows every row's place in it: reads the
    labels (each checked, and returned: rows x labels) and the keys these need."""
    method, keys = schema.split.method, schema.keys
    from_rows = schema.history is not None and schema.history.from_rows
    time_key = keys.timestamp if method in ("time", "user_time") or from_rows else None
    user_key = keys.user if method in ("hash", "user_time") or from_rows else None
    given = schema.split.column
    keyed = (k for k in (time_key, user_key, given) if k)
    columns = list(dict.fromkeys([*schema.label_columns(), *keyed]))
    times, users, labels, codes, rows = [], [], [], [], 0
    for batch in reader.batches(columns):
        rows += len(batch)
        labels.append(np.stack(_label_values(schema, batch, joined), axis=1))
        if given:
            codes.append(_split_values(batch, given))
        if time_key:
            times.append(batch.columns[time_key].to_numpy(zero_copy_only=False))
        if user_key:
            users.append(hashed(batch.columns[user_key], f"{schema.split.seed}:"))
        _tick(progress, "1/3 reading labels and keys", len(batch))
    if rows == 0:  # (a header, blank lines, lines passed by: prepare_schema_file says so)
        return 0, np.zeros(0, np.int8), None, np.zeros((0, len(schema.labels)), np.int8)
    all_times = np.concatenate(times) if times else None
    del times
    all_users = np.concatenate(users) if users else None
    del users
    if given:
        split = np.concatenate(codes) if codes else np.zeros(0, np.int8)
    else:
        split = assign_split(schema, rows, all_times, all_users)
    del codes
    chronology = Chronology.of(all_users, all_times) if from_rows and rows else None
    all_labels = np.concatenate(labels) if labels else np.zeros((0, len(schema.labels)), np.int8)
    return rows, split, chronology, all_labels


def _fit(schema: SchemaFile, reader: Rows, split: np.ndarray, progress) -> Plan:
    encoders = {
        name: Encoder(name, feature)
        for feature in schema.features
        if feature.type != "sequence"
        for name in feature.fields
    }
    counts = {
        name: ValueCounts()
        for name, e in encoders.items()
        if e.feature.type in ("categorical", "multi_hot") and e.feature.hash is None
    }
    stats = {name: DenseStats() for name, e in encoders.items() if e.feature.type == "dense"}
    sequence = schema.history
    from_rows = sequence is not None and sequence.from_rows
    keep = (sequence.max_len or DEFAULT_MAX_LEN["sequence"]) if sequence else 0
    action = sequence.action if sequence is not None else None
    columns = [c for f in schema.features for c in f.columns] + ([action] if action else [])
    columns = list(dict.fromkeys(columns))
    events, items, actions = 0, ValueCounts(), 1
    forms: set[bool] = set()  # a history column: of events (structs), or of items only
    for batch in reader.batches(columns):  # every column checked, on every row
        if action:
            actions = max(actions, int(_actions(batch, action).max()))
        if sequence is not None and not from_rows:
            lists = batch.columns[sequence.columns[0]]
            lengths = pc.fill_null(pc.list_value_length(lists), 0)
            events += int(np.minimum(lengths.to_numpy(zero_copy_only=False), keep).sum())
            forms.add(pa.types.is_struct(lists.type.value_type))
            if forms == {False} and sequence.event_fields is not None and len(lists):
                raise batch.bad(
                    sequence.columns[0],
                    0,
                    "holds lists of items, not of events: event_fields names the fields of a "
                    "column of structs; drop it",
                )
            if len(forms) > 1:
                raise batch.bad(
                    sequence.columns[0],
                    0,
                    "holds lists of items here and lists of events elsewhere; give one form",
                )
            if forms == {True} and len(lists):
                found = pc.max(pc.struct_field(pc.list_flatten(lists), "action")).as_py()
                actions = max(actions, found or 0)
        if from_rows:
            items.add(encoders[sequence.vocab_of].values(batch))
        train = split[batch.start : batch.start + len(batch)] == 0
        for name, stat in stats.items():
            x = encoders[name].values(batch).to_numpy(zero_copy_only=False)
            check_dense(batch, encoders[name], x)
            stat.add(np.where(np.isnan(x[train]), encoders[name].feature.fill or 0.0, x[train]))
        if train.any():
            mask = pa.array(train)
            for name, counter in counts.items():
                values = encoders[name].values(batch).filter(mask)
                if encoders[name].feature.type == "multi_hot":
                    values = pc.list_flatten(values)
                counter.add(values)
        _tick(progress, "2/3 checking every column, fitting on train", len(batch), len(split))
    for name, encoder in encoders.items():
        if name in counts:
            feature = encoder.feature
            encoder.vocab = counts[name].vocabulary(feature.min_freq or 1, feature.max_size)
            encoder.value_set = pa.array(encoder.vocab, pa.string())
        if name in stats:
            encoder.mean, encoder.std = stats[name].mean_std()
            if encoder.feature.transform == "standardize" and not (
                math.isfinite(encoder.mean) and math.isfinite(encoder.std)
            ):
                raise DataError(
                    schema.source.path,
                    f"dense field {name!r} (column {encoder.column!r}): its training values "
                    "are too large to standardize (their squares overflow float64); declare "
                    "transform: log1p or rescale the column",
                )
    sequence_encoder = None
    if sequence is not None:
        owner = encoders[sequence.vocab_of]
        sequence_encoder = Encoder(sequence.fields[0], sequence, owner.vocab, owner.value_set)

    def of_type(kind: str) -> list[Encoder]:
        return [e for e in encoders.values() if e.feature.type == kind]

    multi_hot = of_type("multi_hot")
    return Plan(
        categorical=of_type("categorical"),
        multi_hot=multi_hot,
        dense=of_type("dense"),
        sequence=sequence_encoder,
        multi_hot_width=max(
            (e.feature.max_len or DEFAULT_MAX_LEN["multi_hot"] for e in multi_hot), default=0
        ),
        sequence_len=keep,
        events=len(split) if from_rows else events,
        actions=actions + 1,
        events_in_column=forms == {True},
        items=len(items.vocabulary(1, None)) if from_rows else 0,
    )


def model_schema(plan: Plan, labels: list[str]) -> ModelSchema:
    def side(encoder: Encoder, default: str = "candidate") -> str:
        return encoder.feature.side or default

    fields = [
        Field(e.field, "categorical", max(2, e.cardinality), side=side(e)) for e in plan.categorical
    ]
    fields += [
        Field(
            e.field,
            "multi_hot",
            max(2, e.cardinality),
            max_len=e.feature.max_len or DEFAULT_MAX_LEN["multi_hot"],
            side=side(e),
        )
        for e in plan.multi_hot
    ]
    fields += [Field(e.field, "dense") for e in plan.dense]
    if plan.sequence is not None:
        fields.append(
            Field(
                plan.sequence.field,
                "sequence",
                max(2, plan.sequence.cardinality),
                max_len=plan.sequence_len,
                side="request",
                actions=plan.actions,
            )
        )
    if len(labels) > 1:  # one head per label
        fields += [Field(name, LABEL) for name in labels]
    return ModelSchema(tuple(fields))


def raw_form(plan: Plan, keys, per_second: int = 1) -> RawForm:
    """How serving rows become this dataset's features; ``keys``: the schema's keys;
    ``per_second``: numeric times' units (said on each time and history column, unless
    seconds)."""
    columns: dict[str, dict] = {}
    for e in plan.categorical:
        if e.feature.derive in DERIVED:  # from the row's time
            columns[e.column] = {"type": "integer", "optional": False}
        else:
            columns.setdefault(e.column, {"type": "string", "optional": True})
    for e in plan.multi_hot:
        columns.setdefault(
            e.column, {"type": "strings", "optional": True, "sep": e.feature.sep or "|"}
        )
    for e in plan.dense:
        columns.setdefault(e.column, {"type": "number", "optional": True})
    history = None
    if plan.sequence is not None:
        feature = plan.sequence.feature
        history = {"column": plan.sequence.field, "items": feature.vocab_of}
        if feature.from_rows:  # the user's past events, each [item, action, time]
            columns[plan.sequence.field] = {"type": "events", "optional": True}
            columns[keys.timestamp] = {"type": "integer", "optional": False}
            history["now"] = keys.timestamp
        elif plan.events_in_column:  # the same, a column of each row's own
            columns[plan.sequence.column] = {"type": "events", "optional": True}
            if event_names(feature) != EVENT_KEYS:
                columns[plan.sequence.column]["fields"] = list(event_names(feature))
            history["column"] = plan.sequence.column
            if keys.timestamp:  # else a row's last event's time is its "now"
                columns[keys.timestamp] = {"type": "integer", "optional": False}
                history["now"] = keys.timestamp
        else:
            column = plan.sequence.column
            columns[column] = {"type": "strings", "optional": True, "sep": feature.sep or "|"}
            history |= {"column": column, "max_len": plan.sequence_len, "plain": True}
    if per_second != 1:
        for column in columns.values():
            if column["type"] in ("integer", "events"):
                column["per_second"] = per_second
    multi_hot = [
        e.recipe() | {"max_len": e.feature.max_len or DEFAULT_MAX_LEN["multi_hot"]}
        for e in plan.multi_hot
    ]
    return RawForm(
        columns=columns,
        categorical=[e.recipe() for e in plan.categorical],
        multi_hot=multi_hot,
        dense=[e.recipe() for e in plan.dense],
        history=history,
    )


def _actions(batch: Batch, column: str) -> np.ndarray:
    """A history's action column as int8 kinds (empty: 0, unknown)."""
    x = batch.columns[column].to_numpy(zero_copy_only=False)
    x = np.where(np.isnan(x), 0, x)
    bad = (x != np.floor(x)) | (x < 0) | (x > ACTION_MAX)
    if bad.any():
        i = first_row(bad)
        raise batch.bad(
            column, i, f"must be an integer action from 0 to {ACTION_MAX}, got {x[i]:g}"
        )
    return x.astype(np.int8)


def _write(
    schema: SchemaFile,
    reader: Rows,
    split: np.ndarray,
    plan: Plan,
    chronology: Chronology | None,
    root: Path,
    source: dict,
    progress,
    manifest: dict,
    joined: dict[str, JoinedEvents],
) -> None:
    """Encode every row into the prepared files at ``root``; ``manifest``: extra entries."""
    rows, labels, keys = len(split), list(schema.label_names), schema.keys
    n_cat, n_mh, n_dense = len(plan.categorical), len(plan.multi_hot), len(plan.dense)
    columns = schema.label_columns()
    columns += [e.column for e in plan.categorical + plan.multi_hot + plan.dense]
    sequence = plan.sequence
    action = sequence.feature.action if sequence is not None else None
    if sequence is not None and not sequence.feature.from_rows:
        columns.append(sequence.column)
    columns += [action] if action else []
    key_files = {"timestamp": keys.timestamp, "user_key": keys.user, "request_key": keys.request}
    key_files = {name: column for name, column in key_files.items() if column}
    columns = list(dict.fromkeys([*columns, *key_files.values()]))
    # Rows are stored split by split (train, valid, test), each in the files' order (with a
    # history from rows: in its events' order): a split is then one contiguous slice, which
    # trainers map without reading it into memory.
    sizes = np.bincount(split, minlength=3)
    cursor = np.array([0, sizes[0], sizes[0] + sizes[1]], dtype=np.int64)  # next free row
    stored_at = chronology.positions(split) if chronology is not None else None
    with PreparedWriter(root) as out:
        categorical = out.array("categorical", (rows, n_cat), np.int32)
        multi_hot = out.array("multi_hot", (rows, n_mh, plan.multi_hot_width), np.int32)
        dense = out.array("dense", (rows, n_dense), np.float32)
        label = out.array("label", (rows,), np.int8)
        stacked = out.array("labels", (rows, len(labels)), np.int8) if len(labels) > 1 else None
        out.array("split", (rows,), np.int8)[:] = split_codes(tuple(sizes))
        source_row = out.array("source_row", (rows,), np.int64)
        key_arrays = {name: out.array(name, (rows,), np.int64) for name in key_files}
        if chronology is not None and not keys.request:  # requests: a user's rows at a time
            key_arrays["request_key"] = out.array("request_key", (rows,), np.int64)
        if sequence is not None:  # rows point into the events
            event_item = out.array("event_item", (max(plan.events, 1),), np.int32)
            event_action = out.array("event_action", (max(plan.events, 1),), np.int8)
            history_start = out.array("history_start", (rows,), np.int64)
            history_end = out.array("history_end", (rows,), np.int64)
            events = 0
        event_time = history_now = None
        if plan.events_in_column:  # each event's own time; a row's own, or its last event's
            event_time = out.array("event_time", (max(plan.events, 1),), np.int64)
            if not keys.timestamp:
                history_now = out.array("history_now", (rows,), np.int64)
        if chronology is not None:
            item_column = plan.categorical.index(plan.encoder(sequence.feature.vocab_of))
        written = 0
        for batch in reader.batches(columns):
            n = len(batch)
            mine = slice(batch.start, batch.start + n)
            if stored_at is not None:
                at = stored_at[mine]
            else:
                codes = split[mine]
                at = np.empty(n, dtype=np.int64)  # where each row of the batch is stored
                for code in range(3):
                    chosen = codes == code
                    count = int(chosen.sum())
                    at[chosen] = cursor[code] + np.arange(count)
                    cursor[code] += count
            source_row[at] = batch.source_rows()
            for name, column in key_files.items():
                values = batch.columns[column]
                key_arrays[name][at] = (
                    values.to_numpy(zero_copy_only=False)
                    if name == "timestamp"
                    else hashed(values).view(np.int64)
                )
            for j, values in enumerate(_label_values(schema, batch, joined)):
                if j == 0:
                    label[at] = values
                if stacked is not None:
                    stacked[at, j] = values
            ids = np.empty((n, n_cat), dtype=np.int64)
            for j, e in enumerate(plan.categorical):
                ids[:, j] = e.ids(e.values(batch))
            categorical[at] = ids
            for j, e in enumerate(plan.multi_hot):
                found = padded(e.values(batch), e, plan.multi_hot_width)
                multi_hot[at, j, :] = found
            for j, e in enumerate(plan.dense):
                dense[at, j] = stored_dense(batch, e)
            if chronology is not None:  # the events are the rows themselves
                event = chronology.event_of_row[mine]
                event_item[event] = ids[:, item_column]
                kinds = _actions(batch, action) if action else np.ones(n, dtype=np.int8)
                event_action[event] = kinds
                history_start[at] = chronology.history_start[event]
                history_end[at] = chronology.history_end[event]
                if not keys.request:
                    key_arrays["request_key"][at] = chronology.request[event]
            elif sequence is not None:  # a history column: each row's last events
                lists = batch.columns[sequence.column]
                kept_at, kept = last_entries(lists, plan.sequence_len)
                found = pc.list_flatten(lists).take(kept_at)
                taken = slice(events, events + len(found))
                ends = events + np.cumsum(kept)
                history_start[at], history_end[at] = ends - kept, ends
                if event_time is None:  # items only: one kind of action, no times
                    ids = sequence.ids(found) if len(found) else np.zeros(0, dtype=np.int64)
                    event_item[taken], event_action[taken] = ids, ids > 0
                else:
                    event_item[taken] = sequence.ids(pc.struct_field(found, "item"))
                    event_action[taken] = pc.struct_field(found, "action").to_numpy()
                    times = pc.struct_field(found, "time").to_numpy()
                    event_time[taken] = times
                    if history_now is not None and len(times):
                        last = times[np.maximum(ends - events - 1, 0)]
                        history_now[at] = np.where(kept > 0, last, 0)
                events += len(found)
            written += n
            if written >= RELEASE_ROWS:
                out.release()
                written = 0
            _tick(progress, "3/3 encoding", n, rows)
        extra = {}
        if chronology is not None:
            out.array("event_time", (rows,), np.int64)[:] = chronology.time
            out.array("user_offsets", (chronology.users + 1,), np.int64)[:] = (
                chronology.user_offsets
            )
            extra = {
                "users": chronology.users,
                "items": plan.items,
                "requests": chronology.requests,
                "history_rule": f"each row's history: its {keys.user}'s earlier rows by "
                f"{keys.timestamp} (the same time excluded), the last {plan.sequence_len} kept",
            }
        elif sequence is not None and event_time is None:  # no times: ages are 0
            out.array("event_time", (len(event_item),), np.int64)
            out.array("history_now", (rows,), np.int64)
        split_rule = _split_rule(schema)
        out.finish(
            {
                "name": schema.name,
                "source": source,
                "schema": model_schema(plan, labels).to_list(),
                "labels": labels,
                "ids": {"missing": PAD, "oov": OOV, "first": FIRST_ID},
                "keys": schema.keys.model_dump(exclude_none=True),
                "split_rule": split_rule,
                "split_ranges": {  # the rows of each split: [start, end)
                    name: [int(sizes[:i].sum()), int(sizes[: i + 1].sum())]
                    for i, name in enumerate(("train", "valid", "test"))
                },
                "label_rule": _label_rule(schema),
                "label_columns": [  # how raw rows carry each label (a model measures on them)
                    rule.to_dict() for rule in schema.label_rules()
                ],
                "raw_form": raw_form(plan, keys, schema.source.per_second).to_dict(),
                "hashed_values": {
                    e.field: e.hashed_values
                    for e in plan.categorical + plan.multi_hot
                    if e.feature.hash is not None
                },
                **extra,
                **manifest,
            }
        )


def _label_rule(schema: SchemaFile) -> str:
    rules = [
        f"{label.name} (from {label.joined.source.path})" if label.joined else str(label.rule())
        for label in schema.labels
    ]
    return rules[0] if len(rules) == 1 else f"{', '.join(rules)} (one head each)"


def _split_rule(schema: SchemaFile) -> str:
    s = schema.split
    if s.at_moments:
        return (
            f"by {schema.keys.timestamp}: valid from {utc_text(s.valid_from)}, test from "
            f"{utc_text(s.test_from)}"
        )
    train = 1 - Fraction(str(s.valid)) - Fraction(str(s.test))
    shares = f"{float(train):g}/{s.valid:g}/{s.test:g}"
    return {
        "order": f"the files' order: {shares} of the rows",
        "time": f"by {schema.keys.timestamp}, oldest first: {shares}",
        "random": f"random by row (seed {s.seed}): {shares}",
        "hash": f"by a hash of {schema.keys.user} (seed {s.seed}): {shares} of the users",
        "user_time": f"per {schema.keys.user}, by {schema.keys.timestamp}: {shares}",
        "column": f"as the column {s.column} says ({', '.join(SPLITS)})",
    }[s.method]
