"""Helpers for tests/security and tests/faults: real relays (honest or hostile), real clients with
their events recorded, a delivery barrier, and reads of the relay's files."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from pathlib import Path

from bench.tools.relayproc import RelayProcess
from client_tui.core import ChatClient, ClientError, GapDetected, MessageReceived, MessageUnreadable
from shared import frames
from shared.keys import Identity
from tests.conftest import FAST_KDF, PASSWORD, start_relay

MAX_SEQ = 2**53 - 1


def passphrase(name: str) -> str:
    return f"{name} passphrase"


def relay_log(relay: RelayProcess) -> str:
    """The relay's log file and its stdout/stderr, as text."""
    return "".join((relay.data_dir / n).read_text(errors="replace") for n in ("relay.log", "relay.stdout")
                   if (relay.data_dir / n).exists())


def attacks(relay: RelayProcess, mode: str, to: str | None = None) -> list[str]:
    """The hostile relay's log lines for each attack it carried out (optionally: on ``to``)."""
    lines = re.findall(rf"hostile {re.escape(mode)}: [^\n]*", (relay.data_dir / "relay.log").read_text())
    return [ln for ln in lines if to is None or f" to {to}" in ln or f" of {to} " in ln]


def db_count(relay: RelayProcess, sql: str = "SELECT count(*) FROM messages") -> int:
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return db.execute(sql).fetchone()[0]
    finally:
        db.close()


class Recorder:
    """Every event a client emits, kept in order (a background task drains ``client.events``)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.events: list = []
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while True:
            self.events.append(await self.client.events.get())

    def of(self, *kinds) -> list:
        return [e for e in self.events if isinstance(e, kinds)]

    @property
    def texts(self) -> list[str]:
        """Texts shown, in the order they were shown."""
        return [e.text for e in self.of(MessageReceived)]

    @property
    def unreadable(self) -> list[tuple[str, str]]:
        """``(delivered sender, reason code)`` of every message shown as "could not verify"."""
        return [(e.sender, e.reason) for e in self.of(MessageUnreadable)]

    @property
    def gaps(self) -> list[tuple[str, tuple[int, ...]]]:
        """Distinct ``(sender, missing counters)`` reports, in order of first report."""
        out: list = []
        for g in self.of(GapDetected):
            if (g.sender, g.missing) not in out:
                out.append((g.sender, g.missing))
        return out

    async def until(self, predicate, timeout: float = 30) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate(self):
            if loop.time() > deadline:
                raise AssertionError(f"condition not met in {timeout} s; events: {self.events[-12:]}")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def barrier(client: ChatClient, timeout: float = 30) -> None:
    """Return once the client processed every frame the relay queued to it before this call.

    An empty ``sync`` is answered after everything already queued on the connection (one
    queue per connection, in order), and the client handles frames one at a time.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        # After a relay restart the client may still be in its reconnect backoff, or in the
        # middle of the sync its connect started: wait for both, then ask (a socket lost in
        # between sends us around again).
        while not (client.online and client._synced.is_set()):
            if loop.time() > deadline:
                raise AssertionError(f"{client.username} not online and synced in {timeout} s "
                                     f"(state {client.state})")
            await asyncio.sleep(0.01)
        client._synced.clear()
        try:
            await client._send_frame(frames.Sync(after=MAX_SEQ))
            break
        except ClientError as exc:
            if exc.code != "offline":
                raise
    await client.wait_synced(max(0.1, deadline - loop.time()))


class World:
    """Relays and clients of one test, torn down at its end."""

    def __init__(self, root: Path, identities: dict[str, Identity]) -> None:
        self.root = root
        self.identities = identities
        self.relays: list[RelayProcess] = []
        self.clients: list[ChatClient] = []
        self.recorders: dict[ChatClient, Recorder] = {}

    def relay(self, *args: str, name: str = "relay", env: dict[str, str] | None = None) -> RelayProcess:
        proc = start_relay(self.root / name, *args, env=env)
        self.relays.append(proc)
        return proc

    def hostile(self, mode: str, *args: str, env: dict[str, str] | None = None) -> RelayProcess:
        """A relay started with ``--hostile MODE --demo-level``."""
        return self.relay("--hostile", mode, "--demo-level", *args, name="hostile-" + mode.replace(":", "-"),
                          env=env)

    async def client(self, relay: RelayProcess, name: str, *, register: bool = True, connect: bool = True,
                     url: str | None = None, identity: Identity | None = None, login: bool = True) -> ChatClient:
        """A ChatClient for ``name`` (keys from the session's fixed identities), its events recorded.

        ``register``: a new account (else log in to the existing one, unless ``login`` is False too).
        """
        client = ChatClient(url or relay.url, name, self.root / "clients", kdf=FAST_KDF, backoff=(0.05, 0.5))
        self.clients.append(client)
        self.recorders[client] = Recorder(client)
        if register:
            await client.register(PASSWORD, passphrase(name), identity=identity or self.identities[name])
        elif login:
            await client.login(PASSWORD, passphrase(name))
        if connect:
            await client.connect()
            await client.wait_synced()
        return client

    def rec(self, client: ChatClient) -> Recorder:
        return self.recorders[client]

    async def close(self) -> None:
        for c in self.clients:
            if not c._http.is_closed:
                with contextlib.suppress(Exception):
                    await c.close()
        for r in self.recorders.values():
            await r.stop()
        for proc in self.relays:
            proc.stop()
