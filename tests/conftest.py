"""Shared fixtures: relays on 127.0.0.1 (in this process unless a test needs a process), clients, test keys."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from client_tui.core import ChatClient
from shared.keys import Identity
from tests.helpers import logstate
from tests.helpers.clients import close_all
from tests.helpers.config import FAST_KDF, PASSWORD, TEST_BITS, passphrase
from tests.helpers.relays import allow_processes, marked_process, relay_pids, start_relay
from tests.helpers.world import World


@pytest.fixture(autouse=True)
def _relay_processes_only_when_marked(request):
    allow_processes(marked_process(request))


@pytest.fixture(autouse=True)
def _logging_left_as_found():
    """A test leaves the ``e2ee*`` loggers and the root level as it found them (see
    ``tests.helpers.logstate``): a leak fails the test that made it, and is undone."""
    before = logstate.snapshot()
    yield
    changed = logstate.changes(before, logstate.snapshot())
    logstate.restore(before)
    assert not changed, "the test changed the process's logging and left it so:\n" + "\n".join(changed)


@pytest.fixture(scope="session", autouse=True)
def _no_relay_process_outlives_the_run(tmp_path_factory):
    """After the session: no relay process with a data folder of this run is alive (a test or tool
    that leaks one fails the run here; the leaked relays are killed)."""
    yield
    left = relay_pids(tmp_path_factory.getbasetemp())
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"relay processes of this test run still alive after it (killed now): {left}"


@pytest.fixture(scope="session")
def identities() -> dict[str, Identity]:
    """alice, bob, carol and mallory with RSA-2048 keys, generated once per test session."""
    return {name: Identity.generate(name, TEST_BITS) for name in ("alice", "bob", "carol", "mallory")}


@pytest.fixture
def relay(request, tmp_path: Path):
    """A relay (uvicorn, SQLite file) on a free 127.0.0.1 port, for one test: in this process,
    or a real relay process for a test marked ``@pytest.mark.process``."""
    relay = start_relay(tmp_path / "relay", process=marked_process(request))
    yield relay
    relay.stop()


@pytest.fixture
async def world(request, tmp_path: Path, identities):
    """The relays and clients of one test (``tests.helpers.world.World``), torn down at its end;
    its relays are processes in a test marked ``@pytest.mark.process``."""
    w = World(tmp_path, identities, process=marked_process(request))
    yield w
    await w.close()


@pytest.fixture
async def make_client(tmp_path: Path, relay, identities):
    """``await make_client("alice")`` registers a user (RSA-2048: the session's keys for alice, bob,
    carol and mallory, new ones for anyone else) and returns its client."""
    made: list[ChatClient] = []

    async def make(name: str, *, register: bool = True, url: str | None = None, level: int = 4) -> ChatClient:
        client = ChatClient(url or relay.url, name, tmp_path / "clients", kdf=FAST_KDF, relay_level=level)
        if register:
            await client.register(PASSWORD, passphrase(name), bits=TEST_BITS, identity=identities.get(name))
        made.append(client)
        return client

    yield make
    await close_all(*made)
