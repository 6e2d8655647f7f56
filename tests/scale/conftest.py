"""Fixtures for the scale-out path: a fresh PostgreSQL database per test and a cuttable
TCP path to this machine's Redis. They skip only when a service is unreachable and ``CI`` is
unset; under CI an unreachable service fails the run."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.helpers.scale import REDIS, RedisPath, fresh_pg_url, unavailable
from tests.helpers.writing import writer_on


@pytest.fixture
async def pg_url():
    """A new database on the local PostgreSQL, dropped afterwards: its SQLAlchemy asyncpg URL."""
    async with fresh_pg_url() as url:
        yield url


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
