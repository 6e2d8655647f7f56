"""One websocket connection to the relay: a thin asyncio loop around the sans-I/O session.

Every decision about frames -- hello and the level check (no silent downgrade), ready, the paged
sync that holds live messages until it caught up, ack batching, ping nonces, when a token is due
for in-band renewal -- is :class:`shared.session.ClientProtocol`'s. The socket is opened, the
handshake run and queued frames written by :class:`client_tui.session_socket.SessionSocket` (the
level client, the bench client and the load generator use it too). A :class:`Link` adds what the
product needs around it: the relay's refusals as the core's errors; a reader task that feeds each
frame to ``receive_frame`` and hands the events to the client core, in order, one at a time; a
timer task that calls ``on_timer`` when ``next_deadline`` passes (acks, pings and the token's
renewal go on while a message is being opened); one lock around every write, so frames leave in
the order the protocol queued them. When the socket closes, ``connection_lost`` ends the session
and its :class:`~shared.session.Closed` event (with the sends left unanswered) is the handler's last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from client_tui.session_socket import MAX_FRAME_BYTES, SessionSocket, ws_url
from shared.errors import (
    AuthFailed,
    DowngradeRefused,
    E2EEError,
    ErrorCode,
    SessionEnded,
    SessionStateError,
)
from shared.session import ClientEvent, ClientProtocol, ClientState, CloseCode, Opened, RenewalDue

from . import transport
from .errors import ClientError, SenderKeyUnavailable

log = logging.getLogger("e2ee.client")

REQUIRED_LEVEL = 4
PING_EVERY_S = 15.0
ACK_DELAY_S = 0.05
OPEN_TIMEOUT_S = 10.0

Handler = Callable[[ClientEvent], Awaitable[None]]
Renewer = Callable[[str | None], Awaitable[str]]


def _offline() -> ClientError:
    return ClientError("not connected", code=ErrorCode.OFFLINE)


class Link:
    """An open, authenticated connection. Make one with :meth:`dial`, then :meth:`start` it.

    Attributes:
        protocol: the session's state (:class:`~shared.session.ClientProtocol`).
        opened: the relay's hello, the authenticated user and the token's lifetime.
        reader: the task reading frames (done when the connection is gone).
    """

    def __init__(self, sock: SessionSocket, opened: Opened, handler: Handler, renewer: Renewer) -> None:
        self.sock, self.ws, self.protocol, self.opened = sock, sock.ws, sock.protocol, opened
        self._handler, self._renewer = handler, renewer
        self._write_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._lost = False
        self._token = self.protocol.token
        self.reader: asyncio.Task | None = None
        self._timer: asyncio.Task | None = None
        self._renewal: asyncio.Task | None = None

    # -- opening -----------------------------------------------------------------------------------
    @classmethod
    async def dial(
        cls,
        server_url: str,
        *,
        username: str,
        token: str,
        tls: ssl.SSLContext,
        handler: Handler,
        renewer: Renewer,
        clock: Callable[[], float],
    ) -> Link:
        """Open the websocket of the relay at ``server_url`` (token in the upgrade's Authorization
        header, never in the URL) and run the handshake up to ``ready``
        (:meth:`client_tui.session_socket.SessionSocket.open`).

        Raises:
            DowngradeRefused: the relay announced a level below 4.
            AuthFailed: the relay refused the token (HTTP 401/403, an error before ready, close 1008).
            ClientError: ``unreachable`` (no connection, closed during the handshake) or
                ``protocol`` (the relay broke the handshake's order or sent no valid frame).
        """
        protocol = ClientProtocol(
            username,
            level=REQUIRED_LEVEL,
            token=token,
            ping_every=PING_EVERY_S,
            ack_delay=ACK_DELAY_S,
            renew=True,
            clock=clock,
        )
        try:
            sock, opened = await SessionSocket.open(
                server_url, protocol, ssl=tls, max_size=MAX_FRAME_BYTES, open_timeout=OPEN_TIMEOUT_S
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise AuthFailed(f"the relay refused the token (HTTP {status})") from None
            raise ClientError(
                f"websocket refused with HTTP {status}", code=ErrorCode.UNREACHABLE, status=status
            ) from None
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise ClientError(transport.describe_failure(exc, ws_url(server_url)), code=ErrorCode.UNREACHABLE) from None
        except ConnectionClosed as exc:  # closed before ready
            code = exc.rcvd.code if exc.rcvd else None
            if code == CloseCode.AUTH_REFUSED:
                raise AuthFailed("the relay refused the token") from None
            raise ClientError(f"relay closed the connection ({code})", code=ErrorCode.UNREACHABLE) from None
        except (DowngradeRefused, AuthFailed):
            raise
        except E2EEError as exc:  # ProtocolViolation, LevelMismatch, FrameInvalid: not a relay we can talk to
            raise ClientError(exc.message, code=ErrorCode.PROTOCOL, field=exc.field) from None
        return cls(sock, opened, handler, renewer)

    def start(self, after: int) -> None:
        """Ask for every message after the cursor ``after`` and start the reader and the timer
        (the sync frame leaves with the next :meth:`write`)."""
        self.protocol.start_sync(after)
        self.reader = asyncio.create_task(self._read(), name=f"ws-reader-{self.protocol.username}")
        self._timer = asyncio.create_task(self._tick(), name=f"ws-timer-{self.protocol.username}")

    # -- state -------------------------------------------------------------------------------------
    @property
    def open(self) -> bool:
        """Frames can be sent: ready came and the socket is not known to be gone."""
        return self.protocol.open and not self._lost

    @property
    def synced(self) -> bool:
        """No sync is running (live messages are not held)."""
        return self.protocol.state is not ClientState.SYNCING

    # -- writing -----------------------------------------------------------------------------------
    async def write(self) -> None:
        """Send what the protocol queued, in order.

        Raises:
            ClientError: ``offline`` (the socket is gone; the reader ends the session).
        """
        async with self._write_lock:
            if self._lost:
                raise _offline()
            try:
                await self.sock.flush()
            except ConnectionClosed:
                # Nobody may use this socket again: a loop retrying on it would never yield to
                # the reader, which ends the session when it next runs.
                self._lost = True
                raise _offline() from None
        self._wake.set()  # a call before this one may have moved the next deadline

    async def send(self, conversation: str, envelope: bytes, mid: str) -> None:
        """Send the envelope ``envelope`` (message id ``mid``); its answer comes to the handler
        as ``frames.Stored`` or :class:`~shared.session.SendRefused`.

        Raises:
            ClientError: ``offline``.
        """
        if not self.open:
            raise _offline()
        self.protocol.send(conversation, envelope, mid)
        await self.write()

    def forget(self, mid: str) -> None:
        """Stop waiting for the answer to ``mid``."""
        self.protocol.forget(mid)

    def ack(self, seq: int) -> None:
        """Acknowledge every message up to ``seq`` soon (one frame for a burst)."""
        if self.open:
            self.protocol.ack(seq)
            self._wake.set()

    async def barrier(self) -> None:
        """Ask for an empty sync page: its :class:`~shared.session.SyncProgress` comes after every
        frame the relay queued before (``ClientProtocol.barrier``).

        Raises:
            ClientError: ``offline``; SessionStateError: a sync is running.
        """
        if not self.open:
            raise _offline()
        self.protocol.barrier()
        await self.write()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Send the due ack, then close the socket (the reader ends the session)."""
        if self.open:
            self.protocol.flush_acks()
            with contextlib.suppress(ClientError):
                await self.write()
        with contextlib.suppress(Exception):
            await self.ws.close(code, reason)

    async def ping(self) -> float:
        """A websocket-level ping's round trip in ms."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await (await self.ws.ping())
        return (loop.time() - t0) * 1000

    # -- the tasks ---------------------------------------------------------------------------------
    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                try:
                    events = self.protocol.receive_frame(raw)
                except SessionStateError:
                    break
                except E2EEError as exc:  # FrameInvalid, or a hello in the middle: this frame only
                    log.warning("relay sent an invalid frame: %s", exc.message)
                    continue
                with contextlib.suppress(ClientError):
                    await self.write()  # the next sync page, asked for by the protocol
                for event in events:
                    await self._handler(event)
        except ConnectionClosed:
            pass
        except SenderKeyUnavailable as exc:
            log.warning("%s; reconnecting to receive the message again", exc)
            with contextlib.suppress(Exception):
                await self.ws.close()
        finally:
            self._lost = True
            for task in (self._timer, self._renewal):
                if task is not None:
                    task.cancel()
            code = self.ws.close_code
            if code == CloseCode.AUTH_REFUSED:
                log.warning("relay refused the session (1008): %s", self.ws.close_reason)
            for event in self.protocol.connection_lost(code, self.ws.close_reason or ""):
                await self._handler(event)

    async def _tick(self) -> None:
        clock = self.protocol.clock
        while self.open:
            due = self.protocol.next_deadline()
            self._wake.clear()
            if due is None or due > clock():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), None if due is None else due - clock())
                continue
            for event in self.protocol.on_timer():
                if isinstance(event, RenewalDue) and (self._renewal is None or self._renewal.done()):
                    self._renewal = asyncio.create_task(self._renew(), name=f"ws-renew-{self.protocol.username}")
            with contextlib.suppress(ClientError):
                await self.write()

    async def _renew(self) -> None:
        """In-band renewal: a fresh token in an ``auth`` frame; the relay answers ``ready``."""
        try:
            token = await self._renewer(self._token)
        except (SessionEnded, ClientError) as exc:
            log.warning("in-band renewal failed: %s", exc.message)  # the relay closes with 4401/4403
            return
        if self.open:
            self.protocol.renew(token)
            self._token = token
            with contextlib.suppress(ClientError):
                await self.write()
