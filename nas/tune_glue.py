"""Ray and Ray Tune, seen from the controller: starting or joining Ray, and the three Tune
hooks a search plugs in (a ``Searcher`` that asks, a ``Callback`` that records, a ``Stopper``
that obeys ``nas cancel``). Each hook only forwards to the controller."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ray.tune import Callback, Stopper
from ray.tune.search import Searcher

from nas.config import runs_dir

if TYPE_CHECKING:
    from nas.controller import Controller

# Unix socket paths must stay under 107 bytes, and Ray puts its sockets at
# <temp>/session_2026-11-30_15-03-01_837784_15325/sockets/plasma_store (62 more bytes).
MAX_RAY_TEMP_LEN = 107 - 62


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
    logging.getLogger("ray").setLevel(logging.WARNING)
    # Tune's ResultGrid looks for the result files we switched off, and warns per trial;
    # on Ctrl-C Tune suggests Tuner.restore, but a search resumes from the registry.
    logging.getLogger("ray.tune.analysis").setLevel(logging.ERROR)
    logging.getLogger("ray.tune.tune").setLevel(logging.ERROR)
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        import blocks
        import nas
        import search_spaces
        import workers

        ray.init(
            address=address,
            runtime_env={"py_modules": [nas, blocks, search_spaces, workers]},
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
        return True
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local only: no token in $HOME
    temp = runs_dir() / "ray"
    if len(str(temp)) > MAX_RAY_TEMP_LEN:
        temp = Path(tempfile.gettempdir()) / f"recnas-ray-{os.getuid()}"
    temp.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        _temp_dir=str(temp),
        logging_level=logging.WARNING,
        log_to_driver=False,
    )
    return True


class _Glue:
    """Tune pickles its search algorithm, callbacks and stopper into its own experiment
    checkpoint. Ours hold the live controller (database engines, an MLflow client), and the
    registry, not Tune's checkpoint, is what a search resumes from: pickle them empty."""

    controller: Controller | None

    def __getstate__(self) -> dict:
        return {"controller": None}


class StrategySearcher(_Glue, Searcher):
    """Tune's search algorithm: asks the controller, which asks the strategy."""

    def __init__(self, controller: Controller):
        super().__init__()  # no metric: Tune only relays; the strategy ranks
        self.controller = controller

    def save(self, checkpoint_path: str) -> None:
        pass  # the registry holds the strategy's state after every ask and tell

    def restore(self, checkpoint_path: str) -> None:
        pass

    def suggest(self, trial_id: str):
        config = self.controller.next_config(trial_id)
        return config if config is not None else Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        pass  # recorded by _Recorder, which also sees Ray's error message


class Recorder(_Glue, Callback):
    def __init__(self, controller: Controller):
        self.controller = controller

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self.controller.record(trial.trial_id, trial.last_result, None)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self.controller.record(trial.trial_id, None, _ray_error(trial))


class CancelStopper(_Glue, Stopper):
    def __init__(self, controller: Controller):
        self.controller = controller

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.controller.poll_cancel()


def _ray_error(trial) -> str:
    """The last lines of the error Ray recorded for a trial whose worker failed."""
    text = ""
    if trial.error_file and Path(trial.error_file).exists():
        text = Path(trial.error_file).read_text()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    reason = "\n".join(lines[-3:]) if lines else "the Ray worker failed without a message"
    if "OutOfMemoryError" in text or "memory" in text.lower() and "kill" in text.lower():
        reason = "the worker was killed for using too much memory\n" + reason
    return reason
