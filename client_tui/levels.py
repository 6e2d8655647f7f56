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
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from shared import frames, l3, plain
from shared.b64 import b64u_decode
from shared.errors import AuthFailed, E2EEError, ErrorCode, KeyInvalid
from shared.keys import load_wrap_public_key

from .core.errors import ClientError


class LevelMismatch(E2EEError):
    """The relay runs another level than the one this client was asked to speak."""

    code = ErrorCode.LEVEL_MISMATCH


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
    """One user's websocket session with a level 1-3 relay.

    Args:
        server_url: relay base URL (``http://`` or ``https://``).
        username: the account (registered beforehand through the REST API).
        level: the level to speak (1, 2 or 3); the relay's ``hello`` must announce the same.
        token: the JWT (levels 2 and 3).
        relay_key: the relay's RSA key (SPKI DER) pinned earlier, for level 3; when None the key
            announced in ``hello`` is pinned on first use (see :attr:`pinned_relay_key`).
        ssl: an ``ssl.SSLContext`` for ``https://`` relays (e.g. trusting a dev certificate).
    """

    def __init__(self, server_url: str, username: str, level: int, token: str | None = None,
                 relay_key: bytes | None = None, ssl: ssl_module.SSLContext | None = None) -> None:
        if level not in (1, 2, 3):
            raise ValueError("LevelClient speaks levels 1-3; use ChatClient for level 4")
        self.server_url = server_url.rstrip("/")
        self.username = username
        self.level = level
        self.token = token
        self.pinned_relay_key = relay_key
        self.ssl = ssl
        self.events: asyncio.Queue[LevelMessage] = asyncio.Queue()
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task | None = None
        self._session: l3.Session | None = None
        self._c2r = 0
        self._r2c = 0
        self._pending: dict[str, asyncio.Future] = {}

    async def connect(self) -> None:
        """Open the websocket, authenticate for this level and start reading.

        Raises:
            LevelMismatch, AuthFailed, KeyInvalid (level 3: the relay key changed since pinned).
        """
        url = self.server_url.replace("http", "ws", 1) + "/v1/ws"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token and self.level == 2 else {}
        self._ws = await connect(url, additional_headers=headers, compression=None, max_size=2 * 1024 * 1024,
                                 ssl=self.ssl if url.startswith("wss") else None)
        hello = frames.decode_relay_frame(await self._ws.recv())
        if not isinstance(hello, frames.Hello) or hello.level != self.level:
            await self._ws.close()
            raise LevelMismatch(f"relay runs level {getattr(hello, 'level', '?')}, not {self.level}")
        if self.level == 1:
            await self._ws.send(frames.encode(frames.Auth(user=self.username)).decode())
        elif self.level == 3:
            key_der = b64u_decode(hello.relay_key or "", "relay_key")
            if self.pinned_relay_key is None:
                self.pinned_relay_key = key_der
            elif key_der != self.pinned_relay_key:
                await self._ws.close()
                raise KeyInvalid("the relay's level-3 key differs from the pinned one", field="relay_key")
            relay_key = load_wrap_public_key(key_der, "relay")
            challenge = b64u_decode(hello.challenge or "", "challenge")
            self._session, handshake = await asyncio.to_thread(l3.start_handshake, relay_key, challenge)
            await self._ws.send(frames.encode(frames.Auth(token=self.token or "", l3_key=handshake)).decode())
        ready = frames.decode_relay_frame(await self._ws.recv())
        if isinstance(ready, frames.Error):
            await self._ws.close()
            raise AuthFailed(ready.message, field=ready.field)
        self._reader = asyncio.create_task(self._read_loop())

    async def sync(self, after: int = 0) -> None:
        """Ask for stored messages after ``after`` (they arrive as events)."""
        await self._ws.send(frames.encode(frames.Sync(after=after)).decode())

    async def send_text(self, conversation: str, text: str, timeout: float = 30) -> LevelSent:
        """Send ``text``; return its ``mid`` and the relay's ``seq`` once stored.

        Raises:
            E2EEError with the relay's error code, TimeoutError.
        """
        m = plain.make(text, conversation, self.username)
        if self._session is not None:
            self._c2r += 1
            token = l3.seal(self._session, text, direction=l3.C2R, conversation=conversation,
                            sender=self.username, seq=self._c2r, message_id=m.mid, sent_at_ms=m.ts)
            payload = msgspec.json.encode(token)
        else:
            payload = plain.encode(m)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[m.mid] = fut
        await self._ws.send(frames.encode(frames.Send(conversation, msgspec.Raw(payload))).decode())
        return LevelSent(m.mid, await asyncio.wait_for(fut, timeout))

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def _read_loop(self) -> None:
        try:
            async for raw in self._ws:
                frame = frames.decode_relay_frame(raw)
                if isinstance(frame, frames.Message):
                    await self.events.put(self._read_message(frame))
                elif isinstance(frame, frames.Stored):
                    fut = self._pending.pop(frame.mid, None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame.seq)
                elif isinstance(frame, frames.Error) and frame.ref in self._pending:
                    err = ClientError(frame.message, code=frame.code, field=frame.field, detail=frame.detail)
                    self._pending.pop(frame.ref).set_exception(err)
        except ConnectionClosed:
            pass

    def _read_message(self, frame: frames.Message) -> LevelMessage:
        raw = bytes(frame.envelope)
        if self._session is None:
            m = plain.parse(raw, max_bytes=len(raw))
            return LevelMessage(frame.seq, m.cid, m.snd, m.text, m.mid, m.ts)
        opened = l3.open(self._session, msgspec.json.decode(raw, type=str), direction=l3.R2C, after_seq=self._r2c)
        h = opened.header
        self._r2c = h.seq
        return LevelMessage(frame.seq, h.cid, h.snd, opened.text, h.mid, h.ts)
