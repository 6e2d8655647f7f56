"""My messages written before members joined: their author decides (a mixin of
:class:`~client_tui.core.outbox.Outbox`). A message is never sealed to a larger audience than
the one it was written for without its author (DESIGN §10): it waits (``audience_grew``) until
:meth:`AudienceDecisions.approve` or :meth:`AudienceDecisions.decline`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.errors import ErrorCode

from .errors import AudienceGrew
from .record import AgreedAudience

if TYPE_CHECKING:
    from .outbox import Outgoing

__all__ = ["AudienceDecisions"]


class AudienceDecisions:
    """Approve or decline sending waiting messages to newcomers (mixed into ``Outbox``, which
    provides ``c``, ``items``, ``unblock()`` and ``fail()``)."""

    c: Any
    items: list[Outgoing]
    unblock: Any
    fail: Any

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
