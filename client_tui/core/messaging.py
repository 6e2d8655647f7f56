"""What a user does to messages beyond writing one: reply, edit, delete for everyone, react, set
the disappearing-message timer (``client.messaging``). Each is a content document sealed to the
conversation's members through the outbox like any message (docs/PROTOCOL.md §13), so the relay
cannot tell one from another; each is checked here before it is sealed (only the author edits or
deletes; the message must be stored here) and applied here as it is queued.

Every method returns the record of the document queued; with ``wait`` it returns once the relay
stored it (its ``seq`` set), or raises as :meth:`ChatClient.send_text` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from shared import content
from shared.errors import ContentInvalid, InvalidRequest

from . import annotate
from .errors import NotAuthor, UnknownReference
from .outbox import SEND_TIMEOUT_S
from .record import OUTGOING_STATES, Doc, Record, RecordState

if TYPE_CHECKING:
    from .client import ChatClient

__all__ = ["Messaging"]


class Messaging:
    """Replies, edits, deletes, reactions and timers of one :class:`~client_tui.core.ChatClient`."""

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.lock = asyncio.Lock()
        """One change of a stored message at a time (an edit, reaction or delete applied, an
        expiry): each reads the message, changes it and stores it; two at once lost one."""

    async def _queue(
        self, conversation: str, text: str | None, doc: Doc, wait: bool, timeout: float, apply: bool = False
    ) -> Record:
        item = await self.c.outgoing.queue(conversation, text, not wait, doc)
        if apply:  # here at once; as written: the relay may have stored it already, and its document went then
            copy = dataclasses.replace(item.record, text=text, content=doc, state=RecordState.SENDING)
            await annotate.apply(self.c, copy)
        if wait:
            await self.c.outgoing.stored(item, timeout)
        return item.record

    async def message(self, mid: str, conversation: str | None = None, sender: str | None = None) -> Record:
        """The message ``mid`` stored here (in ``conversation``, written by ``sender``): the one a
        reply, reaction or saved file names.

        A mid is unique per sender, not globally: any member (helped by a relay that reads the
        headers) can reuse another's. So a mid that names messages in several conversations is
        refused rather than resolved to the first one stored; inside one conversation a document
        names the message its receivers resolve it to (:func:`annotate.target_of`: the first one
        stored), and asking for another author's there is refused, since it would name that one.

        Raises:
            UnknownReference: no message (text, reply, attachment) with that id is stored here (or
                not in ``conversation``, or not by ``sender``).
            InvalidRequest (``field`` ``mid``): it names several messages here, or ``sender``'s is not
                the one this id names in its conversation (``--conversation``/``--from`` tell which).
        """
        found = await self.c.history.by_mid(mid, conversation) if self.c.history is not None else []
        found = [r for r in found if r.is_message]
        chosen = [r for r in found if sender is None or r.sender == sender]
        if not chosen:
            raise UnknownReference(f"no message {mid} here", field="mid")
        if len({r.conversation for r in chosen}) > 1 or (sender is not None and len(chosen) > 1):
            which = ", ".join(sorted(f"{r.sender} in {r.conversation}" for r in chosen))
            raise InvalidRequest(
                f"message id {mid} names {len(chosen)} messages here ({which}): "
                "say which with --conversation and/or --from",
                field="mid",
            )
        first = next(r for r in found if r.conversation == chosen[0].conversation)
        if first is not chosen[0] and first.sender != self.c.username:
            raise InvalidRequest(
                f"message id {mid} was used first in this conversation by {first.sender}: a reply or "
                f"reaction naming it would reach {first.sender}'s message, not {chosen[0].sender}'s",
                field="mid",
            )
        return chosen[0]

    async def own(self, mid: str) -> Record:
        """My message ``mid`` (the one thing I may edit or delete).

        Raises:
            UnknownReference: not stored here; NotAuthor: someone else wrote it.
        """
        found = [r for r in await self.c.history.by_mid(mid) if r.is_message] if self.c.history is not None else []
        mine = [r for r in found if r.sender == self.c.username]
        if mine:
            return mine[0]
        if found:
            raise NotAuthor(f"{found[0].sender} wrote {mid}: only its author may change it", field="ref")
        raise UnknownReference(f"no message {mid} here", field="ref")

    async def send(
        self,
        conversation: str,
        body: str,
        *,
        reply: str | None = None,
        wait: bool = False,
        timeout: float = SEND_TIMEOUT_S,
    ) -> Record:
        """Send ``body``; with ``reply`` (a message id of this conversation) as a reply quoting it.

        Raises:
            UnknownReference (``reply`` is not stored here); as :meth:`ChatClient.queue_text`.
        """
        if reply is not None:
            await self.message(reply, conversation)
        doc = Doc(t="reply", ref=reply) if reply is not None else Doc()
        return await self._queue(conversation, body, doc, wait, timeout)

    async def edit(self, mid: str, body: str, *, wait: bool = False, timeout: float = SEND_TIMEOUT_S) -> Record:
        """Replace the text of my message ``mid`` with ``body`` for everyone (earlier texts stay
        visible as its versions).

        Raises:
            UnknownReference, NotAuthor; as :meth:`ChatClient.queue_text`.
        """
        target = await self.own(mid)
        return await self._queue(target.conversation, body, Doc(t="edit", ref=mid), wait, timeout, apply=True)

    async def delete(self, mid: str, *, wait: bool = False, timeout: float = SEND_TIMEOUT_S) -> Record:
        """Delete my message ``mid`` for everyone: here at once (text, document and envelope
        removed from the cache), on every member's device when they receive the document. A
        message still waiting in the outbox is withdrawn instead (nothing is sent; the record
        returned is the message's tombstone).

        Raises:
            UnknownReference, NotAuthor; as :meth:`ChatClient.queue_text`.
        """
        target = await self.own(mid)
        if target.state in OUTGOING_STATES:
            waiting = next((i.record for i in self.c.outgoing.items if i.record.lid == target.lid), target)
            if await self.c.outgoing.withdraw(waiting):  # not sent yet: nobody else has it
                return waiting
        return await self._queue(target.conversation, None, Doc(t="delete", ref=mid), wait, timeout, apply=True)

    async def react(
        self,
        mid: str,
        emoji: str,
        on: bool | None = None,
        *,
        conversation: str | None = None,
        sender: str | None = None,
        wait: bool = False,
        timeout: float = SEND_TIMEOUT_S,
    ) -> Record:
        """Add (``on`` True) or take back (False) my reaction ``emoji`` to message ``mid`` (in
        ``conversation``, by ``sender``: see :meth:`message`); ``on`` None toggles it.

        Raises:
            UnknownReference, InvalidRequest (as :meth:`message`); ContentInvalid (``emoji``: 1-16
            code points, no spaces or controls); as :meth:`ChatClient.queue_text`.
        """
        target = await self.message(mid, conversation, sender)
        if on is None:
            on = self.c.username not in target.content.reactions.get(emoji, [])
        doc = Doc(t="react", ref=mid, emoji=emoji, on=on)
        return await self._queue(target.conversation, None, doc, wait, timeout, apply=True)

    async def set_timer(
        self, conversation: str, seconds: int, *, wait: bool = False, timeout: float = SEND_TIMEOUT_S
    ) -> Record:
        """Set the disappearing-message timer of ``conversation`` for every member (0: off): the
        messages written after it expire ``seconds`` after they were sent.

        Raises:
            ContentInvalid (``seconds`` out of 0..``shared.content.MAX_EXPIRE_SECONDS``); as
            :meth:`ChatClient.queue_text`.
        """
        if not 0 <= seconds <= content.MAX_EXPIRE_SECONDS:
            raise ContentInvalid(f"seconds: must be in 0..{content.MAX_EXPIRE_SECONDS}", field="seconds")
        rec = await self._queue(conversation, None, Doc(t="expire", seconds=seconds), wait, timeout)
        await self.c.expiry.set(conversation, seconds, self.c.username)
        return rec
