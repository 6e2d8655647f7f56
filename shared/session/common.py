"""What both sides of the session share: close codes, the renewal point, the output queue."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

__all__ = ["RENEW_AT", "CloseCode"]

RENEW_AT = 2 / 3
"""Renew a token (in-band, or before a REST request) when this share of its stated lifetime passed."""


class CloseCode(IntEnum):
    """Websocket close codes of the session (RFC 6455 §7.4; 4xxx are this protocol's own)."""

    GOING_AWAY = 1001  # the relay is shutting down: reconnect
    AUTH_REFUSED = 1008  # authentication refused, or too many invalid frames: not with the same token
    TOO_BIG = 1009  # a frame larger than hello.max_frame
    SERVICE_RESTART = 1012  # the connection was dropped on purpose (e.g. a test relay cutting it)
    SLOW_READER = 1013  # the relay's send queue for this connection overflowed: reconnect and sync
    TOKEN_EXPIRED = 4401  # the connection's token expired: renew in-band before, else log in again
    SESSION_ENDED = 4403  # the login session ended (logout, revocation, password change)

    @property
    def refused(self) -> bool:
        """The relay refused the credentials: retrying with the same ones cannot help."""
        return self in (CloseCode.AUTH_REFUSED, CloseCode.SESSION_ENDED)


class _Side:
    """What both sides share: the frames queued to write, and the clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._out: list[bytes] = []

    def frames_to_send(self) -> list[bytes]:
        """Drain the frames to write, in order; each is one UTF-8 JSON text message."""
        out, self._out = self._out, []
        return out
