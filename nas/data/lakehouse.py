"""A lakehouse table's current files, by its format: Delta Lake's (``delta_table.py``) or
Apache Iceberg's (``iceberg_table.py``); what they share: ``table_files.py``."""

from __future__ import annotations

from pathlib import Path

from nas.core.errors import ConfigError
from nas.data.delta_table import delta_files
from nas.data.iceberg_table import iceberg_files
from nas.data.row_filter import RowFilter
from nas.data.table_files import TABLE_FORMATS, TableFiles


def table_files(
    path: Path,
    fmt: str,
    version: int | None,
    field: str,
    source: str | None = None,
    as_of: int | None = None,
    filters: tuple[RowFilter, ...] = (),
    per_second: int = 1,
) -> TableFiles:
    """The files of the ``fmt`` table at ``path`` at ``version`` (None: its latest), or as
    it was at the moment ``as_of`` (unix seconds); an Iceberg table's, but those its
    metadata shows hold no row ``filters`` keep (``per_second``: its numeric times' units);
    ``ConfigError`` on ``field`` (of the file ``source``) where it cannot be read so, or
    holds none."""
    if fmt == "delta":
        found = delta_files(path.absolute(), version, field, source, as_of)
    else:
        found = iceberg_files(path.absolute(), version, field, source, as_of, filters, per_second)
    if not found.files and not found.passed_by:
        raise ConfigError(field, f"the {TABLE_FORMATS[fmt]} table {path} has no files", source)
    return found
