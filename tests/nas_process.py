"""`nas` commands in processes of their own, without each paying for its imports.

Before it does anything, a `nas submit` spends about 9 s of CPU importing torch, Ray, MLflow
and matplotlib (2 cores, 2026-12-05), and the end-to-end tests run about 60 such commands.
Here each command is forked from a server process (multiprocessing's forkserver) that
imported those libraries once. The command still runs in a process of its own, started from
the CLI's ``main`` as the `nas` script starts it: its own pid, environment, working folder,
stdout and stderr, session and signals, and the Ray and stores it starts. The server imports
no recnas module that reads the environment or makes a console, so those see the command's.

What a fork cannot catch is an import that fails only in a fresh interpreter:
``tests/test_cli.py`` runs the real `nas` script for that. ``RECNAS_TEST_FORK=0`` runs every
command as a plain subprocess instead.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

# What a `nas` command imports that takes time: the libraries, and the recnas layers below
# the CLI (none reads the environment at import, bar TRITON_INTERPRET, which is the same).
PRELOAD = [
    "torch",
    "mlflow",
    "mlflow.store.tracking.sqlalchemy_store",
    "ray.tune",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "plotly.graph_objects",
    "nas.service.controller",
    "nas.service.retrain",
    "nas.service.serving",
    "workers.search_trial",
    "dashboards.pareto_plot",
]
FORK = os.environ.get("RECNAS_TEST_FORK", "1") != "0"
_context: multiprocessing.context.ForkServerContext | None = None
_forked: list[NasProcess] = []  # killed if still running when the test process exits


def _server() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


class NasProcess:
    """A running `nas` command, as much of ``subprocess.Popen`` as the tests use: ``pid``,
    ``returncode``, ``poll``, ``wait``, ``communicate`` (its whole output, as text),
    ``send_signal``, ``kill``."""

    def __init__(
        self, args: list[str], env: dict[str, str], cwd: Path, new_session: bool, fork: bool
    ):
        self.args = ["nas", *args]
        self.returncode: int | None = None
        self.forked = fork
        self._folder = Path(tempfile.mkdtemp(prefix="nas-output-"))
        self._outputs = (self._folder / "stdout", self._folder / "stderr")
        if fork:
            self._process = _server().Process(
                target=_command, args=(args, env, str(cwd), self._outputs, new_session)
            )
            self._process.start()
            self.pid = self._process.pid
            _forked.append(self)
        else:
            with self._outputs[0].open("wb") as out, self._outputs[1].open("wb") as err:
                self._popen = subprocess.Popen(
                    [sys.executable, "-m", "nas.cli", *args],
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=new_session,
                    preexec_fn=_foreground_ctrl_c,
                )
            self.pid = self._popen.pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._process.exitcode if self.forked else self._popen.poll()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.forked:
            self.returncode = self._popen.wait(timeout)
            return self.returncode
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        out, err = (path.read_text(errors="replace") for path in self._outputs)
        shutil.rmtree(self._folder, ignore_errors=True)
        return out, err

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@atexit.register
def _kill_leftovers() -> None:
    """Kill the commands a failed test left running: at exit, multiprocessing waits for
    every process it started (a subprocess would be left to run on instead)."""
    for process in _forked:
        process.kill()


def start(
    args: list[str], env: dict[str, str], cwd: Path, new_session: bool = False, fork: bool = FORK
) -> NasProcess:
    return NasProcess(list(args), env, cwd, new_session, fork)


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float, fork: bool = FORK):
    """The command run to its end: a ``subprocess.CompletedProcess``; killed after
    ``timeout`` seconds (``subprocess.TimeoutExpired``), as ``subprocess.run`` does."""
    process = start(args, env, cwd, fork=fork)
    try:
        out, err = process.communicate(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _foreground_ctrl_c() -> None:
    """Ctrl-C as a command typed in a terminal gets it. A test process started in the
    background (``pytest ... &``, some CI runners) ignores SIGINT, its children inherit that,
    and a search that inherits it keeps ignoring it (``Controller._first_ctrl_c``)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _command(args, env, cwd, outputs, new_session) -> None:
    """In the forked process: become the command (session, folder, environment, standard
    streams, Ctrl-C), run the CLI, and exit as the interpreter would: exit handlers run, an
    uncaught exception's traceback on stderr and exit 1, an uncaught Ctrl-C as death by
    SIGINT."""
    if new_session:
        os.setsid()
    # Ctrl-C as a fresh Python in a terminal's foreground answers it (``_foreground_ctrl_c``)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for path, flags, fd in (
        (os.devnull, os.O_RDONLY, 0),
        (outputs[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 1),
        (outputs[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 2),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["nas", *args]
    code: int = 0
    try:
        from nas.cli import entry

        code = entry()
    except SystemExit as exit:
        if isinstance(exit.code, int) or exit.code is None:
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)
