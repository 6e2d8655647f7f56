"""The websocket endpoint (``/v1/ws``): a thin loop around the sans-I/O session protocol.

:class:`shared.session.RelayProtocol` decides every frame of the session: ``hello``, the first
frame each level requires, the auth timeout, the count of invalid frames, pings, sync limits,
renewal, and the close with 4401 when the connection's token expires. This module only moves
frames between it and the socket, keeps its timer, and does what its events ask: verify a token
(:mod:`server.auth`, :mod:`server.sessions`), open a level-3 session (:mod:`server.levels`), store
and fan out a send, page a sync, record an ack (:mod:`server.sendpath`).

Before the upgrade is accepted it refuses, without a websocket: a query string (tokens never go in
URLs), an invalid token in the ``Authorization`` header (close 1008, HTTP 403), and connections
past the limits on unauthenticated websockets (HTTP 503 ``busy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

import msgspec
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from shared import frames, l3
from shared.errors import AuthFailed, Busy, E2EEError
from shared.session import (
    AckReceived,
    AuthRequested,
    CloseCode,
    FrameRefused,
    RelayEvent,
    RelayProtocol,
    RelayState,
    RenewalRequested,
    SendRequested,
    SyncRequested,
)

from . import queries
from .auth import Claims, bearer_token
from .hub import Connection
from .sendpath import mid_of

if TYPE_CHECKING:
    from .relay import Relay

log = logging.getLogger("e2ee.relay")


class Endpoint:
    """Serves each websocket of one relay (``Relay.endpoint``)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.settings = relay.settings

    async def serve(self, ws: WebSocket) -> None:
        """Run one websocket: count it among the unauthenticated ones until it is authenticated
        (refused with 503 ``busy`` past ``max_preauth_ws`` in total or ``max_preauth_ws_per_ip``
        from its address), authenticate it, then read frames until the peer or the relay closes."""
        relay = self.relay
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
        address = ws.client.host if ws.client else "?"
        try:
            relay.preauth.enter(address)
        except Busy as exc:
            log.warning("ws refused peer=%s reason=%s", peer, exc.message)
            await _deny(ws, exc)
            return
        try:
            conn = await self._open(ws, peer)
        finally:
            relay.preauth.leave(address)
        if conn is None:
            return
        relay.hub.add(conn)
        relay.pull(conn)  # ordered delivery: what committed while it was being set up
        log.info("ws open user=%s peer=%s level=%d", conn.user, peer, self.settings.level)
        pump = asyncio.create_task(conn.pump())
        try:
            await self._read_loop(conn, pump)
        finally:
            relay.hub.remove(conn)
            _disarm(conn)
            if not pump.done():
                conn.queue.put_nowait(None)  # peer went away: stop the pump
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pump, 2)
            pump.cancel()
            log.info("ws closed user=%s reason=%s", conn.user, conn.closing or "peer")

    # -- opening: hello, authentication, ready --------------------------------------------------------
    async def _open(self, ws: WebSocket, peer: str) -> Connection | None:
        """The open connection (``ready`` sent), or None if it was refused or went away."""
        relay = self.relay
        if ws.url.query:
            log.warning("ws refused peer=%s reason=query string present (tokens never go in URLs)", peer)
            await ws.close(CloseCode.AUTH_REFUSED)
            return None
        claims = None
        header_token = bearer_token(ws.headers.get("authorization"))
        if header_token is not None and relay.levels.uses_tokens:
            try:
                claims = relay.tokens.verify(header_token)
                await relay.guard.check(claims)
            except AuthFailed as exc:
                log.warning("ws refused peer=%s reason=%s", peer, exc.message)
                await ws.close(CloseCode.AUTH_REFUSED)
                return None
        hello, challenge = relay.levels.hello()
        proto = RelayProtocol(hello, header_auth=claims is not None, leeway_s=self.settings.jwt_leeway_s)
        await ws.accept()
        try:
            await _write(ws, proto)
            session = None
            if proto.awaiting_auth_frame:
                auth = await _first_frame(ws, proto)
                if auth is None:
                    await _close_refused(ws, proto, peer)
                    return None
                subject, session, claims = await self._authenticate(auth, claims, challenge)
            else:
                assert claims is not None  # a header token, at level 2 or 4
                subject = claims.sub
            async with relay.sessions() as db:
                user = await queries.get_user(db, subject)
                # ordered delivery starts after what is stored now (older: the client's sync)
                delivered = await queries.last_seq_for(db, user.id) if user is not None and relay.ordered else None
            if user is None:
                raise AuthFailed("unknown user", field="sub")
        except E2EEError as exc:
            proto.refuse(exc)
            await _close_refused(ws, proto, peer)
            return None
        except WebSocketDisconnect:
            return None
        conn = Connection(
            ws,
            user.username,
            user.id,
            self.settings.send_queue_frames,
            self.settings.send_queue_bytes,
            session=session,
            sid=claims.sid if claims else None,
            delivered=delivered,
            protocol=proto,
        )
        proto.accept(conn.user, claims.exp - time.time() if claims else None)
        try:
            await _write(ws, proto)
        except WebSocketDisconnect:
            return None
        self._arm(conn)
        return conn

    async def _authenticate(
        self, auth: frames.Auth, claims: Claims | None, challenge: bytes | None
    ) -> tuple[str, l3.Session | None, Claims | None]:
        """``(username, level-3 session or None, token claims or None)`` for the first ``auth``
        frame (its shape for the level was checked by the protocol).

        Raises:
            AuthFailed, SessionEnded; at level 3 the handshake's errors (UnwrapFailed, ...).
        """
        relay = self.relay
        if not relay.levels.uses_tokens:
            assert auth.user  # RelayProtocol refuses a level-1 auth frame without it
            return auth.user, None, None
        if claims is None:
            claims = relay.tokens.verify(auth.token)
            await relay.guard.check(claims)
        return claims.sub, await relay.levels.handshake(auth, challenge), claims

    # -- the open connection ------------------------------------------------------------------------
    async def _read_loop(self, conn: Connection, pump: asyncio.Task[None]) -> None:
        proto = _protocol(conn)
        inflight = asyncio.Semaphore(self.settings.max_inflight_sends)
        tasks: set[asyncio.Task[None]] = set()

        def done(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            inflight.release()

        while not pump.done():
            try:
                msg = await conn.ws.receive()
            except (WebSocketDisconnect, RuntimeError):
                break
            if msg["type"] == "websocket.disconnect":
                break
            data = msg.get("text") if msg.get("text") is not None else msg.get("bytes")
            for event in proto.receive_frame(data or b""):
                if isinstance(event, SendRequested):
                    await inflight.acquire()
                    task = asyncio.create_task(self._send(conn, event.send))
                    tasks.add(task)
                    task.add_done_callback(done)
                else:
                    await self._handle(conn, event)
            self.flush(conn)
            if proto.state is RelayState.CLOSING:
                break
        if tasks:  # sends already read are still stored and acked (if the socket lives)
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, conn: Connection, event: RelayEvent) -> None:
        relay, proto = self.relay, _protocol(conn)
        if isinstance(event, SyncRequested):
            page = await relay.sync_page(conn, event.after, event.limit)
            if page is not None:
                proto.page_done(*page)
                self.flush(conn)
                relay.caught_up(conn, *page)
        elif isinstance(event, AckReceived):
            await relay.ack(conn, event.seq)
        elif isinstance(event, RenewalRequested):
            try:
                claims = relay.tokens.verify(event.token)
                if claims.sub != conn.user:
                    raise AuthFailed("the new token is for another user", field="sub")
                await relay.guard.check(claims)
            except E2EEError as exc:
                log.info("renewal refused user=%s code=%s", conn.user, exc.code)
                proto.error(exc)
                return
            conn.sid = claims.sid
            proto.renewed(claims.exp - time.time())
            self._arm(conn)
        elif isinstance(event, FrameRefused):
            log.info("bad frame user=%s code=%s bytes=%d", conn.user, event.error.code, event.size)

    async def _send(self, conn: Connection, frame: frames.Send) -> None:
        relay, proto = self.relay, _protocol(conn)
        raw = bytes(frame.envelope)
        try:
            relay.sends.check(conn.user)
            if conn.session is not None:
                started = time.perf_counter()
                stored = await relay.accept_plain(
                    conn.user,
                    conn.user_id,
                    frame.conversation,
                    relay.levels.open_l3(conn, raw),
                    exclude=conn,
                    started=started,
                )
            else:
                stored = await relay.accept(conn.user, conn.user_id, frame.conversation, raw, exclude=conn)
        except E2EEError as exc:
            log.info("send refused user=%s code=%s bytes=%d", conn.user, exc.code, len(raw))
            proto.error(exc, mid_of(raw))
        except Exception:
            log.exception("send failed user=%s bytes=%d", conn.user, len(raw))
            proto.error(E2EEError("internal error; not stored"), mid_of(raw))
        else:
            proto.stored(stored)
        self.flush(conn)

    def flush(self, conn: Connection) -> None:
        """Queue what the protocol wrote to the connection's bounded queue; close it (after those
        frames) when the protocol decided to close."""
        proto = _protocol(conn)
        for data in proto.frames_to_send():
            conn.enqueue(data)
        if proto.state is RelayState.CLOSING and proto.close_code is not None:
            conn.close(proto.close_code, proto.close_reason)

    # -- the protocol's timer (token expiry) ---------------------------------------------------------
    def _arm(self, conn: Connection) -> None:
        _disarm(conn)
        deadline = _protocol(conn).next_deadline()
        if deadline is not None:
            conn.expiry = asyncio.get_running_loop().call_later(
                max(0.0, deadline - time.monotonic()), self._on_timer, conn
            )

    def _on_timer(self, conn: Connection) -> None:
        conn.expiry = None
        _protocol(conn).on_timer()
        self.flush(conn)
        if not conn.closing:
            self._arm(conn)


def _protocol(conn: Connection) -> RelayProtocol:
    assert conn.protocol is not None  # every open connection has one
    return conn.protocol


def _disarm(conn: Connection) -> None:
    if conn.expiry is not None:
        conn.expiry.cancel()
        conn.expiry = None


async def _write(ws: WebSocket, proto: RelayProtocol) -> None:
    """Write what the protocol queued straight to the socket (before the connection's pump runs)."""
    for data in proto.frames_to_send():
        await ws.send_text(data.decode("utf-8"))


async def _first_frame(ws: WebSocket, proto: RelayProtocol) -> frames.Auth | None:
    """The ``auth`` frame, once the protocol accepts it as this level's first frame; None if the
    protocol refused (a wrong first frame, the auth timeout) or the peer went away."""
    while proto.state is RelayState.AUTHENTICATING:
        deadline = proto.next_deadline()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            msg = await asyncio.wait_for(ws.receive(), timeout)
        except TimeoutError:
            proto.on_timer()
            continue
        data = msg.get("text") if msg.get("text") is not None else msg.get("bytes")
        if msg["type"] == "websocket.disconnect" or data is None:
            raise WebSocketDisconnect()
        for event in proto.receive_frame(data):
            if isinstance(event, AuthRequested):
                return event.auth
    return None


async def _close_refused(ws: WebSocket, proto: RelayProtocol, peer: str) -> None:
    """The protocol refused the authentication: log why, send its error frame, close (1008)."""
    reason = proto.refusal.message if proto.refusal is not None else proto.close_reason
    log.warning("ws refused peer=%s reason=%s", peer, reason)
    with contextlib.suppress(Exception):
        await _write(ws, proto)
        await ws.close(proto.close_code or CloseCode.AUTH_REFUSED, proto.close_reason)


async def _deny(ws: WebSocket, exc: E2EEError) -> None:
    """Refuse before accepting: HTTP 503 with the error as JSON (websocket denial response
    extension), or close 1013 (try again later) where the server lacks it."""
    body = msgspec.json.encode({"error": exc.as_dict()})
    try:
        await ws.send_denial_response(Response(body, 503, {"Retry-After": "1"}, "application/json"))
    except RuntimeError:
        await ws.close(CloseCode.SLOW_READER, exc.code)
