"""A search records the version of the prepared dataset it started on: a dataset prepared
again under it (another schema, changed source files) stops it, and its resume is refused
until the data is as it was.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recnas_searches") as batch:
        batch.add_column(sa.Column("data_version", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("recnas_searches") as batch:
        batch.drop_column("data_version")
