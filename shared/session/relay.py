"""The relay's side of the session (sans-I/O): see :mod:`shared.session`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from .. import frames
from ..errors import AuthFailed, E2EEError, FrameInvalid, SessionStateError
from .common import CloseCode, _Side

__all__ = [
    "MAX_BAD_FRAMES",
    "SYNC_MAX_LIMIT",
    "AuthRequested",
    "SendRequested",
    "SyncRequested",
    "AckReceived",
    "RenewalRequested",
    "FrameRefused",
    "RelayState",
    "RelayProtocol",
]

MAX_BAD_FRAMES = 20
SYNC_MAX_LIMIT = 500


# -- the relay's side -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AuthRequested:
    """The first ``auth`` frame, of the shape the level needs: verify it, then :meth:`RelayProtocol.accept`
    or :meth:`RelayProtocol.refuse`."""

    auth: frames.Auth


@dataclass(frozen=True, slots=True)
class SendRequested:
    send: frames.Send


@dataclass(frozen=True, slots=True)
class SyncRequested:
    """A page after ``after`` is asked for; ``limit`` is clamped to 1..500."""

    after: int
    limit: int


@dataclass(frozen=True, slots=True)
class AckReceived:
    seq: int


@dataclass(frozen=True, slots=True)
class RenewalRequested:
    """An ``auth`` frame on an open connection: verify ``token`` (same user, live session), then
    :meth:`RelayProtocol.renewed` or :meth:`RelayProtocol.error`."""

    token: str


@dataclass(frozen=True, slots=True)
class FrameRefused:
    """An invalid frame (``size`` bytes) was answered with an error frame and counted."""

    error: E2EEError
    size: int


RelayEvent = AuthRequested | SendRequested | SyncRequested | AckReceived | RenewalRequested | FrameRefused


class RelayState(StrEnum):
    AUTHENTICATING = "authenticating"  # hello queued; the auth frame or the relay's decision is awaited
    OPEN = "open"
    CLOSING = "closing"  # a close was decided: send what is queued, then close with close_code
    CLOSED = "closed"


class RelayProtocol(_Side):
    """The relay's side of one websocket connection; ``hello`` is queued at once.

    Args:
        hello: this connection's ``hello`` (its ``level``, limits, and at level 3 its challenge).
        header_auth: a valid token came in the upgrade's Authorization header. At levels 2 and 4
            no ``auth`` frame is needed then: the relay calls :meth:`accept` right away.
        max_bad_frames: invalid frames after which the connection is closed with 1008.
        leeway_s: seconds past the token's expiry before the connection is closed with 4401.
        clock: seconds, intervals only.
    """

    def __init__(
        self,
        hello: frames.Hello,
        *,
        header_auth: bool = False,
        max_bad_frames: int = MAX_BAD_FRAMES,
        leeway_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock)
        self.hello, self.level = hello, hello.level
        self.state = RelayState.AUTHENTICATING
        self.user: str | None = None
        self.close_code: CloseCode | None = None
        self.close_reason = ""
        self.refusal: E2EEError | None = None  # why the authentication was refused, if it was
        self.bad_frames = 0
        self._max_bad, self._leeway = max_bad_frames, leeway_s
        self._out.append(frames.encode(hello))
        self.awaiting_auth_frame = not header_auth or self.level in (1, 3)
        self._auth_by = clock() + hello.auth_timeout_s if self.awaiting_auth_frame else None
        self._expires_at: float | None = None

    def next_deadline(self) -> float | None:
        """When :meth:`on_timer` is due: the auth timeout, or the token's expiry (+ leeway)."""
        if self.state is RelayState.AUTHENTICATING:
            return self._auth_by
        return self._expires_at if self.state is RelayState.OPEN else None

    def on_timer(self) -> None:
        """Refuse a connection that sent no ``auth`` in time; close (4401) one whose token expired."""
        now = self.clock()
        if self.state is RelayState.AUTHENTICATING and self._auth_by is not None and self._auth_by <= now:
            self.refuse(AuthFailed("no auth frame in time"))
        elif self.state is RelayState.OPEN and self._expires_at is not None and self._expires_at <= now:
            self.close(CloseCode.TOKEN_EXPIRED, "token expired: renew before expiry, or log in and reconnect")

    def receive_frame(self, data: bytes | str) -> list[RelayEvent]:
        """Take one frame from the client; return what the relay must do, in order.

        Raises:
            SessionStateError: a frame fed while the relay decides on the authentication.
        """
        if self.state in (RelayState.CLOSING, RelayState.CLOSED):
            return []  # the close is decided: nothing the client says changes it
        if self.state is RelayState.AUTHENTICATING and not self.awaiting_auth_frame:
            raise SessionStateError(f"a frame arrived in state {self.state} before the relay decided")
        try:
            frame = frames.decode_client_frame(data)
        except FrameInvalid as exc:
            if self.state is RelayState.AUTHENTICATING:
                self.refuse(exc)
                return []
            self.bad_frames += 1
            self.error(exc)
            if self.bad_frames >= self._max_bad:
                self.close(CloseCode.AUTH_REFUSED, "too many invalid frames")
            return [FrameRefused(exc, len(data))]
        if self.state is RelayState.AUTHENTICATING:
            return self._first(frame)
        if isinstance(frame, frames.Send):
            return [SendRequested(frame)]
        if isinstance(frame, frames.Sync):
            return [SyncRequested(frame.after, max(1, min(frame.limit, SYNC_MAX_LIMIT)))]
        if isinstance(frame, frames.Ack):
            return [AckReceived(frame.seq)]
        if isinstance(frame, frames.Ping):
            self._emit(frames.Pong(frame.nonce))
            return []
        if self.level == 1:
            self.error(FrameInvalid("level 1 has no tokens to renew", field="type"))
            return []
        return [RenewalRequested(frame.token)]

    def _first(self, frame: frames.ClientFrame) -> list[RelayEvent]:
        if not isinstance(frame, frames.Auth):
            self.refuse(AuthFailed("the first frame must be auth", field="type"))
        elif self.level == 1 and not frame.user:
            self.refuse(AuthFailed("level 1: the auth frame names the user", field="user"))
        elif self.level == 3 and not frame.l3_key:
            self.refuse(AuthFailed("level 3: the auth frame carries the session-key handshake", field="l3_key"))
        else:
            self.awaiting_auth_frame, self._auth_by = False, None
            return [AuthRequested(frame)]
        return []

    # -- the relay's decisions -----------------------------------------------------------------------
    def accept(self, user: str, expires_in: float | None) -> None:
        """Authenticated as ``user``; the connection lives ``expires_in`` seconds (the token's, None
        at level 1) plus the leeway, unless renewed. Queues ``ready``."""
        if self.state is not RelayState.AUTHENTICATING or self.awaiting_auth_frame:
            raise SessionStateError(f"cannot accept in state {self.state}")
        self.state, self.user = RelayState.OPEN, user
        self._ready(expires_in)

    def renewed(self, expires_in: float | None) -> None:
        """A renewal was verified: the connection now lives ``expires_in`` more seconds. Queues ``ready``."""
        if self.state is not RelayState.OPEN:
            raise SessionStateError(f"cannot renew in state {self.state}")
        self._ready(expires_in)

    def _ready(self, expires_in: float | None) -> None:
        assert self.user is not None
        if expires_in is None:
            self._expires_at = None
            self._emit(frames.Ready(self.user, None))
            return
        self._expires_at = self.clock() + max(0.0, expires_in) + self._leeway
        self._emit(frames.Ready(self.user, max(0, int(expires_in))))

    def refuse(self, exc: E2EEError) -> None:
        """Authentication failed: an ``error`` frame, then close with 1008 and the error's code
        (:attr:`refusal` keeps ``exc``, e.g. for the relay's log line)."""
        if self.state not in (RelayState.CLOSING, RelayState.CLOSED):
            self.refusal = exc
        self.error(exc)
        self.close(CloseCode.AUTH_REFUSED, exc.code)

    def error(self, exc: E2EEError, ref: str | None = None) -> None:
        """Queue an ``error`` frame for ``exc`` (``ref``: the mid of the send it answers)."""
        self._emit(frames.Error(exc.code, exc.message, exc.field, getattr(exc, "detail", None), ref))

    def stored(self, stored: frames.Stored) -> None:
        """Queue the ``stored`` answer to a send (after the commit)."""
        self._emit(stored)

    def page_done(self, cursor: int, more: bool) -> None:
        """Queue the ``synced`` frame that ends a sync page (its ``msg`` frames went before it)."""
        self._emit(frames.Synced(cursor, more))

    def _emit(self, frame: frames.RelayFrame) -> None:
        if self.state not in (RelayState.CLOSING, RelayState.CLOSED):  # later frames are dropped
            self._out.append(frames.encode(frame))

    def close(self, code: CloseCode, reason: str) -> None:
        """Decide to close: the frames queued so far are still sent, then the close with ``code``."""
        if self.state in (RelayState.CLOSING, RelayState.CLOSED):
            return
        self.state, self.close_code, self.close_reason = RelayState.CLOSING, code, reason

    def connection_lost(self) -> None:
        """The socket is gone."""
        self.state = RelayState.CLOSED
