"""The first registry schema: searches and trials.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recnas_searches",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("config_path", sa.Text),
        sa.Column("strategy_state", sa.JSON),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("elapsed_s", sa.Float, nullable=False),
        sa.Column("session_started_at", sa.DateTime(timezone=True)),
        sa.Column("sessions", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        sa.Column("message", sa.Text),
        sa.Column("mlflow_experiment_id", sa.String(64)),
        sa.Column("mlflow_run_id", sa.String(64)),
    )
    op.create_table(
        "recnas_trials",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "search_id",
            sa.String(32),
            sa.ForeignKey("recnas_searches.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("arch_id", sa.String(32), nullable=False),
        sa.Column("label", sa.String(100)),
        sa.Column("is_baseline", sa.Boolean, nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("values", sa.JSON),
        sa.Column("metrics", sa.JSON),
        sa.Column("timings", sa.JSON),
        sa.Column("error", sa.Text),
        sa.Column("mlflow_run_id", sa.String(64)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("search_id", "number", name="uq_trial_number"),
        sa.UniqueConstraint("search_id", "arch_id", name="uq_trial_arch"),
    )


def downgrade() -> None:
    op.drop_table("recnas_trials")
    op.drop_table("recnas_searches")
