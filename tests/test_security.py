"""A local search's Ray, seen from the network: what listens, who may talk to it, what is left
after a kill -9.

Ray 2.60 binds its GCS, raylet, workers and driver to every interface, whatever node address
it is given; it cannot be held to loopback. So the guarantee checked here is: every socket a
search listens on is on loopback, or refuses a client that lacks the session's token, and the
token is nowhere on disk. (See ``nas/service/tune_glue.py``.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from nas.service.tune_glue import DRIVER_MARK, THROWAWAY_PREFIX
from tests.conftest import runs_with_store
from tests.test_reliability import _workers_named
from tests.test_search import nas, start_submit, wait_for, write_search

INTRUDER = """
import ray
ray.init(address="{address}", logging_level=40)
print("INTRUDER RAN", ray.get(ray.remote(lambda: 42).remote()))
"""


def _search_processes(driver: int) -> list[psutil.Process]:
    """The driver and every process of its local Ray (they carry the driver's mark)."""
    found = [psutil.Process(driver)]
    for process in psutil.process_iter():
        try:
            if process.environ().get(DRIVER_MARK) == str(driver) and process.pid != driver:
                found.append(process)
        except psutil.Error:
            continue
    return found


def _listening(processes: list[psutil.Process]) -> list[tuple[str, str, int]]:
    sockets = []
    for process in processes:
        try:
            for conn in process.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    sockets.append((process.name(), conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            continue
    return sockets


def _network_address() -> str:
    """An address of this machine other than loopback (what a neighbour would dial)."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family.name == "AF_INET" and not address.address.startswith("127."):
                return address.address
    return "127.0.0.1"


def _loopback(ip: str) -> bool:
    return ip.startswith("127.") or ip == "::1"


@pytest.mark.slow
def test_a_local_search_listens_on_loopback_or_behind_its_token_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    runs = runs_with_store(tmp_path)
    submit = start_submit(runs, write_search(tmp_path, candidates=2, steps=3000, baselines="false"))
    try:
        wait_for(runs, lambda trials: any(t.status == "running" for t in trials))
        time.sleep(2)  # the workers' own servers
        processes = _search_processes(submit.pid)
        commands = [" ".join(p.cmdline()) for p in processes if p.is_running()]
        # one local node: nothing to stream to a driver that asks for no logs, nor to scale
        assert not [c for c in commands if "monitor.py" in c], commands  # log, autoscaler
        assert any("dashboard/agent.py" in c or "DashboardAgent" in c for c in commands)
        sockets = _listening(processes)
        assert sockets, "a running search listens somewhere (Ray's GCS at least)"
        exposed = [s for s in sockets if not _loopback(s[1])]
        gcs = [s for s in exposed if s[0] == "gcs_server"]
        assert gcs, f"expected Ray's GCS among the exposed sockets: {sockets}"
        for worker in _workers_named(submit.pid, "ImplicitFunc"):
            worker.suspend()  # its training would only take the cores from here on
        # a neighbour dialling the GCS over the network, without the token, is refused. Ray's
        # client retries a refused connection 20 times, a second apart; 3 tries say the same
        # (a GCS that let it in would answer the first).
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        env["RAY_NUM_REDIS_GET_RETRIES"] = "3"
        for mode in (
            {"RAY_AUTH_MODE": "disabled"},
            {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "x"},
        ):
            intruder = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    INTRUDER.format(address=f"{_network_address()}:{gcs[0][2]}"),
                ],
                env={**env, **mode},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert intruder.returncode != 0 and "INTRUDER RAN" not in intruder.stdout, mode
        # the token lives in the search's processes only: not in ~/.ray, not in the runs folder
        gcs_process = next(p for p in processes if p.name() == "gcs_server")
        token = gcs_process.environ().get("RAY_AUTH_TOKEN")  # the driver passed it on
        assert token and len(token) >= 32 and gcs_process.environ()["RAY_AUTH_MODE"] == "token"
        home_token = Path.home() / ".ray" / "auth_token"
        assert not home_token.exists() or token not in home_token.read_text()
        assert not any(token in p.read_text(errors="ignore") for p in runs.glob("*") if p.is_file())
        # Ray's session files are in a folder private to this user
        temp = _ray_temp(processes)
        assert temp.stat().st_mode & 0o077 == 0, f"{temp} is open to others"
        _killed_search_is_reaped(runs, submit)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.communicate()


def _ray_temp(processes: list[psutil.Process]) -> Path:
    """The private folder around the temp folder that the search gave its local Ray."""
    gcs_process = next(p for p in processes if p.name() == "gcs_server")
    log_dir = next(a for a in gcs_process.cmdline() if a.startswith("--log_dir="))
    return Path(log_dir.removeprefix("--log_dir=")).parent.parent.parent  # .../r/session_*/logs


def _killed_search_is_reaped(runs: Path, submit: subprocess.Popen) -> None:
    """kill -9 of the driver: what it leaves of Ray (its agents outlive it) is reaped by the
    next start on this machine, and the search stays resumable."""
    driver = submit.pid
    before = _search_processes(driver)[1:]
    assert before, "the search started Ray processes"
    temp = _ray_temp(before)
    os.kill(driver, signal.SIGKILL)
    submit.communicate()
    from nas.service.tune_glue import reap_orphans

    time.sleep(1)
    reap_orphans()
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(p) for p in before):
        time.sleep(0.2)
    left = [p for p in before if _alive(p)]
    assert not left, f"left running after the driver died: {[p.pid for p in left]}"
    # tmp_path is too long for Ray's sockets: its files went to a folder in /tmp, now gone
    assert temp.name.startswith(THROWAWAY_PREFIX) and not temp.exists(), temp
    listed = nas(runs, "list")  # the search itself is resumable: not stuck
    assert listed.returncode == 0, listed.stderr


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
