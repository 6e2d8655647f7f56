"""Login sessions over REST: log in, refresh, log out (here or everywhere), list and end sessions,
change the password.

Login answers a short-lived access token and a refresh credential bound to a new server-side
session. Lifetimes are stated as ``expires_in`` (seconds, by the relay's clock): a client schedules
its renewals from them, never from its own clock against ``exp``. A refresh rotates the credential;
presenting one that was already exchanged ends the session (someone else has it). No access token
outlives its session's absolute lifetime.
"""

from __future__ import annotations

import logging
import time

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shared.errors import AuthFailed, InvalidRequest, NotFound
from shared.names import canonical_username

from . import queries, session_store, store
from .models import User
from .session_store import Outcome
from .sessions import session_ended
from .web import State, claims_of, client_address, json_response, read_body, state

log = logging.getLogger("e2ee.relay.sessions")
DAY_MS = 86_400_000


class LoginBody(msgspec.Struct, forbid_unknown_fields=True):
    username: str
    password: str


class RefreshBody(msgspec.Struct, forbid_unknown_fields=True):
    refresh: str  # "<session id>.<secret>"


class PasswordBody(msgspec.Struct, forbid_unknown_fields=True):
    password: str  # the current one
    new_password: str


def _user_agent(request: Request) -> str:
    raw = request.headers.get("user-agent", "")
    return "".join(ch for ch in raw if ch.isprintable())[:200]


def _tokens(st: State, s: Outcome, secret: str) -> dict[str, object]:
    """The answer to a login or refresh: access token, refresh credential, their lifetimes (s)."""
    assert s.username is not None  # a live session's outcome names its user
    token, exp = st.tokens.issue(s.username, s.sid, not_after=s.expires_at_ms // 1000)
    now_ms = time.time() * 1000
    refresh_end_ms = min(s.expires_at_ms, s.last_used_at_ms + st.settings.session_idle_days * DAY_MS)
    return {
        "token": token,
        "expires_in": max(0, exp - int(now_ms / 1000)),
        "refresh": f"{s.sid}.{secret}",
        "refresh_expires_in": max(0, int((refresh_end_ms - now_ms) / 1000)),
        "session": s.sid,
        "username": s.username,
    }


async def _verify_password(st: State, request: Request, username: str | None, password: str) -> User:
    """The user if ``password`` is theirs (lockout counted per username and address).

    Raises:
        RateLimited: locked out; AuthFailed: unknown user or wrong password; Busy.
    """
    address = client_address(request)
    st.limits.lockout.check(username or "?", address)
    user = None
    if username is not None:
        async with st.sessions() as session:
            user = await queries.get_user(session, username)
    ok, upgraded = await st.passwords.verify_and_upgrade(user.password_hash if user else None, password)
    if not ok or user is None:
        st.limits.lockout.failed(username or "?", address)
        log.info("password refused user=%s", username or "?")
        raise AuthFailed("unknown user or wrong password", field="password")
    st.limits.lockout.succeeded(user.username, address)
    if upgraded is not None:  # a hash of the raw (pre-normalisation) form: store the normalised one
        await st.writer.run(store.set_password_hash(user.id, user.password_hash, upgraded))
        log.info("password hash upgraded user=%s", user.username)
    return user


async def login(request: Request) -> Response:
    """``{"username", "password"}`` → a new session: ``{"token", "expires_in", "refresh",
    "refresh_expires_in", "session", "username"}``."""
    st = state(request)
    st.limits.logins.check(client_address(request))
    body = await read_body(request, LoginBody)
    try:
        username = canonical_username(body.username)
    except InvalidRequest:
        username = None
    user = await _verify_password(st, request, username, body.password)
    secret, digest = session_store.new_secret()
    lifetime_ms = int(st.settings.session_lifetime_days * DAY_MS)
    sid, expires_at, evicted = await st.writer.run(
        session_store.create(user.id, digest, _user_agent(request), lifetime_ms, st.settings.max_sessions_per_user)
    )
    if evicted:
        st.relay.end_sessions(evicted, "too_many_sessions")
    now = int(time.time() * 1000)
    s = Outcome(sid, user.id, user.username, expires_at, now)
    st.relay.guard.remember(s)
    st.relay.guard.logins += 1
    log.info("login user=%s session=%s", user.username, sid[:6])
    return json_response(_tokens(st, s, secret))


async def refresh(request: Request) -> Response:
    """``{"refresh"}`` → new access token and a new refresh credential (the old one is spent).

    Raises:
        AuthFailed: a malformed credential; SessionEnded: the session is over — including because
            this credential was already used (which ends the session).
    """
    st = state(request)
    body = await read_body(request, RefreshBody)
    sid, presented = session_store.split_credential(body.refresh)
    secret, digest = session_store.new_secret()
    idle_ms = int(st.settings.session_idle_days * DAY_MS)
    s = await st.writer.run(session_store.rotate(sid, session_store.hash_secret(presented), digest, idle_ms))
    if s.ended is not None:
        if s.just_ended:
            st.relay.guard.reuse_detected += 1
            log.warning("refresh credential reused: session=%s ended", sid[:6])
            st.relay.end_sessions([sid], s.ended)
        raise session_ended(s.ended)
    st.relay.guard.remember(s)
    st.relay.guard.refreshes += 1
    return json_response(_tokens(st, s, secret))


async def _end(request: Request, reason: str, sids: list[str] | None = None, keep: str | None = None) -> Response:
    st = state(request)
    claims = claims_of(request)
    user_id = (await st.relay.guard.check(claims)).user_id
    ended = await st.writer.run(session_store.end(user_id, reason, sids, keep))
    st.relay.end_sessions(ended, reason)
    log.info("sessions ended user=%s reason=%s count=%d", claims.sub, reason, len(ended))
    return json_response({"ended": len(ended)})


async def logout(request: Request) -> Response:
    """End the session of the presented access token."""
    return await _end(request, "logged_out", [claims_of(request).sid])


async def logout_everywhere(request: Request) -> Response:
    """End every session of the user, this one included."""
    return await _end(request, "logged_out_everywhere")


async def revoke(request: Request) -> Response:
    """End one of the user's sessions (e.g. a lost device), named by its id."""
    sid = request.path_params["sid"]
    st = state(request)
    claims = claims_of(request)
    user_id = (await st.relay.guard.check(claims)).user_id
    async with st.sessions() as db:
        mine = {s.id for s in await session_store.list_live(db, user_id, st.relay.guard.idle_ms)}
    if sid not in mine:
        raise NotFound("no such live session of yours", field="sid")
    return await _end(request, "revoked", [sid])


async def list_sessions(request: Request) -> Response:
    """The user's live sessions, most recently used first."""
    st = state(request)
    claims = claims_of(request)
    user_id = (await st.relay.guard.check(claims)).user_id
    async with st.sessions() as db:
        rows = await session_store.list_live(db, user_id, st.relay.guard.idle_ms)
    return json_response(
        {
            "sessions": [
                {
                    "id": r.id,
                    "created_at_ms": r.created_at_ms,
                    "last_used_at_ms": r.last_used_at_ms,
                    "expires_at_ms": r.expires_at_ms,
                    "user_agent": r.user_agent,
                    "current": r.id == claims.sid,
                }
                for r in rows
            ]
        }
    )


async def change_password(request: Request) -> Response:
    """``{"password", "new_password"}``: the new password; every other session ends."""
    st = state(request)
    claims = claims_of(request)
    body = await read_body(request, PasswordBody)
    user = await _verify_password(st, request, claims.sub, body.password)
    new_hash = await st.passwords.hash(body.new_password)
    ended = await st.writer.run(session_store.change_password(user.id, new_hash, claims.sid))
    st.relay.end_sessions(ended, "password_changed")
    log.info("password changed user=%s other sessions ended=%d", claims.sub, len(ended))
    return json_response({"ended": len(ended)})
