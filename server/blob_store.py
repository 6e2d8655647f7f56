"""Attachment blobs in the relay's database: the write ops (run by :mod:`server.writer`) and reads.

A blob is opaque to the relay (a file the client sealed, ``shared.attachment``; PROTOCOL.md §13).
Its bytes are kept in the database, in rows of at most :data:`PART_BYTES` (``blob_parts``), not in
the data folder: relays that share one PostgreSQL then serve each other's uploads, backups of the
database hold them, and retention deletes them with the same single writer as envelopes.

Who may fetch a blob is fixed when it is uploaded: its owner and the members of its conversation
at that moment (``blob_fetches`` rows, like an envelope's deliveries). A complete download marks
the row fetched; retention (:func:`delete_blobs`) deletes a blob once every row is fetched and it
is older than ``retention_keep_days``, or at ``retention_max_days`` whatever happened, and an
upload that never completed (its relay stopped mid-upload) after :data:`INCOMPLETE_BLOB_MS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sqlalchemy import and_, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from shared.b64 import b64u_encode
from shared.errors import Forbidden, NotFound, QuotaExceeded, RateLimited

from .models import Blob, BlobFetch, BlobPart, Member, User

PART_BYTES = 1024 * 1024  # bytes per blob_parts row (a download reads parts in order until none is left)
INCOMPLETE_BLOB_MS = 3_600_000  # an upload not completed within an hour is abandoned
UPLOAD_RETRY_S = 1.0  # Retry-After of an upload refused for too many in progress


def new_blob_id() -> str:
    """A fresh blob id: b64url of 16 random bytes (22 characters)."""
    return b64u_encode(os.urandom(16))


def begin(blob_id: str, cid: str, owner_id: int, now_ms: int, max_uploads: int) -> Callable[[Session], int]:
    """A write op: the row of a blob being uploaded (not complete, ``size`` 0: the bytes stored so
    far, counted by :func:`put_part`) and a fetch row for each member of ``cid`` now (the owner's
    already fetched). Returns how many may fetch it.

    At most ``max_uploads`` uploads of one owner are in progress at once (counted in the database
    under the owner's row lock, so across relays sharing one PostgreSQL; an upload whose relay
    stopped counts until retention deletes it, :data:`INCOMPLETE_BLOB_MS`).

    Raises:
        Forbidden: the owner is no longer a member of ``cid`` (removed since the check).
        RateLimited: ``max_uploads`` uploads of the owner are already in progress.
    """

    def op(s: Session) -> int:
        _lock_owner(s, owner_id)
        open_uploads = s.execute(
            select(func.count()).where(
                Blob.owner_id == owner_id,
                Blob.complete.is_(False),
                Blob.created_at_ms > now_ms - INCOMPLETE_BLOB_MS,
            )
        ).scalar_one()
        if open_uploads >= max_uploads:
            raise RateLimited(
                f"{open_uploads} uploads in progress (at most {max_uploads} at once)",
                retry_after=UPLOAD_RETRY_S,
                field="max_uploads_per_user",
            )
        members = list(s.execute(select(Member.user_id).where(Member.conversation_id == cid)).scalars())
        if owner_id not in members:
            raise Forbidden("not a member of this conversation", field="conversation")
        s.add(Blob(id=blob_id, conversation_id=cid, owner_id=owner_id, size=0, complete=False, created_at_ms=now_ms))
        s.flush()
        s.add_all(
            BlobFetch(blob_id=blob_id, user_id=u, fetched_at_ms=now_ms if u == owner_id else None) for u in members
        )
        return len(members)

    return op


def put_part(blob_id: str, owner_id: int, part: int, data: bytes, quota: int) -> Callable[[Session], None]:
    """A write op storing part ``part`` (0-based) of a blob's bytes (at most :data:`PART_BYTES`) and
    adding its length to the blob's ``size``, if every blob of the owner — complete or still
    uploading — and it stay within ``quota`` bytes. Checked in the transaction under the owner's
    row lock (PostgreSQL: ``SELECT … FOR UPDATE``; SQLite: one writer), so parallel uploads, on one
    relay or several, never store more than the quota between them.

    Raises:
        QuotaExceeded: over the quota (nothing stored; the caller discards the blob).
    """

    def op(s: Session) -> None:
        _lock_owner(s, owner_id)
        used = _stored(s, owner_id)
        if used + len(data) > quota:
            raise quota_exceeded(quota, used)
        s.add(BlobPart(blob_id=blob_id, part=part, data=data))
        s.execute(update(Blob).where(Blob.id == blob_id).values(size=Blob.size + len(data)))

    return op


def finish(blob_id: str, owner_id: int, size: int, quota: int) -> Callable[[Session], None]:
    """A write op marking a blob of ``size`` bytes complete: its parts (:func:`put_part`) must
    hold exactly ``size`` bytes, and the owner's blobs stay within ``quota`` bytes (they do, as
    every part was counted when stored; checked again under the owner's row lock).

    Raises:
        QuotaExceeded: over the quota, or the parts do not add up to ``size`` (the caller
            discards the blob).
    """

    def op(s: Session) -> None:
        _lock_owner(s, owner_id)
        used = _stored(s, owner_id)
        stored = s.execute(select(Blob.size).where(Blob.id == blob_id)).scalar_one_or_none()
        if stored != size or used > quota:
            raise quota_exceeded(quota, used)
        s.execute(update(Blob).where(Blob.id == blob_id).values(complete=True))

    return op


def discard(blob_id: str) -> Callable[[Session], None]:
    """A write op deleting a blob (an upload that failed or was refused) with its parts and fetches."""

    def op(s: Session) -> None:
        _delete(s, [blob_id])

    return op


def mark_fetched(blob_id: str, user_id: int, now_ms: int) -> Callable[[Session], None]:
    """A write op: ``user_id`` downloaded the whole blob (the first time counts)."""

    def op(s: Session) -> None:
        s.execute(
            update(BlobFetch)
            .where(BlobFetch.blob_id == blob_id, BlobFetch.user_id == user_id, BlobFetch.fetched_at_ms.is_(None))
            .values(fetched_at_ms=now_ms)
        )

    return op


def delete_blobs(
    keep_before_ms: int, max_before_ms: int | None, abandoned_before_ms: int, limit: int
) -> Callable[[Session], int]:
    """A write op deleting up to ``limit`` blobs that may go (retention, see the module
    docstring): complete, fetched by everyone and stored at or before ``keep_before_ms``; stored at
    or before ``max_before_ms`` (None: no maximum age); or not complete and begun at or before
    ``abandoned_before_ms``. Returns how many it deleted."""

    def op(s: Session) -> int:
        unfetched = exists().where(BlobFetch.blob_id == Blob.id, BlobFetch.fetched_at_ms.is_(None))
        may_go = or_(
            and_(Blob.complete.is_(True), Blob.created_at_ms <= keep_before_ms, ~unfetched),
            and_(Blob.complete.is_(False), Blob.created_at_ms <= abandoned_before_ms),
        )
        if max_before_ms is not None:
            may_go = or_(may_go, Blob.created_at_ms <= max_before_ms)
        ids = list(s.execute(select(Blob.id).where(may_go).order_by(Blob.created_at_ms).limit(limit)).scalars())
        _delete(s, ids)
        return len(ids)

    return op


def _delete(s: Session, ids: list[str]) -> None:
    if ids:
        s.execute(delete(BlobPart).where(BlobPart.blob_id.in_(ids)))
        s.execute(delete(BlobFetch).where(BlobFetch.blob_id.in_(ids)))
        s.execute(delete(Blob).where(Blob.id.in_(ids)))


def _lock_owner(s: Session, owner_id: int) -> None:
    """Lock the owner's ``users`` row for the transaction (PostgreSQL; SQLite has one writer):
    quota and upload counts of one owner are checked and changed one transaction at a time."""
    s.execute(select(User.id).where(User.id == owner_id).with_for_update())


def _stored(s: Session, owner_id: int) -> int:
    """Bytes of every blob of ``owner_id``: complete ones and the parts of uploads in progress."""
    used = s.execute(select(func.coalesce(func.sum(Blob.size), 0)).where(Blob.owner_id == owner_id)).scalar_one()
    return int(used)


def quota_exceeded(quota: int, used: int) -> QuotaExceeded:
    """The error for an upload past ``quota`` bytes with ``used`` bytes stored."""
    return QuotaExceeded(
        f"blob quota of {quota} bytes: {used} stored, {max(0, quota - used)} left", field="blob_quota_bytes"
    )


# -- reads -----------------------------------------------------------------------------------------
async def is_member(session: AsyncSession, cid: str, user_id: int) -> bool:
    """Whether ``user_id`` is a member of conversation ``cid`` now."""
    row = await session.execute(select(Member.user_id).where(Member.conversation_id == cid, Member.user_id == user_id))
    return row.first() is not None


async def used_bytes(session: AsyncSession, owner_id: int) -> int:
    """Bytes ``owner_id`` has stored: complete blobs plus the parts of uploads in progress."""
    used = await session.execute(select(func.coalesce(func.sum(Blob.size), 0)).where(Blob.owner_id == owner_id))
    return int(used.scalar_one())


async def readable(session: AsyncSession, blob_id: str, user_id: int) -> Blob:
    """The complete blob ``blob_id`` if ``user_id`` may fetch it.

    Raises:
        NotFound: no complete blob of that id (never uploaded, not finished, or deleted).
        Forbidden: it exists, but ``user_id`` is neither its owner nor was a member of its
            conversation when it was uploaded.
    """
    blob = (await session.execute(select(Blob).where(Blob.id == blob_id, Blob.complete.is_(True)))).scalar_one_or_none()
    if blob is None:
        raise NotFound("no such blob (it may have been deleted by retention)", field="blob")
    allowed = await session.execute(
        select(BlobFetch.user_id).where(BlobFetch.blob_id == blob_id, BlobFetch.user_id == user_id)
    )
    if allowed.first() is None:
        raise Forbidden("not a member of the blob's conversation when it was uploaded", field="blob")
    return blob


async def part(session: AsyncSession, blob_id: str, index: int) -> bytes | None:
    """Part ``index`` of a blob's bytes, or None (deleted meanwhile)."""
    row = await session.execute(select(BlobPart.data).where(BlobPart.blob_id == blob_id, BlobPart.part == index))
    data = row.scalar_one_or_none()
    return bytes(data) if data is not None else None
