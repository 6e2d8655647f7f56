"""A bench-only websocket client for levels 1-4 that times each step of a message.

It speaks the wire protocol with the same calls the product's clients make (``client_tui.levels``
for L1-L3, ``client_tui.core`` for L4): ``shared.plain`` / ``shared.l3`` / ``shared.envelope``
for the message, the sans-I/O session (``shared.session.ClientProtocol``, through
``client_tui.session_socket``) for the frames, ``websockets`` with per-message deflate off. It
adds only timers, and it can talk TLS at every level (``ssl=``).
It keeps no history cache and no keystore: what it measures is the message path itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl as ssl_module
import time
from dataclasses import dataclass, field

import httpx2
import msgspec
from websockets.exceptions import ConnectionClosed

from client_tui.core.record import now_ms
from client_tui.session_socket import SessionSocket
from shared import envelope, frames, l3, membership, plain
from shared.b64 import b64u_encode
from shared.content import Text
from shared.keys import Identity, PublicIdentity, spki_der
from shared.session import ClientProtocol, RelayError, SendRefused

_now = time.perf_counter

HEADS: dict[str, tuple[int, str]] = {}
"""The membership head (epoch, statement hash) of every conversation this run created."""


def seal_to_head(
    text: str, sender: Identity, conversation: str, recipients: list[PublicIdentity], *, counter: int
) -> bytes:
    """``envelope.seal`` to the conversation's membership head (:data:`HEADS`), the recipients
    in the log's member order (sorted by username), as the relay requires."""
    epoch, head = HEADS[conversation]
    ordered = sorted(recipients, key=lambda p: p.username.encode())
    return envelope.seal(Text(text, ts=now_ms(), ctr=counter), sender, conversation, ordered, epoch=epoch, head=head)


@dataclass
class Timing:
    """One message's timings (perf_counter seconds for instants, ms for durations)."""

    t_send: float = 0.0  # before sealing (sender)
    t_stored: float = 0.0  # the relay's ``stored`` ack arrived (sender)
    t_done: float = 0.0  # text decrypted and readable (receiver)
    seal_ms: float = 0.0
    encode_ms: float = 0.0  # frame (and plain envelope) serialization at the sender
    decode_ms: float = 0.0  # frame decode + envelope parse at the receiver
    open_ms: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class BenchClient:
    """One user on one relay, at one level, with timers on every message.

    Args:
        base_url: relay base URL (``http://`` or ``https://``).
        identity: the user's keys (registered by :meth:`register`; used to seal/open at L4).
        level: 1-4; the relay's ``hello`` must announce the same.
        ssl: an ``ssl.SSLContext`` that trusts the relay's certificate (TLS runs).
    """

    def __init__(
        self,
        base_url: str,
        identity: Identity,
        level: int,
        ssl: ssl_module.SSLContext | None = None,
        password: str = "bench-password",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.identity = identity
        self.username = identity.username
        self.level = level
        self.ssl = ssl
        self.password = password
        self.token = ""
        self.timings: dict[str, Timing] = {}
        self._socket: SessionSocket | None = None
        self._reader: asyncio.Task | None = None
        self._c2r = 0
        self._r2c = 0
        self._ctr = 0
        self._sign_keys: dict[str, object] = {}
        self._stored: dict[str, asyncio.Future] = {}
        self.received = 0
        self.errors: list[str] = []
        self.open_messages = True  # False: count deliveries without reading them (load runs)
        self.all_received: asyncio.Event = asyncio.Event()
        self.expect = 0  # with open_messages False: set all_received after this many deliveries

    def http(self) -> httpx2.AsyncClient:
        """An HTTP client for this relay (trusting ``ssl`` when given)."""
        return httpx2.AsyncClient(base_url=self.base_url, timeout=30, verify=self.ssl if self.ssl else True)

    async def register(self, http: httpx2.AsyncClient) -> None:
        """Publish this user's keys and log in (POST /v1/accounts, POST /v1/token)."""
        pub = self.identity.public
        r = await http.post(
            "/v1/accounts",
            json={
                "username": self.username,
                "password": self.password,
                "wrap_key": b64u_encode(spki_der(pub.wrap_key)),
                "sign_key": b64u_encode(spki_der(pub.sign_key)),
            },
        )
        if r.status_code != 201:
            raise RuntimeError(f"register {self.username}: {r.status_code} {r.text[:200]}")
        await self.login(http)

    async def login(self, http: httpx2.AsyncClient) -> None:
        """Get a token (POST /v1/token)."""
        r = await http.post("/v1/token", json={"username": self.username, "password": self.password})
        if r.status_code != 200:
            raise RuntimeError(f"login {self.username}: {r.status_code} {r.text[:200]}")
        self.token = r.json()["token"]

    async def create_conversation(self, http: httpx2.AsyncClient, members: list[PublicIdentity]) -> str:
        """Create a conversation with ``members`` from a signed creation statement; returns its id
        (its membership head goes into :data:`HEADS`, for every client of this run to seal to)."""
        cid = b64u_encode(os.urandom(16))
        created = membership.create(
            self.identity, cid, "bench", [membership.member_of(p) for p in (self.identity.public, *members)]
        )
        r = await http.post(
            "/v1/conversations", json={"statement": created.signed}, headers={"Authorization": f"Bearer {self.token}"}
        )
        if r.status_code != 201:
            raise RuntimeError(f"conversation: {r.status_code} {r.text[:200]}")
        HEADS[cid] = (created.ep, created.hash)
        return cid

    def trust(self, people: list[PublicIdentity]) -> None:
        """Pin the senders' signing keys (L4 receivers verify against them)."""
        for p in people:
            self._sign_keys[p.username] = p.sign_key

    @property
    def _session(self) -> l3.Session | None:
        return self._socket.protocol.l3 if self._socket is not None else None

    async def connect(self) -> None:
        """Open the websocket and authenticate at this client's level (the session protocol's
        handshake: L2/L4 token in the Authorization header; L1 the first frame names the user;
        L3 token + session-key handshake).

        Raises:
            LevelMismatch (the relay announced another level), AuthFailed (refused).
        """
        protocol = ClientProtocol(self.username, level=self.level, token=self.token)
        self._socket, _ = await SessionSocket.open(self.base_url, protocol, ssl=self.ssl, ping_interval=None)
        self._reader = asyncio.create_task(self._read_loop(self._socket))

    async def ping(self) -> float:
        """One websocket ping/pong round trip (the transport's control frames), in ms."""
        assert self._socket is not None
        t0 = _now()
        await (await self._socket.ws.ping())
        return (_now() - t0) * 1000

    def seal(self, conversation: str, text: str, recipients: list[PublicIdentity]) -> tuple[str, Timing]:
        """Seal ``text`` at this level and queue its ``send`` frame in the session (not written
        yet: :meth:`send` does); returns (mid, timing)."""
        t = Timing(t_send=_now())
        if self.level == 4:
            self._ctr += 1
            env = seal_to_head(text, self.identity, conversation, recipients, counter=self._ctr)
            t1 = _now()
            mid = envelope.parse(env).header.mid  # the client core reads it back the same way
            t2 = _now()
            payload = env
            t.seal_ms = (t1 - t.t_send) * 1000
            extra = t2 - t1
        else:
            m = plain.make(text, conversation, self.username)
            mid = m.mid
            if self.level == 3:
                self._c2r += 1
                t1 = _now()
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
                t2 = _now()
                payload = msgspec.json.encode(token)
                t.seal_ms = (t2 - t1) * 1000
                extra = (t1 - t.t_send) + (_now() - t2)
            else:
                payload = plain.encode(m)
                extra = _now() - t.t_send
        t3 = _now()
        self._socket.protocol.send(conversation, payload, mid)  # encodes the ``send`` frame
        t.encode_ms = (extra + _now() - t3) * 1000
        return mid, t

    async def send(
        self, conversation: str, text: str, recipients: list[PublicIdentity], registry: dict[str, Timing]
    ) -> tuple[str, asyncio.Future]:
        """Seal and send; the timing goes into ``registry`` (shared with the receiver) under the
        message id. Returns ``(mid, future of the relay's seq)``."""
        mid, t = self.seal(conversation, text, recipients)
        registry[mid] = t
        fut = asyncio.get_running_loop().create_future()
        self._stored[mid] = fut
        await self._socket.flush()
        return mid, fut

    async def send_sealed(self, conversation: str, data: bytes, mid: str) -> asyncio.Future:
        """Send an envelope sealed beforehand (load runs: sealing done in worker processes);
        returns the future of the relay's seq."""
        fut = asyncio.get_running_loop().create_future()
        self._stored[mid] = fut
        self._socket.protocol.send(conversation, data, mid)
        await self._socket.flush()
        return fut

    async def close(self) -> None:
        """Close the websocket and stop reading."""
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    # -- receiving ------------------------------------------------------------------------------------
    registry: dict[str, Timing] | None = None
    """Where a receiver finds the sender's :class:`Timing` for a message id (shared dict)."""

    async def _read_loop(self, socket: SessionSocket) -> None:
        protocol, ws = socket.protocol, socket.ws
        try:
            async for raw in ws:  # no timers in a bench session: the frames alone drive it
                t0 = _now()  # the receiver's decode time starts with the frame (``receive_frame`` decodes it)
                for event in protocol.receive_frame(raw):
                    if isinstance(event, frames.Message):
                        self._on_message(event, t0)
                    elif isinstance(event, frames.Stored):
                        fut = self._stored.pop(event.mid, None)
                        t = self.registry.get(event.mid) if self.registry is not None else None
                        if t is not None:
                            t.t_stored = _now()
                        if fut is not None and not fut.done():
                            fut.set_result(event.seq)
                    elif isinstance(event, SendRefused | RelayError):
                        error = event.error
                        self.errors.append(f"{error.code}: {error.message}")
                        fut = self._stored.pop(error.ref or "", None)
                        if fut is not None and not fut.done():
                            fut.set_exception(RuntimeError(f"{error.code}: {error.message}"))
        except ConnectionClosed:
            protocol.connection_lost(ws.close_code, ws.close_reason or "")

    def _on_message(self, frame: frames.Message, t0: float) -> None:
        if not self.open_messages:
            self.received += 1
            if self.received >= self.expect:
                self.all_received.set()
            return
        raw = bytes(frame.envelope)
        if self.level == 4:
            parsed = envelope.parse(raw)
            t1 = _now()
            h = parsed.header
            opened = envelope.open(
                parsed, self.identity, self._sign_keys[h.snd], conversation=frame.conversation, sender=frame.sender
            )
            mid, _text = h.mid, opened.text
        elif self.level == 3:
            token = msgspec.json.decode(raw, type=str)
            t1 = _now()
            opened = l3.open(self._session, token, direction=l3.R2C, after_seq=self._r2c)
            self._r2c = opened.header.seq
            mid, _text = opened.header.mid, opened.text
        else:
            m = plain.parse(raw, max_bytes=len(raw))
            t1 = _now()
            mid, _text = m.mid, m.text
        t2 = _now()
        self.received += 1
        t = self.registry.get(mid) if self.registry is not None else None
        if t is not None:
            t.decode_ms = (t1 - t0) * 1000
            t.open_ms = (t2 - t1) * 1000
            t.t_done = t2
            t.done.set()
