"""``e2ee-demo --attacks``: attacks on the trust layer, run against real relays, and their table.

A small registry: each attack is an ``async (folder) -> Outcome`` function that starts its own relay
(hostile where the attack is the relay's) and real clients, carries the attack out, and reports
what the relay did, what each client showed its user, and how many messages the attacker read.
Modules add attacks by exposing ``ATTACKS: dict[name, function]`` and being listed in
:data:`SOURCES` (one line each); a function may return an :class:`Outcome`, or anything with
``attack``, ``shown`` and ``held`` (the attacks that count no messages).

The run fails (exit status 1) if any attacker read anything, any canary text was found in an
attacker's store or frames, or any attack reports that a promise did not hold.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import secrets
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bench.tools.relayproc import RelayProcess
from client_tui.core import ChatClient
from shared import frames

from .demo import forms

SOURCES = ("bench.tools.attacks_membership", "bench.tools.key_attacks", "bench.tools.kt_attacks")
"""Modules whose ``ATTACKS`` the demo runs, in this order."""


@dataclass(frozen=True)
class Outcome:
    """What one attack did and what came of it.

    Attributes:
        name: the attack's name in the registry.
        relay_did: what the relay (or the attacker holding a password) did, in plain words.
        shown: per user, what their client showed them, in plain words.
        attacker: who the attacker is (an account the relay lets in, or a password holder).
        read: messages the attacker read (decrypted); None when the attack counts none.
        canary_hits: canary texts found in the attacker's client store and captured frames.
        held: every other promise of the attack held (nothing unverified shown as verified, ...).
        details: what the tests assert on (warning codes, counts), beyond the table.
    """

    name: str
    relay_did: str
    shown: dict[str, str]
    attacker: str = ""
    read: int | None = 0
    canary_hits: int = 0
    held: bool = True
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.read and not self.canary_hits and self.held


Attack = Callable[[Path], Awaitable[object]]

FAST_RELAY = {
    "E2EE_ARGON2_TIME_COST": "1",
    "E2EE_ARGON2_MEMORY_KIB": "8192",
    "E2EE_ARGON2_PARALLELISM": "1",
    "E2EE_RATE_LOGINS_PER_MIN": "600",
}
FAST_KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}
PASSWORD = "attack demo password"


class Capturing(ChatClient):
    """A client that keeps every frame the relay sent it (as the relay sent it): the attacker's
    "captured frames", searched for canary texts afterwards."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.frames: list[bytes] = []

    async def _on_event(self, event) -> None:
        if isinstance(event, frames.RelayFrame):  # messages, receipts, events (the session keeps the rest)
            self.frames.append(frames.encode(event))
        await super()._on_event(event)


class Stage:
    """One attack's relay (``--hostile MODE --demo-level``, or honest with ``mode`` None) and its
    clients (2048-bit keys, cheap key derivation: throwaway demo accounts), torn down together.
    Every client's events are kept in :attr:`seen` (per username)."""

    def __init__(self, root: Path, mode: str | None) -> None:
        args = ["--hostile", mode, "--demo-level"] if mode else []
        self.root = Path(root)
        self.relay = RelayProcess(self.root / "relay", extra_args=args, env=FAST_RELAY).start()
        self.clients: dict[str, ChatClient] = {}
        self.seen: dict[str, list] = {}
        self._drains: list[asyncio.Task] = []

    async def user(self, name: str, *, connect: bool = True, capture: bool = False) -> ChatClient:
        client = (Capturing if capture else ChatClient)(
            self.relay.url, name, self.root / "clients", kdf=FAST_KDF, backoff=(0.05, 0.5)
        )
        self.clients[name] = client
        self.seen[name] = []
        self._drains.append(asyncio.create_task(self._drain(client, self.seen[name])))
        await client.register(PASSWORD, f"{name} passphrase", bits=2048)
        if connect:
            await client.connect()
            await client.wait_synced()
        return client

    @staticmethod
    async def _drain(client: ChatClient, into: list) -> None:
        while True:
            into.append(await client.events.get())

    def of(self, name: str, kind) -> list:
        return [e for e in self.seen[name] if isinstance(e, kind)]

    async def close(self) -> None:
        for c in self.clients.values():
            with contextlib.suppress(Exception):
                await c.close()
        for t in self._drains:
            t.cancel()
        self.relay.stop()


def canaries(attack: str, n: int) -> list[str]:
    """``n`` fresh texts to send during ``attack`` and search for afterwards."""
    return [f"canary {attack} {i} {secrets.token_hex(12)}" for i in range(n)]


async def canary_hits(client: ChatClient, texts: list[str]) -> int:
    """How often any of ``texts`` (UTF-8, base64, base64url, hex) occurs in the attacker's client
    store (every file of its profile, and its history's decrypted texts) and its captured frames."""
    blobs = [p.read_bytes() for p in client.profile.rglob("*") if p.is_file()]
    blobs += getattr(client, "frames", [])
    for conv in list(client.titles) + list(client.members):
        blobs += [(r.text or "").encode() for r in await client.load_history(conv, 1000)]
    return sum(1 for blob in blobs for text in texts for needle in forms(text).values() if needle in blob)


def registry() -> dict[str, Attack]:
    """Every attack of every module in :data:`SOURCES`, by name, in order."""
    out: dict[str, Attack] = {}
    for name in SOURCES:
        out.update(getattr(importlib.import_module(name), "ATTACKS", {}))
    return out


def as_outcome(name: str, result: object) -> Outcome:
    """An :class:`Outcome` from what an attack returned (an Outcome, or ``attack``/``shown``/``held``)."""
    if isinstance(result, Outcome):
        return result
    return Outcome(
        name,
        str(getattr(result, "attack", "")),
        {"user": str(getattr(result, "shown", ""))},
        read=None,
        held=bool(getattr(result, "held", False)),
    )


async def run(names: list[str] | None = None, root: Path | None = None) -> list[Outcome]:
    """Run the attacks ``names`` (default: all), each in its own folder under ``root``."""
    attacks = registry()
    unknown = sorted(set(names or ()) - set(attacks))
    if unknown:
        raise ValueError(f"unknown attacks: {', '.join(unknown)}; known: {', '.join(attacks)}")
    with tempfile.TemporaryDirectory(prefix="e2ee-attacks-") as tmp:
        base = Path(root or tmp)
        return [as_outcome(n, await attacks[n](base / n)) for n in (names or list(attacks))]


def table(outcomes: list[Outcome]) -> Table:
    """The table: attack, what the relay did, what each client showed, messages the attacker read.
    Every string is rendered as plain text (``rich.text.Text``), never as markup."""
    t = Table(title="attacks on the trust layer", show_lines=True, title_justify="left")
    for col in ("attack", "what the relay did", "what each client showed", "attacker read"):
        t.add_column(col, overflow="fold")
    for o in outcomes:
        shown = "\n".join(f"{user}: {words}" for user, words in o.shown.items())
        read = "n/a" if o.read is None else str(o.read)
        if o.canary_hits:
            read += f" ({o.canary_hits} canary hits)"
        verdict = Text(read + ("" if o.ok else "  FAILED"), style="bold" if o.ok else "bold red")
        t.add_row(Text(o.name), Text(o.relay_did), Text(shown), verdict)
    return t


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Run the attacks and print the table; 0 only if no attacker read anything and every
    promise held."""
    parser = argparse.ArgumentParser(prog="e2ee-demo --attacks")
    parser.add_argument("--only", nargs="*", metavar="NAME", help="run only these attacks")
    parser.add_argument("--data-dir", type=Path, help="folder for the relays and clients (default: a temp dir)")
    args = parser.parse_args(argv)
    console = console or Console(width=140)
    quiet = logging.NullHandler()  # the clients' warnings are in the table, not on stderr
    logging.getLogger("e2ee").addHandler(quiet)
    try:
        outcomes = asyncio.run(run(args.only, args.data_dir))
    finally:
        logging.getLogger("e2ee").removeHandler(quiet)
    console.print(table(outcomes))
    failed = [o.name for o in outcomes if not o.ok]
    console.print(
        Text(
            f"{len(outcomes) - len(failed)} of {len(outcomes)} attacks held; attackers read "
            f"{sum(o.read or 0 for o in outcomes)} messages" + (f"; FAILED: {', '.join(failed)}" if failed else "")
        )
    )
    return 1 if failed else 0
