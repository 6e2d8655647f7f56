"""The websocket relay: authentication (header or first frame, by level), ``hello``/``ready``,
the read loop (send, sync, ack, ping, in-band renewal), sync by cursor. The send path it shares
with REST is :mod:`server.sendpath`; connections and their queues are :mod:`server.hub`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time

import msgspec
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from shared import envelope, frames, l3, plain
from shared.b64 import b64u_encode
from shared.errors import AuthFailed, Busy, E2EEError, EnvelopeMalformed, FrameInvalid
from shared.keys import spki_der

from . import store
from .auth import Tokens, bearer_token
from .hub import CLOSE_AUTH, CLOSE_GOING_AWAY, CLOSE_SESSION_ENDED, CLOSE_SLOW, CLOSE_TOKEN_EXPIRED, Connection
from .limits import Gate
from .sendpath import SendPath, _mid_of
from .sessions import SessionGuard
from .settings import Settings
from .writer import Writer

log = logging.getLogger("e2ee.relay")

MAX_BAD_FRAMES = 20
SYNC_MAX_LIMIT = 500


class Relay(SendPath):
    """Websocket protocol handler; one instance per relay process (``app.state.relay``)."""

    def __init__(self, settings: Settings, tokens: Tokens, sessions, writer: Writer) -> None:
        super().__init__(settings, sessions, writer)
        self.tokens = tokens
        self.guard = SessionGuard(sessions, settings.session_cache_ttl_s, int(settings.session_idle_days * 86_400_000))
        self.preauth = Gate("unauthenticated websockets", settings.max_preauth_ws, settings.max_preauth_ws_per_ip)
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
        """Run one websocket: count it among the unauthenticated ones until it is authenticated
        (refused with 503 ``busy`` past ``max_preauth_ws`` in total or ``max_preauth_ws_per_ip``
        from its address), authenticate it, then read frames until the peer or the relay closes."""
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
        address = ws.client.host if ws.client else "?"
        try:
            self.preauth.enter(address)
        except Busy as exc:
            log.warning("ws refused peer=%s reason=%s", peer, exc.message)
            await self._deny(ws, exc)
            return
        try:
            conn = await self._open(ws, peer)
        finally:
            self.preauth.leave(address)
        if conn is None:
            return
        self.hub.add(conn)
        self.pull(conn)  # ordered delivery: what committed while it was being set up
        log.info("ws open user=%s peer=%s level=%d", conn.user, peer, self.settings.level)
        pump = asyncio.create_task(conn.pump())
        try:
            await self._read_loop(conn, pump)
        finally:
            self.hub.remove(conn)
            self._cancel_expiry(conn)
            if not pump.done():
                conn.queue.put_nowait(None)  # peer went away: stop the pump
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pump, 2)
            pump.cancel()
            log.info("ws closed user=%s reason=%s", conn.user, conn.closing or "peer")

    @staticmethod
    async def _deny(ws: WebSocket, exc: E2EEError) -> None:
        """Refuse before accepting: HTTP 503 with the error as JSON (websocket denial response
        extension), or close 1013 (try again later) where the server lacks it."""
        body = msgspec.json.encode({"error": exc.as_dict()})
        try:
            await ws.send_denial_response(Response(body, 503, {"Retry-After": "1"}, "application/json"))
        except RuntimeError:
            await ws.close(CLOSE_SLOW, exc.code)

    async def _open(self, ws: WebSocket, peer: str) -> Connection | None:
        """Refuse tokens in URLs, authenticate (header or first frame, by level), announce
        ``hello`` and ``ready``; the open connection, or None if it was refused or went away."""
        level = self.settings.level
        if ws.url.query:
            log.warning("ws refused peer=%s reason=query string present (tokens never go in URLs)", peer)
            await ws.close(CLOSE_AUTH)
            return None
        claims = None
        header_token = bearer_token(ws.headers.get("authorization"))
        if header_token is not None and level > 1:
            try:
                claims = self.tokens.verify(header_token)
                await self.guard.check(claims)
            except AuthFailed as exc:
                log.warning("ws refused peer=%s reason=%s", peer, exc.message)
                await ws.close(CLOSE_AUTH)
                return None
        challenge = os.urandom(l3.CHALLENGE_BYTES) if level == 3 else None
        await ws.accept()
        await ws.send_text(self._hello(challenge))
        try:
            session = None
            if claims is None or level in (1, 3):
                auth = await self._first_frame(ws, peer)
                if auth is None:
                    return None
                subject, session, claims = await self._authenticate(auth, claims, challenge)
            else:
                subject = claims.sub
            async with self.sessions() as db:
                user = await store.get_user(db, subject)
                # ordered delivery starts after what is stored now (older: the client's sync)
                delivered = await store.last_seq_for(db, user.id) if user is not None and self.ordered else None
            if user is None:
                raise AuthFailed("unknown user", field="sub")
        except E2EEError as exc:
            await self._refuse(ws, peer, exc)
            return None
        except WebSocketDisconnect:
            return None
        conn = Connection(ws, user.username, user.id, self.settings.send_queue_frames,
                          self.settings.send_queue_bytes, session=session, sid=claims.sid if claims else None,
                          delivered=delivered)
        try:
            await ws.send_text(self._ready(conn, claims.exp if claims else None).decode())
        except WebSocketDisconnect:
            self._cancel_expiry(conn)
            return None
        return conn

    def _hello(self, challenge: bytes | None) -> str:
        if challenge is None:
            return self.hello
        return frames.encode(frames.Hello(
            version=envelope.VERSION, level=self.settings.level, max_frame=self.settings.max_frame_bytes,
            max_envelope=self.settings.max_envelope_bytes, max_recipients=self.settings.max_recipients,
            auth_timeout_s=self.settings.auth_timeout_s, challenge=b64u_encode(challenge),
            relay_key=self.relay_key_b64,
        )).decode()

    def _ready(self, conn: Connection, exp: int | None) -> bytes:
        """The ``ready`` frame: the connection now lives until its token's ``exp`` (stated to the
        client as ``expires_in`` seconds by this relay's clock) unless renewed in-band; at that
        moment (plus the leeway) it is closed with 4401."""
        self._cancel_expiry(conn)
        expires_in = None
        if exp is not None:
            left = exp - time.time()
            expires_in = max(0, int(left))
            conn.expiry = asyncio.get_running_loop().call_later(
                max(0.0, left + self.settings.jwt_leeway_s), conn.close, CLOSE_TOKEN_EXPIRED,
                "token expired: renew before expiry, or log in and reconnect")
        return frames.encode(frames.Ready(conn.user, expires_in))

    @staticmethod
    def _cancel_expiry(conn: Connection) -> None:
        if conn.expiry is not None:
            conn.expiry.cancel()
            conn.expiry = None

    async def _renew(self, conn: Connection, auth: frames.Auth) -> None:
        """An ``auth`` frame on an open connection: a fresh token for the same user, from a live
        session, extends it (answered by ``ready`` with the new ``expires_in``)."""
        if self.settings.level == 1:
            raise FrameInvalid("level 1 has no tokens to renew", field="type")
        claims = self.tokens.verify(auth.token)
        if claims.sub != conn.user:
            raise AuthFailed("the new token is for another user", field="sub")
        await self.guard.check(claims)
        conn.sid = claims.sid
        conn.enqueue(self._ready(conn, claims.exp))

    def end_sessions(self, sids: list[str], reason: str, publish: bool = True) -> None:
        """Sessions ended (here, or on another relay when ``publish`` is False): their access
        tokens are refused from now on and their websockets here are closed with 4403; other
        relays are told through the broker."""
        if not sids:
            return
        self.guard.ended(sids, reason)
        ended = set(sids)
        for conn in self.hub.all():
            if conn.sid in ended:
                conn.close(CLOSE_SESSION_ENDED, f"session ended ({reason}): log in again")
        if publish and self.broker is not None:
            self.broker.publish_revoke(sids, reason)

    async def _authenticate(self, auth: frames.Auth, claims, challenge: bytes | None):
        """``(username, l3 session or None, token claims or None)`` for a first ``auth`` frame at
        this relay's level.

        Raises:
            AuthFailed, SessionEnded; at level 3 the handshake's errors (UnwrapFailed, ...).
        """
        level = self.settings.level
        if level == 1:
            if not auth.user:
                raise AuthFailed("level 1: the auth frame names the user", field="user")
            return auth.user, None, None
        if claims is None:
            claims = self.tokens.verify(auth.token)
            await self.guard.check(claims)
        if level != 3:
            return claims.sub, None, claims
        if not auth.l3_key:
            raise AuthFailed("level 3: the auth frame carries the session-key handshake", field="l3_key")
        # One RSA private-key operation: off the event loop.
        session = await asyncio.to_thread(l3.accept_handshake, auth.l3_key, self.relay_private, challenge)
        return claims.sub, session, claims

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
                    await self._renew(conn, frame)
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
        if self.ordered and not more:  # caught up: live delivery reads on from here
            conn.delivered = max(conn.delivered or 0, cursor)
            self.pull(conn)

    async def _ack(self, conn: Connection, frame: frames.Ack) -> None:
        acked = await self.writer.run(store.ack_up_to(conn.user_id, frame.seq))
        for seq, sender_id in acked:
            self.hub.deliver([sender_id], frames.encode(frames.Delivered(seq, conn.user)))
