"""Read receipts, end to end: "I read up to message M" is a small ``read`` document sealed to the
conversation's members like any message (same envelope, same padding bucket: the relay cannot
tell it from one), never the relay's ``ack`` (which stays a delivery receipt).

Sending: the user interface calls :meth:`Receipts.seen` with the newest message of someone else
the user had in view; one receipt per conversation leaves after :data:`RECEIPT_DELAY_S` (a burst
of messages read together gives one receipt), and only when it moves past the last one sent.
``enabled`` False (the user's preference) sends none; receipts of others are still shown.

Receiving: a ``read`` document from U with ``ref`` M counts as "U read everything up to M's relay
seq" - the seq of M *as stored here* when M is here (the document's own ``upto`` is only used
when M is not: deleted or expired here keeps its seq, so that is rare). A receipt only ever moves
a reader forward. The positions are kept in the cache's meta (``reads``) and announced as
:class:`ReadUpTo`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from shared.errors import E2EEError

from .events import ReadUpTo
from .record import Doc, Record

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client")

__all__ = ["RECEIPT_DELAY_S", "Receipts"]

RECEIPT_DELAY_S = 0.5
"""How long a read position waits before its receipt is sealed (later positions replace it)."""


class Receipts:
    """Read receipts of one :class:`~client_tui.core.ChatClient` (``client.receipts``).

    Attributes:
        enabled: send receipts (the user's preference; receiving is always on).
        reads: conversation id -> reader -> the highest relay seq they read.
        sent: conversation id -> the highest seq my last receipt there reported.
    """

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.enabled = True
        self.reads: dict[str, dict[str, int]] = {}
        self.sent: dict[str, int] = {}
        self._due: dict[str, Record] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def load(self, meta: dict) -> None:
        """The positions the history cache kept (meta ``reads`` and ``read_sent``)."""
        reads, sent = meta.get("reads", {}), meta.get("read_sent", {})
        self.reads = {c: dict(r) for c, r in reads.items() if isinstance(r, dict)} if isinstance(reads, dict) else {}
        self.sent = dict(sent) if isinstance(sent, dict) else {}

    def readers(self, rec: Record) -> list[str]:
        """Who read ``rec`` (stored at a seq), by their receipts; its sender left out; sorted."""
        if rec.seq is None:
            return []
        return sorted(
            u for u, seq in self.reads.get(rec.conversation, {}).items() if seq >= rec.seq and u != rec.sender
        )

    # -- sending -------------------------------------------------------------------------------------
    def seen(self, rec: Record) -> None:
        """The user had ``rec`` in view: a receipt up to it leaves after :data:`RECEIPT_DELAY_S`
        (unless it is mine, not a message, not stored, or not past the last receipt)."""
        if not self.enabled or rec.mine or rec.seq is None or not rec.is_message or not rec.mid:
            return
        cid = rec.conversation
        due = self._due.get(cid)
        if rec.seq <= self.sent.get(cid, 0) or (due is not None and due.seq is not None and due.seq >= rec.seq):
            return
        self._due[cid] = rec
        if cid not in self._timers:
            loop = asyncio.get_running_loop()
            self._timers[cid] = loop.call_later(RECEIPT_DELAY_S, lambda: self.c._spawn(self.flush(cid)))

    async def flush(self, conversation: str) -> Record | None:
        """Seal and queue the receipt waiting for ``conversation`` now; its record, or None."""
        timer = self._timers.pop(conversation, None)
        if timer is not None:
            timer.cancel()
        rec = self._due.pop(conversation, None)
        if rec is None or rec.seq is None or rec.seq <= self.sent.get(conversation, 0) or not self.enabled:
            return None
        self.sent[conversation] = rec.seq
        if self.c.history is not None:
            await self.c.history.set_meta(read_sent=self.sent)
        try:
            item = await self.c.outgoing.queue(conversation, None, True, Doc(t="read", ref=rec.mid, upto=rec.seq))
        except E2EEError as exc:  # a key change waits for a decision: no receipt until then
            log.info("read receipt in %s not sent: %s", conversation, exc.code)
            return None
        return item.record

    # -- receiving -----------------------------------------------------------------------------------
    async def on_read(self, rec: Record) -> None:
        """``rec`` is a ``read`` document (verified): its sender read up to its ``ref``."""
        c, d = self.c, rec.content
        found = await c.history.by_mid(d.ref, rec.conversation) if c.history is not None and d.ref else []
        seq = next((r.seq for r in found if r.seq is not None), None)
        if seq is None:
            seq = d.upto
            log.info("read receipt from %s names %s, not stored here: its seq %s is used", rec.sender, d.ref, seq)
        if seq is None:
            return
        mine = self.reads.setdefault(rec.conversation, {})
        if seq <= mine.get(rec.sender, -1):
            return
        mine[rec.sender] = seq
        if c.history is not None:
            await c.history.set_meta(reads=self.reads)
        await c.events.put(ReadUpTo(rec.conversation, rec.sender, seq))

    def stop(self) -> None:
        """Cancel the receipts waiting to leave (the client closes)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._due.clear()
