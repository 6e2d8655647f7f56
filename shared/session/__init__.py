"""The websocket session between a client and a relay, without I/O (sans-I/O): both sides.

A protocol object holds one connection's state and decides every frame; the code around it only
moves bytes and keeps time. Its shape follows websockets' ``Protocol``: feed what arrived with
``receive_frame(data)``, act on the events it returns, write what ``frames_to_send()`` drains, call
``on_timer()`` when ``next_deadline()`` passes, and ``connection_lost()`` when the socket is gone.
A call the state does not allow raises :class:`~shared.errors.SessionStateError` naming the state.

:class:`ClientProtocol` (docs/PROTOCOL.md §4.2)::

    CONNECTING --hello--> AUTHENTICATING --ready--> OPEN <--> SYNCING ... --> CLOSED

checks the relay's level (no silent downgrade), authenticates for it (level 1 names the user,
level 3 makes the session-key handshake, levels 2/4 carry the token in the upgrade's header),
pages a sync from a cursor and holds live messages until it caught up (so they come out in seq
order), batches acks, matches pong nonces, and says when the token is due for in-band renewal.

:class:`RelayProtocol`::

    AUTHENTICATING --accept()--> OPEN --close()--> CLOSING --connection_lost()--> CLOSED

sends ``hello``, requires a first ``auth`` frame where the level needs one (within the auth
timeout), counts invalid frames (the 20th closes with 1008), answers pings, clamps sync limits,
and closes the connection with 4401 when its token expires unless a renewal extended it.

Times are seconds on an injected ``clock`` (``time.monotonic`` by default), used as intervals only.
This module imports no asyncio and touches no socket: its tests feed frames and read events.
"""

from __future__ import annotations

from .client import (
    MAX_SEQ,
    ClientEvent,
    ClientProtocol,
    ClientState,
    Closed,
    Opened,
    RelayError,
    RenewalDue,
    Renewed,
    RoundTrip,
    SendRefused,
    SyncProgress,
)
from .common import RENEW_AT, CloseCode
from .relay import (
    AckReceived,
    AuthRequested,
    FrameRefused,
    RelayEvent,
    RelayProtocol,
    RelayState,
    RenewalRequested,
    SendRequested,
    SyncRequested,
)

__all__ = [
    "MAX_SEQ",
    "RENEW_AT",
    "AckReceived",
    "AuthRequested",
    "ClientEvent",
    "ClientProtocol",
    "ClientState",
    "CloseCode",
    "Closed",
    "FrameRefused",
    "Opened",
    "RelayError",
    "RelayEvent",
    "RelayProtocol",
    "RelayState",
    "Renewed",
    "RenewalDue",
    "RenewalRequested",
    "RoundTrip",
    "SendRefused",
    "SendRequested",
    "SyncProgress",
    "SyncRequested",
]
