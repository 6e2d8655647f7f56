"""Shared fixtures: real relay processes on 127.0.0.1, fast account settings, fixed test keys."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.tools.relayproc import RelayProcess
from client_tui.core import ChatClient
from shared.keys import Identity

# Cheap argon2id for the relay's password hashes in tests (production defaults are 64 MiB, t=3).
FAST_RELAY_ENV = {
    "E2EE_ARGON2_TIME_COST": "1",
    "E2EE_ARGON2_MEMORY_KIB": "8192",
    "E2EE_ARGON2_PARALLELISM": "1",
}
FAST_KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}
TEST_BITS = 2048
PASSWORD = "pw-for-tests-only"


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


@pytest.fixture(scope="session")
def identities() -> dict[str, Identity]:
    """alice, bob, carol and mallory with RSA-2048 keys, generated once per test session."""
    return {name: Identity.generate(name, TEST_BITS) for name in ("alice", "bob", "carol", "mallory")}


def start_relay(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> RelayProcess:
    """Start ``python -m server`` with test settings (``env`` adds or overrides ``E2EE_*``)."""
    return RelayProcess(data_dir, extra_args=list(args), env={**FAST_RELAY_ENV, **(env or {})}).start()


@pytest.fixture
def relay(tmp_path: Path):
    """A real relay process (uvicorn, SQLite file) on a free 127.0.0.1 port, for one test."""
    proc = start_relay(tmp_path / "relay")
    yield proc
    proc.stop()


@pytest.fixture
async def make_client(tmp_path: Path, relay: RelayProcess):
    """``await make_client("alice")`` registers a user (RSA-2048) and returns its client."""
    made: list[ChatClient] = []

    async def make(name: str, *, register: bool = True, url: str | None = None) -> ChatClient:
        client = ChatClient(url or relay.url, name, tmp_path / "clients", kdf=FAST_KDF)
        if register:
            await client.register(PASSWORD, f"{name} passphrase", bits=TEST_BITS)
        made.append(client)
        return client

    yield make
    await close_all(*made)


async def close_all(*clients: ChatClient) -> None:
    """Close clients that are still open (idempotent)."""
    for c in clients:
        if not c._http.is_closed:
            await c.close()
