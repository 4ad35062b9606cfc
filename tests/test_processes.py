"""Children that end with their parent: the watching thread that macOS relies on, run here
on Linux (the kernel's parent-death signal is tested with the commands that use it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent

# A parent that starts a watching child, says its pid, then sleeps until it is killed.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
child.wait()
"""
CHILD = """
import os, time
from nas.core.processes import watch_parent
watch_parent(os.getppid(), every=0.05)
time.sleep(60)
"""


def test_a_watching_child_ends_when_its_parent_is_killed_by_sigkill() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    child = psutil.Process(int(parent.stdout.readline()))
    try:
        time.sleep(0.5)
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        child.wait(timeout=10)  # raises psutil.TimeoutExpired if it outlives its parent
    finally:
        if child.is_running():
            os.kill(child.pid, signal.SIGKILL)
        parent.stdout.close()
