"""`benchmarks/suite_cpu.py`: the suite's CPU by kind of process, sampled from /proc."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.test_search import REPO

SCRIPT = REPO / "benchmarks" / "suite_cpu.py"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _script():
    spec = importlib.util.spec_from_file_location("suite_cpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("command", "name", "kind"),
    [
        ("/v/ray/core/src/ray/raylet/raylet --python_worker_command=default_worker.py", "raylet",
         "ray daemon: raylet"),
        ("ray::DashboardAgent", "ray::DashboardA", "ray daemon: dashboard agent"),
        ("python -u /v/ray/dashboard/agent.py", "python", "ray daemon: dashboard agent"),
        ("python setup_worker.py default_worker.py --node-ip-address=x", "python",
         "ray worker python"),
        ("ray::ImplicitFunc.train", "ray::ImplicitFu", "ray worker ray::ImplicitFu"),
        ("python -c from multiprocessing.forkserver import main; main(3)", "python",
         "nas command (forked by the tests)"),
        ("python -m nas.cli submit s.yaml", "python", "nas command (a fresh interpreter)"),
        ("/usr/bin/sleep 10", "sleep", "other: /usr/bin/sleep 10"),
    ],
)  # fmt: skip
def test_a_process_is_sorted_by_its_command_line_and_name(command, name, kind) -> None:
    assert _script().kind_of(command, name) == kind


def test_the_cpu_of_a_child_is_seen_and_its_exit_code_passed_on() -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}]); sys.exit(3)"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--interval", "0.1", "--", sys.executable, "-c", child],
        capture_output=True, text=True, cwd=REPO, env={"COLUMNS": "200", "PATH": ""}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    rows = [line.split("│") for line in done.stdout.splitlines() if line.startswith("│")]
    seen = {row[1].strip(): float(row[3].replace(",", "")) for row in rows}
    busy_kind = f"other: {sys.executable} -c import"[:67]
    assert seen.get(busy_kind, 0) >= 1.2, done.stdout
    assert "exit 3;" in done.stdout
