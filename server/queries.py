"""Reads: the relay's queries over the models (:mod:`server.models`), each on a short async session
of its caller (``async with sessions() as session``). Writes are :mod:`server.store`'s ops, run by
the single writer (:mod:`server.writer`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from shared.errors import NotFound

from .models import Conversation, Delivery, Member, Message, User, UserKey


async def get_user(session: AsyncSession, username: str) -> User | None:
    """The user named ``username`` (canonical form), or None."""
    return (await session.execute(select(User).where(User.username == username))).scalar_one_or_none()


async def current_keys(session: AsyncSession, username: str) -> UserKey:
    """The current key row of ``username``.

    Raises:
        NotFound: no such user (``field`` "username"), or a user who has published no key
            (``field`` "wrap_key": clients name that member before sealing, case K09).
    """
    row = (
        await session.execute(
            select(UserKey)
            .join(User, User.id == UserKey.user_id)
            .where(User.username == username, UserKey.current.is_(True))
        )
    ).scalar_one_or_none()
    if row is None:
        if await get_user(session, username) is not None:
            raise NotFound(f"{username} has published no key", field="wrap_key")
        raise NotFound(f"no user {username!r}", field="username")
    return row


async def conversations_of(session: AsyncSession, user_id: int) -> list[dict[str, Any]]:
    """Conversations ``user_id`` belongs to: ``[{"id", "title", "members": [usernames], "epoch",
    "head"}]`` (the head of each membership log; None for a legacy conversation)."""
    convs = (
        (
            await session.execute(
                select(Conversation)
                .join(Member, Member.conversation_id == Conversation.id)
                .where(Member.user_id == user_id)
                .order_by(Conversation.created_at_ms)
            )
        )
        .scalars()
        .all()
    )
    out = []
    for c in convs:
        names = (
            await session.execute(
                select(User.username).join(Member, Member.user_id == User.id).where(Member.conversation_id == c.id)
            )
        ).scalars()
        out.append(
            {"id": c.id, "title": c.title, "members": sorted(names, key=str.encode), "epoch": c.epoch, "head": c.head}
        )
    return out


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    conversation_id: str
    sender: str
    envelope: bytes


def not_expired(now_ms: int) -> ColumnElement[bool]:
    """Messages whose expiry hint has not passed at ``now_ms`` (or that have none)."""
    return or_(Message.expires_at_ms == 0, Message.expires_at_ms > now_ms)


async def sync_page(
    session: AsyncSession, user_id: int, after: int, limit: int, now_ms: int | None = None
) -> list[StoredMessage]:
    """Up to ``limit`` messages for ``user_id`` with ``seq > after``, in ``seq`` order; none whose
    expiry hint passed by ``now_ms`` (Unix ms; default: now)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    rows = await session.execute(
        select(Message.seq, Message.conversation_id, User.username, Message.envelope)
        .join(Delivery, Delivery.seq == Message.seq)
        .join(User, User.id == Message.sender_id)
        .where(Delivery.user_id == user_id, Delivery.seq > after, not_expired(now_ms))
        .order_by(Delivery.seq)
        .limit(limit)
    )
    return [StoredMessage(seq, cid, sender, envelope) for seq, cid, sender, envelope in rows]


async def last_seq_for(session: AsyncSession, user_id: int) -> int:
    """The highest ``seq`` stored for ``user_id`` (0 if none)."""
    return (
        await session.execute(select(func.max(Delivery.seq)).where(Delivery.user_id == user_id))
    ).scalar_one_or_none() or 0


async def seq_of(session: AsyncSession, sender_id: int, mid: str) -> int | None:
    """The ``seq`` of the message ``mid`` from ``sender_id``, if it is stored."""
    return (
        await session.execute(select(Message.seq).where(Message.sender_id == sender_id, Message.mid == mid))
    ).scalar_one_or_none()


async def deliveries_by_seq(
    session: AsyncSession, user_ids: list[int], seqs: list[int]
) -> list[tuple[int, StoredMessage]]:
    """``(user_id, message)`` for each of ``seqs`` stored *for* one of ``user_ids`` (joined with
    the deliveries table: a message is never handed to a user it was not stored for), in ``seq``
    order."""
    rows = await session.execute(
        select(Delivery.user_id, Message.seq, Message.conversation_id, User.username, Message.envelope)
        .join(Message, Message.seq == Delivery.seq)
        .join(User, User.id == Message.sender_id)
        .where(Delivery.user_id.in_(user_ids), Delivery.seq.in_(seqs))
        .order_by(Delivery.seq)
    )
    return [(uid, StoredMessage(seq, cid, sender, envelope)) for uid, seq, cid, sender, envelope in rows]


async def delivered_since(session: AsyncSession, user_id: int, since_ms: int, limit: int = 5000) -> list[StoredMessage]:
    """Messages for ``user_id`` stored at or after ``since_ms`` (Unix ms), in ``seq`` order."""
    rows = await session.execute(
        select(Message.seq, Message.conversation_id, User.username, Message.envelope)
        .join(Delivery, Delivery.seq == Message.seq)
        .join(User, User.id == Message.sender_id)
        .where(Delivery.user_id == user_id, Message.created_at_ms >= since_ms)
        .order_by(Message.seq)
        .limit(limit)
    )
    return [StoredMessage(seq, cid, sender, envelope) for seq, cid, sender, envelope in rows]


async def key_history(session: AsyncSession, username: str) -> list[UserKey]:
    """All keys ``username`` ever published, oldest first."""
    rows = await session.execute(
        select(UserKey).join(User, User.id == UserKey.user_id).where(User.username == username).order_by(UserKey.id)
    )
    return list(rows.scalars())


async def peers_of(session: AsyncSession, user_id: int) -> list[int]:
    """Ids of every user sharing at least one conversation with ``user_id`` (itself included)."""
    mine = select(Member.conversation_id).where(Member.user_id == user_id)
    rows = await session.execute(select(Member.user_id).where(Member.conversation_id.in_(mine)).distinct())
    return [r[0] for r in rows] or [user_id]


async def outstanding(session: AsyncSession, user_id: int, wrap_kids: Sequence[str]) -> dict[str, int]:
    """For each of ``wrap_kids`` (b64url key ids, 43 chars): how many envelopes the relay still
    stores for ``user_id`` whose delivery to that user is not acknowledged and that were wrapped to
    that key, a delivery with no recorded key (stored before migration 0011, or at levels 1-3)
    counted for every key asked, since it may have been wrapped to any of them.

    Only ``user_id``'s own deliveries are read: one grouped count over its unacknowledged rows
    (the deliveries primary key starts with ``user_id``).

    Returns:
        ``{wrap_kid: count}`` with every distinct key id of ``wrap_kids`` (0 when none is left).
    """
    kids = sorted(set(wrap_kids))
    rows = await session.execute(
        select(Delivery.wrap_kid, func.count())
        .where(
            Delivery.user_id == user_id,
            Delivery.acked_at_ms.is_(None),
            or_(Delivery.wrap_kid.in_(kids), Delivery.wrap_kid.is_(None)),
        )
        .group_by(Delivery.wrap_kid)
    )
    counts: dict[str | None, int] = {kid: n for kid, n in rows}
    unknown = counts.get(None, 0)
    return {kid: counts.get(kid, 0) + unknown for kid in kids}
