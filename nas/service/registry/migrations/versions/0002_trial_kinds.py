"""Trials have a kind (baseline, searched, supernet, dnas) instead of an is_baseline flag;
setup jobs (supernet and DNAS training) keep their settings, progress and checkpoint, and
have no spec.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recnas_trials") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(16), nullable=False, server_default="searched")
        )
        batch.add_column(sa.Column("job", sa.JSON))
        batch.add_column(sa.Column("checkpoint", sa.Text))
        batch.alter_column("spec", existing_type=sa.JSON, nullable=True)
    trials = sa.table("recnas_trials", sa.column("kind"), sa.column("is_baseline"))
    op.execute(trials.update().where(trials.c.is_baseline == sa.true()).values(kind="baseline"))
    with op.batch_alter_table("recnas_trials") as batch:
        batch.drop_column("is_baseline")
        batch.alter_column("kind", existing_type=sa.String(16), server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("recnas_trials") as batch:
        batch.add_column(sa.Column("is_baseline", sa.Boolean, nullable=False, server_default="0"))
    trials = sa.table("recnas_trials", sa.column("kind"), sa.column("is_baseline"))
    op.execute(trials.update().where(trials.c.kind == "baseline").values(is_baseline=True))
    op.execute(trials.delete().where(trials.c.kind.not_in(["baseline", "searched"])))
    with op.batch_alter_table("recnas_trials") as batch:
        batch.drop_column("checkpoint")
        batch.drop_column("job")
        batch.drop_column("kind")
        batch.alter_column("spec", existing_type=sa.JSON, nullable=False)
        batch.alter_column("is_baseline", existing_type=sa.Boolean, server_default=None)
