"""The registry's tables: one row per search, one per trial (a candidate's run, or a setup
job of a one-shot or differentiable strategy).

Table names carry a ``recnas_`` prefix: Optuna keeps its studies in the same database
(tables ``studies``, ``trials``, ... and its own ``alembic_version``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Search states. "running" with a dead controller process reads as "crashed" (see store).
SEARCH_STATES = (
    "running",
    "completed",
    "cancelling",
    "cancelled",
    "interrupted",
    "stopped",
    "failed",
)
# Trial states. "running" after a crash, and "cancelled", are run again by `nas resume`;
# "stopped": the search's early-stopping scheduler ended it at a rung (never run again).
TRIAL_STATES = ("running", "completed", "failed", "cancelled", "stopped")
FINISHED = ("completed", "failed", "stopped")  # a trial in one of these is never run again
# Trial kinds. Candidates (on the front): a hand-designed baseline, or an architecture the
# strategy proposed. Setup jobs of one-shot and differentiable strategies: supernet training
# (and the subnet search over it), and one DNAS run (one penalty, one data shard). A
# retrain's trials: one architecture trained with one seed.
CANDIDATE_KINDS = ("baseline", "searched")
JOB_KINDS = ("supernet", "dnas")
RETRAIN_KIND = "retrain"  # one architecture, one seed, of a retrain (nas/service/retrain.py)
TRIAL_KINDS = CANDIDATE_KINDS + JOB_KINDS + (RETRAIN_KIND,)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Search(Base):
    __tablename__ = "recnas_searches"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), index=True)
    status: Mapped[str] = mapped_column(String(16))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_path: Mapped[str | None] = mapped_column(Text)
    strategy_state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)  # closed sessions only
    session_started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sessions: Mapped[int] = mapped_column(Integer, default=0)  # submit + each resume
    host: Mapped[str | None] = mapped_column(String(255))  # where the controller runs
    pid: Mapped[int | None] = mapped_column(Integer)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # its lease
    message: Mapped[str | None] = mapped_column(Text)  # why it stopped, when not completed
    mlflow_experiment_id: Mapped[str | None] = mapped_column(String(64))
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64))
    # the prepared dataset it started on (``PreparedDataset.version``): a resume on other data
    # is refused; None for searches older than the column
    data_version: Mapped[str | None] = mapped_column(String(64))

    trials: Mapped[list[Trial]] = relationship(
        back_populates="search", order_by="Trial.number", cascade="all, delete-orphan"
    )


class Trial(Base):
    __tablename__ = "recnas_trials"
    __table_args__ = (
        UniqueConstraint("search_id", "number", name="uq_trial_number"),
        UniqueConstraint("search_id", "arch_id", name="uq_trial_arch"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    search_id: Mapped[str] = mapped_column(ForeignKey("recnas_searches.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # 0, 1, ... in the order asked
    arch_id: Mapped[str] = mapped_column(String(32))
    label: Mapped[str | None] = mapped_column(String(100))  # the spec's name (baselines)
    kind: Mapped[str] = mapped_column(String(16), default="searched")  # TRIAL_KINDS
    spec: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # candidates only
    job: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # jobs: settings and progress
    checkpoint: Mapped[str | None] = mapped_column(Text)  # jobs: where they checkpoint
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    values: Mapped[list[Any] | None] = mapped_column(JSON)  # objectives, in config order
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the whole TrialResult
    timings: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # seconds, see controller
    error: Mapped[str | None] = mapped_column(Text)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    search: Mapped[Search] = relationship(back_populates="trials")

    @property
    def is_baseline(self) -> bool:
        return self.kind == "baseline"

    @property
    def is_candidate(self) -> bool:
        return self.kind in CANDIDATE_KINDS

    @property
    def is_job(self) -> bool:
        """A strategy's setup job (not one architecture trained stand-alone)."""
        return self.kind in JOB_KINDS
