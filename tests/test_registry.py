"""The registry: created at the schema head, refuses newer schemas, keeps trials unique."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from sqlalchemy import text

from nas.core.errors import ConfigError, NasError
from nas.service.registry import Registry, RegistryError, display_status
from nas.service.registry.schema import VERSION_TABLE, head_revision


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
    with pytest.raises(ConfigError, match="registry_url: 'registry.db' is not a database URL"):
        Registry("registry.db")


def test_a_relative_sqlite_path_opens_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = Registry("sqlite:///runs/registry.db")
    first.create_search("s-000001", "s", {}, None)
    again = Registry("sqlite:///runs/registry.db")  # a file that exists: checked, then read
    assert [s.id for s in again.list_searches()] == ["s-000001"]


def test_trials_and_strategy_state_are_recorded_together(registry: Registry) -> None:
    search = registry.create_search("s-1", "s", {"k": 1}, None)
    trial = registry.add_trial(search.id, {"x": 1}, "a" * 16, None, "searched", {"step": 1})
    assert trial.number == 0 and trial.status == "running"
    assert registry.get_search("s-1").strategy_state == {"step": 1}
    registry.finish_trial(trial.id, "completed", values=[0.5], strategy_state={"step": 2})
    (stored,) = registry.trials(search.id)
    assert stored.values == [0.5] and stored.finished_at is not None
    assert registry.get_search("s-1").strategy_state == {"step": 2}
    second = registry.add_trial(search.id, {"x": 2}, "b" * 16, "dlrm", "baseline")
    assert second.number == 1


def test_an_architecture_is_recorded_once_per_search(registry: Registry) -> None:
    registry.create_search("s-1", "s", {}, None)
    registry.add_trial("s-1", {}, "a" * 16, None)
    with pytest.raises(RegistryError, match="UNIQUE"):
        registry.add_trial("s-1", {}, "a" * 16, None)
    assert len(registry.trials("s-1")) == 1  # the failed insert was rolled back


def test_ids_resolve_by_unique_prefix(registry: Registry) -> None:
    registry.create_search("demo-aaa111", "demo", {}, None)
    registry.create_search("demo-bbb222", "demo", {}, None)
    assert registry.get_search("demo-a").id == "demo-aaa111"
    with pytest.raises(NasError, match="ambiguous"):
        registry.get_search("demo-")
    with pytest.raises(NasError, match="no search 'nope'.*recent searches: demo-"):
        registry.get_search("nope")
    # A whole name names its search, though its retrain's id starts with it too and keeps
    # its name (as `nas retrain` writes them); a name longer than an id's 25 characters too.
    registry.create_search("ctr-ccc333", "ctr", {}, None)
    registry.create_search("ctr-retrain-ddd444", "ctr", {}, None)
    assert registry.get_search("ctr").id == "ctr-ccc333"
    long = "a-very-long-search-name-of-a-team"
    registry.create_search(f"{long[:25]}-eee555", long, {}, None)
    registry.create_search(f"{long[:16]}-retrain-fff666", long, {}, None)
    assert registry.get_search(long).id == f"{long[:25]}-eee555"
    with pytest.raises(NasError, match="ambiguous: demo-aaa111, demo-bbb222"):
        registry.get_search("demo")  # two searches of that name


def test_a_search_is_owned_by_its_creator_before_any_controller_claims_it(
    registry: Registry,
) -> None:
    search = registry.create_search("s-1", "s", {}, None)
    assert (search.host, search.pid) == (socket.gethostname(), os.getpid())
    assert display_status(search) == "running"
    # killed between the row and the controller: crashed at once, not running for ever
    dead = registry.update_search("s-1", pid=_dead_pid())
    assert display_status(dead) == "crashed"


def test_a_running_search_whose_process_died_reads_crashed(registry: Registry) -> None:
    search = registry.claim(registry.create_search("s-1", "s", {}, None))
    assert search.pid == os.getpid() and display_status(search) == "running"
    dead = registry.update_search("s-1", pid=_dead_pid(), host=socket.gethostname())
    assert display_status(dead) == "crashed"


def test_a_search_on_another_host_is_crashed_once_its_heartbeat_is_older_than_the_lease(
    registry: Registry,
) -> None:
    from datetime import timedelta

    from nas.service.registry.models import utcnow
    from nas.service.registry.store import LEASE_S

    registry.create_search("s-1", "s", {}, None)
    fresh = registry.update_search("s-1", host="elsewhere", pid=1, heartbeat_at=utcnow())
    assert display_status(fresh) == "running"
    stale = utcnow() - timedelta(seconds=LEASE_S + 1)
    assert display_status(registry.update_search("s-1", heartbeat_at=stale)) == "crashed"


def test_a_beat_renews_only_the_owners_lease(registry: Registry) -> None:
    from datetime import timedelta

    from nas.service.registry.models import utcnow

    old = utcnow() - timedelta(hours=1)
    search = registry.claim(registry.create_search("s-1", "s", {}, None))
    registry.update_search(search.id, heartbeat_at=old)
    registry.beat(search.id)
    assert display_status(registry.get_search(search.id)) == "running"
    registry.update_search(search.id, pid=_dead_pid(), heartbeat_at=old)
    registry.beat(search.id)  # not ours any more: no effect
    assert display_status(registry.get_search(search.id)) == "crashed"


def test_two_processes_taking_over_the_same_crashed_search_one_backs_off(
    registry: Registry,
) -> None:
    seen = registry.update_search(registry.create_search("s-1", "s", {}, None).id, pid=_dead_pid())
    registry.update_search("s-1", pid=_dead_pid())  # another resume claimed it meanwhile
    with pytest.raises(NasError, match="just taken over"):
        registry.claim(seen)


def test_search_ids_never_match_as_wildcards(registry: Registry) -> None:
    registry.create_search("demo-aaa111", "demo", {}, None)
    for pattern in ("%", "_", "demo%", "demo-___111", ""):
        with pytest.raises(NasError):
            registry.get_search(pattern)


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_migrations_build_exactly_the_tables_the_models_describe(registry: Registry) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from nas.service.registry.models import Base

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


def test_a_registry_from_before_trial_kinds_is_upgraded_in_place(tmp_path: Path) -> None:
    """A database written at revision 0001 (is_baseline flags) opens at the head: baselines
    become kind 'baseline', the rest 'searched', and nothing else changes."""
    from alembic import command
    from sqlalchemy import create_engine

    from nas.service.registry import schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    with create_engine(url).begin() as connection:
        command.upgrade(schema._alembic_config(connection), "0001")
        connection.execute(
            text(
                "insert into recnas_searches (id, name, status, config, created_at, updated_at,"
                " elapsed_s, sessions) values ('s-1', 's', 'completed', '{}', '2026-01-01',"
                " '2026-01-01', 12.5, 1)"
            )
        )
        for number, (arch, baseline) in enumerate([("a" * 16, 1), ("b" * 16, 0)]):
            connection.execute(
                text(
                    "insert into recnas_trials (search_id, number, arch_id, is_baseline, spec,"
                    " status, attempts, created_at) values ('s-1', :n, :a, :b, '{\"k\": 1}',"
                    " 'completed', 1, '2026-01-01')"
                ),
                {"n": number, "a": arch, "b": baseline},
            )
    registry = Registry(url)
    with registry.engine.connect() as connection:
        assert schema.current_revision(connection) == head_revision()
    trials = registry.trials("s-1")
    assert [(t.kind, t.spec, t.is_baseline) for t in trials] == [
        ("baseline", {"k": 1}, True),
        ("searched", {"k": 1}, False),
    ]
    assert registry.get_search("s-1").elapsed_s == 12.5
    registry.claim(registry.get_search("s-1"))  # a controller's writes need the lease
    job = registry.add_trial("s-1", None, "supernet", None, "supernet", job={"steps": 10})
    assert job.spec is None and not job.is_candidate and job.job == {"steps": 10}
