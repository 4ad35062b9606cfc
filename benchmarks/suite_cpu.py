"""Where the test suite's CPU goes, by kind of process: a command (by default `make test`'s
pytest) run while every process on the machine is sampled from /proc (Linux only).

    .venv/bin/python benchmarks/suite_cpu.py [--interval 0.5] [-- COMMAND ...]

The suite keeps both cores busy from start to end, so its time is its CPU time over the
cores, and most of that CPU is spent in processes that `time` does not count: Ray's
daemons and workers are not waited for by the test processes. This samples each process's
user+system time every ``--interval`` seconds (a process is keyed by its pid and start
time, so a reused pid is a new process), sorts it into a kind by its command line and
name (a Tune trial's worker, Ray's agents, a forked `nas` command, a test process...), and
prints per kind the processes seen and their CPU seconds. A process that lives shorter
than one interval is missed; CPU a process spent before the command started is left out.
The reference in the same run: the command's wall time times the cores, against the CPU
seen.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
# `make test`'s command (the Makefile's PYTEST)
PYTEST = [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadfile", "--no-loadscope-reorder"]
TICK = os.sysconf("SC_CLK_TCK")

# (what the command line holds, the kind), first match wins; a Ray worker's kind is its
# process title (ray::ImplicitFunc.train for a Tune trial, ray::IDLE once it is free).
KINDS = (
    ("multiprocessing.forkserver", "nas command (forked by the tests)"),
    ("multiprocessing.spawn", "spawned process (data-parallel ranks)"),
    ("exec(eval(sys.stdin", "test process (xdist worker)"),
    ("default_worker.py", "ray worker"),
    ("dashboard/agent.py", "ray daemon: dashboard agent"),
    ("runtime_env/agent", "ray daemon: runtime env agent"),
    ("log_monitor", "ray daemon: log monitor"),
    ("monitor.py", "ray daemon: autoscaler monitor"),
    ("dashboard/dashboard.py", "ray daemon: dashboard head"),
    ("gcs_server", "ray daemon: gcs"),
    ("raylet", "ray daemon: raylet"),
    ("mlflow server", "mlflow server or UI"),
    ("uvicorn", "mlflow server or UI"),  # MLflow's UI of `nas dashboard`
    ("postgres", "postgres"),
    ("chrom", "chromium"),
    ("nas.cli", "nas command (a fresh interpreter)"),
    ("pytest", "pytest"),
)


# Ray's daemons by process name (the raylet's command line names the worker's script) or
# by the title a Python one gives itself.
NAMED = {
    "raylet": "ray daemon: raylet",
    "gcs_server": "ray daemon: gcs",
    "ray::DashboardAgent": "ray daemon: dashboard agent",
    "ray::RuntimeEnvAgent": "ray daemon: runtime env agent",
}


def kind_of(command: str, name: str) -> str:
    for named, kind in NAMED.items():  # the kernel keeps 15 characters of a name
        if named[:15] == name or command.startswith(named):
            return kind
    for mark, kind in KINDS:
        if mark in command:
            return f"ray worker {name}" if kind == "ray worker" else kind
    if name.startswith("ray::"):  # a worker whose title replaced its command line
        return f"ray worker {name}"
    return f"other: {' '.join(command.split()[:3])[:60] or name}"


def sample(seen: dict) -> None:
    """Every process's CPU seconds so far into ``seen`` (keyed by pid and start time), with
    its kind."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            key = (entry.name, fields[19])
            with open(f"/proc/{entry.name}/comm") as f:
                name = f.read().strip()
            if key not in seen:
                with open(f"/proc/{entry.name}/cmdline") as f:
                    command = f.read().replace("\0", " ")
                seen[key] = [kind_of(command, name), cpu]
            else:
                seen[key][1] = cpu
                if seen[key][0].startswith("ray worker"):  # its title changes with its task
                    seen[key][0] = f"ray worker {name}"
        except (OSError, IndexError, ValueError):  # gone in between
            continue


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("command", nargs="*", help="what to run (default: make test's pytest)")
    args = parser.parse_args()
    if not Path("/proc/self/stat").exists():
        parser.error("this reads /proc: Linux only")
    if not args.interval > 0:
        parser.error(f"--interval: must be a positive number of seconds, got {args.interval}")
    command = args.command or PYTEST
    seen: dict = {}
    sample(seen)
    started = {key: cpu for key, (_, cpu) in seen.items()}  # CPU spent before the command
    began = time.time()
    try:
        process = subprocess.Popen(command, cwd=REPO)
    except OSError as err:
        parser.error(f"cannot run {command[0]}: {err.strerror}")
    while process.poll() is None:
        time.sleep(args.interval)
        sample(seen)
    wall = time.time() - began
    cpu, count = Counter(), Counter()
    for key, (kind, seconds) in seen.items():
        spent = seconds - started.get(key, 0.0)
        if spent > 0:
            cpu[kind] += spent
            count[kind] += 1
    total = sum(cpu.values())
    table = Table(title=f"CPU by kind of process: {' '.join(command)}")
    for column in ("kind", "processes", "CPU s", "share"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind, seconds in cpu.most_common():
        if seconds >= 0.5:
            table.add_row(kind, str(count[kind]), f"{seconds:,.1f}", f"{seconds / total:.1%}")
    console = Console()
    console.print(table)
    cores = os.cpu_count() or 1
    console.print(
        f"exit {process.returncode}; wall {wall:,.0f} s x {cores} cores = {wall * cores:,.0f} "
        f"core-s; CPU seen {total:,.0f} s ({total / wall:.2f} cores busy on average)"
    )
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
