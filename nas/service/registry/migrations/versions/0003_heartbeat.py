"""A running search's controller writes a heartbeat: a search whose owner is gone (killed,
its machine lost) reads as crashed from any host, and `nas resume` takes it over.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recnas_searches") as batch:
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("recnas_searches") as batch:
        batch.drop_column("heartbeat_at")
