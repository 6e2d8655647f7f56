"""Disappearing messages: each conversation's timer (set by any member with an ``expire``
document) and the loop timer that deletes what expired.

A member sets the timer (seconds; 0 turns it off); the newest ``expire`` document in the relay's
order wins. Every document I write in a conversation with a timer then carries ``exp`` = its
``ts`` + the timer (ms), inside the ciphertext; the ``expire`` document itself does not expire.
A record is deleted here when its ``exp`` passes, whoever wrote it, whatever the timer is now:
the sender's ``exp`` decides. The deletion is one loop timer (``call_later``) set for the
earliest ``exp`` the cache holds, set again after each sweep and whenever an earlier one is
stored: no polling. What expired becomes a tombstone (:func:`~client_tui.core.annotate.tombstone`):
text, document and envelope gone from the cache, and a :class:`RecordChanged` takes it off the
screen.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .annotate import live, tombstone
from .events import ConversationsChanged, RecordChanged
from .record import Record, RecordState, now_ms

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client")

__all__ = ["Expiry", "timer_words"]


def timer_words(seconds: int) -> str:
    """A timer in words: ``30 s``, ``5 min``, ``1 h``, ``1 day``, ``2 weeks``; ``off`` for 0."""
    if seconds <= 0:
        return "off"
    for unit, size in (("week", 604800), ("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}" + ("s" if n > 1 and unit in ("week", "day") else "")
    return f"{seconds} s"


class Expiry:
    """The disappearing-message timers of one :class:`~client_tui.core.ChatClient` (``client.expiry``).

    Attributes:
        timers: conversation id -> seconds (only conversations with a timer on).
    """

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.timers: dict[str, int] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._armed: int | None = None
        self._shown: dict[str, int] = {}  # lid -> exp of the records this session announced

    def load(self, meta: dict) -> None:
        """The timers the history cache kept (its meta ``timers``)."""
        timers = meta.get("timers", {})
        self.timers = (
            {k: int(v) for k, v in timers.items() if isinstance(v, int) and v > 0} if isinstance(timers, dict) else {}
        )

    def stamp(self, rec: Record) -> None:
        """Set my record's ``exp`` from its conversation's timer (not on an ``expire`` document)."""
        seconds = self.timers.get(rec.conversation, 0)
        if seconds and rec.content.t != "expire":
            rec.content.exp = rec.ts + seconds * 1000

    async def set(self, conversation: str, seconds: int, by: str) -> None:
        """``by`` set ``conversation``'s timer to ``seconds`` (0: off): kept in the cache's meta;
        announced as :class:`ConversationsChanged`."""
        if seconds > 0:
            self.timers[conversation] = seconds
        else:
            self.timers.pop(conversation, None)
        log.info("%s set the disappearing-message timer of %s to %s", by, conversation, timer_words(seconds))
        if self.c.history is not None:
            await self.c.history.set_meta(timers=self.timers)
        await self.c.events.put(ConversationsChanged(conversation))

    # -- the loop timer ------------------------------------------------------------------------
    def note(self, exp: int | None, lid: str | None = None) -> None:
        """A record (local id ``lid``) expiring at ``exp`` (ms) was stored: make sure the timer
        fires by then, and that this session announces its deletion even if another session of the
        account on the same cache (``e2ee-chat send`` while the app is open) deletes it first."""
        if exp is None:
            return
        if lid is not None:
            self._shown[lid] = exp
        if self._armed is not None and self._armed <= exp:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._armed = exp
        delay = max(0.0, (exp - now_ms()) / 1000)
        self._handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle, self._armed = None, None
        self.c._spawn(self.sweep())

    async def sweep(self) -> list[Record]:
        """Delete every record whose ``exp`` passed (from the cache, and announced so that the
        screen drops it), then set the timer for the next one. Returns what was deleted."""
        history = self.c.history
        if history is None:
            return []
        now = now_ms()
        async with self.c.messaging.lock:  # not while an edit or reaction rewrites one of them
            gone = [live(self.c, r) for r in await history.expiring(now)]
            for rec in gone:
                tombstone(rec, "expired")
                await history.put(rec)
            gone += await self._deleted_elsewhere(now, {r.lid for r in gone})
        for rec in gone:
            await self.c.events.put(RecordChanged(rec))
        if gone:
            log.info("%d expired message(s) deleted", len(gone))
        self.note(await history.next_exp())
        return gone

    async def _deleted_elsewhere(self, now: int, done: set[str]) -> list[Record]:
        """Records this session announced whose ``exp`` passed and that another session of the
        account already deleted from the shared cache: announced deleted here too."""
        due = [lid for lid, exp in self._shown.items() if exp <= now]
        out = []
        for lid in due:
            del self._shown[lid]
            if lid in done or self.c.history is None:
                continue
            rec = await self.c.history.by_lid(lid)
            if rec is not None and rec.state == RecordState.DELETED:
                shown = live(self.c, rec)  # the object this session holds: deleted here too
                tombstone(shown, rec.reason)
                out.append(shown)
        return out

    def stop(self) -> None:
        """Cancel the loop timer (the client closes)."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._armed = None, None
