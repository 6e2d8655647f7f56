"""Run the Alembic migrations (the only way the schema is created or changed)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations


def alembic_config(database_url: str) -> Config:
    """An Alembic config for ``database_url`` pointing at the ``migrations`` package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Upgrade the database at ``database_url`` to ``revision``.

    Must not be called from inside a running event loop (Alembic's async env uses asyncio.run);
    the relay calls it before the server loop starts.
    """
    command.upgrade(alembic_config(database_url), revision)
