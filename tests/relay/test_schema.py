"""One owner of the schema: the models and the Alembic migrations describe the same tables, on
SQLite and PostgreSQL; messages keep SQLite's AUTOINCREMENT through every migration (0007)."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from server import migrate
from server.models import Base
from tests.helpers.scale import fresh_pg_url


def _in_thread(fn, *args) -> None:
    """Alembic's async env runs its own event loop; the test may be inside one."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(fn, *args).result()


def _diff(sync_url: str) -> list:
    engine = create_engine(sync_url)
    try:
        with engine.connect() as conn:
            return compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()


def test_the_migrations_build_exactly_the_models_tables_on_sqlite(tmp_path):
    db = tmp_path / "relay.db"
    _in_thread(migrate.upgrade, f"sqlite+aiosqlite:///{db}")
    assert _diff(f"sqlite:///{db}") == []
    con = sqlite3.connect(db)
    try:
        ddl = con.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    finally:
        con.close()
    assert "AUTOINCREMENT" in ddl and "expires_at_ms" in ddl


def test_the_newest_migration_goes_down_and_up_again_keeping_messages_autoincrement(tmp_path):
    db = tmp_path / "relay.db"
    url = f"sqlite+aiosqlite:///{db}"
    _in_thread(migrate.upgrade, url)
    _in_thread(command.downgrade, migrate.alembic_config(url), "-1")
    con = sqlite3.connect(db)
    try:
        ddl = con.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
        deliveries = con.execute("SELECT sql FROM sqlite_master WHERE name = 'deliveries'").fetchone()[0]
        version = con.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        con.close()
    assert version == "0010_message_expiry"
    assert "AUTOINCREMENT" in ddl and "expires_at_ms" in ddl
    # 0011 rebuilt deliveries without wrap_kid, keeping its cascades from users and messages
    assert "wrap_kid" not in deliveries and deliveries.count("ON DELETE CASCADE") == 2
    _in_thread(migrate.upgrade, url)
    assert _diff(f"sqlite:///{db}") == []


async def test_the_migrations_build_exactly_the_models_tables_on_postgresql():
    async with fresh_pg_url() as url:
        _in_thread(migrate.upgrade, url)
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                diff = await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), Base.metadata))
        finally:
            await engine.dispose()
    assert diff == []
