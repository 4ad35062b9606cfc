"""The team setup, for real: a PostgreSQL registry, an MLflow tracking server backed by that
Postgres, and a two-node Ray cluster, all started on this machine the way docs/team-setup.md
says.

PostgreSQL comes from the machine's server binaries (Debian's ``postgresql`` package:
/usr/lib/postgresql/*/bin). Without them these tests skip, unless RECNAS_REQUIRE_POSTGRES is
set (CI sets it: there, a missing server is a failure, not a skip).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from nas.service.registry import Registry
from tests import nas_process
from tests.mlflow_server import mlflow_server as serving_mlflow
from tests.test_search import REPO, env_for, nas, start_submit, write_search

# `make test` runs a test file on one worker (xdist's loadfile): the module fixtures
# (Postgres, an MLflow server) start once.
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server on 127.0.0.1 (trust auth, this test only); its URL."""
    bindir = _postgres_bin()
    if bindir is None:
        if os.environ.get("RECNAS_REQUIRE_POSTGRES"):
            pytest.fail("no PostgreSQL server binaries (apt-get install postgresql)")
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    home = Path(tempfile.mkdtemp(prefix="recnas-pg-"))
    run_as: list[str] = []
    if os.getuid() == 0:  # initdb refuses to run as root: run the server as `postgres`
        shutil.chown(home, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def pg(tool: str, *args: str) -> None:
        subprocess.run(
            [*run_as, str(bindir / tool), *args], check=True, capture_output=True, timeout=120
        )

    pg("initdb", "-D", f"{home}/data", "-U", "recnas", "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg("pg_ctl", "-D", f"{home}/data", "-o", options, "-l", f"{home}/log", "-w", "start")
    try:
        for db in ("registry", "mlflow"):
            pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "recnas", db)
        yield f"postgresql://recnas@127.0.0.1:{port}"
    finally:
        pg("pg_ctl", "-D", f"{home}/data", "-m", "immediate", "stop")
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def mlflow_server(postgres: str):
    """`mlflow server` backed by the Postgres above, artifacts served from a folder."""
    artifacts = Path(tempfile.mkdtemp(prefix="recnas-artifacts-"))
    backend = f"{postgres.replace('postgresql://', 'postgresql+psycopg://')}/mlflow"
    try:
        with serving_mlflow(backend, artifacts, _free_port()) as uri:
            yield uri, artifacts
    finally:
        shutil.rmtree(artifacts, ignore_errors=True)


def test_a_search_on_postgres_and_an_mlflow_server_survives_kill_9_and_resumes(
    tmp_path: Path, postgres: str, mlflow_server
) -> None:
    """The team setup: the registry on Postgres, MLflow on a server (itself on Postgres).
    Killed mid-search, the search reads crashed; resumed, it ends with each candidate once
    in the registry and in MLflow, and nothing written to the runs folder's local stores."""
    url = f"{postgres}/registry"
    uri, artifacts = mlflow_server
    runs = tmp_path / "runs"
    path = write_search(tmp_path, strategy="optuna", candidates=4, steps=150, baselines="false")
    flags = ("--registry-url", url, "--tracking-uri", uri)
    submit = start_submit(runs, path, *flags, start_new_session=True)
    registry = Registry(url)
    deadline = time.time() + 300
    while time.time() < deadline:
        searches = registry.list_searches()
        if searches and sum(t.status == "completed" for t in registry.trials(searches[0].id)):
            break
        time.sleep(0.5)
    os.kill(submit.pid, signal.SIGKILL)
    submit.communicate()
    (search,) = registry.list_searches()
    listing = nas(runs, "list", "--json", "--registry-url", url)
    assert json.loads(listing.stdout)[0]["status"] == "crashed", listing.stderr
    done = nas(runs, "resume", search.id, "--registry-url", url)
    assert done.returncode == 0, done.stderr
    trials = registry.trials(search.id)
    assert registry.get_search(search.id).status == "completed"
    assert [t.status for t in trials] == ["completed"] * 4
    assert len({t.arch_id for t in trials}) == 4
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tiny")
    found = client.search_runs([experiment.experiment_id])
    children = [r for r in found if "mlflow.parentRunId" in r.data.tags]
    assert sorted(int(r.data.tags["trial"]) for r in children) == [t.number for t in trials]
    assert all("ne" in r.data.metrics for r in children)
    assert {r.data.tags["search_id"] for r in found} == {search.id}
    # artifacts went through the server into its destination, not into the runs folder
    assert any(artifacts.rglob("spec.json"))
    assert not (runs / "mlflow.db").exists() and not (runs / "registry.db").exists()
    registry.engine.dispose()


def test_a_search_runs_on_a_two_node_ray_cluster(tmp_path: Path) -> None:
    """`ray start --head` plus a second `ray start --address`: the code travels to the nodes
    as runtime_env py_modules, the data through the object store, trials land on both."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rc")  # short: Ray's socket paths must stay < 108 bytes
    ray = str(Path(sys.executable).parent / "ray")
    # Every process of this cluster carries the mark, so that the end stops these and no
    # other Ray on the machine (`ray stop` would end every local search running beside it).
    mark = f"cluster-{port}-{os.getpid()}"
    env = {**env_for(tmp_path / "runs"), "RAY_AUTH_MODE": "disabled", CLUSTER_MARK: mark}

    def ray_start(*args: str) -> None:
        subprocess.run(
            [ray, "start", "--num-cpus", "1", "--disable-usage-stats", *args],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )

    ray_start("--head", "--port", str(port), "--temp-dir", temp, "--include-dashboard", "false")

    def submit(search: Path) -> subprocess.CompletedProcess:
        command = ["submit", str(search), "--address", f"127.0.0.1:{port}", "--json"]
        return nas_process.run(command, env, REPO, 600)

    try:
        ray_start("--address", f"127.0.0.1:{port}")
        runs = tmp_path / "runs"
        path = write_search(
            tmp_path, candidates=4, steps=200, baselines="false", concurrency=2
        )  # a trial on each node
        done = submit(path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["status"] == "completed"
        registry = Registry(f"sqlite:///{runs / 'registry.db'}")
        (search,) = registry.list_searches()
        trials = registry.trials(search.id)
        assert [t.status for t in trials] == ["completed"] * 4
        assert len({t.timings["node"] for t in trials}) == 2, "trials ran on both nodes"
        assert not (runs / "ray").exists(), "a cluster search must not start a local Ray"
        # Data parallel across the nodes: a candidate's two ranks take a CPU on each. ASHA
        # stops one candidate at its rung: its ranks must go with it, or the next one
        # could never start (each node's only CPU would stay taken).
        data = yaml.safe_load(path.read_text())
        data["name"] = "parallel"
        data["budget"] |= {"candidates": 2, "steps": 40, "select_best": {"every_steps": 20}}
        data["resources"] |= {"concurrency": 1, "workers_per_trial": 2}
        data["scheduler"] = {"name": "asha", "options": {"grace_steps": 20, "reduction_factor": 2}}
        parallel = tmp_path / "parallel.yaml"
        parallel.write_text(yaml.safe_dump(data))
        done = submit(parallel)
        assert done.returncode == 0, done.stderr
        found = next(s for s in registry.list_searches() if s.name == "parallel")
        assert sorted(t.status for t in registry.trials(found.id)) == ["completed", "stopped"]
        # The head's GCS killed under a search: Ray's driver would end the process after its
        # wait (20 s here, 60 by default) with one log line, the search left `crashed`.
        # The search says what happened first, and ends failed, resumable.
        data["name"], data["scheduler"] = "headless", None
        data["budget"] = {"candidates": 2, "steps": 20000}  # still training when killed
        data["resources"] |= {"workers_per_trial": 1}
        headless = tmp_path / "headless.yaml"
        headless.write_text(yaml.safe_dump(data))
        env["RAY_gcs_rpc_server_reconnect_timeout_s"] = "20"
        command = ["submit", str(headless), "--address", f"127.0.0.1:{port}"]
        process = nas_process.start(command, env, REPO)
        try:
            deadline = time.time() + 120
            while time.time() < deadline:
                time.sleep(0.5)
                search = next((s for s in registry.list_searches() if s.name == "headless"), None)
                if search and any(t.status == "running" for t in registry.trials(search.id)):
                    break
            (gcs,) = [p for p in _marked(mark) if p.name() == "gcs_server"]
            gcs.kill()
            _suspend_trials(mark)  # their 20000 steps would only take the cores from here on
            _, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        said = " ".join(err.split())
        assert process.returncode == 2 and "Traceback" not in err, err
        assert f":{port} (its GCS) stopped answering 10 s ago" in said
        assert f"the search stopped, resumable: nas resume {search.id}" in said
        search = registry.get_search(search.id)
        assert search.status == "failed" and "stopped answering" in search.message
        registry.engine.dispose()
    finally:
        _stop_marked(mark)
        shutil.rmtree(temp, ignore_errors=True)


CLUSTER_MARK = "RECNAS_TEST_CLUSTER"


def _stop_marked(mark: str) -> None:
    """SIGTERM (and SIGCONT), then after 10 s SIGKILL, to every process whose environment holds
    ``mark``."""
    import psutil

    processes = _marked(mark)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
            process.resume()  # one suspended hears it now
    _, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive + _marked(mark):
        with contextlib.suppress(psutil.Error):
            process.kill()


def _suspend_trials(mark: str) -> None:
    """SIGSTOP to the Tune trials among the processes whose environment holds ``mark``."""
    import psutil

    for process in _marked(mark):
        with contextlib.suppress(psutil.Error):
            if "ImplicitFunc" in " ".join(process.cmdline()):
                process.suspend()


def _marked(mark: str) -> list:
    """The live processes whose environment holds ``mark``."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(CLUSTER_MARK) == mark:
                found.append(process)
        except psutil.Error:
            continue
    return found
