"""The scale-out path's tools: a fresh PostgreSQL database, a cuttable TCP path to Redis, two relays
on one database and broker, and a wait for a relay's broker link."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from pathlib import Path

import asyncpg
import httpx2
import pytest

from client_tui.core import ChatClient
from tests.helpers.config import FAST_KDF, PASSWORD, TEST_BITS, in_ci, passphrase
from tests.helpers.relays import start_relay

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = ("127.0.0.1", 6379)


def unavailable(what: str, exc: Exception) -> None:
    if in_ci():
        pytest.fail(f"{what} unreachable under CI: {exc!r}")
    pytest.skip(f"{what} unreachable ({type(exc).__name__}); CI unset")


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
        await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.close()


@contextlib.asynccontextmanager
async def database_url(kind: str, tmp_path: Path):
    """An empty database for the ``async with`` block, ``kind`` "sqlite" (a file in ``tmp_path``)
    or "postgresql" (:func:`fresh_pg_url`): its SQLAlchemy async URL."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'relay.db'}"
    else:
        async with fresh_pg_url() as url:
            yield url


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


def two_relays(tmp_path, pg_url: str, broker_url: str, env: dict[str, str] | None = None):
    """Relays A and B on one database and one broker channel, sharing A's JWT secret and its key
    transparency log key (relays on one database sign one log: PROTOCOL.md §14.1)."""
    channel = f"e2ee-test-{secrets.token_hex(4)}"
    args = ["--database-url", pg_url, "--broker", broker_url, "--broker-channel", channel]
    a = start_relay(tmp_path / "relay-a", *args, env=env, process=True)
    shared = {"E2EE_JWT_SECRET": jwt_secret(a), "E2EE_KT_KEY_FILE": str(a.data_dir / "kt-ed25519.pem")}
    b = start_relay(tmp_path / "relay-b", *args, env={**(env or {}), **shared}, process=True)
    return a, b


def jwt_secret(relay) -> str:
    return (relay.data_dir / "jwt.secret").read_text().strip()


async def user(url: str, name: str, root, register: bool = True) -> ChatClient:
    c = ChatClient(url, name, root, kdf=FAST_KDF)
    if register:
        await c.register(PASSWORD, passphrase(name), bits=TEST_BITS)
    return c


async def wait_broker(relay, up: bool, timeout: float = 20) -> None:
    async with httpx2.AsyncClient() as http:
        for _ in range(int(timeout / 0.1)):
            m = (await http.get(relay.url + "/v1/metrics", headers=relay.operator_headers)).json()
            if m["broker"]["up"] is up:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"broker never became up={up}")
