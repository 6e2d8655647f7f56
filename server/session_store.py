"""Login sessions in the database: create, rotate the refresh credential, end, list.

A refresh credential is ``<session id>.<secret>`` (22 + 1 + 43 characters: base64url of 16 and 32
random bytes). Only SHA-256 of the current secret is stored (the secret is 256 random bits, so a
fast hash is enough: there is nothing to guess). Write ops are plain functions of a sync
``Session`` run by the writer; they never raise for an ended session, so that a revocation they
decide (a reused credential) is committed: they return what happened instead.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from shared import digests
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import AuthFailed, E2EEError

from .models import LoginSession, User
from .store import now_ms

SECRET_BYTES = 32


def new_secret() -> tuple[str, bytes]:
    """A fresh refresh secret: ``(b64url text, SHA-256 of it)``."""
    text = b64u_encode(secrets.token_bytes(SECRET_BYTES))
    return text, hash_secret(text)


def hash_secret(text: str) -> bytes:
    """SHA-256 (32 bytes) of a refresh credential's secret (ASCII): only this hash is stored."""
    return digests.sha256(text.encode("ascii"))


def split_credential(credential: str) -> tuple[str, str]:
    """``(session id, secret)`` of a refresh credential.

    Raises:
        AuthFailed: it is not of the documented form.
    """
    if not isinstance(credential, str) or len(credential) > 128:
        raise AuthFailed("refresh credential malformed", field="refresh")
    sid, _, secret = credential.partition(".")
    try:
        if len(b64u_decode(sid, "refresh")) != 16 or len(b64u_decode(secret, "refresh")) != SECRET_BYTES:
            raise ValueError
    except (E2EEError, ValueError):
        raise AuthFailed("refresh credential malformed", field="refresh") from None
    return sid, secret


@dataclass(frozen=True)
class Outcome:
    """What a session op found: ``ended`` is None for a live session, else why it is over
    (``unknown``, ``expired``, ``idle``, ``refresh_reused``, or the reason it was ended with)."""

    sid: str
    user_id: int | None = None
    username: str | None = None
    expires_at_ms: int = 0
    last_used_at_ms: int = 0
    ended: str | None = None
    just_ended: bool = False  # this op ended it (other relays must be told)


def _state(row: LoginSession | None, now: int, idle_ms: int) -> str | None:
    if row is None:
        return "unknown"
    if row.ended_at_ms is not None:
        return row.ended_reason or "revoked"
    if now >= row.expires_at_ms:
        return "expired"
    if now >= row.last_used_at_ms + idle_ms:
        return "idle"
    return None


def create(
    user_id: int, refresh_hash: bytes, user_agent: str, lifetime_ms: int, max_per_user: int
) -> Callable[[Session], tuple[str, int, list[str]]]:
    """A write op opening a session; returns ``(session id, expires_at_ms, ended)`` where
    ``ended`` lists the least recently used sessions it ended to stay within ``max_per_user``."""

    def op(s: Session) -> tuple[str, int, list[str]]:
        now = now_ms()
        sid = b64u_encode(secrets.token_bytes(16))
        live = (
            s.execute(
                select(LoginSession.id)
                .where(LoginSession.user_id == user_id, LoginSession.ended_at_ms.is_(None))
                .order_by(LoginSession.last_used_at_ms.desc())
            )
            .scalars()
            .all()
        )
        evicted = list(live[max_per_user - 1 :])
        if evicted:
            s.execute(
                update(LoginSession)
                .where(LoginSession.id.in_(evicted))
                .values(ended_at_ms=now, ended_reason="too_many_sessions")
            )
        s.add(
            LoginSession(
                id=sid,
                user_id=user_id,
                refresh_hash=refresh_hash,
                generation=0,
                created_at_ms=now,
                last_used_at_ms=now,
                expires_at_ms=now + lifetime_ms,
                user_agent=user_agent,
                ended_at_ms=None,
                ended_reason=None,
            )
        )
        return sid, now + lifetime_ms, evicted

    return op


def rotate(sid: str, presented: bytes, new_hash: bytes, idle_ms: int) -> Callable[[Session], Outcome]:
    """A write op exchanging the refresh credential whose secret hashes to ``presented`` for the
    one hashing to ``new_hash``. A credential that names a live session but is not its current
    one was used before (or stolen): the session ends (``refresh_reused``)."""

    def op(s: Session) -> Outcome:
        now = now_ms()
        row = s.execute(select(LoginSession).where(LoginSession.id == sid).with_for_update()).scalar_one_or_none()
        ended = _state(row, now, idle_ms)
        if row is None or ended is not None:
            return Outcome(sid, ended=ended)
        if not digests.equal(row.refresh_hash, presented):
            row.ended_at_ms, row.ended_reason = now, "refresh_reused"
            return Outcome(sid, row.user_id, ended="refresh_reused", just_ended=True)
        row.refresh_hash, row.generation, row.last_used_at_ms = new_hash, row.generation + 1, now
        username = s.execute(select(User.username).where(User.id == row.user_id)).scalar_one()
        return Outcome(sid, row.user_id, username, row.expires_at_ms, now)

    return op


def end(
    user_id: int, reason: str, sids: list[str] | None = None, keep: str | None = None
) -> Callable[[Session], list[str]]:
    """A write op ending ``user_id``'s live sessions: those in ``sids`` (all if None), except
    ``keep``. Returns the ids it ended."""

    def op(s: Session) -> list[str]:
        q = select(LoginSession.id).where(LoginSession.user_id == user_id, LoginSession.ended_at_ms.is_(None))
        if sids is not None:
            q = q.where(LoginSession.id.in_(sids))
        if keep is not None:
            q = q.where(LoginSession.id != keep)
        ended = list(s.execute(q).scalars())
        if ended:
            s.execute(
                update(LoginSession).where(LoginSession.id.in_(ended)).values(ended_at_ms=now_ms(), ended_reason=reason)
            )
        return ended

    return op


async def load(session: AsyncSession, sid: str, idle_ms: int) -> Outcome:
    """The session's state now (for the access-token check)."""
    row = (
        await session.execute(
            select(LoginSession, User.username)
            .join(User, User.id == LoginSession.user_id)
            .where(LoginSession.id == sid)
        )
    ).one_or_none()
    if row is None:
        return Outcome(sid, ended="unknown")
    ls, username = row
    return Outcome(sid, ls.user_id, username, ls.expires_at_ms, ls.last_used_at_ms, _state(ls, now_ms(), idle_ms))


async def list_live(session: AsyncSession, user_id: int, idle_ms: int) -> list[LoginSession]:
    """``user_id``'s sessions that are still live, most recently used first."""
    rows = (
        (
            await session.execute(
                select(LoginSession)
                .where(LoginSession.user_id == user_id, LoginSession.ended_at_ms.is_(None))
                .order_by(LoginSession.last_used_at_ms.desc())
            )
        )
        .scalars()
        .all()
    )
    now = now_ms()
    return [r for r in rows if _state(r, now, idle_ms) is None]


def change_password(user_id: int, new_hash: str, keep: str) -> Callable[[Session], list[str]]:
    """A write op storing ``user_id``'s new password hash and ending every other live session
    (all but ``keep``) in the same transaction; returns the ids it ended."""
    ending = end(user_id, "password_changed", keep=keep)

    def op(s: Session) -> list[str]:
        s.execute(update(User).where(User.id == user_id).values(password_hash=new_hash))
        return ending(s)

    return op
