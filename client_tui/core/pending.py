"""Actions that arrived before the message they act on (docs/PROTOCOL.md §13.5): a relay orders
the envelopes, so an ``edit``, ``delete`` or ``react`` may be handed over before its ``ref``. Such
an action is kept as an ``ignored`` row (``unknown_reference``) and held here; when the message
arrives it is applied to it, with the same checks (the author of an edit or delete, a member now),
before the message is stored or shown: a delete that came first means it is never shown.

Held in memory (and again after a restart, from the stored rows), at most :data:`MAX_PENDING`
per conversation (the oldest dropped, logged): a relay, or a member, sending actions on ids that
never come cannot grow it without bound.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shared.errors import ErrorCode

from . import annotate
from .events import RecordChanged
from .record import RecordState

if TYPE_CHECKING:
    from .client import ChatClient
    from .record import Record

__all__ = ["MAX_PENDING", "Pending"]

log = logging.getLogger("e2ee.client")

MAX_PENDING = 256
"""Actions held per conversation for messages not stored here yet."""


class Pending:
    """The held actions of one :class:`~client_tui.core.ChatClient` (``client.pending``)."""

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.held: dict[str, list[Record]] = {}  # conversation -> actions, oldest first

    async def load(self) -> None:
        """Hold again what was held when the client stopped: the actions stored ``ignored`` with
        ``unknown_reference`` (they keep their document until applied), oldest first."""
        if self.c.history is None:
            return
        for rec in await self.c.history.ignored(ErrorCode.UNKNOWN_REFERENCE):
            if rec.content.t in ("edit", "delete", "react") and rec.content.ref:
                self.hold(rec)

    def hold(self, rec: Record) -> None:
        """Keep the action ``rec`` (its ``ref`` is not stored here) until its message arrives."""
        kept = self.held.setdefault(rec.conversation, [])
        if any(r.lid == rec.lid for r in kept):
            return
        kept.append(rec)
        if len(kept) > MAX_PENDING:
            old = kept.pop(0)
            log.warning(
                "pending %s from %s on %s in %s dropped: more than %d actions wait for messages not here",
                old.content.t,
                old.sender,
                old.content.ref,
                old.conversation,
                MAX_PENDING,
            )

    async def settle(self, msg: Record) -> None:
        """``msg`` arrived (opened and verified, not stored yet): apply to it, in their authors'
        order, the actions held for its id (an edit or delete only from its author; one from
        someone else stays held: the author's own message with that id may still come). Each
        action applied (or refused) is stored again and announced."""
        kept = self.held.get(msg.conversation)
        if not kept or not msg.mid:
            return
        mine = [r for r in kept if r.content.ref == msg.mid and (r.content.t == "react" or r.sender == msg.sender)]
        if not mine:
            return
        self.held[msg.conversation] = [r for r in kept if r not in mine]
        for rec in sorted(mine, key=lambda r: (r.ts, r.ctr or 0)):
            rec.state, rec.reason, rec.detail = RecordState.RECEIVED, "", ""
            if not annotate.refuse_non_member(self.c, rec):
                if msg.state != RecordState.DELETED:
                    annotate.change(msg, rec)
                annotate.strip(rec)
                log.info("%s from %s applied to %s, which arrived after it", rec.content.t, rec.sender, msg.mid)
            if self.c.history is not None:
                await self.c.history.put(rec)
            await self.c.events.put(RecordChanged(rec))
