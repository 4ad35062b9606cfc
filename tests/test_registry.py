"""The registry: created at the schema head, refuses newer schemas, keeps trials unique."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from sqlalchemy import text

from nas.errors import NasError
from nas.registry import Registry, RegistryError, display_status
from nas.registry.schema import VERSION_TABLE, head_revision


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(f"sqlite:///{tmp_path / 'sub' / 'registry.db'}")


def test_a_new_database_is_at_the_head_revision(registry: Registry) -> None:
    with registry.engine.connect() as connection:
        revision = connection.execute(text(f"select version_num from {VERSION_TABLE}")).scalar()
    assert revision == head_revision()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    registry = Registry(url)
    with registry.engine.begin() as connection:
        connection.execute(text(f"update {VERSION_TABLE} set version_num = '9999'"))
    with pytest.raises(RegistryError, match="revision 9999, which this version of recnas"):
        Registry(url)


def test_a_bad_url_says_what_a_url_looks_like() -> None:
    with pytest.raises(RegistryError, match="not a SQLAlchemy URL"):
        Registry("registry.db")


def test_trials_and_strategy_state_are_recorded_together(registry: Registry) -> None:
    search = registry.create_search("s-1", "s", {"k": 1}, None)
    trial = registry.add_trial(search.id, {"x": 1}, "a" * 16, None, False, {"step": 1})
    assert trial.number == 0 and trial.status == "running"
    assert registry.get_search("s-1").strategy_state == {"step": 1}
    registry.finish_trial(trial.id, "completed", values=[0.5], strategy_state={"step": 2})
    (stored,) = registry.trials(search.id)
    assert stored.values == [0.5] and stored.finished_at is not None
    assert registry.get_search("s-1").strategy_state == {"step": 2}
    second = registry.add_trial(search.id, {"x": 2}, "b" * 16, "dlrm", True)
    assert second.number == 1


def test_an_architecture_is_recorded_once_per_search(registry: Registry) -> None:
    registry.create_search("s-1", "s", {}, None)
    registry.add_trial("s-1", {}, "a" * 16, None, False)
    with pytest.raises(RegistryError, match="UNIQUE"):
        registry.add_trial("s-1", {}, "a" * 16, None, False)
    assert len(registry.trials("s-1")) == 1  # the failed insert was rolled back


def test_ids_resolve_by_unique_prefix(registry: Registry) -> None:
    registry.create_search("demo-aaa111", "demo", {}, None)
    registry.create_search("demo-bbb222", "demo", {}, None)
    assert registry.get_search("demo-a").id == "demo-aaa111"
    with pytest.raises(NasError, match="ambiguous"):
        registry.get_search("demo-")
    with pytest.raises(NasError, match="no search 'nope'.*recent searches: demo-"):
        registry.get_search("nope")


def test_a_running_search_whose_process_died_reads_crashed(registry: Registry) -> None:
    registry.create_search("s-1", "s", {}, None)
    search = registry.claim("s-1")
    assert search.pid == os.getpid() and display_status(search) == "running"
    dead = registry.update_search("s-1", pid=_dead_pid(), host=socket.gethostname())
    assert display_status(dead) == "crashed"


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_migrations_build_exactly_the_tables_the_models_describe(registry: Registry) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from nas.registry.models import Base

    with registry.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    import multiprocessing

    url = f"sqlite:///{tmp_path / 'race.db'}"
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        results = pool.map(_open_and_count, [url] * 12)
    assert results == [0] * 12


def _open_and_count(url: str) -> int:
    return len(Registry(url).list_searches())
