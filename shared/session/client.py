"""The client's side of the session (sans-I/O): see :mod:`shared.session`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import msgspec

from .. import frames, l3
from ..b64 import b64u_decode
from ..errors import (
    AuthFailed,
    DowngradeRefused,
    E2EEError,
    KeyInvalid,
    LevelMismatch,
    ProtocolViolation,
    SessionStateError,
)
from ..keys import load_wrap_public_key
from ..strictjson import MAX_SAFE_INTEGER
from .common import RENEW_AT, _Side

__all__ = [
    "MAX_SEQ",
    "Opened",
    "SyncProgress",
    "SendRefused",
    "RelayError",
    "RoundTrip",
    "Renewed",
    "RenewalDue",
    "Closed",
    "ClientState",
    "ClientProtocol",
]

MAX_SEQ = MAX_SAFE_INTEGER
"""The largest seq (the largest integer JSON carries exactly): a sync after it is an empty page."""


# -- events of the client side --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Opened:
    """The relay accepted the connection: its ``hello``, the ``user`` it authenticated, and the
    connection's lifetime in seconds by the relay's clock (None: no token, level 1)."""

    hello: frames.Hello
    user: str
    expires_in: int | None


@dataclass(frozen=True, slots=True)
class SyncProgress:
    """A sync page ended at ``cursor`` (its messages, and any live ones up to it, came before this
    event); ``more``: another page was asked for. ``more`` False: the sync caught up."""

    cursor: int
    more: bool


@dataclass(frozen=True, slots=True)
class SendRefused:
    """The relay refused the envelope ``mid`` with ``error`` (nothing was stored)."""

    mid: str
    error: frames.Error


@dataclass(frozen=True, slots=True)
class RelayError:
    """An error frame that answers no send in flight (a refused renewal, an invalid frame, ...)."""

    error: frames.Error


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """The pong for ping ``nonce`` came back after ``ms`` milliseconds."""

    nonce: int
    ms: float


@dataclass(frozen=True, slots=True)
class Renewed:
    """The relay accepted an in-band renewal: the connection lives ``expires_in`` more seconds."""

    expires_in: int | None


@dataclass(frozen=True, slots=True)
class RenewalDue:
    """2/3 of the connection's lifetime passed: get a fresh token and call :meth:`ClientProtocol.renew`."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The connection is gone; ``unanswered``: ids of envelopes sent and neither stored nor refused."""

    code: int | None
    reason: str
    unanswered: tuple[str, ...]


ClientEvent = (
    Opened
    | frames.Message
    | frames.Stored
    | frames.Delivered
    | frames.Event
    | SyncProgress
    | SendRefused
    | RelayError
    | RoundTrip
    | Renewed
    | RenewalDue
    | Closed
)


class ClientState(StrEnum):
    CONNECTING = "connecting"  # the socket is open; the relay's hello is awaited
    AUTHENTICATING = "authenticating"  # hello checked (and auth sent where the level needs it); ready is awaited
    OPEN = "open"
    SYNCING = "syncing"  # open, and a sync is running: live messages are held until it caught up
    CLOSED = "closed"


class ClientProtocol(_Side):
    """The client's side of one websocket connection.

    Args:
        username: the account (level 1 names it in its ``auth`` frame).
        level: the level to speak, 1-4; a relay announcing a lower one raises
            :class:`~shared.errors.DowngradeRefused`, a higher one :class:`~shared.errors.LevelMismatch`.
        token: the access token (JWT) for levels 2-4.
        relay_key: level 3: the relay's RSA key (SPKI DER) pinned earlier; None pins the one ``hello``
            announces (read it back from :attr:`relay_key`).
        ping_every: seconds between ``ping`` frames (the first right after ``ready``); None: no pings.
        ack_delay: seconds an ack waits for more messages, so a burst costs one ``ack`` frame.
        renew: emit :class:`RenewalDue` at :data:`RENEW_AT` of each ``expires_in``.
        sync_limit: messages per sync page (1-500).
        clock: seconds, intervals only.
    """

    def __init__(
        self,
        username: str,
        *,
        level: int = 4,
        token: str | None = None,
        relay_key: bytes | None = None,
        ping_every: float | None = None,
        ack_delay: float = 0.05,
        renew: bool = False,
        sync_limit: int = 200,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if level not in (1, 2, 3, 4):
            raise ValueError(f"no level {level}: levels are 1-4")
        super().__init__(clock)
        self.username, self.level, self.token, self.relay_key = username, level, token, relay_key
        self.state = ClientState.CONNECTING
        self.hello: frames.Hello | None = None
        self.user: str | None = None  # whom the relay authenticated (ready.user)
        self.l3: l3.Session | None = None  # level 3: the session key shared with the relay
        self.close_code: int | None = None
        self.close_reason = ""
        self._ping_every, self._ack_delay, self._renew, self._sync_limit = ping_every, ack_delay, renew, sync_limit
        self._in_flight: dict[str, None] = {}  # an ordered set of mids
        self._held: dict[int, frames.Message] = {}
        self._barriers = 0  # empty sync pages asked for and not answered yet
        self._ack_due = self._ack_sent = 0
        self._ack_at: float | None = None
        self._ping_at: float | None = None
        self._ping_nonce = 0
        self._ping_sent: tuple[int, float] | None = None  # only the newest ping is timed
        self._renew_at: float | None = None

    # -- what the code around it asks --------------------------------------------------------------
    @property
    def open(self) -> bool:
        """Frames may be sent (``ready`` came, the connection is not closed)."""
        return self.state in (ClientState.OPEN, ClientState.SYNCING)

    @property
    def in_flight(self) -> tuple[str, ...]:
        """Ids of envelopes sent on this connection that the relay neither stored nor refused yet."""
        return tuple(self._in_flight)

    @property
    def ack_unsent(self) -> int:
        """The seq an ack is due for and not sent yet (0: none)."""
        return self._ack_due if self._ack_due > self._ack_sent else 0

    def handshake_headers(self) -> dict[str, str]:
        """Headers for the websocket upgrade: the token at levels 2 and 4 (never in the URL)."""
        return {"Authorization": f"Bearer {self.token}"} if self.level in (2, 4) and self.token is not None else {}

    def next_deadline(self) -> float | None:
        """When :meth:`on_timer` is due next, on ``clock`` (None: nothing is scheduled)."""
        due = [t for t in (self._ack_at, self._ping_at, self._renew_at) if t is not None]
        return min(due) if due else None

    # -- input ---------------------------------------------------------------------------------
    def receive_frame(self, data: bytes | str) -> list[ClientEvent]:
        """Take one frame from the relay; return what happened, in order.

        Raises:
            FrameInvalid: not a relay frame (the connection may go on).
            DowngradeRefused, LevelMismatch, KeyInvalid (level 3: not the pinned relay key),
            AuthFailed (refused before ``ready``), ProtocolViolation: the handshake failed; the
                state is CLOSED and the socket should be closed.
            SessionStateError: called after the connection was closed.
        """
        if self.state is ClientState.CLOSED:
            raise SessionStateError(f"a frame arrived in state {self.state}")
        if self.state in (ClientState.CONNECTING, ClientState.AUTHENTICATING):
            try:
                frame = frames.decode_relay_frame(data)
                return self._on_hello(frame) if self.state is ClientState.CONNECTING else self._on_ready(frame)
            except E2EEError:
                self.state = ClientState.CLOSED
                raise
        frame = frames.decode_relay_frame(data)
        if isinstance(frame, frames.Message):
            if self.state is ClientState.SYNCING:  # a live message may overtake older ones of the sync
                self._held.setdefault(frame.seq, frame)
                return []
            return [frame]
        if isinstance(frame, frames.Synced):
            return self._on_synced(frame)
        if isinstance(frame, frames.Stored):
            self._in_flight.pop(frame.mid, None)
            return [frame]
        if isinstance(frame, frames.Error):
            if frame.ref is not None and frame.ref in self._in_flight:
                del self._in_flight[frame.ref]
                return [SendRefused(frame.ref, frame)]
            return [RelayError(frame)]
        if isinstance(frame, frames.Ready):  # the answer to an in-band renewal
            self._schedule_renewal(frame.expires_in)
            return [Renewed(frame.expires_in)]
        if isinstance(frame, frames.Pong):
            sent, self._ping_sent = self._ping_sent, None
            if sent is None or sent[0] != frame.nonce:
                self._ping_sent = sent
                return []
            return [RoundTrip(frame.nonce, (self.clock() - sent[1]) * 1000)]
        if isinstance(frame, frames.Hello):
            raise ProtocolViolation(f"hello in state {self.state}", field="type")
        return [frame]  # Delivered, Event

    def _on_hello(self, hello: frames.RelayFrame) -> list[ClientEvent]:
        if not isinstance(hello, frames.Hello):
            raise ProtocolViolation("relay did not start with hello", field="type")
        self.hello = hello
        if hello.level < self.level:
            raise DowngradeRefused(f"relay runs level {hello.level}; this client requires {self.level}", field="level")
        if hello.level != self.level:
            raise LevelMismatch(f"relay runs level {hello.level}, not {self.level}", field="level")
        if self.level == 1:
            self._queue(frames.Auth(user=self.username))
        elif self.level == 3:
            key_der = b64u_decode(hello.relay_key or "", "relay_key")
            if self.relay_key is not None and key_der != self.relay_key:
                raise KeyInvalid("the relay's level-3 key differs from the pinned one", field="relay_key")
            self.relay_key = key_der
            challenge = b64u_decode(hello.challenge or "", "challenge")
            # one RSA public-key operation (~0.03 ms at 3072 bits): cheap enough for any loop
            self.l3, handshake = l3.start_handshake(load_wrap_public_key(key_der, "relay"), challenge)
            self._queue(frames.Auth(token=self.token or "", l3_key=handshake))
        self.state = ClientState.AUTHENTICATING
        return []

    def _on_ready(self, ready: frames.RelayFrame) -> list[ClientEvent]:
        if isinstance(ready, frames.Error):
            raise AuthFailed(ready.message, field=ready.field)
        if not isinstance(ready, frames.Ready):
            raise ProtocolViolation("relay did not send ready", field="type")
        assert self.hello is not None
        self.state, self.user = ClientState.OPEN, ready.user
        self._schedule_renewal(ready.expires_in)
        if self._ping_every is not None:
            self._ping_at = self.clock()
        return [Opened(self.hello, ready.user, ready.expires_in)]

    def _on_synced(self, frame: frames.Synced) -> list[ClientEvent]:
        if self.state is not ClientState.SYNCING:
            self._barriers = max(0, self._barriers - 1)
            return [SyncProgress(frame.cursor, frame.more)]
        released = [self._held.pop(seq) for seq in sorted(self._held) if not frame.more or seq <= frame.cursor]
        if frame.more:
            self._queue(frames.Sync(after=frame.cursor, limit=self._sync_limit))
        else:
            self.state = ClientState.OPEN
        return [*released, SyncProgress(frame.cursor, frame.more)]

    def connection_lost(self, code: int | None = None, reason: str = "") -> list[ClientEvent]:
        """The socket closed (``code``/``reason`` as received, None if none): the session ends."""
        self.state, self.close_code, self.close_reason = ClientState.CLOSED, code, reason
        unanswered = tuple(self._in_flight)
        self._in_flight.clear()
        self._held.clear()
        self._ack_at = self._ping_at = self._renew_at = None
        return [Closed(code, reason, unanswered)]

    # -- output ----------------------------------------------------------------------------------
    def _queue(self, frame: frames.ClientFrame) -> None:
        self._out.append(frames.encode(frame))

    def _require_open(self, what: str) -> None:
        if not self.open:
            raise SessionStateError(f"cannot {what} in state {self.state}")

    def send(self, conversation: str, envelope: bytes, mid: str) -> None:
        """Queue a ``send`` frame for ``envelope`` (the JSON bytes of its level's form) whose
        message id is ``mid``; its answer comes as ``frames.Stored`` or :class:`SendRefused`."""
        self._require_open("send")
        self._queue(frames.Send(conversation, msgspec.Raw(envelope)))
        self._in_flight[mid] = None

    def forget(self, mid: str) -> None:
        """Stop waiting for the answer to ``mid`` (the caller gave up on it)."""
        self._in_flight.pop(mid, None)

    def start_sync(self, after: int) -> None:
        """Ask for every stored message with ``seq > after``, page by page; live messages are held
        until the last page, then released in seq order (SYNCING until then)."""
        self._require_open("sync")
        if self.state is ClientState.SYNCING:
            raise SessionStateError(f"cannot start a sync in state {self.state}")
        if self._barriers:  # its answer would end this sync before its pages came
            raise SessionStateError(f"cannot start a sync in state {self.state} before a barrier's answer")
        self.state = ClientState.SYNCING
        self._queue(frames.Sync(after=after, limit=self._sync_limit))

    def barrier(self) -> None:
        """Queue an empty sync page (after :data:`MAX_SEQ`). The relay answers a connection's frames
        in order, so its :class:`SyncProgress` (``more`` False) comes after every frame the relay
        queued to this connection before it: the code around can wait for that. No sync runs, so
        live messages are not held and keep the order the relay sent them in.

        Raises:
            SessionStateError: not open, or a sync is running (whose end the answer would fake).
        """
        self._require_open("set a barrier")
        if self.state is ClientState.SYNCING:
            raise SessionStateError(f"cannot set a barrier in state {self.state}")
        self._barriers += 1
        self._queue(frames.Sync(after=MAX_SEQ, limit=self._sync_limit))

    def ack(self, seq: int) -> None:
        """Acknowledge every message up to ``seq``, ``ack_delay`` seconds from the first call of a
        burst (one frame for the burst)."""
        self._require_open("ack")
        self._ack_due = max(self._ack_due, seq)
        if self._ack_due > self._ack_sent and self._ack_at is None:
            self._ack_at = self.clock() + self._ack_delay

    def flush_acks(self) -> None:
        """Queue the due ack now (before a deliberate close); nothing if none is due or not open."""
        self._ack_at = None
        if self.open and self._ack_due > self._ack_sent:
            self._queue(frames.Ack(self._ack_due))
            self._ack_sent = self._ack_due

    def ping(self) -> int:
        """Queue a ``ping`` with a new nonce (returned); its pong comes as :class:`RoundTrip`."""
        self._require_open("ping")
        self._ping_nonce += 1
        self._ping_sent = (self._ping_nonce, self.clock())
        self._queue(frames.Ping(self._ping_nonce))
        return self._ping_nonce

    def renew(self, token: str) -> None:
        """Queue an in-band renewal with a fresh access ``token``; the relay answers with
        :class:`Renewed` (or a :class:`RelayError`, and closes with 4401 at expiry)."""
        self._require_open("renew")
        self.token, self._renew_at = token, None
        self._queue(frames.Auth(token=token))

    def _schedule_renewal(self, expires_in: int | None) -> None:
        self._renew_at = None if expires_in is None or not self._renew else self.clock() + expires_in * RENEW_AT

    def on_timer(self) -> list[ClientEvent]:
        """Do what is due by ``clock()``: send the batched ack, the next ping; say a renewal is due."""
        now, events = self.clock(), list[ClientEvent]()
        if self._ack_at is not None and self._ack_at <= now:
            self.flush_acks()
        if self._ping_at is not None and self._ping_at <= now and self._ping_every is not None:
            self.ping()
            self._ping_at = now + self._ping_every
        if self._renew_at is not None and self._renew_at <= now:
            self._renew_at = None
            events.append(RenewalDue())
        return events
