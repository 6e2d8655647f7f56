"""The client's side of a login session: the access token, the refresh credential, and when to renew.

Lifetimes come from the relay (``expires_in``, seconds by the relay's clock) and are measured here
only as intervals on this client's clock (``clock``, monotonic by default): a client whose wall
clock is minutes off renews exactly as one whose clock is right, and never logs in again for it.

One place renews. :class:`RelaySession` is an ``httpx2.Auth``: every authenticated REST request
first renews the access token when 2/3 of its stated lifetime has passed, and a request refused
with 401 is retried once after a refresh. Concurrent requests wait for one refresh (a lock): a
refresh credential is presented once only, because the relay ends a session whose credential is
presented twice. An open websocket is renewed in-band: the session protocol
(:class:`shared.session.ClientProtocol`) says when 2/3 of the relay's ``ready.expires_in`` passed,
:meth:`RelaySession.renewal_token` gives the fresh token its ``auth`` frame carries, and the relay
answers ``ready`` with the new lifetime — no reconnect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable

import httpx2

from shared.errors import AuthFailed, SessionEnded
from shared.session import RENEW_AT

log = logging.getLogger("e2ee.client.session")


class RelaySession(httpx2.Auth):
    """Tokens of one login session on one relay.

    Args:
        clock: seconds, used only for intervals (default ``time.monotonic``; tests inject one).
    """

    requires_response_body = True

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.access: str | None = None
        self.refresh_credential: str | None = None
        self.sid: str | None = None
        self.ended: str | None = None  # why the relay ended the session, once it did
        self._renew_at = 0.0  # on self.clock
        self._lock = asyncio.Lock()
        self.refreshes = 0
        self.ws_renewals = 0

    # -- state -------------------------------------------------------------------------------------
    def adopt(self, answer: dict) -> None:
        """Take a login or refresh answer: ``{"token", "expires_in", "refresh", "session", ...}``."""
        self.access, self.refresh_credential, self.sid = answer["token"], answer["refresh"], answer["session"]
        self._renew_at = self.clock() + float(answer["expires_in"]) * RENEW_AT
        self.ended = None

    @property
    def due(self) -> bool:
        """Whether the access token should be renewed before its next use."""
        return self.access is None or self.clock() >= self._renew_at

    # -- refreshing --------------------------------------------------------------------------------
    def _refresh_request(self, url: httpx2.URL) -> httpx2.Request:
        return httpx2.Request(
            "POST", url.copy_with(path="/v1/token/refresh", query=None), json={"refresh": self.refresh_credential}
        )

    async def _take(self, response: httpx2.Response) -> bool:
        """Adopt a refresh answer; on refusal forget the credential (it is never presented again)."""
        await response.aread()
        if response.status_code == 200:
            self.adopt(response.json())
            self.refreshes += 1
            return True
        try:
            err = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            err = {}
        if response.status_code == 401:
            self.refresh_credential = None
            self.ended = (err.get("detail") or {}).get("reason") or err.get("code") or "refused"
            log.warning("the relay ended the session: %s", err.get("message", self.ended))
        return False

    async def refresh_now(self, http: httpx2.AsyncClient, force: bool = False) -> bool:
        """Exchange the refresh credential for new tokens (unless another task did while this one
        waited); False when there is no live session to refresh.

        Raises:
            httpx2.HTTPError: the relay could not be reached (the credential stays usable).
        """
        before = self.access
        async with self._lock:
            if self.access != before and (force or not self.due):
                return True  # someone else refreshed while we waited
            if self.refresh_credential is None:
                return False
            return await self._take(await http.send(self._refresh_request(http.base_url)))

    async def fresh_access(self, http: httpx2.AsyncClient) -> str:
        """An access token with most of its stated lifetime left (refreshed if due).

        Raises:
            SessionEnded: the session is over (log in again); httpx2.HTTPError: relay unreachable.
        """
        if self.due and not await self.refresh_now(http) and self.due:
            raise SessionEnded(
                f"the session ended ({self.ended or 'not logged in'}): log in again", reason=self.ended or "unknown"
            )
        assert self.access is not None
        return self.access

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """httpx2 calls this for each authenticated request: renew if due, send, and after a 401
        refresh once and send again."""
        if self.due and self.refresh_credential is not None:
            async with self._lock:
                if self.due and self.refresh_credential is not None:
                    await self._take((yield self._refresh_request(request.url)))
        used = self.access
        if used is not None:
            request.headers["Authorization"] = f"Bearer {used}"
        response = yield request
        if response.status_code != 401 or self.refresh_credential is None:
            return
        async with self._lock:
            if self.access == used and self.refresh_credential is not None:
                await self._take((yield self._refresh_request(request.url)))
        if self.access != used:
            request.headers["Authorization"] = f"Bearer {self.access}"
            yield request

    # -- the websocket ---------------------------------------------------------------------------
    async def renewal_token(self, http: httpx2.AsyncClient, on_socket: str | None) -> str:
        """A fresh access token for an in-band renewal of a websocket opened (or last renewed) with
        ``on_socket``: refreshed if due, and refreshed even if not when it is still that token.

        Raises:
            SessionEnded: the session ended; the relay will close the connection (4401 or 4403).
            httpx2.HTTPError: the relay could not be reached.
        """
        token = await self.fresh_access(http)
        if token == on_socket and not await self.refresh_now(http, force=True):
            raise SessionEnded(f"the session ended ({self.ended}): log in again", reason=self.ended or "unknown")
        assert self.access is not None
        self.ws_renewals += 1
        return self.access

    # -- ending ------------------------------------------------------------------------------------
    async def end(self, http: httpx2.AsyncClient, everywhere: bool = False) -> int:
        """Log out: end this session (or, ``everywhere``, every session of the account). Returns
        how many sessions the relay ended.

        Raises:
            AuthFailed: the relay refused (the session was already over).
        """
        path = "/v1/sessions/logout-everywhere" if everywhere else "/v1/sessions/logout"
        r = await http.post(path, auth=self)
        if r.status_code != 200:
            raise AuthFailed(r.json().get("error", {}).get("message", "logout refused"))
        self.access = self.refresh_credential = None
        self.ended = "logged_out"
        return r.json()["ended"]
