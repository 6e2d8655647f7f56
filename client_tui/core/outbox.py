"""My messages on their way to the relay: seal, queue, send in order, and what the relay answers.

A message is sealed once for the members of the conversation's newest verified epoch and waits
in the outbox (``sending``) until the relay stored it; the outbox survives a restart (the history
cache holds it) and is sent again after each reconnect with the same envelope, which the relay
stores once. One message is in flight at a time per connection. The relay's answers decide the
rest: ``rate_limited`` waits and sends again, ``recipients_mismatch``/``epoch_stale`` reload the
members and seal again (same counter, at most :data:`MAX_RESEALS` times), a key change found on
sending keeps the message ``blocked`` until the user decides; anything else fails it. A message
written before members joined waits (``audience_grew``) until its author approves the larger
audience or declines (:meth:`Outbox.approve`, :meth:`Outbox.decline`).

An unsent message is shown after every other line, in the order written, until the relay stores it
at its seq: its ``pos`` is in a band above every seq (:data:`~client_tui.core.record.UNSENT_POS`),
so a line landing while it waits moves nothing, and each landed line costs one history write
whatever the length of the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from shared import envelope, frames
from shared.errors import E2EEError, EnvelopeTooLarge, ErrorCode
from shared.session import CloseCode

from . import documents, measure
from .annotate import strip
from .audience_decisions import AudienceDecisions
from .errors import NOT_ANSWERED, ClientError, KeyChangeBlocked
from .events import MessageStored, RecordChanged, Sent
from .membership import Audience
from .record import ACTION_TYPES, UNSENT_POS, UNSENT_STEP, AgreedAudience, Doc, MessageInfo, Record, RecordState, now_ms

if TYPE_CHECKING:
    from .client import ChatClient
    from .link import Link

log = logging.getLogger("e2ee.client")

SEND_TIMEOUT_S = 30.0
MAX_RESEALS = 3


@dataclass(eq=False)
class Outgoing:
    """One message in the outbox: its record, set ``sealed`` once it has an envelope, ``done``
    with :class:`Sent` or the error; ``hold``: wait (rate limit, key change) instead of failing."""

    record: Record
    sealed: asyncio.Event
    done: asyncio.Future
    hold: bool
    reseals: int = 0


def _detail(exc: ClientError) -> dict:
    """The relay's ``detail`` object of an error answer (empty if it sent none)."""
    return exc.detail if isinstance(exc.detail, dict) else {}


def _consume(fut: asyncio.Future) -> None:
    """Retrieve an outbox future's exception so that nobody waiting on it is not an error."""
    if not fut.cancelled():
        fut.exception()


class Outbox(AudienceDecisions):
    """The sending side of one :class:`~client_tui.core.ChatClient` (``client.outgoing``).

    Attributes:
        items: the outbox in order (sealing, sending or blocked).
        by_mid: outbox items by message id.
        pending: futures of envelopes sent and not answered yet, by message id.
    """

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.items: list[Outgoing] = []
        self.by_mid: dict[str, Outgoing] = {}
        self.pending: dict[str, asyncio.Future] = {}
        self.wake = asyncio.Event()
        self.last_unsent = UNSENT_POS - UNSENT_STEP  # the pos of the newest message written

    def _place(self) -> float:
        """The ``pos`` of a message written now: after every other line and every unsent message."""
        self.last_unsent = max(self.last_unsent + UNSENT_STEP, UNSENT_POS)
        return self.last_unsent

    def _item(self, rec: Record, hold: bool) -> Outgoing:
        item = Outgoing(rec, asyncio.Event(), asyncio.get_running_loop().create_future(), hold)
        item.done.add_done_callback(_consume)
        return item

    async def restore(self, records: list[Record]) -> None:
        """Take back the outbox the history cache kept (oldest first). A message kept below the
        unsent band (by a client before it) is placed in it, after the others, and written back."""
        for rec in records:
            if rec.state == RecordState.SEALING:  # interrupted before the envelope existed: seal again
                rec.state, rec.envelope = RecordState.SENDING, None
            if rec.pos < UNSENT_POS or rec.pos <= self.last_unsent:
                rec.pos = self._place()
                if self.c.history is not None:
                    await self.c.history.put(rec)
            self.last_unsent = max(self.last_unsent, rec.pos)
            item = self._item(rec, True)
            item.sealed.set()
            self.items.append(item)
            if rec.mid:
                self.by_mid[rec.mid] = item

    async def _record(self, rec: Record, meta: dict | None = None) -> None:
        if self.c.history is not None:
            await self.c.history.put(rec, meta)
        await self.c.events.put(RecordChanged(rec))

    # -- queueing and sealing --------------------------------------------------------------------
    async def queue(self, conversation: str, text: str | None, hold: bool, doc: Doc | None = None) -> Outgoing:
        """Seal ``text`` (the body of the content document ``doc``; a text message without one)
        for the conversation's members and put it in the outbox. While the relay does not answer
        and a key is missing to seal it here, it waits unsealed (``sending``) for the audience
        verified here (:meth:`_written_offline`) and is sealed on sending. In a conversation with
        a disappearing-message timer it carries its ``exp`` (``client_tui.core.expiry``).

        Raises:
            EnvelopeTooLarge, ContentTooLarge (before any crypto), ContentInvalid (the document),
            KeyChangeBlocked, MemberWithoutKey, ClientError.
        """
        c = self.c
        max_bytes = c.max_envelope
        size = len((text or "").encode("utf-8", "surrogatepass"))
        if size * 4 // 3 > max_bytes:
            raise EnvelopeTooLarge(
                f"message is {size} bytes; the relay accepts envelopes up to {max_bytes} bytes "
                f"(about {max_bytes * 3 // 4 - 1024} bytes of text)",
                field="text",
            )
        try:
            recipients: Audience | None = await c.recipients_for(conversation)
        except ClientError as exc:  # the relay does not answer (a member's keys were never fetched):
            recipients, agreed = None, self._written_offline(conversation, exc)  # sealed on sending
        counters = c.progress.counters
        counter = counters[conversation] = counters.get(conversation, 0) + 1
        rec = Record(
            secrets.token_hex(8),
            conversation,
            c.username,
            text,
            None,
            None,
            self._place(),
            now_ms(),
            counter,
            RecordState.SEALING,
            info=MessageInfo(mine=True),
            content=doc or Doc(),
        )
        c.expiry.stamp(rec)
        documents.plaintext(rec)  # ContentInvalid, ContentTooLarge: now, before it is in the outbox
        item = self._item(rec, hold)
        self.items.append(item)
        try:
            if recipients is not None:
                await self.seal(item, recipients)
            else:
                rec.state, rec.info.audience = RecordState.SENDING, agreed
                item.sealed.set()  # Outbox._transmit seals it once the relay answers
        except BaseException:
            self.items.remove(item)
            if counters.get(conversation) == counter:
                counters[conversation] = counter - 1
            raise
        if c.history is not None:
            await c.history.put(rec, {"counters": counters})
        c.expiry.note(rec.content.exp, rec.lid)
        await c.events.put(RecordChanged(rec, new=True))
        self.wake.set()
        return item

    def _written_offline(self, conversation: str, exc: ClientError) -> AgreedAudience:
        """The audience a message written while the relay does not answer is for: the members of
        the newest epoch verified here, which the user was shown. It is sealed on sending, after the
        keys it needs are fetched and the log verified again; anyone who joined meanwhile makes it
        wait for its author (``audience_grew``), as for a message sealed before they joined.

        Raises:
            ClientError: ``exc`` again: the relay answered (a refusal), or no verified log of
                ``conversation`` that I am a member of is kept here.
        """
        head = self.c.membership.head(conversation)
        if exc.code not in NOT_ANSWERED or head is None or head.member(self.c.username) is None:
            raise exc
        log.info("relay unreachable: a message to %s waits unsealed in the outbox (epoch %d)", conversation, head.ep)
        return AgreedAudience(head.ep, list(head.usernames))

    async def seal(self, item: Outgoing, audience: Audience) -> None:
        """Seal ``item`` (again) for ``audience`` in a worker thread; it becomes ``sending``.

        Raises:
            AudienceGrew: members joined since it was written; E2EEError: it cannot be sealed.
        """
        c = self.c
        assert c.identity is not None
        rec = item.record
        audience.admit(rec)  # AudienceGrew: members joined since it was written
        max_bytes, max_recipients = c.max_envelope, c.max_recipients
        data, timings = await asyncio.to_thread(
            measure.seal,
            c.transparency.stamp(documents.to_wire(rec)),  # gossip: the newest key directory head verified
            c.identity,
            rec.conversation,
            audience.recipients,
            epoch=audience.epoch,
            head=audience.head,
            max_bytes=max_bytes,
            max_recipients=max_recipients,
        )
        header = envelope.parse(data, max_bytes=max_bytes, max_recipients=max_recipients).header
        if rec.mid:
            self.by_mid.pop(rec.mid, None)
        rec.mid, rec.envelope, rec.state = header.mid, data, RecordState.SENDING  # ts: the document's
        info = rec.info
        info.timings, info.skid, info.rkids = timings, header.skid, list(header.rkids)
        info.recipients, info.warning = list(audience.members), ""
        c.inbox.seen.add((c.username, header.mid))
        self.by_mid[header.mid] = item
        item.sealed.set()

    async def send_text(self, conversation: str, text: str | None, timeout: float, doc: Doc | None = None) -> Sent:
        """Queue ``text`` (``doc``) without hold and wait until the relay stored it (see ``ChatClient.send_text``)."""
        return await self.stored(await self.queue(conversation, text, False, doc), timeout)

    async def stored(self, item: Outgoing, timeout: float) -> Sent:
        """Wait until the relay stored ``item``; after ``timeout`` seconds it fails (TimeoutError)."""
        try:
            return await asyncio.wait_for(asyncio.shield(item.done), timeout)
        except TimeoutError:
            await self.fail(item, ClientError("not stored in time", code=ErrorCode.TIMEOUT))
            raise

    async def retry(self, lid: str) -> None:
        """Send a ``failed`` message of mine again (sealed anew, with a new counter)."""
        history = self.c.history
        rec = await history.by_lid(lid) if history is not None else None
        if history is None or rec is None or rec.state != RecordState.FAILED or not rec.mine or rec.text is None:
            return
        doc = msgspec.structs.replace(rec.content, exp=None)  # its conversation's timer now
        new = (await self.queue(rec.conversation, rec.text, True, doc)).record
        rec.state, rec.detail = RecordState.FAILED, f"sent again as a new message ({new.lid})"
        rec.info.retried_as = new.lid
        await self._record(rec)

    # -- sending ---------------------------------------------------------------------------------
    async def run(self, link: Link) -> None:
        """Send the outbox in order while ``link`` is the live connection; one message in flight."""
        while self.c.connection.link is link and link.open:
            item = self._next()
            if item is None:
                self.wake.clear()
                if self._next() is None:
                    await self.wake.wait()
                continue
            if not item.sealed.is_set():
                await item.sealed.wait()
                continue
            if not await self._transmit(item, link):
                return  # the connection is gone: the next session sends it

    def _next(self) -> Outgoing | None:
        held: set[str] = set()
        for item in self.items:
            conv = item.record.conversation
            if conv in held:
                continue
            if item.record.state == RecordState.BLOCKED:
                held.add(conv)
                continue
            if item.record.state in (RecordState.SEALING, RecordState.SENDING):
                return item
        return None

    async def submit(self, link: Link, conversation: str, data: bytes, mid: str) -> int:
        """Send the envelope ``data`` (message id ``mid``) on ``link``; the seq it was stored at.

        Raises:
            ClientError: the relay refused it (its code), or ``offline``.
        """
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[mid] = fut
        try:
            await link.send(conversation, data, mid)
        except ClientError:
            self.pending.pop(mid, None)
            raise
        return await asyncio.shield(fut)

    async def _transmit(self, item: Outgoing, link: Link) -> bool:
        """Send one message and wait for the relay's answer; False if the connection is gone."""
        rec = item.record
        if rec.envelope is None:  # re-seal after a restart in the middle of sealing
            try:
                await self.seal(item, await self.c.recipients_for(rec.conversation))
            except KeyChangeBlocked as exc:  # AudienceGrew included: its author decides
                await self.block(item, exc)
                return True
            except ClientError as exc:
                if exc.code in NOT_ANSWERED:
                    return False
                await self.fail(item, exc)
                return True
            except E2EEError as exc:
                await self.fail(item, exc)
                return True
            await self._record(rec)  # kept with its envelope: sent again as it is after a restart
        assert rec.mid is not None and rec.envelope is not None
        try:
            seq = await asyncio.wait_for(self.submit(link, rec.conversation, rec.envelope, rec.mid), SEND_TIMEOUT_S)
        except TimeoutError:
            log.warning("no answer to send %s in %.0f s: reconnecting", rec.mid, SEND_TIMEOUT_S)
            self.pending.pop(rec.mid, None)
            link.forget(rec.mid)
            await link.close(CloseCode.GOING_AWAY, "no answer")
            return False
        except ClientError as exc:
            if exc.code == ErrorCode.OFFLINE:
                return False  # sent again after the reconnect
            if exc.code == ErrorCode.RATE_LIMITED and item.hold:
                await asyncio.sleep(float(_detail(exc).get("retry_after", 1.0)))
            elif exc.code in (ErrorCode.RECIPIENTS_MISMATCH, ErrorCode.EPOCH_STALE) and item.reseals < MAX_RESEALS:
                await self._reseal(item, exc)
            else:
                await self.fail(item, exc)
            return True
        await self.mark_stored(item, seq)
        return True

    # -- the relay's answers ---------------------------------------------------------------------
    async def on_stored(self, frame: frames.Stored) -> None:
        """The relay stored ``frame.mid`` at ``frame.seq`` (recorded before the next frame is read)."""
        item = self.by_mid.get(frame.mid)
        if item is not None:
            await self.mark_stored(item, frame.seq)
        fut = self.pending.pop(frame.mid, None)
        if fut is not None and not fut.done():
            fut.set_result(frame.seq)
        await self.c.events.put(MessageStored(frame.mid, frame.seq, frame.conversation))

    def on_refused(self, mid: str, error: frames.Error) -> None:
        """The relay refused the envelope ``mid``: its sender gets the error."""
        fut = self.pending.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_exception(ClientError(error.message, code=error.code, field=error.field, detail=error.detail))

    def on_closed(self) -> None:
        """The connection closed: every send waiting for an answer is sent again on the next one."""
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ClientError("connection closed before the relay stored it", code=ErrorCode.OFFLINE))
        self.pending.clear()
        self.wake.set()

    async def _reseal(self, item: Outgoing, exc: ClientError) -> None:
        item.reseals += 1
        c = self.c
        try:
            await c.refresh_conversations()
            for user in _detail(exc).get("missing", []):
                with contextlib.suppress(ClientError):
                    await c.fetch_keys(user)
            await self.seal(item, await c.recipients_for(item.record.conversation))
        except KeyChangeBlocked as blocked:
            return await self.block(item, blocked)
        except ClientError as err:
            if err.code in NOT_ANSWERED:
                return  # still "sending": tried again on the next connection
            return await self.fail(item, err)
        except E2EEError as err:
            return await self.fail(item, err)
        await self._record(item.record)

    async def block(self, item: Outgoing, exc: KeyChangeBlocked) -> None:
        """Keep ``item`` ``blocked`` until the user decides (fails it without ``hold``)."""
        if not item.hold:
            return await self.fail(item, exc)
        item.record.state, item.record.reason, item.record.detail = RecordState.BLOCKED, exc.code, exc.message
        await self._record(item.record)

    async def unblock(self) -> None:
        """After a key decision: seal again every blocked message nothing blocks any more."""
        for item in list(self.items):
            rec = item.record
            if rec.state != RecordState.BLOCKED or self.c.blocked_by(rec.conversation):
                continue
            try:
                await self.seal(item, await self.c.recipients_for(rec.conversation))
            except KeyChangeBlocked:
                continue
            except E2EEError as exc:
                await self.fail(item, exc)
                continue
            rec.reason = rec.detail = ""
            await self._record(rec)
        self.wake.set()

    async def fail(self, item: Outgoing, exc: E2EEError) -> None:
        """``item`` is not sent: ``failed`` with the error's code; its counter is given back."""
        rec, counters = item.record, self.c.progress.counters
        log.warning("message %s to %s not sent: %s (%s)", rec.mid, rec.conversation, exc.code, exc.message)
        rec.state, rec.reason, rec.detail = RecordState.FAILED, exc.code, exc.message
        if rec.pos >= UNSENT_POS:  # it stays where it is shown now: after the lines landed so far
            rec.pos = self.c._next_pos()
        if item in self.items:
            self.items.remove(item)
        if rec.mid:
            self.by_mid.pop(rec.mid, None)
        if rec.ctr is not None and counters.get(rec.conversation) == rec.ctr:
            counters[rec.conversation] = rec.ctr - 1  # no gap for the others
        await self._record(rec, {"counters": counters})
        if not item.done.done():
            item.done.set_exception(exc)
        self.wake.set()

    async def mark_stored(self, item: Outgoing, seq: int) -> None:
        """The relay stored ``item`` at ``seq``: it leaves the outbox."""
        rec = item.record
        if rec.state in (RecordState.STORED, RecordState.DELIVERED):
            return
        if rec.state == RecordState.DELETED:  # deleted while in flight: stays deleted (its delete follows)
            rec.seq, rec.pos = seq, float(seq)
        else:
            rec.state, rec.seq, rec.pos, rec.reason, rec.detail = RecordState.STORED, seq, float(seq), "", ""
        if rec.content.t in ACTION_TYPES:
            strip(rec)  # stored: its document is not sealed again, and the message it changed holds it
        if item in self.items:
            self.items.remove(item)
        self.c.inbox.mine_by_seq[seq] = rec
        self.c._pos = max(self.c._pos, rec.pos)  # a line made here from now on goes after it
        await self._record(rec)
        if not item.done.done():
            item.done.set_result(Sent(rec.mid or "", seq))
        self.wake.set()

    @property
    def records(self) -> list[Record]:
        """My messages waiting to be stored by the relay (sealing, sending or blocked), in order."""
        return [i.record for i in self.items]
