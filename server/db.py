"""Engines and sessions: SQLite connections get WAL, a busy timeout, foreign keys and
``BEGIN IMMEDIATE`` for write transactions (execution option ``immediate=True``); PostgreSQL a
bound on idle transactions. The schema is :mod:`server.models`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, SingletonThreadPool

Sessions = async_sessionmaker[AsyncSession]
"""Opens a database session: ``async with sessions() as session: ...`` (reads; writes go through the writer)."""


def _sqlite_settings(sync: Engine, synchronous: str, autocheckpoint: bool = True) -> None:
    @event.listens_for(sync, "connect")
    def _on_connect(dbapi_conn: Any, _record: ConnectionPoolEntry) -> None:
        # dbapi_conn: sqlite3's connection, or aiosqlite's adapter of it (both take these calls)
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=10000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        if not autocheckpoint:
            cur.execute("PRAGMA wal_autocheckpoint=0")
        cur.close()

    @event.listens_for(sync, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def create_engine(url: str, *, sqlite_synchronous: str = "NORMAL") -> AsyncEngine:
    """Create the async engine for ``url`` with this project's per-connection settings."""
    # PostgreSQL: a relay frozen inside a transaction (it holds the commit-order lock of
    # server.store.insert_messages) is cut off after 30 s instead of stalling every relay's sends
    args = {"server_settings": {"idle_in_transaction_session_timeout": "30000"}} if "asyncpg" in url else {}
    engine = create_async_engine(url, pool_pre_ping=False, connect_args=args)
    if engine.dialect.name == "sqlite":
        _sqlite_settings(engine.sync_engine, sqlite_synchronous)
    return engine


def commits_wait_for_disk(sqlite_synchronous: str) -> bool:
    """Whether an SQLite commit waits for an fsync: yes with ``FULL``/``EXTRA``; with ``NORMAL``
    in WAL mode a commit only appends to the WAL (it survives a killed process, not a power
    cut) and only checkpoints fsync."""
    return sqlite_synchronous.upper() != "NORMAL"


def create_writer_engine(url: str, *, sqlite_synchronous: str = "NORMAL") -> Engine | None:
    """For SQLite, a sync ``sqlite3`` engine on the same file for the writer (one connection,
    same pragmas); None for other databases (the writer uses the async engine). When commits
    do not wait for the disk the writer checkpoints the WAL itself, from its thread, so this
    connection's automatic checkpoints are off (see :class:`server.writer.Writer`)."""
    if not url.startswith("sqlite+aiosqlite:"):
        return None
    engine = sa_create_engine(url.replace("sqlite+aiosqlite:", "sqlite:", 1), poolclass=SingletonThreadPool)
    _sqlite_settings(engine, sqlite_synchronous, autocheckpoint=commits_wait_for_disk(sqlite_synchronous))
    return engine


def sessionmaker(engine: AsyncEngine) -> Sessions:
    """Sessions on ``engine`` whose objects stay readable after the commit."""
    return async_sessionmaker(engine, expire_on_commit=False)
