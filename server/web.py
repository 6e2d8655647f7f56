"""What every REST handler shares: JSON answers and typed error answers, the per-process state,
request bodies (media type checked; size capped by :mod:`server.bodycap`), bearer claims, client
addresses, and the ``handler`` decorator that turns project errors into answers with a log line."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from shared.errors import (
    AuthFailed,
    Busy,
    Conflict,
    E2EEError,
    Forbidden,
    InvalidRequest,
    KeyInvalid,
    LimitExceeded,
    MalformedInput,
    NotFound,
    RateLimited,
    UnsupportedMediaType,
)

from .auth import Claims, Passwords, Tokens
from .limits import Lockout, RateLimiter
from .relay import Relay
from .retention import Retention
from .settings import Settings
from .writer import Writer

log = logging.getLogger("e2ee.relay.http")
JSON_TYPES = ("application/json",)
ENVELOPE_TYPES = ("application/json", "application/jose+json")  # RFC 7516 §9: a JWE in JSON

_STATUS = {
    AuthFailed: 401, Forbidden: 403, NotFound: 404, Conflict: 409, LimitExceeded: 413,
    RateLimited: 429, KeyInvalid: 422, UnsupportedMediaType: 415, MalformedInput: 400, Busy: 503,
}


def json_response(data: object, status: int = 200) -> Response:
    """``data`` as a JSON answer."""
    return Response(msgspec.json.encode(data), status, media_type="application/json")


def error_response(exc: E2EEError) -> Response:
    """``{"error": {"code", "message", "field"[, "detail"]}}`` with the status of PROTOCOL.md §9
    (and ``Retry-After`` for rate_limited and busy)."""
    status = next((s for cls, s in _STATUS.items() if isinstance(exc, cls)), 400)
    resp = json_response({"error": exc.as_dict()}, status)
    if isinstance(exc, RateLimited | Busy):
        resp.headers["Retry-After"] = str(max(1, round(getattr(exc, "retry_after", 1))))
    return resp


@dataclass
class Limits:
    """The relay's REST limits kept in memory (:mod:`server.limits`)."""

    logins: RateLimiter
    registrations: RateLimiter
    key_fetches: RateLimiter
    conversations: RateLimiter
    member_changes: RateLimiter
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
            Lockout(s.lockout_failures, s.lockout_window_s, s.lockout_user_failures),
        )


@dataclass
class State:
    """Per-process state the handlers share (``app.state.e2ee``)."""

    settings: Settings
    sessions: object
    writer: Writer
    tokens: Tokens
    passwords: Passwords
    relay: Relay
    limits: Limits
    operator_token: str
    retention: Retention


def state(request: Request | WebSocket) -> State:
    """The relay's :class:`State` for this request."""
    return request.app.state.e2ee


def require_type(request: Request, accepted: tuple[str, ...]) -> None:
    """Raises UnsupportedMediaType unless the body's Content-Type is one of ``accepted``
    (parameters such as ``charset`` aside): no ``text/plain`` parsed as JSON."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media not in accepted:
        raise UnsupportedMediaType(f"Content-Type must be {' or '.join(accepted)}", field="content-type")


async def read_body(request: Request, kind: type):
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
        return box["claims"]
    if "auth_error" in box:
        raise box["auth_error"]
    raise AuthFailed("Authorization: Bearer token required", field="authorization")


def handler(fn):
    """Turn project errors into JSON error responses with a log line (never with secrets)."""

    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except E2EEError as exc:
            log.info("%s %s refused code=%s", request.method, request.url.path, exc.code)
            return error_response(exc)

    wrapped.__name__ = fn.__name__
    return wrapped


def client_address(request: Request) -> str:
    """The client's address: the TCP peer, or what a trusted proxy said (``trusted_proxies``)."""
    return request.client.host if request.client else "?"
