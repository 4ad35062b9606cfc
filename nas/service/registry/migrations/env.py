"""Alembic environment for the recnas registry; run by ``nas.service.registry.schema.upgrade``."""

from alembic import context

from nas.service.registry.models import Base
from nas.service.registry.schema import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # sqlite cannot ALTER most things; batch mode copies the table
)
with context.begin_transaction():
    context.run_migrations()
