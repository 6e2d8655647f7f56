"""What arrives from the relay, once the session protocol let it through: messages to open and
verify, delivery receipts, relay events, the end of each sync page.

A message is opened once: duplicates are dropped by ``(sender, message id)``; my own messages
coming back through sync only confirm the outbox. Each sender's counter in a conversation is
tracked, so messages a relay withholds show as gaps (:class:`GapDetected`) until they arrive. The
cursor only passes messages that were processed (the protocol hands them over in seq order), and
is saved in the same transaction as the message that moved it. A message whose sender's key
cannot be fetched (the relay is unreachable) is not judged: :class:`SenderKeyUnavailable` ends the
connection and the next sync brings it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from shared import envelope, frames
from shared.errors import E2EEError, ErrorCode, UnknownSenderKey
from shared.keys import Identity
from shared.session import SyncProgress

from . import annotate, documents, measure
from .errors import ClientError, SenderKeyUnavailable
from .events import Delivered, GapDetected, MessageReceived, MessageUnreadable, RecordChanged
from .record import MessageInfo, Record, RecordState, now_ms

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client")

KEY_REFETCH_S = 5.0
MAX_GAP = 1000


@dataclass
class Progress:
    """What the client remembers between sessions (saved as the history cache's meta)."""

    cursor: int = 0  # the highest seq processed
    counters: dict[str, int] = field(default_factory=dict)  # my counter per conversation
    last_ctr: dict[str, int] = field(default_factory=dict)  # "conv\x00sender" -> highest counter seen
    missing: dict[str, list[int]] = field(default_factory=dict)  # "conv\x00sender" -> counters not seen

    def meta(self) -> dict:
        """The form saved in the history cache's meta table."""
        return {"cursor": self.cursor, "counters": self.counters, "last_ctr": self.last_ctr, "missing": self.missing}

    @classmethod
    def from_meta(cls, meta: dict) -> Progress:
        """Read back what :meth:`meta` wrote (missing keys: empty)."""
        return cls(
            int(meta.get("cursor", 0)),
            dict(meta.get("counters", {})),
            dict(meta.get("last_ctr", {})),
            dict(meta.get("missing", {})),
        )


class Inbox:
    """The receiving side of one :class:`~client_tui.core.ChatClient` (``client.inbox``).

    Attributes:
        seen: ``(sender, mid)`` of every message shown (or sent) here: the dedup set.
        synced: set when the last sync page arrived.
        ack_due: the highest seq this client decided to acknowledge.
        mine_by_seq: my stored messages by seq, for delivery receipts.
    """

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.seen: set[tuple[str, str]] = set()
        self.synced = asyncio.Event()
        self.ack_due = 0
        self.mine_by_seq: dict[int, Record] = {}

    # -- acks and the cursor ---------------------------------------------------------------------
    def ack(self, seq: int) -> None:
        """Acknowledge up to ``seq`` (batched by the session protocol)."""
        self.ack_due = max(self.ack_due, seq)
        link = self.c.connection.link
        if link is not None:
            link.ack(seq)

    def _advance_cursor(self, seq: int) -> None:
        if seq > self.c.progress.cursor:
            self.c.progress.cursor = seq

    async def _skip(self, seq: int) -> None:
        """A message that needs no processing (a duplicate, my own): the cursor passes it."""
        self._advance_cursor(seq)
        if self.c.history is not None:
            await self.c.history.set_meta(cursor=self.c.progress.cursor)
        self.ack(seq)

    async def on_sync_progress(self, event: SyncProgress) -> None:
        """A sync page ended: save the cursor; after the last one, report the gaps still open."""
        if self.c.history is not None:
            await self.c.history.set_meta(**self.c.progress.meta())
        if not event.more:
            self.synced.set()
            await self.report_gaps()

    # -- messages --------------------------------------------------------------------------------
    def identity_for(self, rkids: list[str]) -> Identity:
        """My identity (current, pending or retired) that ``rkids`` names as a recipient, else the
        current one (open() names the error: not_a_recipient).

        Raises:
            WrapKeyErased: ``rkids`` names only a key of mine whose private half was erased.
        """
        assert self.c.identity is not None
        for ident in self.c._my_identities():
            if ident.wrap_kid in rkids:
                return ident
        erased = self.c.epochs.erased_for(rkids)
        if erased is not None:
            raise erased
        return self.c.identity

    async def _sender_key(self, user: str, skid: str, seq: int | None = None):
        """The key that verifies ``user``'s envelope signed with ``skid`` (stored at ``seq``), and a
        warning (see ``Contacts.pinned_sign_key``); an unknown key id fetches ``user``'s keys once."""
        c = self.c
        for attempt in (1, 2):
            found = c.pinned_sign_key(user, skid, seq)
            if found is not None:
                return found
            fetched = c._key_fetched_at.get(user)
            if attempt == 2 or (fetched is not None and time.monotonic() - fetched < KEY_REFETCH_S):
                break
            try:
                await c.fetch_keys(user)
            except ClientError as exc:
                if exc.code == ErrorCode.UNREACHABLE:  # no answer about the key at all: do not judge the message
                    raise SenderKeyUnavailable(user) from exc
                log.info("could not fetch %s's keys: %s", user, exc.code)
                break
        raise UnknownSenderKey(f"{user}'s signing key {skid[:8]}… is not a key pinned for them", field="skid")

    async def on_message(self, frame: frames.Message) -> None:
        """Open, verify and record one message (in seq order, as the protocol hands them over).

        Raises:
            SenderKeyUnavailable: the sender's key could not be fetched; nothing was recorded.
        """
        c = self.c
        assert c.identity is not None
        raw = bytes(frame.envelope)
        parsed = None
        try:
            parsed = envelope.parse(raw, max_bytes=c.max_envelope)
            h = parsed.header
            key = (h.snd, h.mid)
            own = c.outgoing.by_mid.get(h.mid) if h.snd == c.username else None
            if own is not None:  # my own message, back through sync: its ack may have been lost
                await c.outgoing.mark_stored(own, frame.seq)
                return await self._skip(frame.seq)
            if key in self.seen:
                log.info("duplicate message seq=%d from %s dropped (mid already shown)", frame.seq, h.snd)
                return await self._skip(frame.seq)
            self.seen.add(key)  # claimed now: a copy arriving while this one is opened is a duplicate
            if frame.conversation not in c.members:
                c._spawn(c.refresh_conversations())
            try:
                removed = await c.membership.check_envelope(h, frame.conversation, frame.sender, parsed)
                sign_key, warning = await self._sender_key(h.snd, h.skid, frame.seq)
                warning = removed or warning  # sealed before someone was removed: never plain ✔
                me = self.identity_for(h.rkids)
                opened, timings = await asyncio.to_thread(
                    measure.open_, parsed, me, sign_key, conversation=frame.conversation, sender=frame.sender
                )
                text, doc, ts, ctr = documents.read(opened)
            except BaseException:
                self.seen.discard(key)  # not verified: it must not suppress the real message
                raise
        except E2EEError as exc:
            return await self._on_unreadable(frame, raw, parsed, exc)
        mine = h.snd == c.username
        if not mine and opened.content.kth is not None:  # gossip from a verified sender: checked aside
            c._spawn(c.transparency.gossip_in(h.snd, msgspec.structs.asdict(opened.content.kth)))
        if mine:
            c.progress.counters[h.cid] = max(c.progress.counters.get(h.cid, 0), ctr)
        rec = Record(
            secrets.token_hex(8),
            h.cid,
            h.snd,
            text,
            h.mid,
            frame.seq,
            float(frame.seq),
            ts,
            ctr,
            RecordState.STORED if mine else RecordState.RECEIVED,
            envelope=raw,
            info=MessageInfo(
                timings=timings, skid=h.skid, rkids=list(h.rkids), warning=warning, mine=mine, wrap_kid=me.wrap_kid
            ),
            content=doc,
        )
        gap = None if mine else self._track_counter(h.cid, h.snd, ctr)
        self._advance_cursor(frame.seq)
        await self.act(rec)
        counted = rec.is_message and not mine
        if counted:
            c.unread[h.cid] = c.unread.get(h.cid, 0) + 1
        if c.history is not None:
            if not await c.history.put(rec, c.progress.meta()):
                # stored already by another session of this account on this profile (the app open
                # while `e2ee-chat send` runs): show that row, so later changes find it by its lid
                stored = [r for r in await c.history.by_mid(h.mid, h.cid) if r.sender == h.snd]
                rec = stored[0] if stored else rec
            if counted:
                await c.history.set_unread(h.cid, c.unread[h.cid])
        c.expiry.note(rec.content.exp, rec.lid)
        if rec.is_message:
            await c.events.put(
                MessageReceived(frame.seq, h.cid, h.snd, text or "", h.mid, ts, ctr, raw, timings, warning)
            )
        await c.events.put(RecordChanged(rec, new=True))
        if gap:
            await c.events.put(GapDetected(h.cid, h.snd, gap))
        if not mine:
            self.ack(frame.seq)

    async def act(self, rec: Record) -> None:
        """What a verified document does besides being stored: an edit, delete or reaction is
        applied to its message (or refused: ``ignored``), a read receipt moves its reader, a
        timer is set; what expired already is deleted at once (``client_tui.core.expiry``). A
        state-changing document from a sender who is not a member now is refused (``ignored``)."""
        c, t = self.c, rec.content.t
        if annotate.refuse_non_member(c, rec):
            return
        if rec.is_message:
            await c.pending.settle(rec)  # what arrived before it: a delete means it is never shown
        if t in ("edit", "delete", "react"):
            await annotate.apply(c, rec)
        elif t == "read":
            await c.receipts.on_read(rec)
            annotate.strip(rec)
        elif t == "expire":
            await c.expiry.set(rec.conversation, rec.content.seconds or 0, rec.sender)
        if rec.content.exp is not None and rec.content.exp <= now_ms() and rec.state != RecordState.IGNORED:
            annotate.tombstone(rec, "expired")

    async def _on_unreadable(self, frame: frames.Message, raw: bytes, parsed, exc: E2EEError) -> None:
        c = self.c
        log.warning(
            "message seq=%d from %s in %s could not be verified: %s (%s)",
            frame.seq,
            frame.sender,
            frame.conversation,
            exc.code,
            exc.message,
        )
        claimed = parsed.header.mid if parsed is not None else None
        rec = Record(
            secrets.token_hex(8),
            frame.conversation,
            frame.sender,
            None,
            None,
            frame.seq,
            float(frame.seq),
            now_ms(),
            None,
            RecordState.UNREADABLE,
            exc.code,
            exc.message,
            raw,
            MessageInfo(claimed_mid=claimed, field=exc.field),
        )
        self._advance_cursor(frame.seq)
        if c.history is not None:
            await c.history.put(rec, c.progress.meta())
        await c.events.put(MessageUnreadable(frame.seq, frame.conversation, frame.sender, exc.code, exc.message))
        await c.events.put(RecordChanged(rec, new=True))
        self.ack(frame.seq)

    # -- counters and gaps -----------------------------------------------------------------------
    def _track_counter(self, conversation: str, sender: str, ctr: int) -> tuple[int, ...] | None:
        """Update the sender's counter; return the counters it newly skipped (a gap), if any.

        A late message fills its place in the gap. Messages of one sender can arrive out of order
        when its sends were pipelined (the relay may store them in another order), so a gap is a
        fact to show only if it stays open: see :meth:`missing_counters`.
        """
        p = self.c.progress
        k = f"{conversation}\x00{sender}"
        last = p.last_ctr.get(k)
        missing = p.missing.get(k, [])
        if ctr in missing:
            missing.remove(ctr)
        new: tuple[int, ...] | None = None
        if last is None or ctr <= last:
            p.last_ctr[k] = max(ctr, last or 0)
        else:
            p.last_ctr[k] = ctr
            if ctr > last + 1:
                new = tuple(range(max(last + 1, ctr - MAX_GAP), ctr))
                missing = sorted(set(missing) | set(new))[-MAX_GAP:]
                log.warning("gap: %s skipped counters %d..%d in %s", sender, last + 1, ctr - 1, conversation)
        if missing:
            p.missing[k] = missing
        else:
            p.missing.pop(k, None)
        return new

    def missing_counters(self, conversation: str) -> dict[str, tuple[int, ...]]:
        """Counters of each sender in ``conversation`` that never arrived (so far)."""
        prefix = f"{conversation}\x00"
        return {k[len(prefix) :]: tuple(v) for k, v in self.c.progress.missing.items() if k.startswith(prefix) and v}

    async def report_gaps(self) -> None:
        """At the end of a sync: every gap still open, as :class:`GapDetected`."""
        for k, missing in list(self.c.progress.missing.items()):
            if missing:
                conv, sender = k.split("\x00", 1)
                await self.c.events.put(GapDetected(conv, sender, tuple(missing)))

    # -- receipts and relay events ---------------------------------------------------------------
    async def on_delivered(self, frame: frames.Delivered) -> None:
        """``frame.user`` acknowledged up to ``frame.seq``: my message there is delivered to them."""
        c = self.c
        await c.events.put(Delivered(frame.seq, frame.user))
        if frame.user == c.username:
            return
        rec = self.mine_by_seq.get(frame.seq)
        if rec is None and c.history is not None:
            rec = await c.history.by_seq(frame.seq)
            if rec is None or not rec.mine:
                return
            self.mine_by_seq[frame.seq] = rec
        if rec is None or rec.state == RecordState.DELETED:
            return
        to = rec.info.delivered_to
        if frame.user in to:
            return
        to.append(frame.user)
        others = [u for u in rec.info.recipients if u != c.username]
        if others and set(others) <= set(to):
            rec.state = RecordState.DELIVERED
        if c.history is not None:
            await c.history.put(rec)
        await c.events.put(RecordChanged(rec))

    async def on_relay_event(self, frame: frames.Event) -> None:
        """A key changed (judged before the messages that follow the event: they may be sealed to
        the new keys) or a conversation's members changed (reloaded in the background)."""
        c = self.c
        if frame.kind == "key_changed" and frame.user == c.username:
            await c._own_keys_changed()
        elif frame.kind == "key_changed" and frame.user:
            with contextlib.suppress(E2EEError):
                await c.fetch_keys(frame.user)
        elif frame.kind == "members_changed":
            c._spawn(c.refresh_conversations())
