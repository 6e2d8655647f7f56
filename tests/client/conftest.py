"""Fixtures for client tests: an offline client fed frames by hand (a hostile relay), event helpers."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import msgspec
import pytest

from client_tui.core import ChatClient, Contact, keystore
from shared import envelope, frames, membership
from shared.keys import Identity
from shared.membership_chain import Chain
from tests.conftest import FAST_KDF


async def wait_event(client: ChatClient, kind, predicate=lambda e: True, timeout: float = 15):
    """The next event of type ``kind`` matching ``predicate`` (others are dropped)."""
    async def get():
        while True:
            ev = await client.events.get()
            if isinstance(ev, kind) and predicate(ev):
                return ev
    return await asyncio.wait_for(get(), timeout)


def drain(client: ChatClient) -> list:
    out = []
    while not client.events.empty():
        out.append(client.events.get_nowait())
    return out


async def wait_until(predicate, timeout: float = 15, step: float = 0.02) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(step)


async def click_button(pilot, selector: str, timeout: float = 15) -> None:
    """Click the button ``selector`` once it takes a click: Textual's Button ignores clicks while
    disabled and during its 0.2 s ``-active`` flash after the previous press (a second click that
    soon is dropped, as a double click would be)."""
    button = pilot.app.screen.query_one(selector)
    await wait_until(lambda: not button.disabled and not button.has_class("-active"), timeout)
    await pilot.click(selector)


def screen_ready(app, kind, focus: str | None = None) -> bool:
    """The app's screen is a ``kind`` that has composed and mounted its widgets (and ``focus``, a
    selector, has the focus): queries find its widgets and keys reach it. A pushed screen is
    ``app.screen`` at once, but composes, mounts and takes the focus in later turns of the loop;
    under load, a key sent before that goes to no widget and is lost."""
    screen = app.screen
    if not isinstance(screen, kind) or not screen.is_mounted:
        return False
    return focus is None or (screen.focused is not None and screen.focused is screen.query_one(focus))


class Hostile:
    """A relay that is not there: the test hands frames to the client's frame handler directly,
    so it can rewrite, drop, replay or re-route envelopes at will. Each conversation it seals for
    has a verified membership log (alice created it; ``conv`` with bob and carol, another one with
    the members of its first envelope), already known to the client."""

    def __init__(self, client: ChatClient, ids: dict[str, Identity], conv: str = "conv-1") -> None:
        self.client = client
        self.ids = ids
        self.conv = conv
        self.seq = 0
        self.ctr: dict[str, int] = {}
        self.logs: dict[str, list[membership.Statement]] = {}
        self.log = self.log_of(conv, ["alice", "bob", "carol"])

    def log_of(self, conv: str, members: list[str]) -> list[membership.Statement]:
        """The log of ``conv`` (made, and given to the client as verified, on first use)."""
        if conv not in self.logs:
            names = sorted({"alice", *members})
            self.logs[conv] = [membership.create(self.ids["alice"], conv, conv,
                                                 [membership.member_of(self.ids[n].public) for n in names])]
            chain = self.client.membership.chains[conv] = Chain(conv)
            chain.extend(self.logs[conv], lambda user, kid: self.ids[user].public.sign_key)
            self.client.membership.claimed[conv] = (chain.head.ep, chain.head.hash)
        return self.logs[conv]

    def epoch_of(self, conv: str | None = None) -> dict:
        """``epoch``/``head`` of the newest statement of ``conv``'s log, for ``envelope.seal``."""
        head = self.logs[conv or self.conv][-1]
        return {"epoch": head.ep, "head": head.hash}

    @property
    def epoch(self) -> dict:
        return self.epoch_of(self.conv)

    def seal(self, sender: str, text: str, *, to: list[str] | None = None, conv: str | None = None,
             ctr: int | None = None) -> bytes:
        conv = conv or self.conv
        log = self.log_of(conv, to or [sender, self.client.username])
        to = to or list(log[-1].usernames)
        if ctr is None:
            ctr = self.ctr[sender] = self.ctr.get(sender, 0) + 1
        return envelope.seal(text, self.ids[sender], conv, [self.ids[u].public for u in to], counter=ctr,
                             **self.epoch_of(conv))

    async def deliver(self, data: bytes, *, sender: str, conv: str | None = None, seq: int | None = None) -> int:
        if seq is None:
            self.seq += 1
            seq = self.seq
        await self.client._on_frame(frames.Message(seq, conv or self.conv, sender, msgspec.Raw(data)))
        return seq


@pytest.fixture
async def offline_bob(tmp_path: Path, identities):
    """bob's client with keys, cache and alice + carol pinned, never connected (no relay)."""
    client = ChatClient("http://127.0.0.1:9", "bob", tmp_path / "clients", kdf=FAST_KDF)
    local_key = keystore.save(client.keystore_path, identities["bob"], "bob passphrase", FAST_KDF)
    await client._open_local(keystore.KeyBundle(identities["bob"], local_key), "bob passphrase")
    for name in ("alice", "carol"):
        client.contacts[name] = Contact(identities[name].public)
    client.members["conv-1"] = ["alice", "bob", "carol"]
    client.titles["conv-1"] = "hostile"
    client._key_fetched_at = {n: float("inf") for n in ("alice", "carol", "mallory")}  # never fetch
    yield client, Hostile(client, identities)
    await client.close()


def random_local_key() -> bytes:
    return os.urandom(32)


def tui_client(relay, root: Path, name: str) -> ChatClient:
    """A client for app tests: cheap keystore KDF, quick reconnects."""
    return ChatClient(relay.url, name, root, kdf=FAST_KDF, backoff=(0.1, 1.0))


def rendered_text(renderable, width: int = 160) -> str:
    """Plain text of a rich renderable, as the screen would show it."""
    import io

    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()
