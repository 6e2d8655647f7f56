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
from dataclasses import dataclass, field

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from shared import envelope, frames
from shared.errors import (
    AuthFailed,
    ConversationMismatch,
    E2EEError,
    Forbidden,
    FrameInvalid,
    RecipientsMismatch,
    SenderMismatch,
)

from . import store
from .auth import Tokens, bearer_token
from .limits import RateLimiter
from .settings import Settings

log = logging.getLogger("e2ee.relay")

CLOSE_AUTH = 1008
CLOSE_SLOW = 1013
CLOSE_GOING_AWAY = 1001
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

    def deliver(self, user_ids: list[int], data: bytes, exclude: Connection | None = None) -> int:
        """Queue ``data`` to every connection of ``user_ids`` except ``exclude``; return the count."""
        n = 0
        for uid in user_ids:
            for conn in list(self._conns.get(uid, ())):
                if conn is not exclude and conn.enqueue(data):
                    n += 1
        return n

    def all(self) -> list[Connection]:
        return [c for conns in self._conns.values() for c in conns]


def _mid_of(raw: bytes) -> str | None:
    """The envelope's message id if it can be read (to reference it in an error frame)."""
    try:
        return envelope.parse(raw, max_bytes=len(raw)).header.mid
    except E2EEError:
        return None


class Relay:
    """Websocket protocol handler; one instance per relay process (``app.state.relay``)."""

    def __init__(self, settings: Settings, tokens: Tokens, sessions, writer: store.Writer) -> None:
        self.settings = settings
        self.tokens = tokens
        self.sessions = sessions
        self.writer = writer
        self.hub = Hub()
        self.sends = RateLimiter("sends", settings.rate_sends_per_s, settings.rate_sends_burst)
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
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
        if ws.url.query:
            log.warning("ws refused peer=%s reason=query string present (tokens never go in URLs)", peer)
            await ws.close(CLOSE_AUTH)
            return
        claims = None
        header_token = bearer_token(ws.headers.get("authorization"))
        if header_token is not None:
            try:
                claims = self.tokens.verify(header_token)
            except AuthFailed as exc:
                log.warning("ws refused peer=%s reason=%s", peer, exc.message)
                await ws.close(CLOSE_AUTH)
                return
        await ws.accept()
        await ws.send_text(self.hello)
        try:
            if claims is None:
                claims = await self._first_frame_auth(ws, peer)
                if claims is None:
                    return
            async with self.sessions() as session:
                user = await store.get_user(session, claims.sub)
            if user is None:
                await self._refuse(ws, peer, AuthFailed("token subject is unknown", field="sub"))
                return
            conn = Connection(ws, user.username, user.id, self.settings.send_queue_frames,
                              self.settings.send_queue_bytes)
            await ws.send_text(frames.encode(frames.Ready(user.username)).decode())
        except WebSocketDisconnect:
            return
        self.hub.add(conn)
        log.info("ws open user=%s peer=%s", conn.user, peer)
        pump = asyncio.create_task(conn.pump())
        try:
            await self._read_loop(conn, pump)
        finally:
            self.hub.remove(conn)
            if not pump.done():
                conn.queue.put_nowait(None)  # peer went away: stop the pump
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pump, 2)
            pump.cancel()
            log.info("ws closed user=%s reason=%s", conn.user, conn.closing or "peer")

    async def _refuse(self, ws: WebSocket, peer: str, exc: E2EEError) -> None:
        log.warning("ws refused peer=%s reason=%s", peer, exc.message)
        with contextlib.suppress(Exception):
            await ws.send_text(frames.encode(frames.Error(exc.code, exc.message, exc.field)).decode())
            await ws.close(CLOSE_AUTH, exc.code)

    async def _first_frame_auth(self, ws: WebSocket, peer: str):
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
            if not isinstance(frame, frames.Auth):
                raise AuthFailed("the first frame must be auth", field="type")
            return self.tokens.verify(frame.token)
        except (AuthFailed, FrameInvalid) as exc:
            await self._refuse(ws, peer, exc)
            return None

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
            else:
                conn.enqueue(self._error(FrameInvalid("already authenticated", field="type")))
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
        parsed = envelope.parse(
            raw, max_bytes=self.settings.max_envelope_bytes, max_recipients=self.settings.max_recipients
        )
        h = parsed.header
        if h.cid != conversation:
            raise ConversationMismatch("envelope cid differs from the frame's conversation", field="cid")
        if h.snd != user:
            raise SenderMismatch("envelope sender must be the authenticated user", field="snd")
        async with self.sessions() as session:
            members = await store.member_keys(session, h.cid)
        if not any(m.user_id == user_id for m in members):
            raise Forbidden("not a member of this conversation", field="conversation")
        kids = set(h.rkids)
        expected = {m.wrap_kid for m in members if m.wrap_kid}
        missing = [m.username for m in members if m.wrap_kid is None or m.wrap_kid not in kids]
        extra = sorted(kids - expected)
        if missing or extra:
            raise RecipientsMismatch(missing, extra)
        result = await self.writer.run(
            store.add_message(h.cid, user_id, h.mid, raw, [m.user_id for m in members])
        )
        if result.duplicate:
            log.info("duplicate user=%s seq=%d", user, result.seq)
        else:
            out = frames.encode(frames.Message(result.seq, h.cid, user, msgspec.Raw(raw)))
            n = self.hub.deliver([m.user_id for m in members], out, exclude=exclude)
            log.info("stored seq=%d conv=%s from=%s bytes=%d recipients=%d online=%d",
                     result.seq, h.cid, user, len(raw), len(members), n)
        return frames.Stored(h.mid, result.seq, h.cid, result.duplicate)

    def notify(self, user_ids: list[int], event: frames.Event) -> None:
        """Send an ``event`` frame to every online connection of ``user_ids``."""
        self.hub.deliver(sorted(set(user_ids)), frames.encode(event))

    async def _send(self, conn: Connection, frame: frames.Send) -> None:
        raw = bytes(frame.envelope)
        try:
            self.sends.check(conn.user)
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

    async def _sync(self, conn: Connection, frame: frames.Sync) -> None:
        """Send one page after ``frame.after``: at most ``limit`` messages and at most half the
        connection's queue budget in bytes, so a catching-up reader is never dropped as slow."""
        limit = max(1, min(frame.limit, SYNC_MAX_LIMIT))
        async with self.sessions() as session:
            page = await store.sync_page(session, conn.user_id, frame.after, limit + 1)
        budget = self.settings.send_queue_bytes // 2
        cursor, sent, used = frame.after, 0, 0
        for m in page[:limit]:
            data = frames.encode(frames.Message(m.seq, m.conversation_id, m.sender, msgspec.Raw(m.envelope)))
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
