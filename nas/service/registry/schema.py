"""The registry schema's version, kept by Alembic (the tool SQLAlchemy projects use).

Every connection checks the database's revision against this code's: an empty database is
created at the head revision, an older one is upgraded in place, and one written by a newer
recnas is refused rather than misread. Revisions live in ``migrations/versions``.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Connection

VERSION_TABLE = "recnas_alembic_version"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _alembic_config(connection: Connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {rev.revision for rev in ScriptDirectory(str(MIGRATIONS)).walk_revisions()}


def upgrade(connection: Connection) -> None:
    """Bring the schema at ``connection`` to the head revision."""
    from alembic import command

    command.upgrade(_alembic_config(connection), "head")
