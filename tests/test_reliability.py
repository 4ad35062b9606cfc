"""A search is never stuck: bad service addresses are refused before anything is written, a
search whose owner is gone can be cancelled or resumed at once, searches started together on
a fresh folder all finish, and a candidate whose worker is killed is trained again.

Everything runs for real: `nas` in subprocesses, a local Ray, sqlite stores, MovieLens-100k.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from nas.service.registry import display_status
from tests.conftest import runs_with_store
from tests.test_registry import _dead_pid
from tests.test_search import nas, registry_of, start_submit, wait_for, write_search


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--tracking-uri", "junk-mlruns"], "--tracking-uri: 'junk-mlruns' has no scheme"),
        (["--tracking-uri", "foo://bar"], "--tracking-uri: 'foo://bar' has scheme 'foo'"),
        (["--tracking-uri", "http://127.0.0.1:{port}"], "no MLflow tracking server answers"),
        (["--address", "junk"], "--address: 'junk' is not a Ray address"),
        (["--address", "127.0.0.1:{port}"], "--address: nothing answers at"),
        (["--address", "ray://127.0.0.1:{port}"], "is a Ray Client address; recnas joins"),
        (["--registry-url", "mysql://u@h/db"], "--registry-url: the mysql driver is not installed"),
        (["--registry-url", "nosuch://x"], "--registry-url: unknown database kind 'nosuch'"),
        (["--registry-url", "postgresql://u@127.0.0.1:{port}/db"], "cannot open the registry"),
        (["--registry-url", "sqlite:///{tmp}/search.yaml"], "is not a sqlite database"),
        (["--registry-url", "sqlite:///{tmp}/search.yaml/r.db"], "is a file, not a folder"),
    ],
)
def test_a_service_that_cannot_be_used_is_refused_in_seconds_and_nothing_is_written(
    tmp_path: Path, flags: list[str], words: str
) -> None:
    runs = tmp_path / "runs"
    path = write_search(tmp_path)
    flags = [f.format(port=_free_port(), tmp=tmp_path) for f in flags]
    started = time.monotonic()
    done = nas(runs, "submit", str(path), *flags, timeout=120)
    assert time.monotonic() - started < 30
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert words in message and "Traceback" not in done.stderr, message
    assert not (runs / "registry.db").exists() and not (runs / "mlflow.db").exists()


@pytest.mark.parametrize(
    ("store", "field"), [("mlflow.db", "tracking_uri"), ("registry.db", "registry_url")]
)
def test_a_runs_folder_whose_default_store_is_not_a_database_is_refused(
    tmp_path: Path, store: str, field: str
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / store).write_text("not a database\n")
    done = nas(runs, "submit", str(write_search(tmp_path)), timeout=120)
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert f"{field}: {runs / store} is not a sqlite database" in message, message
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in runs.iterdir()) == [store]  # nothing else written
    assert (runs / store).read_text() == "not a database\n"


KILLED_MID_WRITE = """
import os, signal, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("create table t (x)")
db.execute("begin")  # one transaction: more rows than the page cache holds, so the
db.executemany("insert into t values (?)", [("x" * 100,)] * 40000)  # update below spills
db.execute("commit")
db.execute("begin")
db.execute("update t set x = 'y'")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_store_left_by_a_process_killed_mid_write_is_still_a_store(tmp_path: Path) -> None:
    from nas.core.errors import ConfigError
    from nas.service import endpoints

    hot, junk = tmp_path / "killed.db", tmp_path / "junk.db"
    subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(hot)], check=False)
    assert Path(f"{hot}-journal").exists()  # a journal a read-only connection cannot undo
    junk.write_text("not a database")
    for check in (endpoints.registry_url, endpoints.tracking_uri):
        check(f"sqlite:///{hot}")  # accepted: the store's own connection recovers it
        with pytest.raises(ConfigError, match="is not a sqlite database"):
            check(f"sqlite:///{junk}")
    with sqlite3.connect(hot) as db:  # and it does: the killed update is rolled back
        assert db.execute("select count(*) from t where x = 'y'").fetchone() == (0,)


def test_cancel_of_a_search_whose_owner_is_gone_is_immediate(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    from nas.service.config import load_config

    registry = registry_of(runs)
    config = load_config(write_search(tmp_path)).to_dict()
    registry.create_search("gone-abc123", "gone", config, None)
    registry.update_search("gone-abc123", pid=_dead_pid())
    assert json.loads(nas(runs, "list", "--json").stdout)[0]["status"] == "crashed"
    started = time.monotonic()
    done = nas(runs, "cancel", "gone-abc123")
    assert done.returncode == 0 and time.monotonic() - started < 20, done.stderr
    assert registry.get_search("gone-abc123").status == "cancelled"


@pytest.mark.slow
def test_searches_submitted_at_the_same_moment_on_a_fresh_folder_all_finish(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    paths = []
    for i in range(2):  # two racing to make the stores are enough to need the lock
        folder = tmp_path / f"s{i}"
        folder.mkdir()
        paths.append(write_search(folder, candidates=1, steps=20, baselines="false", seed=i))
    submits = [start_submit(runs, path) for path in paths]
    outputs = [submit.communicate(timeout=600) for submit in submits]
    for submit, (_, err) in zip(submits, outputs, strict=True):
        assert submit.returncode == 0 and "Traceback" not in err, err
    searches = registry_of(runs).list_searches()
    assert len(searches) == 2 and {s.status for s in searches} == {"completed"}
    for search in searches:
        assert [t.status for t in registry_of(runs).trials(search.id)] == ["completed"]


@pytest.mark.slow
def test_a_candidate_whose_worker_is_killed_is_trained_again(tmp_path: Path) -> None:
    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=1, steps=800, baselines="false")
    submit = start_submit(runs, path)
    # Killed starting or training, it is retried: 800 steps take only seconds, so the kill
    # must not wait long (after 3 s it found the trial done, under a loaded suite).
    out, err = kill_worker_then_finish(runs, submit, "ImplicitFunc", after_s=1)
    assert submit.returncode == 0, err
    assert "Traceback" not in err and "ActorDiedError" not in err, err
    assert "raylet" not in out + err, out  # Ray's words: runs/ray/errors.log
    (search,) = registry_of(runs).list_searches()
    trials = registry_of(runs).trials(search.id)
    (trial,) = trials
    assert search.status == "completed" and trial.status == "completed" and trial.attempts == 2
    (reason,) = trial.timings["retried_after"]
    assert reason.startswith("attempt 1: the Ray worker died") and "memory" not in reason
    assert "retrying" in err


@pytest.mark.slow
def test_a_controller_taken_over_while_silent_stops_and_writes_nothing(tmp_path: Path) -> None:
    """A controller silent for over a minute (stopped, suspended, cut off) reads crashed, and
    `nas resume` elsewhere takes the search over. When the first one wakes it must not go on
    recording the same search: its next write or heartbeat finds the row names another
    owner, and it stops with nothing written. The takeover is made here as a claim makes
    it: the row's owner changed under the running search."""
    from datetime import UTC, datetime

    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=6, steps=300, baselines="false")
    submit = start_submit(runs, path)
    try:
        search = wait_for(runs, lambda trials: any(t.status == "completed" for t in trials))
        registry = registry_of(runs)
        registry.update_search(search.id, host="elsewhere", pid=12345)
        taken = datetime.now(UTC).replace(tzinfo=None)
        _, err = submit.communicate(timeout=300)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.communicate()
    assert submit.returncode == 2 and "Traceback" not in err, err
    assert f"search {search.id} was taken over by process 12345 on elsewhere" in err, err
    assert "nas resume" not in err  # the search is the new controller's, not to resume
    row = registry.get_search(search.id)
    assert (row.host, row.pid, row.status) == ("elsewhere", 12345, "running")
    trials = registry.trials(search.id)
    assert len(trials) < 6 and all(
        t.finished_at is None or t.finished_at <= taken for t in trials
    ), [(t.number, t.status, t.finished_at, taken) for t in trials]


@pytest.mark.slow
def test_sigterm_to_the_whole_process_group_stops_the_search_as_interrupted(
    tmp_path: Path,
) -> None:
    """What systemd, Slurm, `timeout` or a container runtime sends: SIGTERM to every process,
    Ray's own included. Ray's handler used to exit the driver mid-search (recorded as failed,
    then a C++ stack dump and an abort), or a minute's wait on the dead Ray left it 'running'.

    The signals race: when the raylet's death reaches the driver's Ray core before the
    driver's handler runs, Ray ends the driver itself (exit 1, measured 1-2 runs in 10); the
    search then reads as crashed or interrupted, resumable. So each try must end one of those
    two ways, and at least one of three must show the answer recnas gives."""
    outcomes = []
    for attempt in range(3):
        outcomes.append(_sigterm_the_group(tmp_path / f"try{attempt}"))
        if outcomes[-1] == 130:
            return
    pytest.fail(f"Ray ended the driver first in every try: exit codes {outcomes}")


def _sigterm_the_group(folder: Path) -> int:
    """One search stopped by a group-wide SIGTERM while a candidate trains: its exit code."""
    folder.mkdir()
    runs = runs_with_store(folder)
    path = write_search(folder, candidates=2, steps=3000, baselines="false")
    submit = start_submit(runs, path, start_new_session=True)
    try:
        search = wait_for(runs, lambda trials: any(t.status == "running" for t in trials))
        ray_processes = _marked(submit.pid)
        assert ray_processes, "the search started Ray"
        time.sleep(1)
        os.killpg(submit.pid, signal.SIGTERM)
        _, err = submit.communicate(timeout=120)
    finally:
        if submit.poll() is None:
            os.killpg(submit.pid, signal.SIGKILL)
            submit.communicate()
    assert "Traceback" not in err and "SIGTERM received" not in err, err
    search = registry_of(runs).get_search(search.id)
    if submit.returncode == 1:  # Ray ended the driver before its handler ran
        assert display_status(search) in ("interrupted", "crashed"), search.status
        for process in ray_processes:  # what the next search's start reaps (reap_orphans)
            if _alive(process):
                process.kill()
        return 1
    assert submit.returncode == 130, err
    assert f"continue it with: nas resume {search.id}" in err
    assert search.status == "interrupted" and search.pid is None
    assert {t.status for t in registry_of(runs).trials(search.id)} == {"cancelled"}
    deadline = time.time() + 10  # the last of Ray's processes may take a moment to exit
    while (alive := [p for p in ray_processes if _alive(p)]) and time.time() < deadline:
        time.sleep(0.2)
    assert not alive, [" ".join(p.cmdline()) for p in alive if _alive(p)]
    return 130


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # it exited between the two questions
        return False


def kill_worker_then_finish(runs: Path, submit, name: str, after_s: float) -> tuple[str, str]:
    """Once a trial of the search ``submit`` runs, kill -9 its first Ray worker whose
    command line has ``name`` (``ImplicitFunc``: a Tune trial), ``after_s`` seconds after it
    appears; then the search's output, once it ends."""
    try:
        wait_for(runs, lambda trials: any(t.status == "running" for t in trials))
        deadline = time.time() + 120  # a loaded machine may take a while to start a worker
        while not (workers := _workers_named(submit.pid, name)) and time.time() < deadline:
            time.sleep(0.5)
        assert workers, f"a Ray worker named {name} runs"
        time.sleep(after_s)
        workers[0].send_signal(signal.SIGKILL)
        return submit.communicate(timeout=600)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.communicate()


def _once_it_trains(runs: Path, submit, act: Callable[[], object]) -> str:
    """``act()`` once the search ``submit`` has a trial; then its stderr, when it ends
    (killed if the test fails first)."""
    try:
        wait_for(runs, lambda trials: bool(trials))
        act()
        return submit.communicate(timeout=300)[1]
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.communicate()


def _workers_named(driver: int, name: str) -> list[psutil.Process]:
    """The Ray workers of the search process ``driver`` whose command line has ``name``."""
    found = []
    try:
        children = psutil.Process(driver).children(recursive=True)
    except psutil.NoSuchProcess:  # the search ended
        return found
    for process in {p.pid: p for p in children + _marked(driver)}.values():  # each once
        try:
            if name in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:  # gone in between
            continue
    return found


def _marked(driver: int) -> list[psutil.Process]:
    from nas.service.tune_glue import DRIVER_MARK

    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(DRIVER_MARK) == str(driver):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_doctor_says_what_is_ready_and_what_is_not(tmp_path: Path, ml100k) -> None:
    runs = tmp_path / "runs"
    ready = nas(runs, "doctor", "--json")
    assert ready.returncode == 0, ready.stdout + ready.stderr
    report = json.loads(ready.stdout)
    assert report["ok"] is True
    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) == {"ray", "registry", "mlflow", "data", "runs", "kernels", "gpus"}
    assert checks["gpus"]["ok"]  # none is not a failure: candidates train on the CPU
    assert checks["kernels"]["ok"] and "rowwise_adam" in checks["kernels"]["found"]
    assert "movielens-100k" in checks["data"]["found"]
    assert not runs.exists(), "a doctor only looks"
    broken = nas(runs, "doctor", "--json", "--address", f"127.0.0.1:{_free_port()}")
    assert broken.returncode == 1
    report = json.loads(broken.stdout)
    assert report["ok"] is False
    (ray,) = [c for c in report["checks"] if c["name"] == "ray"]
    assert not ray["ok"] and "nothing answers" in ray["found"]
    runs.mkdir()  # a local MLflow store that is not a database is not ready either
    (runs / "mlflow.db").write_text("not a database")
    broken = nas(runs, "doctor", "--json")
    assert broken.returncode == 1
    (mlflow,) = [c for c in json.loads(broken.stdout)["checks"] if c["name"] == "mlflow"]
    assert not mlflow["ok"] and "mlflow.db is not a sqlite database" in mlflow["found"]


def test_a_runs_folder_that_is_a_file_is_named(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.write_text("not a folder")
    done = nas(runs, "submit", str(write_search(tmp_path)))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "RECNAS_RUNS_DIR" in done.stderr and "is a file" in done.stderr


def test_a_disk_without_room_for_a_program_or_checkpoint_is_an_error_naming_the_file(
    ml100k, tmp_path: Path
) -> None:
    """Torch's zip writer, given a path on a disk that fills up, throws from its destructor
    and the C++ runtime aborts the process (exit 134, a screen of C++ frames): `nas export`
    onto a full disk did. Through `nas.core.disk.torch_file` it is the file system's error,
    naming the file, and nothing half-written is left. A file size limit (`ulimit -f`) makes
    the disk too small here; the pytest process itself would die without the fix."""
    import errno
    import resource

    from nas.service.model_export import export_loaded
    from tests.test_fp8_serving import _loaded
    from workers import checkpoint

    loaded = _loaded(ml100k, tmp_path, "dcnv2.json", None)
    example = loaded.features(ml100k.raw_rows("test", 8)).inputs()
    saved = tmp_path / "job.pt"
    checkpoint.save(saved, {"step": 1, "weights": loaded.network.state_dict()})
    before = saved.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, hard))  # below the weights' size
    try:
        for fmt, name in (("torch-export", "model.pt2"), ("torchscript", "model.pt")):
            with pytest.raises(OSError) as raised:
                export_loaded(loaded, example, fmt, tmp_path / "out", "test")
            assert raised.value.errno == errno.EFBIG
            assert raised.value.filename == str(tmp_path / ".out.tmp" / name)
        with pytest.raises(OSError) as raised:
            checkpoint.save(saved, {"step": 2, "weights": loaded.network.state_dict()})
        assert raised.value.errno == errno.EFBIG and raised.value.filename.endswith(".tmp")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.pt", "model.json", "weights.pt"]
    assert saved.read_bytes() == before  # the previous checkpoint, whole
    kept = checkpoint.load(saved)
    assert kept["step"] == 1 and kept["weights"].keys() == loaded.network.state_dict().keys()


@pytest.mark.parametrize(
    ("damage", "file", "words"),
    [
        ("truncate", "weights.pt", "RuntimeError: PytorchStreamReader failed"),
        ("truncate", "model.json", "JSONDecodeError"),
        ("no schema", "model.json", "KeyError"),
        ("delete", "weights.pt", "FileNotFoundError"),
    ],
)
def test_a_registered_models_damaged_file_is_named(ml100k, tmp_path: Path, damage, file, words):
    """A registered model's files changed after it was logged (a truncated copy, an edited
    JSON) fail `nas predict` and `nas export` with the file named, not a traceback."""
    from nas.core.errors import NasError
    from nas.service.serving import LoadedModel
    from tests.test_fp8_serving import _loaded

    _loaded(ml100k, tmp_path, "dcnv2.json", None)
    path = tmp_path / file
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "delete":
        path.unlink()
    else:
        path.write_text(
            json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "schema"})
        )
    with pytest.raises(NasError) as raised:
        LoadedModel.from_files(tmp_path / "model.json", tmp_path / "weights.pt")
    said = str(raised.value)
    assert said.startswith(f"{path} is not a recnas model's file ({words}"), said
    assert "register it again" in said


def test_a_search_whose_raylet_is_killed_ends_failed_saying_so(tmp_path: Path) -> None:
    """Ray's driver ends its process from C++ when the local raylet dies (exit 1, a log
    line, the search left `crashed` with no reason). The search's watch on its Ray says
    what died, records the search failed with it, leaves nothing of Ray, and exits 2."""
    import psutil

    from nas.service.tune_glue import _driver_mark

    def of_search(pid: int) -> list[psutil.Process]:
        """The live processes of the local Ray that search process ``pid`` started."""
        found = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if _driver_mark(process) == str(pid) and process.status() != "zombie":
                    found.append(process)
        return found

    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=4, steps=3000, baselines="false")
    submit = start_submit(runs, path)
    killed = []

    def kill_its_raylet() -> None:
        (raylet,) = [p for p in of_search(submit.pid) if p.name() == "raylet"]
        raylet.kill()
        killed.append(raylet.pid)

    err = _once_it_trains(runs, submit, kill_its_raylet)
    said = " ".join(err.split())
    assert submit.returncode == 2, err
    assert f"error: Ray's raylet (its node process), pid {killed[0]}, was killed (SIGKILL)" in said
    assert "Traceback" not in err
    (search,) = registry_of(runs).list_searches()
    assert f"the search stopped, resumable: nas resume {search.id}" in said
    assert search.status == "failed" and "raylet" in search.message and search.pid is None
    assert all(t.status != "running" for t in registry_of(runs).trials(search.id))
    time.sleep(1)
    assert not of_search(submit.pid)  # its agents too, which outlive a dead raylet


def test_a_cluster_watch_names_this_nodes_raylet_or_the_heads_gcs_when_it_ends(
    tmp_path: Path, monkeypatch
) -> None:
    """On a cluster `nas` joined, Ray's driver ends the process from C++ some 15 s after
    this machine's raylet ends, or a minute after the head's GCS stops answering, with one
    log line. The watch says which, first. Stand-ins here: a process named raylet serving
    the node's socket, and a listening port for the GCS (Ray's wait set to 2 s)."""
    import socket
    import subprocess
    import sys
    from types import SimpleNamespace

    from nas.service.tune_glue import RayWatch

    monkeypatch.setenv("RAY_gcs_rpc_server_reconnect_timeout_s", "2")
    (tmp_path / "raylet").symlink_to(sys.executable)  # its process is named raylet
    sockets = str(tmp_path / "sockets" / "raylet")
    gcs = socket.create_server(("127.0.0.1", 0))
    node = SimpleNamespace(
        head=False,
        all_processes={},
        gcs_address=f"127.0.0.1:{gcs.getsockname()[1]}",
        raylet_socket_name=sockets,
    )

    def raylet() -> subprocess.Popen:
        command = [str(tmp_path / "raylet"), "-c", "import time; time.sleep(60)"]
        started = subprocess.Popen([*command, f"--raylet_socket_name={sockets}"])
        time.sleep(0.5)  # named and running
        return started

    def first_death(ends) -> list[str]:
        deaths: list[str] = []
        watch = RayWatch(deaths.append, node)
        try:
            time.sleep(2.5)
            assert not deaths, deaths  # both alive: nothing said
            ends()
            deadline = time.time() + 10
            while not deaths and time.time() < deadline:
                time.sleep(0.1)
            return deaths
        finally:
            watch.stop()

    first = raylet()
    try:
        said = first_death(first.kill)
        assert said == [f"Ray's raylet on this machine, pid {first.pid}, ended"]
    finally:
        first.kill()
        first.wait()
    second = raylet()
    try:
        said = first_death(gcs.close)
        assert said == [
            f"the Ray cluster's head at {node.gcs_address} (its GCS) stopped answering 1 s ago"
        ]
    finally:
        second.kill()
        second.wait()


def test_a_search_whose_dataset_goes_missing_stops_resumable_not_failing_every_candidate(
    tmp_path: Path,
) -> None:
    """Trials map the prepared folder's files; a folder deleted or moved under a search
    (a cleanup, a disk unmounted) failed every candidate left, each with the same missing
    file, and the search ended `completed` with nothing: its budget spent. Now the first
    trial that cannot read it stops the search, failed and resumable, saying how to prepare
    it again, and that trial is left to run again on the resume."""
    import shutil

    from tests import nas_process
    from tests.conftest import CACHE
    from tests.test_search import REPO, env_for

    runs = runs_with_store(tmp_path)
    cache = tmp_path / "cache"
    shutil.copytree(CACHE / "movielens-100k", cache / "movielens-100k")
    path = write_search(tmp_path, candidates=6, steps=200, baselines="false")
    env = {**env_for(runs), "RECNAS_CACHE_DIR": str(cache)}
    submit = nas_process.start(["submit", str(path)], env, REPO)
    err = _once_it_trains(
        runs, submit, lambda: (cache / "movielens-100k").rename(cache / "elsewhere")
    )
    said = " ".join(err.split())
    assert submit.returncode == 2 and "Traceback" not in err, err
    # the first trial after the move opens the folder; a running one, its next file
    assert f"{cache / 'movielens-100k'} cannot be read" in said
    assert "prepare it again (nas data prepare movielens-100k) first" in said
    (search,) = registry_of(runs).list_searches()
    assert f"resumable: nas resume {search.id}" in said and search.status == "failed"
    statuses = [t.status for t in registry_of(runs).trials(search.id)]
    assert "failed" not in statuses and "cancelled" in statuses, statuses


@pytest.mark.slow
def test_a_dataset_prepared_again_under_a_search_stops_it_until_the_data_is_as_it_was(
    tmp_path: Path,
) -> None:
    """Trials map the prepared files anew; a schema changed and prepared again under a
    search trained its later candidates on other data, and the front mixed the two. Now the
    first trial to read it stops the search; its resume is refused while the data differs,
    and goes on once the schema the search started on is prepared again."""
    from nas.data import prepare_dataset
    from tests import nas_process
    from tests.data.test_schema_file import schema_file
    from tests.test_search import REPO, env_for, nas_here

    runs = runs_with_store(tmp_path)
    cache = tmp_path / "cache"
    path = schema_file(tmp_path / "logs")
    search = tmp_path / "again.yaml"
    search.write_text(
        f"name: again\ndataset: {path}\nspace: {{name: ctr_stack, options: {{max_depth: 2}}}}\n"
        "strategy: random\nbudget: {candidates: 4, steps: 300}\ntrain: {batch_size: 64}\n"
        "resources: {concurrency: 1}\ninclude_baselines: false\n"
    )
    env = {**env_for(runs), "RECNAS_CACHE_DIR": str(cache)}
    original = path.read_text()

    def prepare_another_schema() -> None:
        path.write_text(original.replace("min_freq: 20", "min_freq: 2"))
        prepare_dataset(str(path), cache)

    submit = nas_process.start(["submit", str(search)], env, REPO)
    err = _once_it_trains(runs, submit, prepare_another_schema)
    said = " ".join(err.split())
    assert submit.returncode == 2 and "Traceback" not in err, err
    assert f"the prepared dataset my_ctr at {cache / 'my_ctr'} was prepared again after" in said
    assert f"it resumes once the data is as it was (nas data prepare {path}, with" in said
    (found,) = registry_of(runs).list_searches()
    assert found.status == "failed" and found.data_version is not None
    refused = nas_process.run(["resume", found.id], env, REPO, 300)
    assert refused.returncode == 2, refused.stderr
    assert f"search {found.id} ran on my_ctr as prepared then (version {found.data_version})" in (
        " ".join(refused.stderr.split())
    )
    assert registry_of(runs).get_search(found.id).sessions == found.sessions  # not started
    path.write_text(original)
    done = nas_process.run(["resume", found.id], env, REPO, 300)
    assert done.returncode == 0, done.stderr
    trials = registry_of(runs).trials(found.id)
    assert registry_of(runs).get_search(found.id).status == "completed"
    assert [t.status for t in trials] == ["completed"] * 4
    # The version the search ran on, as `nas status` and `nas data inspect` show it
    inspected = nas_here(runs, "data", "inspect", "my_ctr", "--json", RECNAS_CACHE_DIR=str(cache))
    status = nas_here(runs, "status", found.id, "--json")
    assert json.loads(inspected.stdout)["version"] == found.data_version
    assert json.loads(status.stdout)["data_version"] == found.data_version


def test_a_trial_over_its_time_limit_is_killed_and_fails_without_a_retry(tmp_path: Path) -> None:
    """A hung trial (a stalled disk, a stopped process) never reports, so nothing ended it
    and the search waited for good. With `resources.max_trial_minutes` its worker is killed
    at the limit; it fails with the reason (another attempt would hang too) and the search
    goes on to its end."""
    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=1, steps=1_000_000, baselines="false")
    text = path.read_text().replace("memory_gb_per_trial: 4}", "max_trial_minutes: 0.1}")
    path.write_text(text)
    assert "max_trial_minutes: 0.1" in text
    started = time.time()
    done = nas(runs, "submit", str(path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert time.time() - started < 120  # the million steps would take an hour
    (search,) = registry_of(runs).list_searches()
    (trial,) = registry_of(runs).trials(search.id)
    assert search.status == "completed" and trial.status == "failed" and trial.attempts == 1
    assert trial.error == "ran over resources.max_trial_minutes (0.1) and was killed"
