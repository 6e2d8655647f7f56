"""What the author decides about their messages waiting in the outbox (a mixin of
:class:`~client_tui.core.outbox.Outbox`): one written before members joined is never sealed to a
larger audience than the one it was written for without its author (DESIGN §10): it waits
(``audience_grew``) until :meth:`AudienceDecisions.approve` or :meth:`AudienceDecisions.decline`;
one deleted before it left is withdrawn (:meth:`AudienceDecisions.withdraw`), never sent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.errors import ErrorCode

from .annotate import tombstone
from .errors import AudienceGrew, ClientError
from .record import AgreedAudience, Record

if TYPE_CHECKING:
    from .outbox import Outgoing

__all__ = ["AudienceDecisions"]


class AudienceDecisions:
    """Approve or decline sending waiting messages to newcomers, withdraw one deleted before it
    left (mixed into ``Outbox``, which provides ``c``, ``items``, ``pending``, ``unblock()``,
    ``fail()`` and ``_record()``)."""

    c: Any
    items: list[Outgoing]
    pending: dict
    unblock: Any
    fail: Any
    _record: Any

    def in_flight(self, rec: Record) -> bool:
        """``rec`` was sent and the relay has not answered yet (it may be storing it now)."""
        return rec.mid is not None and rec.mid in self.pending

    async def withdraw(self, rec: Record) -> bool:
        """Delete my message ``rec`` before it leaves: out of the outbox with the edits and
        reactions of it still waiting there, a tombstone here, nothing sent (a counter is given
        back when it is the newest). False when ``rec`` is not waiting in the outbox (stored
        already, or in flight: then a ``delete`` document must follow it)."""
        item = next((i for i in self.items if i.record.lid == rec.lid), None)
        if item is None or self.in_flight(item.record):
            return False
        refs = [i for i in self.items if i.record.content.ref == rec.mid and not self.in_flight(i.record)]
        for it in (*reversed(refs), item):  # the newest first: each gives its counter back
            await self.fail(it, ClientError("deleted by its author before it was sent"))
            tombstone(it.record, "deleted")
            await self._record(it.record)
        return True

    async def approve(self, cid: str, newcomers: list[str] | None = None) -> int:
        """The user agrees to send the messages waiting in ``cid`` to ``newcomers`` too - the names
        they were shown (None: the current members); returns how many were waiting. Anyone who
        joined beyond them is asked about again (the message waits: ``audience_grew``)."""
        waiting = self.waiting(cid)
        head = self.c.membership.head(cid)
        agreed = newcomers if newcomers is not None else list(head.usernames) if head else []
        for item in waiting:
            written = item.record.info.audience.members if item.record.info.audience else []
            item.record.info.audience = AgreedAudience(head.ep if head else -1, sorted({*written, *agreed}))
        await self.unblock()
        return len(waiting)

    async def decline(self, cid: str) -> int:
        """The user does not send the messages waiting in ``cid`` to the newcomers: they are
        marked not sent (the text stays in the history); returns how many."""
        waiting = self.waiting(cid)
        for item in waiting:
            await self.fail(item, AudienceGrew("not sent: you chose not to send it to the new members"))
        return len(waiting)

    def waiting(self, cid: str) -> list[Outgoing]:
        """My messages in ``cid`` waiting for my decision on a larger audience, oldest first."""
        return [i for i in self.items if i.record.conversation == cid and i.record.reason == ErrorCode.AUDIENCE_GREW]
