"""Access tokens die with their login session.

Every access token names its session (``sid``). Before a token is honoured — each REST request,
a websocket's connect, each in-band renewal — its session is looked up in :class:`SessionGuard`'s
cache: a dictionary hit in the common case, one database read per session at most every
``session_cache_s`` (never longer than half the token lifetime). Messages on an open websocket
cost nothing: the connection is closed when its session ends.

A session that ends on this relay is marked in the cache at once and its websockets are closed
(4403). Other relays learn it two ways: a ``revoke`` note through the broker (at once), and, if
that note is lost, by re-reading the session when their cache entry is older than
``session_cache_s`` — so a revocation reaches every relay's REST path within that bound, and an
open websocket anywhere within its token's lifetime (it cannot renew: refresh is refused).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from shared.errors import AuthFailed, E2EEError, SessionEnded

from . import session_store
from .auth import Claims, bearer_token
from .db import Sessions
from .session_store import Outcome

CACHE_MAX = 100_000
REASONS = {
    "unknown": "this session does not exist",
    "expired": "the session reached its lifetime",
    "idle": "the session was idle too long",
    "refresh_reused": "its refresh credential was used twice",
    "logged_out": "logged out",
    "logged_out_everywhere": "logged out everywhere",
    "password_changed": "the password was changed",
    "revoked": "the session was revoked",
    "too_many_sessions": "too many newer sessions",
}


def session_ended(reason: str) -> SessionEnded:
    """The error for a session that is over, with its reason (``detail.reason``)."""
    return SessionEnded(f"session ended: {REASONS.get(reason, reason)}; log in again", reason=reason, field="sid")


@dataclass(frozen=True)
class LiveSession:
    """A session :meth:`SessionGuard.check` found live: its id, user id and username."""

    sid: str
    user_id: int
    username: str


class SessionGuard:
    """The cache of session states that access tokens are checked against.

    Args:
        db_sessions: async sessionmaker for reads.
        cache_s: how long a state read from the database is trusted, seconds.
        idle_ms: a session not refreshed for this long is over.
    """

    def __init__(self, db_sessions: Sessions, cache_s: float, idle_ms: int) -> None:
        self._db = db_sessions
        self.cache_s = cache_s
        self.idle_ms = idle_ms
        self._cache: OrderedDict[str, tuple[float, Outcome]] = OrderedDict()
        self._loading: dict[str, asyncio.Future[Outcome]] = {}
        self.queries = 0  # database reads (the rest were cache hits)
        self.logins = 0
        self.refreshes = 0
        self.ended_count = 0
        self.reuse_detected = 0

    async def check(self, claims: Claims) -> LiveSession:
        """The live session of ``claims``.

        Raises:
            SessionEnded: the session is over (revoked, logged out, expired, idle, reused).
            AuthFailed: the session belongs to another user than the token's subject.
        """
        hit = self._cache.get(claims.sid)
        if hit is not None and time.monotonic() - hit[0] <= self.cache_s:
            state = hit[1]
        else:
            loading = self._loading.get(claims.sid)
            if loading is None:  # one read per session, however many requests wait for it
                loading = self._loading[claims.sid] = asyncio.ensure_future(self._load(claims.sid))
                sid = claims.sid
                loading.add_done_callback(lambda _f: self._forget_loading(sid))
            state = await asyncio.shield(loading)
        if state.ended is None and state.expires_at_ms <= time.time() * 1000:
            state = Outcome(state.sid, state.user_id, state.username, ended="expired")
        if state.ended is not None:
            raise session_ended(state.ended)
        if state.username != claims.sub or state.user_id is None:
            raise AuthFailed("the token's session belongs to another user", field="sid")
        return LiveSession(state.sid, state.user_id, state.username)

    def _forget_loading(self, sid: str) -> None:
        self._loading.pop(sid, None)

    async def _load(self, sid: str) -> Outcome:
        started = time.monotonic()
        async with self._db() as db:
            state = await session_store.load(db, sid, self.idle_ms)
        self.queries += 1
        current = self._cache.get(sid)
        if current is not None and current[1].ended is not None:  # ended while we read: final
            return current[1]
        self._put(sid, started, state)
        return state

    def remember(self, state: Outcome) -> None:
        """A state this relay just wrote (login, refresh): no read needed to trust it."""
        self._put(state.sid, time.monotonic(), state)

    def ended(self, sids: list[str], reason: str) -> None:
        """Mark sessions over (ended here, or a broker note said so elsewhere)."""
        now = time.monotonic()
        for sid in sids:
            self._put(sid, now, Outcome(sid, ended=reason))
        self.ended_count += len(sids)

    def _put(self, sid: str, at: float, state: Outcome) -> None:
        self._cache[sid] = (at, state)
        self._cache.move_to_end(sid)
        while len(self._cache) > CACHE_MAX:
            self._cache.popitem(last=False)


class BearerAuth:
    """ASGI middleware: for an HTTP request with ``Authorization: Bearer``, verify the token and
    check its session once, before the handler runs; :func:`server.web.claims_of` then returns the
    claims (or raises the error) without further work. ``GET /v1/metrics`` takes the operator
    token instead and is left alone."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/v1/metrics":
            value = next((v for k, v in scope["headers"] if k == b"authorization"), None)
            token = bearer_token(value.decode("latin-1")) if value is not None else None
            if token is not None:
                st = scope["app"].state.e2ee
                box = scope.setdefault("state", {})
                try:
                    claims = st.tokens.verify(token)
                    await st.relay.guard.check(claims)
                    box["claims"] = claims
                except E2EEError as exc:
                    box["auth_error"] = exc
        await self.app(scope, receive, send)
