"""A client for the demonstration levels 1-3, where the relay can read every message.

Level 4 (the product) is :class:`client_tui.core.ChatClient`; it refuses these relays. This
client exists so the demo and the bench can run the same conversation at the levels the seed
article compares, along the same websocket path:

* level 1: no authentication (the first frame names the user), plain JSON envelopes;
* level 2: the JWT in the Authorization header, plain JSON envelopes;
* level 3: the JWT, then a session key wrapped to the relay's pinned RSA key (``shared.l3``);
  every frame's text is AES-256-GCM encrypted between this client and the relay, which decrypts,
  stores readable text and re-encrypts for each recipient.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
from dataclasses import dataclass

import msgspec

from shared import frames, l3, plain
from shared.errors import LevelMismatch
from shared.session import ClientProtocol, SendRefused

from .core.errors import ClientError
from .session_socket import SessionSocket

__all__ = ["LevelClient", "LevelMessage", "LevelMismatch", "LevelSent"]


@dataclass(frozen=True)
class LevelMessage:
    """A message received at level 1-3 (already readable: the relay could read it too)."""

    seq: int
    conversation: str
    sender: str
    text: str
    mid: str
    sent_at_ms: int


@dataclass(frozen=True)
class LevelSent:
    mid: str
    seq: int


class LevelClient:
    """One user's websocket session with a level 1-3 relay: a loop around
    :class:`shared.session.ClientProtocol`, which makes the handshake of each level.

    Args:
        server_url: relay base URL (``http://`` or ``https://``).
        username: the account (registered beforehand through the REST API).
        level: the level to speak (1, 2 or 3); the relay's ``hello`` must announce the same.
        token: the JWT (levels 2 and 3).
        relay_key: the relay's RSA key (SPKI DER) pinned earlier, for level 3; when None the key
            announced in ``hello`` is pinned on first use (see :attr:`pinned_relay_key`).
        ssl: an ``ssl.SSLContext`` for ``https://`` relays (e.g. trusting a dev certificate).
    """

    def __init__(
        self,
        server_url: str,
        username: str,
        level: int,
        token: str | None = None,
        relay_key: bytes | None = None,
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        if level not in (1, 2, 3):
            raise ValueError("LevelClient speaks levels 1-3; use ChatClient for level 4")
        self.server_url = server_url.rstrip("/")
        self.username = username
        self.level = level
        self.token = token
        self.pinned_relay_key = relay_key
        self.ssl = ssl
        self.events: asyncio.Queue[LevelMessage] = asyncio.Queue()
        self._socket: SessionSocket | None = None
        self._reader: asyncio.Task | None = None
        self._c2r = 0
        self._r2c = 0
        self._pending: dict[str, asyncio.Future] = {}

    @property
    def _session(self) -> l3.Session | None:
        return self._socket.protocol.l3 if self._socket is not None else None

    async def connect(self) -> None:
        """Open the websocket, authenticate for this level and start reading.

        Raises:
            LevelMismatch (DowngradeRefused for a lower level), AuthFailed, KeyInvalid (level 3:
            the relay key changed since pinned).
        """
        protocol = ClientProtocol(self.username, level=self.level, token=self.token, relay_key=self.pinned_relay_key)
        self._socket, _ = await SessionSocket.open(self.server_url, protocol, ssl=self.ssl)
        self.pinned_relay_key = protocol.relay_key
        self._reader = asyncio.create_task(self._read_loop(self._socket))

    async def sync(self, after: int = 0) -> None:
        """Ask for stored messages after ``after`` (they arrive as events, in seq order, page by page)."""
        self._socket.protocol.start_sync(after)
        await self._socket.flush()

    async def send_text(self, conversation: str, text: str, timeout: float = 30) -> LevelSent:
        """Send ``text``; return its ``mid`` and the relay's ``seq`` once stored.

        Raises:
            E2EEError with the relay's error code, TimeoutError.
        """
        m = plain.make(text, conversation, self.username)
        if self._session is not None:
            self._c2r += 1
            token = l3.seal(
                self._session,
                text,
                direction=l3.C2R,
                conversation=conversation,
                sender=self.username,
                seq=self._c2r,
                message_id=m.mid,
                sent_at_ms=m.ts,
            )
            payload = msgspec.json.encode(token)
        else:
            payload = plain.encode(m)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[m.mid] = fut
        self._socket.protocol.send(conversation, payload, m.mid)
        await self._socket.flush()
        return LevelSent(m.mid, await asyncio.wait_for(fut, timeout))

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def _read_loop(self, socket: SessionSocket) -> None:
        async for event in socket.events():
            if isinstance(event, frames.Message):
                await self.events.put(self._read_message(event))
            elif isinstance(event, frames.Stored):
                fut = self._pending.pop(event.mid, None)
                if fut is not None and not fut.done():
                    fut.set_result(event.seq)
            elif isinstance(event, SendRefused) and event.mid in self._pending:
                e = event.error
                self._pending.pop(event.mid).set_exception(
                    ClientError(e.message, code=e.code, field=e.field, detail=e.detail)
                )

    def _read_message(self, frame: frames.Message) -> LevelMessage:
        raw = bytes(frame.envelope)
        if self._session is None:
            m = plain.parse(raw, max_bytes=len(raw))
            return LevelMessage(frame.seq, m.cid, m.snd, m.text, m.mid, m.ts)
        opened = l3.open(self._session, msgspec.json.decode(raw, type=str), direction=l3.R2C, after_seq=self._r2c)
        h = opened.header
        self._r2c = h.seq
        return LevelMessage(frame.seq, h.cid, h.snd, opened.text, h.mid, h.ts)
