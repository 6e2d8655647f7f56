"""The client's REST side: one HTTP client to the relay, its answers as values or typed errors,
and logging in.

Token renewal happens in one place, :class:`~client_tui.core.tokens.RelaySession` (an
``httpx2.Auth``): every authenticated request renews a token that is due and retries once after
a 401. :class:`Rest` only turns answers into ``dict`` values or :class:`ClientError` with the
relay's error code, and keeps a typed password only while the relay has not accepted it yet (a
client started while the relay is down logs in when it returns).
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx2

from shared.errors import AuthFailed, DowngradeRefused, ErrorCode

from . import transport
from .errors import ClientError
from .link import REQUIRED_LEVEL
from .tokens import RelaySession

HTTP_TIMEOUT_S = 30.0


def relay_error(resp: httpx2.Response) -> ClientError:
    """The relay's error answer (HTTP >= 400, body read) as a :class:`ClientError` with its
    ``code``, ``field``, ``detail`` and ``status`` (``client_error`` without a JSON error body)."""
    try:
        data = resp.json()
    except (ValueError, RecursionError):
        return ClientError(f"relay answered {resp.status_code} without JSON", status=resp.status_code)
    err = data.get("error", {}) if isinstance(data, dict) else {}
    err = err if isinstance(err, dict) else {}
    return ClientError(
        err.get("message", "request failed"),
        code=err.get("code"),
        field=err.get("field"),
        detail=err.get("detail"),
        status=resp.status_code,
    )


class Rest:
    """REST calls to the relay at ``server_url`` (normalised, ``http(s)://host:port``) over ``tls``.

    Attributes:
        http: the ``httpx2.AsyncClient`` (tests may replace it with one on a mock transport).
        session: the login session whose tokens authenticate the calls.
        password: a password not accepted yet (the relay was unreachable), else None.
        level: the security level the relay must report before a registration or a login.
    """

    def __init__(
        self, server_url: str, tls: ssl.SSLContext, session: RelaySession, username: str, level: int = REQUIRED_LEVEL
    ) -> None:
        self.server_url, self.session, self.username, self.level = server_url, session, username, level
        self.http = httpx2.AsyncClient(base_url=server_url, timeout=HTTP_TIMEOUT_S, verify=tls)
        self.password: str | None = None

    def unreachable(self, exc: BaseException, url: str | None = None) -> ClientError:
        """The error for a relay that did not answer (``code`` ``unreachable``), in words."""
        return ClientError(transport.describe_failure(exc, url or self.server_url), code=ErrorCode.UNREACHABLE)

    async def request(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> Any:
        """``method path`` with a JSON ``body``; returns the decoded JSON answer.

        Raises:
            ClientError: ``unreachable`` (no answer), the relay's error ``code``/``field``/``detail``
                with ``status`` (HTTP >= 400), or an answer without JSON.
        """
        try:
            resp = await self.http.request(method, path, json=body, auth=self.session if auth else None)
        except httpx2.HTTPError as exc:
            raise self.unreachable(exc) from None
        except httpx2.InvalidURL as exc:  # a path built from a value nobody checked: a typed error, not a crash
            raise ClientError(f"not a request this client can make: {exc}", code=ErrorCode.INVALID_REQUEST) from None
        if resp.status_code >= 400:
            raise relay_error(resp)
        try:
            return resp.json()
        except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
            raise ClientError(f"relay answered {resp.status_code} without JSON", status=resp.status_code) from None

    async def check_level(self) -> int:
        """The relay's security level from ``GET /healthz`` (``{"ok": true, "level": N}``), when it
        is :attr:`level`: asked before anything is sent that a relay of another level should not
        get (an account, public keys, a password, then conversations). The websocket's hello is
        checked again when it opens (``shared.session.ClientProtocol``).

        Raises:
            DowngradeRefused: the relay reports a lower level (``field`` ``level``).
            ClientError: ``protocol`` (no level, or another one), ``unreachable``.
        """
        data = await self.request("GET", "/healthz", auth=False)
        level = data.get("level") if isinstance(data, dict) else None
        if not isinstance(level, int) or isinstance(level, bool):
            raise ClientError("the relay did not report its level", code=ErrorCode.PROTOCOL, field="level")
        if level < self.level:
            raise DowngradeRefused(f"relay runs level {level}; this client requires {self.level}", field="level")
        if level != self.level:
            raise ClientError(f"relay runs level {level}, not {self.level}", code=ErrorCode.PROTOCOL, field="level")
        return level

    async def login(self, password: str) -> None:
        """Log in with ``password`` (``POST /v1/token``) and adopt the session's tokens, once the
        relay reported the required level (:meth:`check_level`). The password is kept only until
        the relay answers it.

        Raises:
            DowngradeRefused: the relay reports a lower level (the password is not sent).
            ClientError: refused (``status`` 401/403) or unreachable (the password is kept).
        """
        self.password = password
        await self.check_level()
        data = await self.request("POST", "/v1/token", {"username": self.username, "password": password}, auth=False)
        self.session.adopt(data)
        self.password = None  # the session's refresh credential keeps us logged in from here

    async def login_if_pending(self) -> None:
        """Log in with a password kept while the relay was unreachable, if the session has no
        live token. Raises as :meth:`login`."""
        if (self.session.access is None or self.session.ended) and self.password:
            await self.login(self.password)

    async def socket_token(self) -> str:
        """The access token for a websocket upgrade (refreshed if due); ``"none"`` without a
        session (the relay refuses the upgrade with 403).

        Raises:
            ClientError: ``unreachable``; SessionEnded: the session is over.
        """
        if self.session.access is None:
            return "none"
        try:
            return await self.session.fresh_access(self.http)
        except httpx2.HTTPError as exc:
            raise self.unreachable(exc) from None

    async def reauth(self) -> None:
        """The relay refused our token: refresh the session once or, if it is over, log in with
        a password this client still holds (never one kept after a login succeeded).

        Raises:
            ClientError: ``unreachable``, or the login was refused; AuthFailed: nothing to log in with.
        """
        try:
            if await self.session.refresh_now(self.http):
                return
        except httpx2.HTTPError as exc:  # not a refusal: the supervisor retries with backoff
            raise self.unreachable(exc) from None
        if not self.password:
            raise AuthFailed(f"the session ended ({self.session.ended or 'refused'}): log in again")
        await self.login(self.password)

    async def renewal_token(self, on_socket: str | None) -> str:
        """A fresh token for an in-band renewal (:meth:`RelaySession.renewal_token`).

        Raises:
            SessionEnded; ClientError: ``unreachable``.
        """
        try:
            return await self.session.renewal_token(self.http, on_socket)
        except httpx2.HTTPError as exc:
            raise self.unreachable(exc) from None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.http.aclose()
