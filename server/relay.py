"""The websocket relay: authentication, per-connection bounded send queues, envelope checks,
storage through the writer, acks after commit, fan-out to online members, sync by cursor.

Close codes: 1008 authentication refused (do not retry with the same token), 1009 frame too large
(uvicorn/websockets, before the frame is buffered whole), 1013 send queue overflow (slow reader:
reconnect and sync), 1001 relay shutting down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from shared import envelope, frames, l3, plain
from shared.b64 import b64u_encode
from shared.errors import (
    AuthFailed,
    ConversationMismatch,
    E2EEError,
    EnvelopeMalformed,
    Forbidden,
    FrameInvalid,
    RecipientsMismatch,
    SenderMismatch,
)
from shared.keys import spki_der

from . import store
from .auth import Tokens, bearer_token
from .limits import RateLimiter
from .settings import Settings

log = logging.getLogger("e2ee.relay")

CLOSE_AUTH = 1008
CLOSE_SLOW = 1013
CLOSE_GOING_AWAY = 1001
CLOSE_TOKEN_EXPIRED = 4401  # the connection's token expired: renew (before expiry) or log in, reconnect
MAX_BAD_FRAMES = 20
SYNC_MAX_LIMIT = 500


@dataclass(eq=False)
class Connection:
    """One authenticated websocket with a bounded outgoing queue (frames and bytes)."""

    ws: WebSocket
    user: str
    user_id: int
    max_frames: int
    max_bytes: int
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    pending_bytes: int = 0
    closing: str | None = None  # why the relay closes it (None: open, or closed by the peer)
    close_code: int = CLOSE_GOING_AWAY
    session: l3.Session | None = None  # level 3: the session key shared with this client
    expiry: asyncio.TimerHandle | None = None  # closes the connection when its token expires
    c2r_seq: int = 0  # level 3: last sequence number received from the client
    r2c_seq: int = 0  # level 3: last sequence number sent to the client

    def seal_l3(self, m: plain.PlainEnvelope) -> bytes:
        """Level 3: a ``msg`` payload re-encrypted for this connection (one AES-GCM encryption)."""
        assert self.session is not None
        self.r2c_seq += 1
        token = l3.seal(self.session, m.text, direction=l3.R2C, conversation=m.cid, sender=m.snd,
                        seq=self.r2c_seq, message_id=m.mid, sent_at_ms=m.ts, max_bytes=1 << 30)
        return msgspec.json.encode(token)

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
            log.warning("slow reader user=%s queued=%d bytes=%d: disconnecting", self.user,
                        self.queue.qsize(), self.pending_bytes)
            self.close(CLOSE_SLOW, "send queue full: reconnect and sync")
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
        self._conns.setdefault(conn.user_id, set()).add(conn)

    def remove(self, conn: Connection) -> None:
        conns = self._conns.get(conn.user_id)
        if conns:
            conns.discard(conn)
            if not conns:
                del self._conns[conn.user_id]

    def deliver(self, user_ids: list[int], data: bytes | Callable[[Connection], bytes],
                exclude: Connection | None = None) -> int:
        """Queue ``data`` (or ``data(conn)``, built per connection) to every connection of
        ``user_ids`` except ``exclude``; return how many connections took it."""
        n = 0
        for uid in user_ids:
            for conn in list(self._conns.get(uid, ())):
                if conn is not exclude and conn.enqueue(data(conn) if callable(data) else data):
                    n += 1
        return n

    def online(self, user_id: int) -> bool:
        return user_id in self._conns

    def all(self) -> list[Connection]:
        return [c for conns in self._conns.values() for c in conns]


def _mid_of(raw: bytes) -> str | None:
    """The envelope's message id if it can be read (to reference it in an error frame)."""
    try:
        return envelope.parse(raw, max_bytes=len(raw)).header.mid
    except E2EEError:
        return None


@dataclass
class Metrics:
    """Cumulative time the relay spends per stored message, in seconds (``GET /v1/metrics``).

    ``checks``: parse, sender/membership/recipient checks (and the L3 decryption before them is
    not included); ``commit``: waiting for the group-commit writer; ``fanout``: queuing frames.
    """

    stored: int = 0
    checks_s: float = 0.0
    commit_s: float = 0.0
    fanout_s: float = 0.0

    def record(self, checks: float, commit: float, fanout: float) -> None:
        self.stored += 1
        self.checks_s += checks
        self.commit_s += commit
        self.fanout_s += fanout


class Relay:
    """Websocket protocol handler; one instance per relay process (``app.state.relay``)."""

    def __init__(self, settings: Settings, tokens: Tokens, sessions, writer: store.Writer) -> None:
        self.settings = settings
        self.tokens = tokens
        self.sessions = sessions
        self.writer = writer
        self.hub = Hub()
        self.metrics = Metrics()
        self._member_cache: dict[str, tuple[float, list[store.MemberKey]]] = {}
        self._member_loading: dict[str, asyncio.Future] = {}
        self._member_generation = 0
        self.broker = None  # set by the app when --broker is given (server.broker.RedisBroker)
        self.sends = RateLimiter("sends", settings.rate_sends_per_s, settings.rate_sends_burst)
        self.relay_private = settings.resolve_relay_key() if settings.level == 3 else None
        self.relay_key_b64 = (b64u_encode(spki_der(self.relay_private.public_key()))
                              if self.relay_private is not None else None)
        self.hello = frames.encode(
            frames.Hello(
                version=envelope.VERSION, level=settings.level, max_frame=settings.max_frame_bytes,
                max_envelope=settings.max_envelope_bytes, max_recipients=settings.max_recipients,
                auth_timeout_s=settings.auth_timeout_s,
            )
        ).decode()

    async def shutdown(self, timeout: float = 3.0) -> None:
        """Close every websocket with 1001 after the frames already queued to it are sent."""
        conns = self.hub.all()
        for conn in conns:
            conn.close(CLOSE_GOING_AWAY, "relay shutting down")
        deadline = asyncio.get_running_loop().time() + timeout
        while self.hub.all() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        if conns:
            log.info("shutdown closed %d websockets (1001)", len(conns))

    # -- connection life ---------------------------------------------------------------------------
    async def serve(self, ws: WebSocket) -> None:
        """Run one websocket: refuse tokens in URLs, authenticate (header or first frame, by level),
        announce ``hello``, then read frames until the peer or the relay closes."""
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
        level = self.settings.level
        if ws.url.query:
            log.warning("ws refused peer=%s reason=query string present (tokens never go in URLs)", peer)
            await ws.close(CLOSE_AUTH)
            return
        claims = None
        header_token = bearer_token(ws.headers.get("authorization"))
        if header_token is not None and level > 1:
            try:
                claims = self.tokens.verify(header_token)
            except AuthFailed as exc:
                log.warning("ws refused peer=%s reason=%s", peer, exc.message)
                await ws.close(CLOSE_AUTH)
                return
        challenge = os.urandom(l3.CHALLENGE_BYTES) if level == 3 else None
        await ws.accept()
        await ws.send_text(self._hello(challenge))
        try:
            session = None
            if claims is None or level in (1, 3):
                auth = await self._first_frame(ws, peer)
                if auth is None:
                    return
                subject, session, expires = await self._authenticate(auth, claims, challenge)
            else:
                subject, expires = claims.sub, claims.exp
            async with self.sessions() as db:
                user = await store.get_user(db, subject)
            if user is None:
                raise AuthFailed("unknown user", field="sub")
        except E2EEError as exc:
            await self._refuse(ws, peer, exc)
            return
        except WebSocketDisconnect:
            return
        conn = Connection(ws, user.username, user.id, self.settings.send_queue_frames,
                          self.settings.send_queue_bytes, session=session)
        self._expire_at(conn, expires)
        try:
            await ws.send_text(frames.encode(frames.Ready(user.username)).decode())
        except WebSocketDisconnect:
            return
        self.hub.add(conn)
        log.info("ws open user=%s peer=%s level=%d", conn.user, peer, level)
        pump = asyncio.create_task(conn.pump())
        try:
            await self._read_loop(conn, pump)
        finally:
            self.hub.remove(conn)
            if conn.expiry is not None:
                conn.expiry.cancel()
            if not pump.done():
                conn.queue.put_nowait(None)  # peer went away: stop the pump
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pump, 2)
            pump.cancel()
            log.info("ws closed user=%s reason=%s", conn.user, conn.closing or "peer")

    def _hello(self, challenge: bytes | None) -> str:
        if challenge is None:
            return self.hello
        return frames.encode(frames.Hello(
            version=envelope.VERSION, level=self.settings.level, max_frame=self.settings.max_frame_bytes,
            max_envelope=self.settings.max_envelope_bytes, max_recipients=self.settings.max_recipients,
            auth_timeout_s=self.settings.auth_timeout_s, challenge=b64u_encode(challenge),
            relay_key=self.relay_key_b64,
        )).decode()

    def _expire_at(self, conn: Connection, exp: int | None) -> None:
        """Close ``conn`` with 4401 when its token expires (``exp``, Unix s, plus the leeway),
        unless an ``auth`` frame with a fresh token for the same user comes first."""
        if conn.expiry is not None:
            conn.expiry.cancel()
            conn.expiry = None
        if exp is not None:
            delay = max(0.0, exp + self.settings.jwt_leeway_s - time.time())
            conn.expiry = asyncio.get_running_loop().call_later(
                delay, conn.close, CLOSE_TOKEN_EXPIRED, "token expired: renew before expiry, or log in and reconnect")

    def _renew(self, conn: Connection, auth: frames.Auth) -> None:
        """An ``auth`` frame on an open connection: a fresh token for the same user extends it."""
        if self.settings.level == 1:
            raise FrameInvalid("level 1 has no tokens to renew", field="type")
        claims = self.tokens.verify(auth.token)
        if claims.sub != conn.user:
            raise AuthFailed("the new token is for another user", field="sub")
        self._expire_at(conn, claims.exp)
        conn.enqueue(frames.encode(frames.Ready(conn.user)))

    async def _authenticate(self, auth: frames.Auth, claims, challenge: bytes | None):
        """``(username, l3 session or None, token exp or None)`` for a first ``auth`` frame at
        this relay's level.

        Raises:
            AuthFailed; at level 3 the handshake's errors (UnwrapFailed, ChallengeMismatch, ...).
        """
        level = self.settings.level
        if level == 1:
            if not auth.user:
                raise AuthFailed("level 1: the auth frame names the user", field="user")
            return auth.user, None, None
        if claims is None:
            claims = self.tokens.verify(auth.token)
        if level != 3:
            return claims.sub, None, claims.exp
        if not auth.l3_key:
            raise AuthFailed("level 3: the auth frame carries the session-key handshake", field="l3_key")
        # One RSA private-key operation: off the event loop.
        session = await asyncio.to_thread(l3.accept_handshake, auth.l3_key, self.relay_private, challenge)
        return claims.sub, session, claims.exp

    async def _refuse(self, ws: WebSocket, peer: str, exc: E2EEError) -> None:
        log.warning("ws refused peer=%s reason=%s", peer, exc.message)
        with contextlib.suppress(Exception):
            await ws.send_text(frames.encode(frames.Error(exc.code, exc.message, exc.field)).decode())
            await ws.close(CLOSE_AUTH, exc.code)

    async def _first_frame(self, ws: WebSocket, peer: str) -> frames.Auth | None:
        """The connection's first frame, which must be ``auth`` and come within the auth timeout."""
        try:
            raw = await asyncio.wait_for(ws.receive(), self.settings.auth_timeout_s)
        except TimeoutError:
            await self._refuse(ws, peer, AuthFailed("no auth frame in time"))
            return None
        data = raw.get("text") if raw.get("text") is not None else raw.get("bytes")
        if raw["type"] == "websocket.disconnect" or data is None:
            return None
        try:
            frame = frames.decode_client_frame(data)
        except FrameInvalid as exc:
            await self._refuse(ws, peer, exc)
            return None
        if not isinstance(frame, frames.Auth):
            await self._refuse(ws, peer, AuthFailed("the first frame must be auth", field="type"))
            return None
        return frame

    async def _read_loop(self, conn: Connection, pump: asyncio.Task) -> None:
        inflight = asyncio.Semaphore(self.settings.max_inflight_sends)
        tasks: set[asyncio.Task] = set()
        bad = 0
        while not pump.done():
            try:
                msg = await conn.ws.receive()
            except (WebSocketDisconnect, RuntimeError):
                break
            if msg["type"] == "websocket.disconnect":
                break
            data = msg.get("text") if msg.get("text") is not None else msg.get("bytes")
            try:
                frame = frames.decode_client_frame(data or b"")
            except FrameInvalid as exc:
                bad += 1
                log.info("bad frame user=%s code=%s bytes=%d", conn.user, exc.code, len(data or b""))
                conn.enqueue(self._error(exc))
                if bad >= MAX_BAD_FRAMES:
                    conn.close(CLOSE_AUTH, "too many invalid frames")
                    break
                continue
            if isinstance(frame, frames.Send):
                await inflight.acquire()
                task = asyncio.create_task(self._send(conn, frame))
                tasks.add(task)
                task.add_done_callback(lambda t: (tasks.discard(t), inflight.release()))
            elif isinstance(frame, frames.Sync):
                await self._sync(conn, frame)
            elif isinstance(frame, frames.Ack):
                await self._ack(conn, frame)
            elif isinstance(frame, frames.Ping):
                conn.enqueue(frames.encode(frames.Pong(frame.nonce)))
            elif isinstance(frame, frames.Auth):
                try:
                    self._renew(conn, frame)
                except E2EEError as exc:
                    log.info("renewal refused user=%s code=%s", conn.user, exc.code)
                    conn.enqueue(self._error(exc))
        if tasks:  # sends already read are still stored and acked (if the socket lives)
            await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    def _error(exc: E2EEError, ref: str | None = None) -> bytes:
        return frames.encode(
            frames.Error(exc.code, exc.message, exc.field, getattr(exc, "detail", None), ref)
        )

    # -- the send path (websocket and REST) -------------------------------------------------------
    async def accept(self, user: str, user_id: int, conversation: str, raw: bytes,
                     exclude: Connection | None = None) -> frames.Stored:
        """Validate an envelope from ``user``, store it, and fan it out to online members.

        Checks, before anything is stored: size and shape (``envelope.parse``), the frame's
        conversation equals the header's ``cid``, the header's sender is ``user`` (the token's
        subject), ``user`` is a member, and the recipients are exactly the members' current wrap
        keys. A repeated (sender, mid) returns the first ``seq`` with ``duplicate=True``.

        Returns:
            the ``stored`` frame to send to the sender (after the commit).

        Raises:
            E2EEError subclasses: EnvelopeTooLarge, EnvelopeMalformed, ConversationMismatch,
            SenderMismatch, Forbidden, RecipientsMismatch.
        """
        if self.settings.level < 4:
            return await self.accept_plain(
                user, user_id, conversation,
                plain.parse(raw, max_bytes=self.settings.max_envelope_bytes), exclude)
        t0 = time.perf_counter()
        parsed = envelope.parse(
            raw, max_bytes=self.settings.max_envelope_bytes, max_recipients=self.settings.max_recipients
        )
        h = parsed.header
        if h.cid != conversation:
            raise ConversationMismatch("envelope cid differs from the frame's conversation", field="cid")
        if h.snd != user:
            raise SenderMismatch("envelope sender must be the authenticated user", field="snd")
        members = await self._members(h.cid, user_id)
        kids = set(h.rkids)
        expected = {m.wrap_kid for m in members if m.wrap_kid}
        missing = [m.username for m in members if m.wrap_kid is None or m.wrap_kid not in kids]
        extra = sorted(kids - expected)
        if missing or extra:
            # A retry of a message stored before the members or keys changed gets its first ack,
            # not a request to re-seal (which would give the same text a second message id).
            async with self.sessions() as session:
                seq = await store.seq_of(session, user_id, h.mid)
            if seq is not None:
                return frames.Stored(h.mid, seq, h.cid, True)
            raise RecipientsMismatch(missing, extra)
        return await self._commit(user, user_id, h.cid, h.mid, raw, members, exclude, t0)

    async def accept_plain(self, user: str, user_id: int, conversation: str, m: plain.PlainEnvelope,
                           exclude: Connection | None = None, started: float | None = None) -> frames.Stored:
        """Levels 1-3: store a readable message after the same sender and membership checks as
        level 4, and fan it out (at level 3 re-encrypted under each recipient's session key).

        ``started`` (perf_counter) counts earlier work, e.g. the level-3 decryption, as checks.

        Raises:
            ConversationMismatch, SenderMismatch, Forbidden.
        """
        t0 = started if started is not None else time.perf_counter()
        if m.cid != conversation:
            raise ConversationMismatch("envelope cid differs from the frame's conversation", field="cid")
        if m.snd != user:
            raise SenderMismatch("envelope sender must be the authenticated user", field="snd")
        members = await self._members(m.cid, user_id)
        raw = plain.encode(m)
        return await self._commit(user, user_id, m.cid, m.mid, raw, members, exclude, t0)

    async def _members(self, conversation: str, user_id: int) -> list[store.MemberKey]:
        """Members of ``conversation`` with their current wrap key ids, from a cache that this
        relay clears when members or keys change and, on a shared database (not SQLite), that
        expires after ``member_cache_s`` (the bound on staleness when several relays share it).

        Raises:
            Forbidden: ``user_id`` is not one of them.
        """
        now = time.monotonic()
        hit = self._member_cache.get(conversation)
        if hit is not None and hit[0] > now:
            members = hit[1]
        else:
            loading = self._member_loading.get(conversation)
            if loading is None:  # one query per conversation, however many sends wait for it
                loading = self._member_loading[conversation] = asyncio.ensure_future(self._load_members(conversation))
                loading.add_done_callback(
                    lambda f: self._member_loading.pop(conversation, None) if self._member_loading.get(
                        conversation) is f else None)
            members = await asyncio.shield(loading)
        if not any(m.user_id == user_id for m in members):
            raise Forbidden("not a member of this conversation", field="conversation")
        return members

    async def _commit(self, user: str, user_id: int, cid: str, mid: str, raw: bytes,
                      members: list[store.MemberKey], exclude: Connection | None, t0: float) -> frames.Stored:
        """Store through the writer, then fan out to online members here and, through the
        broker, on other relays."""
        t1 = time.perf_counter()
        result = await self.writer.run(store.NewMessage(cid, user_id, mid, raw, [m.user_id for m in members]))
        t2 = time.perf_counter()
        if result.duplicate:
            log.debug("duplicate user=%s seq=%d", user, result.seq)
        else:
            user_ids = [m.user_id for m in members]
            n = self.hub.deliver(user_ids, self._frame_for(result.seq, cid, user, raw), exclude=exclude)
            if self.broker is not None:
                self.broker.publish_message(result.seq, user_ids)
            log.debug("stored seq=%d conv=%s from=%s bytes=%d recipients=%d online=%d",
                     result.seq, cid, user, len(raw), len(members), n)
        self.metrics.record(t1 - t0, t2 - t1, time.perf_counter() - t2)
        return frames.Stored(mid, result.seq, cid, result.duplicate)

    def _frame_for(self, seq: int, cid: str, sender: str, raw: bytes) -> bytes | Callable[[Connection], bytes]:
        """The ``msg`` frame for a stored envelope: the same bytes for every connection (levels
        1, 2 and 4), or built per connection under its session key (level 3)."""
        if self.settings.level != 3:
            return frames.encode(frames.Message(seq, cid, sender, msgspec.Raw(raw)))
        m = plain.parse(raw, max_bytes=len(raw))
        return lambda conn: frames.encode(frames.Message(seq, cid, sender, msgspec.Raw(conn.seal_l3(m))))

    async def deliver_stored(self, seqs: list[int], user_ids: list[int]) -> int:
        """Deliver already stored messages to those of ``user_ids`` connected to this relay
        (used for messages stored by another relay). Returns the frames queued."""
        local = [uid for uid in user_ids if self.hub.online(uid)]
        if not local:
            return 0
        async with self.sessions() as session:
            rows = await store.messages_by_seq(session, seqs)
        return sum(self.hub.deliver(local, self._frame_for(m.seq, m.conversation_id, m.sender, m.envelope))
                   for m in rows)

    async def resync_since(self, since_ms: int) -> int:
        """After a broker outage: send every connected user what was stored for them since
        ``since_ms`` (Unix ms); clients drop what they already have by message id."""
        n = 0
        for conn in self.hub.all():
            async with self.sessions() as session:
                rows = await store.delivered_since(session, conn.user_id, since_ms)
            for m in rows:
                data = self._frame_for(m.seq, m.conversation_id, m.sender, m.envelope)
                n += conn.enqueue(data(conn) if callable(data) else data)
        return n

    async def _load_members(self, conversation: str) -> list[store.MemberKey]:
        generation = self._member_generation
        async with self.sessions() as session:
            members = await store.member_keys(session, conversation)
        if generation == self._member_generation:  # not invalidated while the query ran
            if len(self._member_cache) >= 50_000:
                self._member_cache.clear()
            # Alone on its SQLite file this relay sees every change and drops the entry itself;
            # on a shared database, other relays' changes come as broker notes that may be lost.
            alone = self.broker is None and self.settings.db_url.startswith("sqlite")
            ttl = float("inf") if alone else self.settings.member_cache_s
            self._member_cache[conversation] = (time.monotonic() + ttl, members)
        return members

    def forget_members(self, conversation: str | None = None, publish: bool = True) -> None:
        """Drop cached member lists: one conversation's, or all (after a key rotation); other
        relays are told through the broker unless ``publish`` is False."""
        self._member_generation += 1
        if conversation is None:
            self._member_cache.clear()
            self._member_loading.clear()
        else:
            self._member_cache.pop(conversation, None)
            self._member_loading.pop(conversation, None)
        if publish and self.broker is not None:
            self.broker.publish_forget(conversation)

    def notify(self, user_ids: list[int], event: frames.Event, publish: bool = True) -> None:
        """Send an ``event`` frame to every online connection of ``user_ids`` (on every relay)."""
        self.hub.deliver(sorted(set(user_ids)), frames.encode(event))
        if publish and self.broker is not None:
            self.broker.publish_event(sorted(set(user_ids)), event)

    async def _send(self, conn: Connection, frame: frames.Send) -> None:
        raw = bytes(frame.envelope)
        try:
            self.sends.check(conn.user)
            if conn.session is not None:
                started = time.perf_counter()
                stored = await self.accept_plain(conn.user, conn.user_id, frame.conversation,
                                                 self._open_l3(conn, raw), exclude=conn, started=started)
            else:
                stored = await self.accept(conn.user, conn.user_id, frame.conversation, raw, exclude=conn)
        except E2EEError as exc:
            log.info("send refused user=%s code=%s bytes=%d", conn.user, exc.code, len(raw))
            conn.enqueue(self._error(exc, _mid_of(raw)))
            return
        except Exception:
            log.exception("send failed user=%s bytes=%d", conn.user, len(raw))
            conn.enqueue(self._error(E2EEError("internal error; not stored"), _mid_of(raw)))
            return
        conn.enqueue(frames.encode(stored))

    def _open_l3(self, conn: Connection, raw: bytes) -> plain.PlainEnvelope:
        """Level 3: decrypt a client's message under its session key (the relay reads it)."""
        try:
            token = msgspec.json.decode(raw, type=str)
        except msgspec.DecodeError:
            raise EnvelopeMalformed("level 3: the envelope is a JWE compact string", field="envelope") from None
        opened = l3.open(conn.session, token, direction=l3.C2R, after_seq=conn.c2r_seq,
                         max_bytes=self.settings.max_envelope_bytes)
        h = opened.header
        conn.c2r_seq = h.seq
        return plain.check(plain.PlainEnvelope(h.mid, h.cid, h.snd, h.ts, opened.plaintext.decode("utf-8")))

    async def _sync(self, conn: Connection, frame: frames.Sync) -> None:
        """Send one page after ``frame.after``: at most ``limit`` messages and at most half the
        connection's queue budget in bytes, so a catching-up reader is never dropped as slow."""
        limit = max(1, min(frame.limit, SYNC_MAX_LIMIT))
        async with self.sessions() as session:
            page = await store.sync_page(session, conn.user_id, frame.after, limit + 1)
        budget = self.settings.send_queue_bytes // 2
        cursor, sent, used = frame.after, 0, 0
        for m in page[:limit]:
            data = self._frame_for(m.seq, m.conversation_id, m.sender, m.envelope)
            data = data(conn) if callable(data) else data
            if sent and used + len(data) > budget:
                break
            if not conn.enqueue(data):
                return
            cursor, sent, used = m.seq, sent + 1, used + len(data)
        more = sent < len(page)
        conn.enqueue(frames.encode(frames.Synced(cursor, more)))

    async def _ack(self, conn: Connection, frame: frames.Ack) -> None:
        acked = await self.writer.run(store.ack_up_to(conn.user_id, frame.seq))
        for seq, sender_id in acked:
            self.hub.deliver([sender_id], frames.encode(frames.Delivered(seq, conn.user)))
