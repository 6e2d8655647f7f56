"""Data that is not kept forever: envelopes are deleted once every recipient acknowledged them.

An envelope is deleted at the first sweep after

* every recipient acknowledged it and it was stored more than ``retention_keep_days`` ago
  (default 0: as soon as the last acknowledgement arrives; a positive value keeps history that
  long, e.g. for a new device to sync), or
* it was stored more than ``retention_max_days`` ago (default 30), acknowledged or not — an
  account that never comes back does not keep its envelopes on the relay forever, or
* its expiry hint ``xp`` (a disappearing message's expiry, rounded up to the hour; docs/PROTOCOL.md)
  has passed, acknowledged or not (such an envelope is no longer handed out by sync either).

The sender's own copy counts as acknowledged when it is stored (its device has the message).
Acknowledgements are per account: a second device of an account that was offline when the first
one acknowledged does not get those envelopes (unless ``retention_keep_days`` keeps them).

Sweeps run every ``retention_interval_s`` and delete in transactions of ``retention_batch``
envelopes (and their delivery rows), each a *background* write of the single writer: its own
transaction, off the event loop, between batches of sends — so a send waits at most for one
deletion batch, never for a sweep. With several relays on PostgreSQL one sweeps at a time (an
advisory lock); the others skip. Ended login sessions are deleted a day after they ended.

Attachment blobs follow the same rules (:func:`server.blob_store.delete_blobs`): deleted once
every member they were uploaded for fetched them and ``retention_keep_days`` passed, or at
``retention_max_days``; an upload never completed goes after an hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import CursorResult, and_, delete, exists, or_, select, text
from sqlalchemy.orm import Session

from .blob_store import INCOMPLETE_BLOB_MS, delete_blobs
from .models import Delivery, LoginSession, Message
from .settings import Settings
from .store import now_ms
from .writer import Writer

log = logging.getLogger("e2ee.relay.retention")
DAY_MS = 86_400_000
SWEEP_LOCK = 7265502  # PostgreSQL advisory lock: one relay sweeps at a time


def delete_batch(
    keep_before_ms: int, max_before_ms: int | None, limit: int, after: int = 0, now_ms: int | None = None
) -> Callable[[Session], list[int] | None]:
    """A write op deleting up to ``limit`` envelopes with ``seq > after`` that may go: every
    delivery acknowledged and stored at or before ``keep_before_ms``, or stored at or before
    ``max_before_ms`` (None: no maximum age), or whose expiry hint ``xp`` passed by ``now_ms``
    (Unix ms; None: expiry not checked). Returns their seqs in order, or None when another relay
    holds the sweep lock (PostgreSQL)."""

    def op(s: Session) -> list[int] | None:
        if (
            s.get_bind().dialect.name == "postgresql"
            and not s.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": SWEEP_LOCK}).scalar()
        ):
            return None
        unacked = exists().where(Delivery.seq == Message.seq, Delivery.acked_at_ms.is_(None))
        may_go = and_(Message.created_at_ms <= keep_before_ms, ~unacked)
        if max_before_ms is not None:
            may_go = or_(may_go, Message.created_at_ms <= max_before_ms)
        if now_ms is not None:
            may_go = or_(may_go, and_(Message.expires_at_ms > 0, Message.expires_at_ms <= now_ms))
        seqs = list(
            s.execute(
                select(Message.seq).where(Message.seq > after, may_go).order_by(Message.seq).limit(limit)
            ).scalars()
        )
        if seqs:
            s.execute(delete(Delivery).where(Delivery.seq.in_(seqs)))
            s.execute(delete(Message).where(Message.seq.in_(seqs)))
        return seqs

    return op


def delete_ended_sessions(before_ms: int, idle_ms: int) -> Callable[[Session], int]:
    """A write op deleting login sessions that ended, expired or went idle before ``before_ms``."""

    def op(s: Session) -> int:
        # a DELETE's result is a CursorResult (Session.execute is typed for SELECTs)
        done = cast(
            "CursorResult[Any]",
            s.execute(
                delete(LoginSession).where(
                    or_(
                        LoginSession.ended_at_ms < before_ms,
                        LoginSession.expires_at_ms < before_ms,
                        LoginSession.last_used_at_ms < before_ms - idle_ms,
                    )
                )
            ),
        )
        return done.rowcount or 0

    return op


class Retention:
    """Runs the sweeps of one relay process (see the module docstring)."""

    def __init__(self, settings: Settings, writer: Writer) -> None:
        self.settings = settings
        self.writer = writer
        self.deleted = 0  # envelopes
        self.blobs_deleted = 0
        self.sessions_deleted = 0
        self.sweeps = 0
        self.last_sweep_s = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the sweeps every ``retention_interval_s`` seconds (0: never)."""
        if self.settings.retention_interval_s > 0:
            self._task = asyncio.create_task(self._run(), name="retention")

    async def stop(self) -> None:
        """Stop the sweeps (a sweep in progress is cancelled; its transaction rolls back)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def sweep(self) -> int:
        """One pass: delete every envelope that may go now, batch by batch. Returns how many."""
        s = self.settings
        started, now = time.perf_counter(), now_ms()
        keep_before = now - int(s.retention_keep_days * DAY_MS)
        max_before = now - int(s.retention_max_days * DAY_MS) if s.retention_max_days else None
        total, after = 0, 0
        while True:
            seqs = await self.writer.run(
                delete_batch(keep_before, max_before, s.retention_batch, after, now_ms=now), background=True
            )
            if seqs is None:  # another relay is sweeping
                break
            total += len(seqs)
            if len(seqs) < s.retention_batch:
                break
            after = seqs[-1]
        while True:
            gone = await self.writer.run(
                delete_blobs(keep_before, max_before, now - INCOMPLETE_BLOB_MS, s.retention_batch), background=True
            )
            self.blobs_deleted += gone
            if gone:
                log.info("retention deleted %d blobs", gone)
            if gone < s.retention_batch:
                break
        self.sessions_deleted += await self.writer.run(
            delete_ended_sessions(now - DAY_MS, int(s.session_idle_days * DAY_MS)), background=True
        )
        self.deleted += total
        self.sweeps += 1
        self.last_sweep_s = time.perf_counter() - started
        if total:
            log.info("retention deleted %d envelopes in %.0f ms", total, self.last_sweep_s * 1000)
        return total

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.retention_interval_s)
            try:
                await self.sweep()
            except Exception:  # the next sweep tries again; a failure never stops the relay
                log.exception("retention sweep failed")
