"""Waiting on real clients: the next message, every event recorded, a delivery barrier, a condition."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

from client_tui.core import ChatClient, GapDetected, MessageReceived, MessageUnreadable


async def next_message(client: ChatClient, timeout: float = 15) -> MessageReceived:
    """The next decrypted message the client emits (other events are skipped)."""
    while True:
        ev = await asyncio.wait_for(client.events.get(), timeout)
        if isinstance(ev, MessageReceived):
            return ev


async def messages_of(client: ChatClient, conversation: str, limit: int = 200) -> list:
    """The client's cached records of ``conversation`` that are messages (not the lines about
    membership changes), oldest first."""
    return [r for r in await client.load_history(conversation, limit) if r.state != "system"]


async def close_all(*clients: ChatClient) -> None:
    """Close clients that are still open (idempotent)."""
    for c in clients:
        if not c.rest.http.is_closed:
            await c.close()


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


class Recorder:
    """Every event a client emits, kept in order (a background task drains ``client.events``)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.events: list = []
        self._index: dict[tuple, tuple[int, list]] = {}
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while True:
            self.events.append(await self.client.events.get())

    def of(self, *kinds) -> list:
        """The events of ``kinds``, in order. Each kind-tuple keeps an index that only looks at events
        recorded since its last call: ``until()`` polls predicates built on this every 10 ms, and a
        full scan per poll made long runs (1,500 messages, ~10k events) starve the clients' loop."""
        scanned, found = self._index.get(kinds, (0, []))
        found.extend(e for e in itertools.islice(self.events, scanned, None) if isinstance(e, kinds))
        self._index[kinds] = (len(self.events), found)
        return list(found)

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
    try:
        await client.settle(timeout)  # after a reconnect backoff and a running sync, if any
    except TimeoutError:
        raise AssertionError(f"{client.username} not online and synced in {timeout} s (state {client.state})") from None
    for _ in range(100):  # a Recorder's task takes what the barrier let through (all at once, when it runs)
        if client.events.empty():
            break
        await asyncio.sleep(0)
