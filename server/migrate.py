"""Run the Alembic migrations (the only way the schema is created or changed)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.exc import SQLAlchemyError

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


class SchemaMismatch(Exception):
    """The database is not at this relay's schema; ``str(exc)`` is the one line to print."""


def current_revisions(database_url: str) -> tuple[str, ...]:
    """The Alembic revisions the database is stamped with (empty for a new database).

    Must not be called from inside a running event loop (it runs its own).

    Raises:
        SchemaMismatch: the database cannot be reached (the reason in one line).
    """
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.ext.asyncio import create_async_engine

    async def read() -> tuple[str, ...]:
        engine = create_async_engine(database_url)
        try:
            async with engine.connect() as conn:
                return tuple(await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_heads()))
        finally:
            await engine.dispose()

    quiet = logging.getLogger("alembic.runtime.migration")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # no "Context impl ..." lines around a one-line refusal
    try:
        return asyncio.run(read())
    except (OSError, SQLAlchemyError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise SchemaMismatch(f"cannot read the database: {type(exc).__name__}: {reason}") from None
    finally:
        quiet.setLevel(level)


def check(database_url: str, *, before_upgrade: bool = False) -> None:
    """Refuse a database whose schema is not this relay's head.

    ``before_upgrade``: only refuse a database *newer* than this relay (an older one is about to
    be upgraded).

    Raises:
        SchemaMismatch: "this relay is older than its database" (a revision this relay does not
            know), or "run e2ee-relay migrate" (an older or empty schema).
    """
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    script = ScriptDirectory.from_config(alembic_config(database_url))
    heads = script.get_heads()
    current = current_revisions(database_url)
    for rev in current:
        try:
            known = script.get_revision(rev) is not None
        except CommandError:
            known = False
        if not known:
            raise SchemaMismatch(
                f"this relay is older than its database (the database is at revision {rev}, unknown here; this "
                f"relay's newest is {heads[0]}): run a newer relay"
            )
    if not before_upgrade and set(current) != set(heads):
        at = ", ".join(current) or "none (an empty database)"
        raise SchemaMismatch(
            f"the database schema is at revision {at}, this relay needs {heads[0]}: run e2ee-relay migrate"
        )
