"""The relay of one process: the parts the app and the broker reach through ``app.state.e2ee.relay``.

* :class:`server.sendpath.SendPath` (its base): delivery — accept, members, commit, fan-out,
  sync by cursor, acks;
* :mod:`server.hub`: the connections and their bounded queues;
* :mod:`server.endpoint`: the websocket endpoint, a loop around ``shared.session.RelayProtocol``;
* :mod:`server.levels`: what differs between levels 1-4;
* here: token verification and the login-session guard the endpoint and REST share, ending
  sessions, and closing every websocket at shutdown.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.websockets import WebSocket

from shared.session import CloseCode

from .auth import Tokens
from .db import Sessions
from .endpoint import Endpoint
from .levels import LevelPolicy
from .limits import Gate
from .sendpath import SendPath
from .sessions import SessionGuard
from .settings import Settings
from .writer import Writer

log = logging.getLogger("e2ee.relay")


class Relay(SendPath):
    """One per relay process (``app.state.e2ee.relay``).

    Attributes:
        tokens: JWT issue/verify.  guard: the login sessions tokens are checked against.
        preauth: the limit on websockets not authenticated yet.  levels: the level's policy.
        endpoint: serves ``/v1/ws``.
    """

    def __init__(self, settings: Settings, tokens: Tokens, sessions: Sessions, writer: Writer) -> None:
        super().__init__(settings, sessions, writer, LevelPolicy(settings))
        self.tokens = tokens
        self.guard = SessionGuard(sessions, settings.session_cache_ttl_s, int(settings.session_idle_days * 86_400_000))
        self.preauth = Gate("unauthenticated websockets", settings.max_preauth_ws, settings.max_preauth_ws_per_ip)
        self.endpoint = Endpoint(self)

    async def serve(self, ws: WebSocket) -> None:
        """Run one websocket until it closes (:meth:`server.endpoint.Endpoint.serve`)."""
        await self.endpoint.serve(ws)

    async def shutdown(self, timeout: float = 3.0) -> None:
        """Close every websocket with 1001 after the frames already queued to it are sent."""
        conns = self.hub.all()
        for conn in conns:
            conn.close(CloseCode.GOING_AWAY, "relay shutting down")
        deadline = asyncio.get_running_loop().time() + timeout
        while self.hub.all() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        if conns:
            log.info("shutdown closed %d websockets (1001)", len(conns))

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
                conn.close(CloseCode.SESSION_ENDED, f"session ended ({reason}): log in again")
        if publish and self.broker is not None:
            self.broker.publish_revoke(sids, reason)
