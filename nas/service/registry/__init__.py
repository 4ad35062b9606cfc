"""The registry database: searches and trials (SQLAlchemy, schema versioned with Alembic)."""

from nas.service.registry.models import Search, Trial
from nas.service.registry.store import (
    Registry,
    RegistryError,
    controller_alive,
    display_status,
    elapsed_seconds,
    new_search_id,
)

__all__ = [
    "Registry",
    "RegistryError",
    "Search",
    "Trial",
    "controller_alive",
    "display_status",
    "elapsed_seconds",
    "new_search_id",
]
