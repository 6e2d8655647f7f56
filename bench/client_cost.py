"""``e2ee-bench client``: what one message costs the client core (``ChatClient``), against the length
of the conversation already in its history and the number of its own messages waiting in the outbox.

A relay process (level 4, SQLite, no rate limits) and two ``ChatClient`` in this process, alice and
bob in one conversation. For each history length (messages already in both caches) alice sends
bursts: ``k`` messages queued at once (all of them in the outbox together, as for a user whose relay
comes back after a while), the burst ending when the relay stored every one and bob opened every one.
Per message of a burst:

* **client CPU**: this process's CPU time (both clients and their worker threads; the relay is
  another process), in ms;
* **wall**: the burst's wall time divided by ``k``, in ms;
* **cache rows**: rows each client's history cache wrote (SQLite ``total_changes``: the message, the
  cursor and counters, the unread count), which must not grow with either length
  (``tests/client/test_outbox_cost.py`` checks that without timing);
* **record events**: ``RecordChanged`` events alice's client announced (each one redraws a line).

Before the fix of issue #15's leftover, every landed line rewrote every unsent message (2 + k rows
and k + 1 events per message in a burst of k).
"""

from __future__ import annotations

import asyncio
import collections
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from client_tui.core import ChatClient, MessageReceived, MessageStored, RecordChanged
from shared.keys import Identity

from .relays import start_relay

PASSWORD = "bench-password"
CHEAP_KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}  # the keystore's cost is not measured here
FILL_CHUNK = 20  # the history is filled in bursts this small


class _Counts:
    """The events one client announced, counted by type (drains ``client.events``)."""

    def __init__(self, client: ChatClient) -> None:
        self.n: collections.Counter[type] = collections.Counter()
        self._changed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._drain(client))

    async def _drain(self, client: ChatClient) -> None:
        while True:
            self.n[type(await client.events.get())] += 1
            self._changed.set()

    async def until(self, kind: type, count: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while self.n[kind] < count:
                self._changed.clear()
                await self._changed.wait()

    def stop(self) -> None:
        self._task.cancel()


async def _people(url: str, root: Path, bits: int) -> tuple[ChatClient, ChatClient, str]:
    clients = []
    for name in ("alice", "bob"):
        c = ChatClient(url, name, root, kdf=CHEAP_KDF)
        await c.register(PASSWORD, f"{name} passphrase", identity=Identity.generate(name, bits))
        clients.append(c)
    alice, bob = clients
    cid = await alice.create_conversation("bench", ["bob"])
    for c in clients:
        await c.refresh_conversations()
        await c.connect()
        await c.wait_synced()
    return alice, bob, cid


async def _burst(alice: ChatClient, bob: ChatClient, cid: str, counts: dict, k: int, label: str) -> dict:
    """Queue ``k`` messages at once; per message: client CPU and wall ms, cache rows, record events."""
    assert alice.history is not None and bob.history is not None
    stored, received = counts["alice"].n[MessageStored] + k, counts["bob"].n[MessageReceived] + k
    events0 = counts["alice"].n[RecordChanged]
    rows0 = (await alice.history.rows_written(), await bob.history.rows_written())
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(k):
        await alice.queue_text(cid, f"{label} {i}")
    await counts["alice"].until(MessageStored, stored, timeout=60 + k)
    await counts["bob"].until(MessageReceived, received, timeout=60 + k)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rows = (await alice.history.rows_written() - rows0[0], await bob.history.rows_written() - rows0[1])
    return {
        "outbox": k,
        "client_cpu_ms": cpu * 1000 / k,
        "wall_ms": wall * 1000 / k,
        "sender_rows": rows[0] / k,
        "receiver_rows": rows[1] / k,
        "sender_record_events": (counts["alice"].n[RecordChanged] - events0) / k,
    }


async def run_async(histories: tuple[int, ...], outboxes: tuple[int, ...], bits: int, say) -> dict:
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-client-") as tmp:
        root = Path(tmp)
        relay = start_relay(root / "relay", 4)
        alice = bob = None
        try:
            alice, bob, cid = await _people(relay.url, root / "clients", bits)
            counts = {"alice": _Counts(alice), "bob": _Counts(bob)}
            rows = []
            for history in histories:
                say(f"client: {history} messages in the history")
                while (have := counts["bob"].n[MessageReceived]) < history:
                    await _burst(alice, bob, cid, counts, min(FILL_CHUNK, history - have), "fill")
                for k in outboxes:
                    at = counts["bob"].n[MessageReceived]
                    rows.append({"history": at, **await _burst(alice, bob, cid, counts, k, f"burst {k}")})
            for c in counts.values():
                c.stop()
            return {"params": {"histories": list(histories), "outboxes": list(outboxes), "bits": bits}, "rows": rows}
        finally:
            for c in (alice, bob):
                if c is not None:
                    await c.close()
            relay.stop()


def run(
    progress: Callable[[str], None] | None = None,
    histories: tuple[int, ...] = (10, 2000),
    outboxes: tuple[int, ...] = (10, 500),
    bits: int = 2048,
) -> dict:
    """Run the measurements (see the module's docstring); JSON-ready (ms, rows, events per message)."""
    return asyncio.run(run_async(histories, outboxes, bits, progress or (lambda _label: None)))


def section(result: dict, results: dict) -> str:
    """The client core's lines of REPORT.md ("Beyond the article")."""
    rows = [
        f"| {r['history']:,} | {r['outbox']:,} | {r['client_cpu_ms']:.2f} | {r['wall_ms']:.2f} | "
        f"{r['sender_rows']:.1f} / {r['receiver_rows']:.1f} | {r['sender_record_events']:.1f} |"
        for r in result["rows"]
    ]
    return (
        "### The client core per message\n\nTwo clients in one process, the relay in another; alice queues "
        "a burst of messages at once (her outbox holds them all), bob opens them. Per message, against "
        "the messages already in the history and the burst (the outbox):\n\n"
        "| history | outbox | client CPU ms | wall ms | cache rows sender / receiver | record events |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def print_result(console, result: dict) -> None:
    """The same figures on the console."""
    for r in result["rows"]:
        console.print(
            f"client: history {r['history']:,}, outbox {r['outbox']:,}: {r['client_cpu_ms']:.2f} ms CPU, "
            f"{r['wall_ms']:.2f} ms wall per message; cache rows {r['sender_rows']:.1f} sender, "
            f"{r['receiver_rows']:.1f} receiver; {r['sender_record_events']:.1f} record events"
        )
