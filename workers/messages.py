"""What the controller and a trial's worker tell each other, as frozen records.

    TrialRequest   controller -> worker: which candidate, trained how (``TrialSettings``)
    TrialReport    worker -> controller: how the trial ended, or, at a rung, how it is doing

Ray Tune carries both as plain dicts (a trial's config, a trial's reported result). Each
record becomes a dict at that boundary (``to_config``, ``to_result``) and is read back from
one there (``from_config``, ``from_result``), and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from nas.search.early_stopping import RUNG_METRIC, RUNG_TIME
from workers.train import TrainConfig
from workers.trial import SelectBest

# "unavailable": the trial's data is gone where it ran (``TrialData.unavailable``): not the
# candidate's failure; the search stops, and the trial runs again on its resume. "changed":
# the data was prepared again under the search (``DatasetChanged``): it stops too, and its
# resume waits for the data as it was.
OUTCOMES = ("completed", "failed", "unavailable", "changed")


@dataclass(frozen=True)
class RungPlan:
    """Where a trial reports to the early-stopping scheduler: at ``steps``, measured on
    ``rows`` validation rows."""

    steps: tuple[int, ...]
    rows: int


@dataclass(frozen=True)
class TrialSettings:
    """What decides a trial's figures besides its spec: the key a baseline's figures are
    filed under (``nas.service.trained_before``) hashes ``as_dict()``."""

    train: TrainConfig
    threads: int
    rungs: RungPlan | None = None
    select: SelectBest | None = None
    fp8_probe: dict[str, Any] | None = None  # nas.search.objectives.fp8_probe_settings
    gpus: float = 0.0  # resources.gpus_per_trial: above 0, the trial trains on its GPU
    workers: int = 1  # resources.workers_per_trial: above 1, a data-parallel group

    @property
    def device(self) -> str:
        """Where the trial trains: Ray shows a trial only the GPU it gave it (``cuda``)."""
        return "cuda" if self.gpus > 0 else "cpu"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialSettings:
        rungs, select = data.get("rungs"), data.get("select")
        return cls(
            train=TrainConfig(**data["train"]),
            threads=data["threads"],
            rungs=RungPlan(tuple(rungs["steps"]), rungs["rows"]) if rungs else None,
            select=SelectBest(**select) if select else None,
            fp8_probe=data.get("fp8_probe"),
            gpus=data.get("gpus", 0.0),
            workers=data.get("workers", 1),
        )


@dataclass(frozen=True)
class TrialRequest:
    """A candidate to train: registry trial ``trial_id`` (number ``number`` in its search)."""

    trial_id: int
    number: int
    spec: dict[str, Any]
    settings: TrialSettings
    memory_limit_bytes: int
    save_weights: str | None = None  # where to keep the trained weights (a retrain's)

    def to_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> TrialRequest:
        return cls(
            trial_id=config["trial_id"],
            number=config["number"],
            spec=config["spec"],
            settings=TrialSettings.from_dict(config["settings"]),
            memory_limit_bytes=config["memory_limit_bytes"],
            save_weights=config.get("save_weights"),
        )


@dataclass(frozen=True)
class TrialReport:
    """A trial's report. Final: ``outcome`` (one of ``OUTCOMES``) with the ``TrialResult``
    as JSON or the failure's reason in ``payload``. At a rung: no outcome, the figures of
    the steps so far in ``payload``, and ``step`` and ``rung_ne`` for the scheduler (a final
    report of a trial with rungs carries them too: its last rung is the full budget's)."""

    payload: str
    started_at: float
    finished_at: float  # or stopped, for the last report of a trial the scheduler ended
    node: str | None = None  # where it trained
    outcome: str | None = None
    step: int | None = None
    rung_ne: float | None = None

    def __post_init__(self) -> None:
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES} or None, got {self.outcome!r}")

    @property
    def completed(self) -> bool:
        return self.outcome == "completed"

    def metrics(self) -> dict[str, Any]:
        """The ``TrialResult`` the payload holds (not for a failed trial's reason)."""
        return json.loads(self.payload)

    def to_result(self) -> dict[str, Any]:
        """Tune's result dict: the scheduler reads ``RUNG_TIME`` and ``RUNG_METRIC``."""
        result = {
            "payload": self.payload,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "node": self.node,
        }
        if self.outcome is not None:
            result["outcome"] = self.outcome
        if self.step is not None:
            result |= {RUNG_TIME: self.step, RUNG_METRIC: self.rung_ne}
        return result

    @classmethod
    def from_result(cls, result: dict[str, Any] | None) -> TrialReport | None:
        """Ours from Tune's result (which adds its own keys beside ours); None when the
        trial never reported (Tune stopped it first)."""
        if not result or "payload" not in result:
            return None
        return cls(
            payload=result["payload"],
            started_at=result["started_at"],
            finished_at=result["finished_at"],
            node=result.get("node"),
            outcome=result.get("outcome"),
            step=result.get(RUNG_TIME),
            rung_ne=result.get(RUNG_METRIC),
        )
