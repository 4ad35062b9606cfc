"""A Delta Lake table's current files (the tables of Databricks, of Spark's and delta-rs's
writers): its log, ``_delta_log/``, says which of the Parquet files in its folder make the
table at a version. The folder also holds the files later commits removed (a DELETE, an
UPDATE, an OPTIMIZE, an overwrite) until a VACUUM, so its files read as a folder would
read removed rows again, twice over after an OPTIMIZE. The ``deltalake`` package (delta-rs)
replays the log, checkpoints and all; recnas reads the files it names as Parquet, each
with its partition columns' values as the log records them (not as its folders' names
say: a writer may name them otherwise).

How each file is read is its ``FileView`` (``table_files.py``): a
DELETE, UPDATE or MERGE of a table with deletion vectors (Databricks' default since 2024)
marks rows gone inside a file that stays, and only the rows kept are read; a table with
column mapping (a column renamed or dropped: Databricks turns it on so) stores its
columns, and its objects' fields, under physical names (``col-5f2a...``), read under the
table's names. Refused: files outside the table's folder (a shallow clone's, or in object
storage)."""

from __future__ import annotations

import json
from pathlib import Path

from nas.core.errors import ConfigError
from nas.data.table_files import DELTA_LOG, KEYS, FileView, Names, TableFiles, local_path, outside


def column_names(schema: dict) -> Names:
    """A Delta schema's (its log's JSON) physical names of every field, at any depth."""

    def within(kind) -> Names:
        if not isinstance(kind, dict):
            return {}
        if kind.get("type") == "struct":
            out = {}
            for f in kind["fields"]:
                physical = f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"])
                out[physical] = (f["name"], within(f["type"]))
            return out
        if kind.get("type") == "array":
            return within(kind["elementType"])
        if kind.get("type") == "map":
            inner = within(kind["valueType"])
            keys = within(kind["keyType"])
            return {**inner, KEYS: ("", keys)} if keys else inner
        return {}

    return within(schema)


def delta_files(
    folder: Path,
    version: int | None,
    field: str,
    source: str | None = None,
    as_of: int | None = None,
) -> TableFiles:
    """The files of the Delta table at ``folder``, at ``version`` (None: its latest) or at
    the moment ``as_of`` (unix seconds: its last version then); ``ConfigError`` on
    ``field`` (of the file ``source``) where it cannot be read so."""
    import datetime
    import math

    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    def refused(problem: str) -> ConfigError:
        return ConfigError(field, f"the Delta table {folder}: {problem}", source)

    try:
        if as_of is not None:  # its last version then, by its commits' times
            commits = DeltaTable(str(folder)).history()
            then = [c["version"] for c in commits if c.get("timestamp", math.inf) <= as_of * 1000]
            if not then:
                moment = datetime.datetime.fromtimestamp(as_of, datetime.UTC).isoformat()
                raise refused(f"has no version as of {moment} (its first is later)")
            version = max(then)
        table = DeltaTable(str(folder), version=version)
        actions = pa.table(table.get_add_actions(flatten=True))
        vectors = pa.table(table.deletion_vectors())
    except (DeltaError, OSError) as err:
        problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        latest = _latest_version(folder)
        if version is not None and latest is not None and version > latest:
            problem = f"has no version {version}; its latest is {latest}"
        raise refused(f"cannot be read ({problem})") from None
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    names = column_names(json.loads(table.schema().to_json())) if mode != "none" else None
    kept = {}  # (a byte a row of each file a DELETE marked: no Python object a row)
    masks = vectors.column("selection_vector").combine_chunks()
    flat, ends = masks.flatten().to_numpy(zero_copy_only=False), masks.offsets.to_numpy()
    for i, uri in enumerate(vectors.column("filepath").to_pylist()):
        kept[local_path(folder, uri)] = flat[ends[i] : ends[i + 1]].astype(bool)
    files, partitions = [], {}
    named = [c for c in actions.column_names if c.startswith("partition.")]
    texts = {c: pc.cast(actions.column(c), pa.string()).to_pylist() for c in named}
    for i, relative in enumerate(actions.column("path").to_pylist()):
        path = local_path(folder, relative)
        if path is None:
            raise ConfigError(field, outside(folder, "delta", relative), source)
        files.append(path)
        partitions[path] = {c.removeprefix("partition."): texts[c][i] for c in named}
    files.sort()
    views = {
        path: FileView(kept.get(path), names) for path in files if names is not None or path in kept
    }
    return TableFiles(folder, table.version(), files, partitions, views)


def _latest_version(folder: Path) -> int | None:
    """The highest version the log's commits name (None: none)."""
    versions = [
        int(p.name[:20]) for p in (folder / DELTA_LOG).glob("*.json") if p.name[:20].isdigit()
    ]
    return max(versions) if versions else None
