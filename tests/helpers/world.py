"""``World``: the relays (honest or hostile) and real clients of one test, torn down at its end."""

from __future__ import annotations

import contextlib
from pathlib import Path

from bench.tools.relayproc import RelayProcess
from client_tui.core import ChatClient
from shared.keys import Identity
from tests.helpers.clients import Recorder
from tests.helpers.config import FAST_KDF, PASSWORD, passphrase
from tests.helpers.inprocess import InProcessRelay
from tests.helpers.relays import start_relay


class World:
    """Relays and clients of one test, torn down at its end."""

    def __init__(self, root: Path, identities: dict[str, Identity], process: bool = False) -> None:
        self.root = root
        self.process = process
        self.identities = identities
        self.relays: list[InProcessRelay | RelayProcess] = []
        self.clients: list[ChatClient] = []
        self.recorders: dict[ChatClient, Recorder] = {}

    def relay(
        self, *args: str, name: str = "relay", env: dict[str, str] | None = None, process: bool | None = None
    ) -> InProcessRelay | RelayProcess:
        """A relay with ``e2ee-relay`` flags ``args``, stopped at the end of the test: in this
        process unless ``process`` (default: the World's; see ``tests.helpers.relays.start_relay``)."""
        relay = start_relay(self.root / name, *args, env=env, process=self.process if process is None else process)
        self.relays.append(relay)
        return relay

    def hostile(
        self, mode: str, *args: str, env: dict[str, str] | None = None, process: bool | None = None
    ) -> InProcessRelay | RelayProcess:
        """A relay started with ``--hostile MODE --demo-level``."""
        return self.relay(
            "--hostile", mode, "--demo-level", *args, name="hostile-" + mode.replace(":", "-"), env=env, process=process
        )

    async def client(
        self,
        relay,
        name: str,
        *,
        register: bool = True,
        connect: bool = True,
        url: str | None = None,
        identity: Identity | None = None,
        login: bool = True,
        level: int = 4,
        **options,
    ) -> ChatClient:
        """A ChatClient for ``name`` (keys from the session's fixed identities), its events recorded.

        ``register``: a new account (else log in to the existing one, unless ``login`` is False too).
        ``level``: the relay's (1-3: accounts for a ``LevelClient``; ``ChatClient(relay_level=)``).
        ``options``: more ``ChatClient`` arguments (``wall_clock``, ``key_lifetime_days``, ...).
        """
        client = ChatClient(
            url or relay.url,
            name,
            self.root / "clients",
            kdf=FAST_KDF,
            backoff=(0.05, 0.5),
            relay_level=level,
            **options,
        )
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
            if not c.rest.http.is_closed:
                with contextlib.suppress(Exception):
                    await c.close()
        for r in self.recorders.values():
            await r.stop()
        for relay in self.relays:
            relay.stop()
