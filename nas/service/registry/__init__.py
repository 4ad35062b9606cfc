"""The registry database: searches and trials (SQLAlchemy, schema versioned with Alembic)."""

from nas.service.registry.models import Search, Trial
from nas.service.registry.store import (
    LeaseLost,
    Registry,
    RegistryError,
    controller_alive,
    display_status,
    elapsed_seconds,
    new_search_id,
)

__all__ = [
    "LeaseLost",
    "Registry",
    "RegistryError",
    "Search",
    "Trial",
    "controller_alive",
    "display_status",
    "elapsed_seconds",
    "new_search_id",
]
