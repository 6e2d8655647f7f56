"""Fixtures for the scale-out path: a fresh PostgreSQL database per test and a cuttable
TCP path to this machine's Redis. They skip only when a service is unreachable and ``CI`` is
unset; under CI an unreachable service fails the run."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from tests.conftest import in_ci
from tests.scale.writing import writer_on

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = ("127.0.0.1", 6379)


def unavailable(what: str, exc: Exception) -> None:
    if in_ci():
        pytest.fail(f"{what} unreachable under CI: {exc!r}")
    pytest.skip(f"{what} unreachable ({type(exc).__name__}); CI unset")


@pytest.fixture
async def pg_url():
    """A new database on the local PostgreSQL, dropped afterwards: its SQLAlchemy asyncpg URL."""
    async with fresh_pg_url() as url:
        yield url


@contextlib.asynccontextmanager
async def fresh_pg_url():
    """A new database on the local PostgreSQL for the ``async with`` block: its SQLAlchemy
    asyncpg URL (skips, or fails under CI, when PostgreSQL is unreachable)."""
    name = f"e2ee_{secrets.token_hex(6)}"
    try:
        admin = await asyncpg.connect(PG_ADMIN, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        unavailable("PostgreSQL", exc)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.close()


class RedisPath:
    """A TCP proxy to Redis that the test can cut (relays see Redis unreachable) and restore."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*REDIS)
        except OSError:
            writer.close()
            return
        self._links |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._links -= {writer, up_writer}

    async def cut(self) -> None:
        """Stop accepting and drop every open connection: Redis becomes unreachable."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._links):
            with contextlib.suppress(Exception):
                w.transport.abort()
        self._links.clear()

    async def restore(self) -> None:
        await self.open()


@pytest.fixture
async def redis_path():
    try:
        client = aioredis.Redis(host=REDIS[0], port=REDIS[1], socket_connect_timeout=2)
        await client.ping()
        await client.aclose()
    except (OSError, aioredis.RedisError) as exc:
        unavailable("Redis", exc)
    path = RedisPath()
    await path.open()
    yield path
    await path.cut()


@pytest.fixture(params=["sqlite NORMAL", "sqlite FULL", "postgresql"])
async def writer(request, tmp_path: Path):
    """A writer on SQLite with commits on the event loop (NORMAL) or in its thread (FULL), or
    on PostgreSQL."""
    async with contextlib.AsyncExitStack() as stack:
        if request.param.startswith("sqlite"):
            url = f"sqlite+aiosqlite:///{tmp_path / 'relay.db'}"
        else:
            url = await stack.enter_async_context(fresh_pg_url())
        async for pair in writer_on(url, request.param.partition(" ")[2] or "NORMAL"):
            yield pair
