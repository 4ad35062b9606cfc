"""Ray and Ray Tune, seen from the controller: starting or joining Ray, and the Tune hooks a
search plugs in (a ``Searcher`` that asks, a ``Callback`` that records, a ``Stopper`` that
ends the run when the search must stop, and Tune's own early-stopping schedulers, which
tell the controller whom they stopped). Each hook only forwards to the controller."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from ray.tune import Callback, Stopper
from ray.tune.schedulers import AsyncHyperBandScheduler, MedianStoppingRule, TrialScheduler
from ray.tune.schedulers.async_hyperband import _Bracket
from ray.tune.search import Searcher

from nas.core.errors import NasError
from nas.core.paths import ray_dir, ray_errors_file
from nas.search.early_stopping import RUNG_LOSSES, RUNG_METRIC, RUNG_TIME, Scheduler
from nas.search.pareto import pareto_order

# Unix socket paths must stay under 107 bytes, and Ray puts its sockets at
# <temp>/session_2026-11-30_15-03-01_837784_15325/sockets/plasma_store (62 more bytes).
MAX_RAY_TEMP_LEN = 107 - 62
DRIVER_MARK = "RECNAS_RAY_DRIVER"  # the pid of the search that started a local Ray
THROWAWAY_PREFIX = "recnas-ray-"  # Ray's folder in /tmp when the runs folder's path is long
RANKED = "ranked"  # what ASHA's rungs rank: the report's losses (the glue fills it in)
# The mkdtemp folder of the local Ray this process runs, when its runs folder's path was too
# long for Ray's sockets (``private_temp_dir``); None when Ray's files are under the runs
# folder, where they stay for the user to read.
_throwaway_temp: Path | None = None


def init_ray(address: str | None) -> bool:
    """Connect to ``address`` (or RAY_ADDRESS), else start a local Ray whose files stay under
    the runs folder. Returns whether this call started Ray (and so must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the classic reporter obeys verbose=0
    # Tune's CSV/JSON/TensorBoard result files: the registry and MLflow already keep results.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # Under an early-stopping scheduler, only searched candidates' reports carry its metric:
    # baselines, failures and rung-less reports leave it out on purpose
    # (nas/search/early_stopping.py).
    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    logging.getLogger("ray").setLevel(logging.WARNING)
    # Tune's ResultGrid looks for the result files we switched off, and warns per trial;
    # on Ctrl-C Tune suggests Tuner.restore, but a search resumes from the registry.
    logging.getLogger("ray.tune.analysis").setLevel(logging.ERROR)
    logging.getLogger("ray.tune.tune").setLevel(logging.CRITICAL)
    # A trial whose worker died: Tune logs Ray's traceback; the controller records the
    # death, retries the candidate and says so in one line (see ``worker_crash``).
    logging.getLogger("ray.tune.execution.tune_controller").setLevel(logging.CRITICAL)
    # Tune times its callbacks and warns past 0.5 s. ``Recorder.on_step_begin`` (the pump) records
    # a setup job that ended there, its MLflow run and plots included (1-2 s): nothing a user
    # could act on.
    logging.getLogger("ray.tune.utils.util").setLevel(logging.ERROR)
    # Tune copies its experiment state into the runs folder now and then; a copy that meets a
    # file its searcher is just replacing fails, is logged with a traceback, and is done
    # again at the next copy. A search resumes from the registry, never from that state.
    logging.getLogger("ray.tune.execution.experiment_state").setLevel(logging.CRITICAL)
    _published_errors_to_file()
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        import blocks
        import nas
        import search_spaces
        import workers

        # Folders, not module objects: Ray's client (ray://) pickles the runtime_env.
        modules = [str(Path(m.__file__).parent) for m in (nas, blocks, search_spaces, workers)]
        try:
            with _sigterm_kept():
                ray.init(
                    address=address,
                    runtime_env={"py_modules": modules},
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                )
        except (ConnectionError, RuntimeError, ValueError) as err:  # Ray's own, on joining
            reason = " ".join(str(err).split())[:300]
            raise NasError(f"cannot join the Ray cluster at {address}: {reason}") from None
        return True
    _require_token()
    reap_orphans()
    global _throwaway_temp
    temp = private_temp_dir()
    _throwaway_temp = None if temp.parent == ray_dir() else temp.parent
    with _sigterm_kept(), _marked_as_ours(), _without_monitors():
        ray.init(
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            _temp_dir=str(temp),
            _node_ip_address="127.0.0.1",
            # Ray starts one idle worker per CPU for plain tasks; Tune's trials run in actors,
            # which start their own, so those idle workers only cost CPU and memory.
            _system_config={"enable_worker_prestart": False, "prestart_worker_first_driver": False},
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    return True


class RayWatch:
    """Watches the GCS and the raylet of the local Ray that ``init_ray`` started, and calls
    ``on_death`` with a sentence once either has died of anything but a stop signal; on a
    cluster this process joined, the raylet of the node it runs on, and its head's GCS, by
    its port.

    Ray's driver cannot say so itself: on a dead raylet (killed, out of memory) its C++ core
    ends this process within seconds, and on a dead GCS after a minute's wait, with one log
    line, exit 1 and no Python code run: the search read ``crashed`` with no reason. A death by
    SIGTERM or SIGINT is left alone: those reach Ray's processes from a supervisor or a
    Ctrl-C to the whole process group, which stop the search as interrupted. On a cluster,
    the node's raylet is another process's child (``ray start``'s), so it is watched by pid
    and any end of it counts (Ray's driver ends this process some 15 s after). The cluster's
    head is not this machine's to watch as a process: its GCS counts as dead once its port
    has refused connections for 15 s less than Ray's driver waits for it
    (``RAY_gcs_rpc_server_reconnect_timeout_s``, 60 s; half of it at least), so a head that
    comes back in time (GCS fault tolerance) costs nothing."""

    POLL_S = 0.5
    HEAD_POLL_S = 2.0  # a TCP connect to a cluster's GCS: a lighter touch than local polls
    WATCHED = {"gcs_server": "GCS (its head process)", "raylet": "raylet (its node process)"}
    STOPS = (-signal.SIGTERM, -signal.SIGINT)

    def __init__(self, on_death: Callable[[str], None], node: Any = None):
        """``node``: Ray's ``Node`` of this driver (default: the one ``ray.init`` made)."""
        import ray._private.worker as ray_worker

        node = node or ray_worker._global_node  # no public API names a local Ray's processes
        found = node.all_processes if node is not None and node.head else {}
        self.processes = [
            (kind, info.process) for kind in self.WATCHED for info in found.get(kind, ())
        ]
        # A cluster's GCS, "host:port", and the raylet this driver talks to
        joined = node is not None and not self.processes
        self.head = node.gcs_address if joined else None
        self.raylet = _raylet_serving(node.raylet_socket_name) if joined else None
        self.on_death = on_death
        self.stopped = threading.Event()
        watch = self._watch_head if self.head else self._watch_processes
        self.thread = threading.Thread(target=watch, name="recnas-ray-watch", daemon=True)
        if self.processes or self.head:
            self.thread.start()

    def _watch_head(self) -> None:
        host, port = self.head.rsplit(":", 1)
        host = host.strip("[]")  # an IPv6 address, as Ray writes it: [::1]:6379
        waits = _gcs_reconnect_s()  # Ray's: then its driver ends this process from C++
        grace, since = max(waits / 2, waits - 15), None  # the end said and recorded before
        asked = 0.0
        while not self.stopped.wait(self.POLL_S):
            if self.raylet is not None and not _running(self.raylet):
                self.on_death(f"Ray's raylet on this machine, pid {self.raylet.pid}, ended")
                return
            if time.monotonic() - asked < self.HEAD_POLL_S:
                continue
            asked = time.monotonic()
            try:
                socket.create_connection((host, int(port)), timeout=self.HEAD_POLL_S).close()
                since = None
            except OSError:
                since = since or time.monotonic()
                if time.monotonic() - since >= grace:
                    self.on_death(
                        f"the Ray cluster's head at {self.head} (its GCS) stopped answering "
                        f"{grace:.0f} s ago"
                    )
                    return

    def _watch_processes(self) -> None:
        while not self.stopped.wait(self.POLL_S):
            dead = [(kind, p) for kind, p in self.processes if p.poll() is not None]
            if not dead:
                continue
            # A stop signal to the whole group may reach one process first, and the other
            # then exits of its own: a moment later, every death is known.
            if self.stopped.wait(2 * self.POLL_S):
                return
            codes = [p.poll() for _, p in self.processes]
            if any(code in self.STOPS for code in codes):
                return  # the search is being stopped: its own handler says so
            kind, process = dead[0]
            code = process.returncode
            how = (
                f"was killed ({signal.Signals(-code).name})"
                if code < 0 and -code in signal.valid_signals()
                else f"exited with code {code}"
            )
            self.on_death(f"Ray's {self.WATCHED[kind]}, pid {process.pid}, {how}")
            return

    def stop(self) -> None:
        """No more watching: before Ray is shut down on purpose."""
        self.stopped.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join()


def _raylet_serving(socket_name: str):
    """The raylet process listening on ``socket_name`` (this machine's node of a cluster), or
    None where none is found (a client without a node)."""
    import psutil

    flag = f"--raylet_socket_name={socket_name}"
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "raylet" and flag in (process.info["cmdline"] or ()):
            return process
    return None


def _running(process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gcs_reconnect_s() -> float:
    """How long Ray's driver waits for a GCS that stopped answering before it ends the
    process: Ray's setting, as Ray reads it (an environment variable in Ray's own case)."""
    text = os.environ.get("RAY_gcs_rpc_server_reconnect_timeout_s", "60")  # noqa: SIM112
    try:
        return max(1.0, float(text))
    except ValueError:
        return 60.0


def kill_local_ray() -> None:
    """Kill every process of the local Ray this process started, at once (no shutdown: it
    would wait on the dead ones)."""
    _reap(lambda driver: driver == os.getpid())


def _published_errors_to_file() -> None:
    """Ray's driver prints each error its cluster publishes (a worker that died: a paragraph
    of ids and advice) on stdout, whatever ``log_to_driver`` says, and stdout carries
    results (``--json``). The controller says what happened in one line (``worker_crash``);
    Ray's own words go to ``ray_errors_file()`` (``ray/errors.log``). Ray has no option
    for this: its module's printer is replaced (the thread that prints the errors,
    ``listen_error_messages``, looks it up at each one)."""
    import ray._private.worker as ray_worker

    log = ray_errors_file()

    def keep(data: dict, ignore_prefix: bool = False) -> None:
        with contextlib.suppress(OSError):  # a full disk: Ray's words are lost, nothing else
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a", encoding="utf-8") as file:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                file.write(f"{stamp} ({data.get('pid')}) " + "\n".join(data["lines"]) + "\n")

    ray_worker.print_to_stdstream = keep


def check_gpus(per_trial: float) -> None:
    """That the Ray this process joined has a GPU for a trial asking ``per_trial``
    (``resources.gpus_per_trial``); else a ``NasError``: no trial could ever start."""
    if per_trial <= 0:
        return
    import ray

    gpus = ray.cluster_resources().get("GPU", 0)
    if gpus < per_trial:
        raise NasError(
            f"resources.gpus_per_trial is {per_trial:g}, but the Ray cluster has {gpus:g} "
            "GPUs: no trial could start (set it to 0 to train on CPUs)"
        )


def shutdown_ray() -> None:
    """Stop the Ray that ``init_ray`` started or joined, then kill what is left of a local
    one. After a SIGTERM to the whole process group, a worker that Ray was starting at that
    moment waits a minute or more on the dead raylet (measured: 1 run in 10 still there
    after 60 s), out of reach of Ray's shutdown."""
    import ray

    global _throwaway_temp
    ray.shutdown()
    kill_local_ray()
    if _throwaway_temp is not None:  # Ray's logs and sockets in /tmp: no one would find them
        shutil.rmtree(_throwaway_temp, ignore_errors=True)
        _throwaway_temp = None


@contextlib.contextmanager
def _marked_as_ours():
    """``DRIVER_MARK`` in the environment that the processes started in this block inherit:
    Ray's GCS, raylet and agents, and through the raylet every worker. Only in this block,
    so that no other process this one starts later (a test's server, say) is taken for
    Ray's."""
    kept = os.environ.get(DRIVER_MARK)
    os.environ[DRIVER_MARK] = str(os.getpid())
    try:
        yield
    finally:
        if kept is None:
            os.environ.pop(DRIVER_MARK, None)
        else:
            os.environ[DRIVER_MARK] = kept


@contextlib.contextmanager
def _without_monitors():
    """A local Ray started in this block runs without its log monitor and its autoscaler
    monitor: the first streams workers' output to the driver, which ``log_to_driver=False``
    turns away, and the second scales a cluster that a search's one local node is not. Each
    is a Python process (0.5-0.6 CPU-s to start, about 80 MB resident) that ``ray.init`` has
    no option to leave out, though Ray's own ``RayParams`` has one for each
    (``include_log_monitor``, ``no_monitor``): they are set on the parameters ``ray.init``
    hands its head node."""
    from ray._private.node import Node

    start = Node.__init__

    def without(node, ray_params, *args, **kwargs):
        ray_params.include_log_monitor = False
        ray_params.no_monitor = True
        start(node, ray_params, *args, **kwargs)

    Node.__init__ = without
    try:
        yield
    finally:
        Node.__init__ = start


@contextlib.contextmanager
def _sigterm_kept():
    """Keep this process's answer to SIGTERM across ``ray.init``, which sets it to
    ``sys.exit``: a search stopped that way was recorded as failed, with no reason, and Ray's
    own C++ handler then printed a stack dump and aborted the process (``nas.cli.signals``
    says what the CLI answers)."""
    kept = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if kept is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, kept)


def _require_token() -> None:
    """A local search's Ray accepts only processes that hold this session's token.

    Ray 2.60 cannot be told to listen on loopback only: its GCS, raylet, workers and this
    driver bind every interface, whatever ``_node_ip_address`` says (measured: see
    tests/test_security.py). So every gRPC call must carry a token: a fresh random one per
    session, in this process's environment (inherited by the Ray processes it starts,
    readable by no other user), never in a file under $HOME that outlives the search.
    Ray reads its auth settings once, when it is imported; ``Config.initialize`` makes it
    read them again (what ``ray.init`` itself does when it turns token mode on).
    """
    from ray._raylet import Config

    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    Config.initialize("")


def reap_orphans() -> None:
    """Kill what a killed search left of its local Ray. Ray's reaper stops the GCS and raylet
    when the driver dies, but its dashboard and runtime-env agents live on (a minute or more,
    one still listening). They carry ``DRIVER_MARK`` in their environment: any of this user's
    processes whose marked driver is gone is an orphan. Its throwaway folder in /tmp, whose
    session folders are named after their driver's pid, goes too."""
    import psutil

    _reap(lambda driver: not psutil.pid_exists(driver))
    for folder in Path(tempfile.gettempdir()).glob(f"{THROWAWAY_PREFIX}*"):
        drivers = [s.name.rpartition("_")[2] for s in folder.glob("r/session_*_*")]
        try:
            ours = folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if ours and drivers and not any(d.isdigit() and psutil.pid_exists(int(d)) for d in drivers):
            shutil.rmtree(folder, ignore_errors=True)  # what ``shutdown_ray`` never got to


def _reap(is_left: Callable[[int], bool]) -> None:
    """Kill this user's processes (never this one) whose ``DRIVER_MARK`` names a driver
    pid for which ``is_left`` holds."""
    import psutil

    mine = os.getuid()
    for process in psutil.process_iter(["uids", "pid"]):
        try:
            if process.pid == os.getpid() or process.info["uids"] is None:
                continue
            if process.info["uids"].real != mine:
                continue
            driver = _driver_mark(process)
            if driver and driver.isdigit() and is_left(int(driver)):
                process.kill()
        except psutil.Error:
            continue  # gone meanwhile, or not ours to read


def _driver_mark(process) -> str | None:
    """``DRIVER_MARK`` in ``process``'s environment. Read from /proc where there is one: Ray's
    agents set their process titles over the start of their environment's memory, and
    psutil's ``environ()``, which stops at the first empty entry, finds none there (so a
    killed search's agents were never reaped; they linger for a minute)."""
    if not sys.platform.startswith("linux"):  # no /proc (macOS): psutil's reading
        return process.environ().get(DRIVER_MARK)
    try:
        raw = Path(f"/proc/{process.pid}/environ").read_bytes()
    except OSError:
        return None  # gone, or not ours to read
    prefix = f"{DRIVER_MARK}=".encode()
    marks = [entry[len(prefix) :] for entry in raw.split(b"\0") if entry.startswith(prefix)]
    return marks[0].decode() if marks else None


def private_temp_dir() -> Path:
    """Ray's session files (sockets, logs), in a folder only this user can enter: Ray makes
    the folder it is given world-writable (0777), so that folder sits inside a private one
    (0700): the runs folder's ``ray/``, or, when that path is too long for a Unix socket, a
    fresh ``mkdtemp`` folder with an unpredictable name, never a fixed shared /tmp name that
    another user could create first."""
    private = ray_dir()
    if len(str(private)) + 2 <= MAX_RAY_TEMP_LEN:
        private.mkdir(parents=True, exist_ok=True)
        private.chmod(0o700)
    else:
        private = Path(tempfile.mkdtemp(prefix=THROWAWAY_PREFIX))
    return private / "r"


WAIT = "wait"  # next_config: nothing to start now; Tune asks again as trials end


class TuneHost(Protocol):
    """What Tune's hooks forward to: the search's controller. Tune asks it for the next
    trial's config, tells it each result or crash, and lets it stop the run."""

    def next_config(self, tune_id: str) -> dict[str, Any] | Literal["wait"] | None: ...

    def record(
        self, tune_id: str, result: dict[str, Any] | None, crash: WorkerCrash | None
    ) -> None: ...

    def should_stop(self) -> bool: ...

    def pump(self) -> None: ...

    def failed(self, error: Exception) -> None: ...

    def yardstick(self, tune_id: str) -> bool: ...

    def stopped_early(self, tune_id: str) -> None: ...

    def rung_losses(self, report: dict[str, Any]) -> list[float]: ...

    def overdue(self, live: set[str]) -> set[str]: ...


class _Glue:
    """Tune pickles its search algorithm, callbacks and stopper into its own experiment
    checkpoint. Ours hold the live controller (database engines, an MLflow client), and the
    registry, not Tune's checkpoint, is what a search resumes from: pickle them empty."""

    controller: TuneHost | None

    def __getstate__(self) -> dict:
        return {"controller": None}


class StrategySearcher(_Glue, Searcher):
    """Tune's search algorithm: asks the controller, which asks the strategy."""

    def __init__(self, controller: TuneHost):
        super().__init__()  # no metric: Tune only relays; the strategy ranks
        self.controller = controller

    def save(self, checkpoint_path: str) -> None:
        pass  # the registry holds the strategy's state after every ask and tell

    def restore(self, checkpoint_path: str) -> None:
        pass

    def suggest(self, trial_id: str):
        try:
            config = self.controller.next_config(trial_id)
        except Exception as err:  # the registry gone, a bug: the search stops (``Recorder``)
            self.controller.failed(err)
            return None
        if config == WAIT:
            return None  # Tune's "not ready yet": it asks again
        return config if config is not None else Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        pass  # recorded by _Recorder, which also sees Ray's error message


class Recorder(_Glue, Callback):
    """Tune's callbacks into the controller. Tune swallows a callback's exception (it logs
    it, fails that trial and goes on), which would leave a trial half recorded and the
    search running blind when the registry or MLflow stops answering. So each hook hands
    its error to the controller (``failed``): the search stops and ends failed, with the
    reason, resumable."""

    def __init__(self, controller: TuneHost):
        self.controller = controller

    def _hear(self, hook: Callable[..., None], *args) -> None:
        try:
            hook(*args)
        except Exception as err:
            self.controller.failed(err)

    def on_step_begin(self, iteration, trials, **info) -> None:
        self._hear(self.controller.pump)  # the setup jobs, while trials train beside them
        self._hear(self._kill_overdue, trials)

    def _kill_overdue(self, trials) -> None:
        """Kill the worker of each trial over its time limit (``resources.max_trial_minutes``):
        a hung trial never reports, so no stopper of Tune's would end it. Tune then hears
        its worker died, and the controller records it failed."""
        import ray

        actors = {t.trial_id: t.temporary_state.ray_actor for t in trials if t.status == "RUNNING"}
        live = {tune_id for tune_id, actor in actors.items() if actor is not None}
        for tune_id in self.controller.overdue(live):
            ray.kill(actors[tune_id], no_restart=True)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._hear(self.controller.record, trial.trial_id, trial.last_result, None)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._hear(self.controller.record, trial.trial_id, None, worker_crash(trial))


class StopWhenAsked(_Glue, Stopper):
    """Ends Tune's run when the controller says the search must stop (``nas cancel``, a
    first Ctrl-C, a failed setup job)."""

    def __init__(self, controller: TuneHost):
        self.controller = controller

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.controller.should_stop()


class _EarlyStopping(_Glue):
    """Tune's scheduler, telling the controller which trials it stopped at a rung (a final
    report it answers STOP to has simply finished). A baseline's reports are filed like any
    trial's, but it is never stopped: it is the yardstick the candidates are judged by."""

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if RUNG_METRIC not in result:  # a failed trial's final report: nothing to rank
            return TrialScheduler.CONTINUE
        decision = super().on_trial_result(tune_controller, trial, self.ranked(result))
        if "outcome" in result:  # the final report: the trial has ended anyway
            return decision
        if self.controller.yardstick(trial.trial_id):
            return TrialScheduler.CONTINUE
        if decision == TrialScheduler.STOP:
            self.controller.stopped_early(trial.trial_id)
        return decision

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        if RUNG_METRIC in result:
            super().on_trial_complete(tune_controller, trial, self.ranked(result))
        else:  # failed: nothing the scheduler can compare
            self.on_trial_remove(tune_controller, trial)

    def ranked(self, report: dict) -> dict:
        """A rung report with what this scheduler ranks on (the median rule: NE)."""
        return report

    def remember(self, key: str, reports: list[dict]) -> None:
        """Replay a trial of an earlier session (its rung reports, the last one at its end;
        see ``RungBook.replay``), so a resumed search's scheduler compares against
        everything measured so far."""
        ghost = _Recorded(key)
        self.on_trial_add(None, ghost)
        for report in reports[:-1]:
            super().on_trial_result(None, ghost, self.ranked(report))
        super().on_trial_complete(None, ghost, self.ranked(reports[-1]))


@dataclass(frozen=True)
class _Recorded:
    """A trial of an earlier session, as Tune's schedulers see a trial (by id, hashable)."""

    trial_id: str


class _Asha(_EarlyStopping, AsyncHyperBandScheduler):
    """Ray's ASHA (its rungs, its asynchronous promotion), each rung ranking a vector of
    losses in Pareto order (``_ParetoBracket``): with ``rank: ne`` the vector is NE alone."""

    def __init__(self, pareto: bool, **kwargs):
        super().__init__(**kwargs)
        self.pareto = pareto
        self._brackets = [
            _ParetoBracket(kwargs["grace_period"], kwargs["max_t"], kwargs["reduction_factor"], 0)
        ]

    def ranked(self, report: dict) -> dict:
        if not self.pareto:
            losses = [report[RUNG_METRIC]]
        elif RUNG_LOSSES in report:  # replayed from the registry
            losses = report[RUNG_LOSSES]
        else:
            losses = self.controller.rung_losses(report)
        return {**report, RANKED: np.asarray(losses, dtype=float)}


class _ParetoBracket(_Bracket):
    """An ASHA rung that ranks vectors. Ray's rung keeps a trial whose one number beats the
    (1 - 1/rf) percentile of those recorded; a front has no percentile, so this one keeps
    a trial that falls in the first ceil(n / rf) of the n at the rung (itself included) in
    NSGA-II's order. With one objective that is Ray's rule (up to ties)."""

    def on_result(self, trial, cur_iter: int, cur_rew) -> str:
        for milestone, recorded in self._rungs:
            if cur_iter < milestone or trial.trial_id in recorded:
                continue
            recorded[trial.trial_id] = -np.asarray(cur_rew)  # Ray negates a minimised metric
            losses = np.stack(list(recorded.values()))
            order = list(pareto_order(losses, ["min"] * losses.shape[1]))
            place = order.index(len(losses) - 1)  # the trial is the last one recorded
            keep = math.ceil(len(losses) / self.rf - 1e-9)
            return TrialScheduler.CONTINUE if place < keep else TrialScheduler.STOP
        return TrialScheduler.CONTINUE


class _Median(_EarlyStopping, MedianStoppingRule):
    def _on_insufficient_samples(self, tune_controller, trial, time: float) -> str:
        # Ray's rule pauses a trial to let others catch up; a paused function trial would
        # need a checkpoint to resume from. Train on instead.
        return TrialScheduler.CONTINUE


def tune_scheduler(scheduler: Scheduler, controller: TuneHost) -> TrialScheduler:
    """Ray Tune's scheduler for ``scheduler``, reporting its stops to ``controller``."""
    kwargs = {"time_attr": RUNG_TIME, "mode": "min", **scheduler.tune_kwargs()}
    if scheduler.name == "asha":
        tune = _Asha(scheduler.options.rank == "pareto", metric=RANKED, **kwargs)
    else:
        tune = _Median(metric=RUNG_METRIC, **kwargs)
    tune.controller = controller
    return tune


@dataclass(frozen=True)
class WorkerCrash:
    """A trial whose Ray worker died before it reported (the trainable itself reports every
    failure it can catch). ``final``: running it again would only repeat that (Ray's
    memory monitor killed it, or the controller did, over its time limit); any other death
    (a kill, a lost node, a crash outside Python) is worth another attempt on a new worker."""

    reason: str
    final: bool


def worker_crash(trial) -> WorkerCrash:
    """What Ray recorded about a trial whose worker failed: its last lines, and whether it
    was an out-of-memory kill. Only Ray's own ``OutOfMemoryError`` counts: an actor that
    died of SIGKILL carries a message listing the OOM killer among *possible* causes."""
    text = ""
    if trial.error_file and Path(trial.error_file).exists():
        text = Path(trial.error_file).read_text(errors="replace")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    oom = "OutOfMemoryError" in text
    lost = next((line for line in lines if "RankLost: " in line), None)
    if lost is not None:  # workers/search_trial.py: another rank's worker died; its words
        reason = lost.split("RankLost: ", 1)[1].strip()[:300]
        return WorkerCrash(reason, "OutOfMemoryError" in reason)
    if oom:
        reason = "killed by Ray's memory monitor: the node ran low on memory"
    elif "ActorDiedError" in text or "RayActorError" in text or "died unexpectedly" in text:
        reason = "the Ray worker died (killed, or crashed outside Python)"
    elif "is unavailable" in text or "ActorUnavailableError" in text:
        reason = "the Ray worker stopped answering (its node died or left the cluster)"
    else:
        reason = "the Ray worker failed"
    detail = next((line for line in reversed(lines) if "Error" in line), lines[-1] if lines else "")
    detail = detail.strip().split(". ")[0][:160]  # Ray's first sentence; the rest is advice
    return WorkerCrash(f"{reason}: {detail}" if detail else reason, oom)
