"""``Registry``: the searches and trials database, the source of truth for the CLI and resume.

Every access goes through ``session()``, which commits on success, rolls back on error, and
turns driver errors into a ``RegistryError`` that names the database (Optuna's RDB storage
does the same). Any SQLAlchemy URL works; the default is a sqlite file under ``nas-runs/``.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, func, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from nas.core.errors import NasError, shown
from nas.service.endpoints import connect_args, registry_url, store_lock
from nas.service.registry import schema
from nas.service.registry.models import TRIAL_KINDS, Search, Trial, utcnow


class RegistryError(NasError):
    """The registry database cannot be reached, read or written."""


class LeaseLost(RegistryError):
    """This process no longer controls the search it was running: it was silent for over
    ``LEASE_S`` (stopped, suspended, cut off from the registry), and another process took
    the search over with ``nas resume``. Its writes are refused, so two controllers never
    record one search."""

    def __init__(self, search_id: str, row: Search | None = None):
        silent = (
            f"this process was silent for over {LEASE_S:.0f} s (stopped, suspended, or cut "
            "off from the registry)"
        )
        if row is not None and row.pid is None:  # `nas cancel` of a search read as crashed
            what = f"was {row.status} meanwhile: {silent}, so it stops"
        else:
            by = f" by process {row.pid} on {row.host}" if row is not None else ""
            what = f"was taken over{by}: {silent}, so it stops and leaves it to its new controller"
        super().__init__(f"search {search_id} {what} (see: nas status {search_id})")


SCHEMA_WAIT_S = 30.0  # how long to wait for another process creating the schema
HEARTBEAT_S = 10.0  # how often a running search's controller renews its lease
LEASE_S = 60.0  # a running search whose heartbeat is older has no live controller
PG_LOCK = 0x7265636E6173  # "recnas": the advisory lock its Postgres migrations hold


def new_search_id(name: str) -> str:
    """``<name>-<6 hex>``, at most 32 characters (the id column's width)."""
    return f"{name[:25]}-{secrets.token_hex(3)}"


def _is_named(search: Search, name: str) -> bool:
    """Whether ``search`` is one that ``nas submit`` named ``name`` (id ``name-<6 hex>``), not
    a retrain of it: a retrain keeps its search's name, under the id ``name-retrain-<6 hex>``."""
    return search.name == name and search.id[:-7] == name[:25]


def owner() -> tuple[str, int]:
    """This process, as a search's controller: (host, pid)."""
    return socket.gethostname(), os.getpid()


class Registry:
    def __init__(self, url: str, create: bool = True):
        """Open (create, upgrade) the registry at ``url``: its dialect, driver and file are
        checked first (``nas.service.endpoints.registry_url``), its connections time out.
        ``create=False`` (the commands that only read or find a search): a sqlite file that
        does not exist reads as an empty registry, and no file is made."""
        self.url = registry_url(url, connect=False)
        parsed = make_url(self.url)
        self.where = parsed.render_as_string(hide_password=True)  # for messages
        if parsed.drivername.startswith("sqlite") and parsed.database:
            if not create and not Path(parsed.database).exists():
                parsed = make_url("sqlite://")  # in memory: empty, and gone at exit
            else:
                try:
                    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                except OSError as err:
                    raise RegistryError(f"{self.where}: cannot make its folder ({err})") from None
        self.engine = create_engine(parsed, connect_args=connect_args(parsed))
        if parsed.drivername.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._check_schema(parsed)

    def _check_schema(self, parsed) -> None:
        try:
            with store_lock(parsed.render_as_string(hide_password=False)):
                self._upgrade_if_needed()
        except SQLAlchemyError as err:
            if self.engine.dialect.name != "sqlite":  # a server: unreachable, or refused us
                reason = _reason(err)
                raise RegistryError(f"{self.where}: cannot open the registry ({reason})") from None
            # Another recnas without the lock (a sqlite file shared over a network mount,
            # where file locks may not hold) created the schema at the same moment: sqlite
            # commits DDL statement by statement, so wait for the creator.
            deadline = time.monotonic() + SCHEMA_WAIT_S
            while time.monotonic() < deadline:
                try:
                    with self.engine.connect() as connection:
                        if schema.current_revision(connection) == schema.head_revision():
                            return
                except SQLAlchemyError:
                    pass
                time.sleep(0.1)
            reason = _reason(err)
            raise RegistryError(f"{self.where}: cannot open the registry ({reason})") from None

    def _upgrade_if_needed(self) -> None:
        with self.engine.begin() as connection:
            if connection.dialect.name == "postgresql":  # one migrator at a time, server-wide
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK})
            current = schema.current_revision(connection)
            if current is not None and current not in schema.known_revisions():
                raise RegistryError(
                    f"{self.where}: the registry schema is at revision {current}, which this "
                    f"version of recnas does not know (it knows up to "
                    f"{schema.head_revision()}); upgrade recnas to read it"
                )
            if current != schema.head_revision():
                schema.upgrade(connection)

    @contextmanager
    def session(self) -> Iterator[Session]:
        session = self._sessions()
        try:
            yield session
            session.commit()
        except SQLAlchemyError as err:
            session.rollback()
            raise RegistryError(f"{self.where}: {_reason(err)}") from None
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    # --- searches -----------------------------------------------------------------------

    def create_search(
        self,
        search_id: str,
        name: str,
        config: dict[str, Any],
        config_path: str | None,
        data_version: str | None = None,
    ) -> Search:
        """A new search, owned by this process from the first moment: killed before its
        controller starts, it reads as crashed, never as running for ever. ``data_version``:
        the prepared dataset's (``PreparedDataset.version``)."""
        host, pid = owner()
        search = Search(
            id=search_id,
            name=name,
            status="running",
            config=config,
            config_path=config_path,
            elapsed_s=0.0,
            sessions=0,
            host=host,
            pid=pid,
            heartbeat_at=utcnow(),
            data_version=data_version,
        )
        with self.session() as s:
            s.add(search)
        return search

    def get_search(self, search_id: str) -> Search:
        """The search ``search_id`` (a unique prefix is enough; no wildcards: ``%`` and
        ``_`` are matched as themselves). A search's whole name names it, though other ids
        start with it too (``ctr`` is ``ctr-1a2b3c``, not its retrain ``ctr-retrain-...``,
        whose name is ``ctr`` too), and though it is longer than the 25 characters of it that
        its id keeps."""
        if not search_id:
            raise NasError("a search id is required (see: nas list)")
        with self.session() as s:
            found = s.get(Search, search_id)
            if found is not None:
                return found
            prefix = Search.id.startswith(search_id, autoescape=True)
            found = s.scalars(select(Search).where(prefix | (Search.name == search_id))).all()
            named = [m for m in found if _is_named(m, search_id)]
            matches = named if len(named) > 1 else [m for m in found if m.id.startswith(search_id)]
            if len(named) == 1 or len(matches) == 1:
                return (named or matches)[0]
            known = s.scalars(select(Search.id).order_by(Search.created_at.desc())).all()
        if matches:
            raise NasError(
                f"search id {shown(search_id)} is ambiguous: {', '.join(m.id for m in matches)}"
            )
        hint = f"; recent searches: {', '.join(known[:5])}" if known else "; none yet"
        raise NasError(f"no search {shown(search_id)} in {self.where}{hint} (see: nas list)")

    def list_searches(self) -> list[Search]:
        with self.session() as s:
            return list(s.scalars(select(Search).order_by(Search.created_at.desc())).all())

    def update_search(self, search_id: str, *, owned: bool = False, **fields: Any) -> Search:
        """Set fields of a search; with ``owned``, only while this process controls it
        (else ``LeaseLost``): what its controller writes."""
        with self.session() as s:
            search = self._owned(s, search_id) if owned else s.get(Search, search_id)
            for key, value in fields.items():
                setattr(search, key, value)
            search.updated_at = utcnow()
            return search

    def claim(self, search: Search) -> Search:
        """Make this process the search's controller (a new session of it). ``search`` is
        the row as its caller judged it (its own new search, or one whose controller is
        gone); if another process has claimed it since, this one backs off."""
        with self.session() as s:
            row = s.get(Search, search.id, with_for_update=True)
            if (row.host, row.pid) != (search.host, search.pid):
                raise NasError(
                    f"search {search.id} was just taken over by process {row.pid} on "
                    f"{row.host}; see: nas status {search.id}"
                )
            row.status = "running"
            row.message = None
            row.host, row.pid = owner()
            row.sessions += 1
            row.updated_at = row.session_started_at = row.heartbeat_at = utcnow()
            return row

    def beat(self, search_id: str) -> bool:
        """Renew this process's lease on a search it controls; False when it controls it no
        longer (another process took it over)."""
        host, pid = owner()
        with self.session() as s:
            renewed = s.execute(
                update(Search)
                .where(Search.id == search_id, Search.host == host, Search.pid == pid)
                .values(heartbeat_at=utcnow())
            )
            return renewed.rowcount == 1

    def require_lease(self, search_id: str) -> None:
        """``LeaseLost`` unless this process controls the search: checked before a write
        outside the registry (the strategy's own storage) that a fenced one follows."""
        with self.session() as s:
            self._owned(s, search_id)

    def _owned(self, s: Session, search_id: str) -> Search:
        """The search's row, locked for this transaction, while this process controls it;
        else ``LeaseLost``. The controller's writes go through it: a controller that was
        taken over while it was silent finds out at its next write, and writes nothing."""
        row = s.get(Search, search_id, with_for_update=True)
        if row is None or (row.host, row.pid) != owner():
            raise LeaseLost(search_id, row)
        return row

    # --- trials -------------------------------------------------------------------------

    def trials(self, search_id: str) -> list[Trial]:
        with self.session() as s:
            query = select(Trial).where(Trial.search_id == search_id).order_by(Trial.number)
            return list(s.scalars(query).all())

    def add_trial(
        self,
        search_id: str,
        spec: dict[str, Any] | None,
        arch_id: str,
        label: str | None,
        kind: str = "searched",
        strategy_state: dict[str, Any] | None = None,
        job: dict[str, Any] | None = None,
    ) -> Trial:
        """Record an asked candidate (or a setup job: ``arch_id`` is then the job's name), and
        the strategy state after the ask, atomically."""
        if kind not in TRIAL_KINDS:
            raise ValueError(f"trial kind must be one of {TRIAL_KINDS}, got {kind!r}")
        with self.session() as s:
            search = self._owned(s, search_id)
            count = s.scalar(select(func.count()).where(Trial.search_id == search_id))
            trial = Trial(
                search_id=search_id,
                number=count,
                arch_id=arch_id,
                label=label,
                kind=kind,
                spec=spec,
                job=job,
                status="running",
                attempts=1,
            )
            s.add(trial)
            if strategy_state is not None:
                search.strategy_state = strategy_state
            return trial

    def trained_before(self, arch_id: str, key: str) -> Trial | None:
        """The newest completed baseline trial of any search with this architecture and
        training key (``nas/service/trained_before.py``), or None."""
        with self.session() as s:
            query = (
                select(Trial)
                .where(Trial.arch_id == arch_id, Trial.kind == "baseline")
                .where(Trial.status == "completed")
                .order_by(Trial.finished_at.desc())
            )
            for trial in s.scalars(query):
                if (trial.metrics or {}).get("training_key") == key:
                    return trial
        return None

    def restart_trial(self, trial_id: int) -> Trial:
        with self.session() as s:
            trial = s.get(Trial, trial_id)
            self._owned(s, trial.search_id)
            trial.status = "running"
            trial.attempts += 1
            trial.error = None
            return trial

    def finish_trial(
        self,
        trial_id: int,
        status: str,
        *,
        values: list[float] | None = None,
        metrics: dict | None = None,
        timings: dict | None = None,
        error: str | None = None,
        strategy_state: dict[str, Any] | None = None,
    ) -> Trial:
        """Record a trial's outcome, and the strategy state after the tell, atomically."""
        with self.session() as s:
            trial = s.get(Trial, trial_id)
            search = self._owned(s, trial.search_id)
            trial.status, trial.values, trial.metrics = status, values, metrics
            trial.timings, trial.error, trial.finished_at = timings, error, utcnow()
            if strategy_state is not None:
                search.strategy_state = strategy_state
            return trial

    def update_trial(self, trial_id: int, **fields: Any) -> None:
        """Set bookkeeping fields of a recorded trial (its MLflow run id, its timings)."""
        with self.session() as s:
            trial = s.get(Trial, trial_id)
            for key, value in fields.items():
                setattr(trial, key, value)


def _reason(err: SQLAlchemyError) -> str:
    """The driver's own message, without SQLAlchemy's statement dump and help link."""
    orig = getattr(err, "orig", None)
    return f"{type(orig).__name__}: {orig}" if orig is not None else str(err).splitlines()[0]


def _sqlite_pragmas(connection, _record) -> None:
    # WAL lets `nas list` read while a search writes; wait rather than fail on a busy file.
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def controller_alive(search: Search) -> bool:
    """Whether the search's controller still runs: its process exists (on this host) and its
    heartbeat is younger than ``LEASE_S`` (on any host)."""
    if search.pid is None:  # no owner at all (a row left by an older recnas)
        return False
    if search.host == socket.gethostname():
        try:
            os.kill(search.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: fall back on the heartbeat
    if search.heartbeat_at is None:
        return search.host != socket.gethostname()  # an older recnas's row: assume alive
    beat = search.heartbeat_at
    if beat.tzinfo is None:  # sqlite returns naive datetimes; they are stored in UTC
        beat = beat.replace(tzinfo=UTC)
    return (utcnow() - beat).total_seconds() < LEASE_S


def elapsed_seconds(search: Search) -> float:
    """Wall time over all sessions, the running one included."""
    if search.status in ("running", "cancelling") and search.session_started_at is not None:
        started = search.session_started_at
        if started.tzinfo is None:  # sqlite returns naive datetimes; they are stored in UTC
            started = started.replace(tzinfo=UTC)
        return search.elapsed_s + (utcnow() - started).total_seconds()
    return search.elapsed_s


def display_status(search: Search) -> str:
    """The status to show: a "running" search whose controller died reads "crashed"."""
    if search.status in ("running", "cancelling") and not controller_alive(search):
        return "crashed"
    return search.status
