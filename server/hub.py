"""Connections and the in-process hub: one bounded outgoing queue per websocket (frames and
bytes), and which connections each user has on this relay.

Close codes are :class:`shared.session.CloseCode`: 1008 authentication refused (do not retry with
the same token), 1009 frame too large (uvicorn/websockets, before the frame is buffered whole),
1013 send queue overflow (slow reader: reconnect and sync), 1001 relay shutting down, 4401 the
connection's token expired, 4403 its login session ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.websockets import WebSocket

from shared import l3
from shared.session import CloseCode, RelayProtocol

log = logging.getLogger("e2ee.relay")


@dataclass(eq=False)
class Connection:
    """One authenticated websocket with a bounded outgoing queue (frames and bytes)."""

    ws: WebSocket
    user: str
    user_id: int
    max_frames: int
    max_bytes: int
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)  # None: close now
    pending_bytes: int = 0
    closing: str | None = None  # why the relay closes it (None: open, or closed by the peer)
    close_code: int = CloseCode.GOING_AWAY
    session: l3.Session | None = None  # level 3: the session key shared with this client
    protocol: RelayProtocol | None = None  # the session's state (server.endpoint drives it)
    expiry: asyncio.TimerHandle | None = None  # closes the connection when its token expires
    sid: str | None = None  # the login session of its token (levels 2-4)
    # Shared database (server.sendpath, ordered delivery): every message for this user with
    # seq <= delivered has been queued here (None: not known yet); one pull runs at a time.
    delivered: int | None = None
    pulling: bool = False
    pull_again: bool = False
    c2r_seq: int = 0  # level 3: last sequence number received from the client
    r2c_seq: int = 0  # level 3: last sequence number sent to the client

    def close(self, code: int, reason: str) -> None:
        """Close after the frames already queued; later frames are dropped."""
        if not self.closing:
            self.closing, self.close_code = reason, code
            self.queue.put_nowait(None)

    def enqueue(self, data: bytes) -> bool:
        """Queue one frame; on overflow mark the connection for closing (1013) and return False."""
        if self.closing:
            return False
        if self.queue.qsize() >= self.max_frames or self.pending_bytes + len(data) > self.max_bytes:
            log.warning(
                "slow reader user=%s queued=%d bytes=%d: disconnecting",
                self.user,
                self.queue.qsize(),
                self.pending_bytes,
            )
            self.close(CloseCode.SLOW_READER, "send queue full: reconnect and sync")
            return False
        self.pending_bytes += len(data)
        self.queue.put_nowait(data)
        return True

    async def pump(self) -> None:
        """Send queued frames in order until closed."""
        while True:
            data = await self.queue.get()
            if data is None:
                with contextlib.suppress(Exception):
                    await self.ws.close(self.close_code, self.closing or "")
                return
            self.pending_bytes -= len(data)
            await self.ws.send_text(data.decode("utf-8"))


class Hub:
    """In-process fan-out: which connections each user has on this relay."""

    def __init__(self) -> None:
        self._conns: dict[int, set[Connection]] = {}

    def add(self, conn: Connection) -> None:
        """An authenticated connection joins its user's."""
        self._conns.setdefault(conn.user_id, set()).add(conn)

    def remove(self, conn: Connection) -> None:
        """A closed connection leaves (no-op if it is not here)."""
        conns = self._conns.get(conn.user_id)
        if conns:
            conns.discard(conn)
            if not conns:
                del self._conns[conn.user_id]

    def deliver(
        self, user_ids: list[int], data: bytes | Callable[[Connection], bytes], exclude: Connection | None = None
    ) -> int:
        """Queue ``data`` (or ``data(conn)``, built per connection) to every connection of
        ``user_ids`` except ``exclude``; return how many connections took it."""
        n = 0
        for uid in user_ids:
            for conn in list(self._conns.get(uid, ())):
                if conn is not exclude and conn.enqueue(data(conn) if callable(data) else data):
                    n += 1
        return n

    def of(self, user_id: int) -> list[Connection]:
        """The connections of ``user_id`` on this relay."""
        return list(self._conns.get(user_id, ()))

    def online(self, user_id: int) -> bool:
        """Whether ``user_id`` has a connection on this relay."""
        return user_id in self._conns

    def all(self) -> list[Connection]:
        """Every connection on this relay."""
        return [c for conns in self._conns.values() for c in conns]
