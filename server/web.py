"""What every REST handler shares: JSON answers, the per-process state, request bodies (media type
checked; size capped by :mod:`server.bodycap`), bearer claims, client addresses, and
:func:`error_answer`, the one exception handler (``Starlette(exception_handlers=…)``) that turns
every project error a handler raises into a typed JSON answer with a log line."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from shared.errors import AuthFailed, Busy, E2EEError, InvalidRequest, RateLimited, UnsupportedMediaType

from .auth import Claims, Passwords, Tokens
from .db import Sessions
from .kt_log import KtLog
from .limits import Lockout, RateLimiter
from .relay import Relay
from .retention import Retention
from .settings import Settings
from .writer import Writer

log = logging.getLogger("e2ee.relay.http")
T = TypeVar("T")
JSON_TYPES = ("application/json",)
ENVELOPE_TYPES = ("application/json", "application/jose+json")  # RFC 7516 §9: a JWE in JSON


def json_response(data: object, status: int = 200) -> Response:
    """``data`` as a JSON answer."""
    return Response(msgspec.json.encode(data), status, media_type="application/json")


def error_response(exc: E2EEError) -> Response:
    """``{"error": {"code", "message", "field"[, "detail"]}}`` with the error's HTTP status
    (PROTOCOL.md §9), and ``Retry-After`` (whole seconds, at least 1) for rate_limited and busy."""
    resp = json_response({"error": exc.as_dict()}, exc.status)
    if isinstance(exc, RateLimited | Busy):
        resp.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
    return resp


async def error_answer(request: Request, exc: Exception) -> Response:
    """The app's exception handler for :class:`E2EEError` (and so every subclass): the typed
    answer of :func:`error_response` and one log line naming the route and the code (never a
    secret)."""
    assert isinstance(exc, E2EEError)  # registered for E2EEError only
    log.info("%s %s refused code=%s", request.method, request.url.path, exc.code)
    return error_response(exc)


@dataclass
class Limits:
    """The relay's REST limits kept in memory (:mod:`server.limits`)."""

    logins: RateLimiter
    registrations: RateLimiter
    key_fetches: RateLimiter
    conversations: RateLimiter
    member_changes: RateLimiter
    key_updates: RateLimiter  # update statements: one per conversation after each key rotation
    lockout: Lockout

    @classmethod
    def from_settings(cls, s: Settings) -> Limits:
        per_min = 1 / 60
        return cls(
            RateLimiter("logins", s.rate_logins_per_min * per_min, s.rate_logins_per_min / 2),
            RateLimiter("registrations", s.rate_registrations_per_min * per_min, s.rate_registrations_per_min / 2),
            RateLimiter("key_fetches", s.rate_key_fetches_per_min * per_min, s.rate_key_fetches_per_min / 4),
            RateLimiter("conversations", s.rate_conversations_per_min * per_min, s.rate_conversations_per_min),
            RateLimiter("member_changes", s.rate_member_changes_per_min * per_min, s.rate_member_changes_per_min),
            RateLimiter("key_updates", s.rate_key_updates_per_min * per_min, s.rate_key_updates_per_min),
            Lockout(s.lockout_failures, s.lockout_window_s, s.lockout_user_failures),
        )


@dataclass
class State:
    """Per-process state the handlers share (``app.state.e2ee``)."""

    settings: Settings
    sessions: Sessions
    writer: Writer
    tokens: Tokens
    passwords: Passwords
    relay: Relay
    limits: Limits
    operator_token: str
    retention: Retention
    kt: KtLog


def state(request: Request | WebSocket) -> State:
    """The relay's :class:`State` for this request."""
    st: State = request.app.state.e2ee  # set by create_app's lifespan
    return st


def require_type(request: Request, accepted: tuple[str, ...]) -> None:
    """Raises UnsupportedMediaType unless the body's Content-Type is one of ``accepted``
    (parameters such as ``charset`` aside): no ``text/plain`` parsed as JSON."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media not in accepted:
        raise UnsupportedMediaType(f"Content-Type must be {' or '.join(accepted)}", field="content-type")


async def read_body(request: Request, kind: type[T]) -> T:
    """The JSON body as ``kind`` (read whole only after the body cap let it through)."""
    require_type(request, JSON_TYPES)
    data = await request.body()
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"body is not valid: {exc}", field="body") from None


def claims_of(request: Request) -> Claims:
    """The verified claims of the request's bearer token, whose session is live (checked once
    per request by :class:`server.sessions.BearerAuth`).

    Raises:
        AuthFailed: no bearer token, or one that does not verify.
        SessionEnded: its session is over.
    """
    box = request.scope.get("state", {})
    if "claims" in box:
        claims: Claims = box["claims"]
        return claims
    if "auth_error" in box:
        raise box["auth_error"]
    raise AuthFailed("Authorization: Bearer token required", field="authorization")


def client_address(request: Request) -> str:
    """The client's address: the TCP peer, or what a trusted proxy said (``trusted_proxies``)."""
    return request.client.host if request.client else "?"
