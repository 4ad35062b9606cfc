"""The services a search talks to, checked before anything is written or started: the
registry database, the MLflow tracking store and the Ray cluster.

    registry_url(url)    the dialect is known, its driver installed, the database reachable
    tracking_uri(uri)    a scheme MLflow serves; a server answers /health; a file is a database
    ray_address(addr)    host:port of a head's GCS, and something listens there

Each returns the address to use (``postgresql://`` is completed with the psycopg driver,
which recnas installs) or raises a ``ConfigError`` naming the field and what would be valid.
No check waits longer than ``CONNECT_TIMEOUT_S``: an unreachable address fails in seconds,
not after minutes of a client's own retries. ``nas doctor`` runs the same checks.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from nas.core.errors import ConfigError, NasError, shown

CONNECT_TIMEOUT_S = 5.0
LOCK_WAIT_S = 120.0  # creating a database's schema takes seconds; minutes means stuck
TRACKING_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https")
URL_EXAMPLES = "sqlite:///nas-runs/registry.db or postgresql://user:password@host:5432/db"


# --- SQL databases (the registry; MLflow's backend store) ------------------------------------


def registry_url(url: str, field: str = "registry_url", connect: bool = True) -> str:
    """A SQLAlchemy URL the registry can open; ``postgresql://`` becomes
    ``postgresql+psycopg://`` (psycopg 3, installed with recnas; SQLAlchemy's default
    postgresql driver is psycopg2)."""
    return _database_url(url, field, URL_EXAMPLES, connect)


def _database_url(url: str, field: str, examples: str, connect: bool) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(field, f"{shown(url)} is not a database URL; e.g. {examples}") from None
    if parsed.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None:
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        raise ConfigError(
            field, f"unknown database kind {parsed.drivername!r} in {shown(url)}; e.g. {examples}"
        ) from None
    try:
        dialect.import_dbapi()
    except ImportError as err:
        raise ConfigError(
            field,
            f"the {parsed.drivername} driver is not installed ({err}); recnas installs "
            f"sqlite and psycopg (postgresql://) drivers; e.g. {examples}",
        ) from None
    if parsed.get_backend_name() == "sqlite":
        _sqlite_file(parsed.database, field)
    elif connect:
        _connect(parsed, field)
    return parsed.render_as_string(hide_password=False)


def _sqlite_file(database: str | None, field: str) -> None:
    """A sqlite database path that is (or can become) a database file."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(field, f"{parent} is a file, not a folder; {path} cannot be made")
            break
    if path.is_dir():
        raise ConfigError(field, f"{path} is a folder, not a database file")
    if path.is_file() and path.stat().st_size:
        # Through SQLite itself, never a plain open(): closing any other file descriptor on
        # a database drops the POSIX locks this process's SQLite connections hold on it, and
        # another process may then reset the WAL under them (stale reads, or corruption).
        import sqlite3

        try:
            read_only = f"{path.resolve().as_uri()}?mode=ro"
            with contextlib.closing(sqlite3.connect(read_only, uri=True)) as db:
                db.execute("PRAGMA schema_version").fetchone()
        except sqlite3.DatabaseError as err:
            # Only a file that is no database, or a damaged one. A read-only connection
            # cannot roll back the journal a process killed mid-write left (READONLY_ROLLBACK):
            # that database is sound, and the store's own connection recovers it.
            if err.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
                raise ConfigError(field, f"{path} is not a sqlite database ({err})") from None


def _connect(parsed, field: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(parsed, connect_args=connect_args(parsed))
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as err:
        where = parsed.render_as_string(hide_password=True)
        orig = getattr(err, "orig", None) or err
        reason = " ".join(str(orig).split())[:300]
        raise ConfigError(field, f"cannot connect to {where}: {reason}") from None
    finally:
        engine.dispose()


def connect_args(parsed) -> dict:
    """Driver options that bound how long a connection attempt may wait."""
    if parsed.get_backend_name() in ("postgresql", "mysql"):
        return {"connect_timeout": int(CONNECT_TIMEOUT_S)}
    return {}


@contextlib.contextmanager
def store_lock(url: str):
    """Held while a database's schema is created or migrated (the registry's, MLflow's):
    two `nas submit` on a fresh runs folder would otherwise both create it, and one fail.
    A sqlite file gets a lock file beside it; a server database locks itself (the registry
    takes a Postgres advisory lock; MLflow's server migrates once, at its start)."""
    from filelock import FileLock, Timeout
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    lock = FileLock(f"{database}.lock", timeout=LOCK_WAIT_S)
    try:
        lock.acquire()
    except Timeout:
        raise NasError(
            f"{database}: another process has held {lock.lock_file} for {LOCK_WAIT_S:.0f} s "
            "while creating the database; if none is running, delete that file"
        ) from None
    try:
        yield
    finally:
        lock.release()


# --- MLflow ----------------------------------------------------------------------------------


def tracking_uri(uri: str, field: str = "tracking_uri") -> str:
    """An MLflow tracking URI this process can reach: a tracking server (``http://``), or a
    database MLflow manages itself (``sqlite:///``, ``postgresql://`` ...)."""
    scheme = urlsplit(uri).scheme.split("+")[0].lower() if "://" in uri else ""
    if scheme not in TRACKING_SCHEMES:
        got = f"scheme {scheme!r}" if scheme else "no scheme"
        raise ConfigError(
            field,
            f"{shown(uri)} has {got}; MLflow tracking URIs here are http(s)://host:port "
            "(an `mlflow server`) or a database: sqlite:///path/mlflow.db, postgresql://...",
        )
    if scheme in ("http", "https"):
        _mlflow_server(uri.rstrip("/"), field)
        return uri
    return _database_url(uri, field, "sqlite:///nas-runs/mlflow.db", connect=True)


def local_tracking_uri() -> str:
    """The default MLflow store (sqlite in the runs folder), checked as any sqlite URI is:
    a file there may be something other than a database."""
    from nas.service.config import default_tracking_uri

    return tracking_uri(default_tracking_uri())


def _mlflow_server(uri: str, field: str) -> None:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=CONNECT_TIMEOUT_S) as response:
            if response.status == 200:
                return
            reason = f"HTTP {response.status}"
    except urllib.error.HTTPError as err:
        reason = f"HTTP {err.code} from /health: is this an MLflow tracking server?"
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = str(getattr(err, "reason", err))
    raise ConfigError(
        field,
        f"no MLflow tracking server answers at {shown(uri)} ({reason}); start one with "
        "`mlflow server --host 127.0.0.1 --port 5000`, or leave tracking_uri unset",
    )


# --- Ray ------------------------------------------------------------------------------------


def ray_address(address: str, field: str = "ray_address") -> str:
    """``host:port`` of a Ray head's GCS, or ``auto`` (the cluster ``ray start`` left on this
    machine). Ray Client (``ray://``) addresses are refused with the reason."""
    if address == "auto":
        return address
    valid = (
        "host:port of the head's GCS (e.g. 10.0.0.5:6379, what `ray start --head` prints) or auto"
    )
    if address.startswith("ray://"):
        # Through Ray Client, Tune runs the whole search loop on the head node, away from
        # this process, where the controller records each trial (registry, MLflow).
        raise ConfigError(
            field,
            f"{shown(address)} is a Ray Client address; recnas joins the cluster as a driver "
            f"(its trials are recorded by this process): use {valid}",
        )
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(field, f"{shown(address)} is not a Ray address; expected {valid}")
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(
            field,
            f"nothing answers at {shown(address)} ({reason}); start the head with "
            "`ray start --head --port 6379` there, or leave the address unset for a local Ray",
        ) from None
    return address
