"""The send path, shared by the websocket and REST: envelope checks, membership from a cache,
storage through the writer, acks after commit, fan-out to online members (here and, through the
broker, on other relays) and delivery of what other relays stored.

No gaps across relays. A client advances its cursor to the highest ``seq`` it received, so it must
never receive ``seq`` N before every message for it below N. Alone on its SQLite file a relay
commits in ``seq`` order and pushes each message as it commits. On a shared database (PostgreSQL)
two things make that hold whatever the timing of relays and broker notes:

* ``seq`` is assigned in commit order (:func:`server.store.insert_messages` takes an advisory lock
  before drawing it; the lock is held until the commit), so what any reader sees is always a
  prefix of the sequence: no transaction still open can commit a smaller ``seq``;
* delivery is *pulled*: a commit here or a broker note from another relay only wakes the
  recipients' connections, and each connection reads everything for its user after its own
  delivery cursor (``Connection.delivered``), in order, from the database (joined with the
  deliveries table). A lost or late note delays a message; it never makes one skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared import envelope, frames, plain
from shared.errors import ConversationMismatch, E2EEError, SenderMismatch

from . import membership, queries, store
from .db import Sessions
from .heads import HeadCache
from .hub import Connection, Hub
from .levels import LevelPolicy
from .limits import RateLimiter
from .settings import Settings
from .writer import Writer

if TYPE_CHECKING:
    from .broker import RedisBroker

log = logging.getLogger("e2ee.relay")
PULL_PAGE = 200


def mid_of(raw: bytes) -> str | None:
    """The envelope's message id if it can be read (to reference it in an error frame)."""
    try:
        return envelope.parse(raw, max_bytes=len(raw)).header.mid
    except E2EEError:
        return None


@dataclass
class Metrics:
    """Cumulative time the relay spends per stored message, in seconds (``GET /v1/metrics``).

    ``checks``: parse, sender/membership/recipient checks (and the L3 decryption before them is
    not included); ``commit``: waiting for the group-commit writer; ``fanout``: queuing frames.
    """

    stored: int = 0
    checks_s: float = 0.0
    commit_s: float = 0.0
    fanout_s: float = 0.0

    def record(self, checks: float, commit: float, fanout: float) -> None:
        """Add one stored message's seconds per part."""
        self.stored += 1
        self.checks_s += checks
        self.commit_s += commit
        self.fanout_s += fanout


class SendPath:
    """Checks, stores and fans out envelopes; the base of :class:`server.relay.Relay`."""

    def __init__(self, settings: Settings, sessions: Sessions, writer: Writer, levels: LevelPolicy) -> None:
        self.settings = settings
        self.levels = levels
        self.sessions = sessions
        self.writer = writer
        self.hub = Hub()
        self.metrics = Metrics()
        self.heads = HeadCache(sessions)
        self.broker: RedisBroker | None = None  # set by the app when --broker is given
        self.sends = RateLimiter("sends", settings.rate_sends_per_s, settings.rate_sends_burst)
        self.ordered = not settings.db_url.startswith("sqlite")  # shared database: pulled delivery
        self._pulls: set[asyncio.Task[None]] = set()

    async def accept(
        self, user: str, user_id: int, conversation: str, raw: bytes, exclude: Connection | None = None
    ) -> frames.Stored:
        """Validate an envelope from ``user``, store it, and fan it out to online members.

        Checks, before anything is stored: size and shape (``envelope.check``), the frame's
        conversation equals the header's ``cid``, the header's sender is ``user`` (the token's
        subject), ``user`` is a member, the header's ``ep``/``mh`` are the membership log's head,
        and the recipients are exactly the wrap keys that head binds, in its member order. A
        repeated (sender, mid) returns the first ``seq`` with ``duplicate=True``, also after the
        members changed (a retry is never asked to re-seal).

        Returns:
            the ``stored`` frame to send to the sender (after the commit).

        Raises:
            E2EEError subclasses: EnvelopeTooLarge, EnvelopeMalformed, ConversationMismatch,
            SenderMismatch, Forbidden, LegacyConversation, EpochStale, RecipientsMismatch.
        """
        readable = self.levels.readable(raw)
        if readable is not None:
            return await self.accept_plain(user, user_id, conversation, readable, exclude)
        t0 = time.perf_counter()
        h = envelope.check(  # never decodes the ciphertext and wrapped keys: only recipients read them
            raw, max_bytes=self.settings.max_envelope_bytes, max_recipients=self.settings.max_recipients
        )
        if h.cid != conversation:
            raise ConversationMismatch("envelope cid differs from the frame's conversation", field="cid")
        if h.snd != user:
            raise SenderMismatch("envelope sender must be the authenticated user", field="snd")
        head = await self._members(h.cid, user_id)
        refusal = head.refusal(h.ep, h.mh, h.rkids)
        if refusal is not None:
            # A retry of a message stored before the members or keys changed gets its first ack,
            # not a request to re-seal (which would give the same text a second message id).
            async with self.sessions() as session:
                seq = await queries.seq_of(session, user_id, h.mid)
            if seq is not None:
                return frames.Stored(h.mid, seq, h.cid, True)
            raise refusal
        # rkids equal the head's bound keys in member order (checked above): each delivery records
        # the wrap key its recipient's copy was sealed to (GET /v1/keys/outstanding)
        return await self._commit(user, user_id, h.cid, h.mid, raw, head.members, exclude, t0, h.xp, h.rkids)

    async def accept_plain(
        self,
        user: str,
        user_id: int,
        conversation: str,
        m: plain.PlainEnvelope,
        exclude: Connection | None = None,
        started: float | None = None,
    ) -> frames.Stored:
        """Levels 1-3: store a readable message after the same sender and membership checks as
        level 4, and fan it out (at level 3 re-encrypted under each recipient's session key).

        ``started`` (perf_counter) counts earlier work, e.g. the level-3 decryption, as checks.

        Raises:
            ConversationMismatch, SenderMismatch, Forbidden.
        """
        t0 = started if started is not None else time.perf_counter()
        if m.cid != conversation:
            raise ConversationMismatch("envelope cid differs from the frame's conversation", field="cid")
        if m.snd != user:
            raise SenderMismatch("envelope sender must be the authenticated user", field="snd")
        head = await self._members(m.cid, user_id)
        refusal = head.refusal(0, "", []) if head.epoch is None else None  # a legacy conversation
        if refusal is not None:
            raise refusal
        raw = plain.encode(m)
        return await self._commit(user, user_id, m.cid, m.mid, raw, head.members, exclude, t0)

    async def _members(self, conversation: str, user_id: int) -> membership.Head:
        """The membership head of ``conversation`` from :class:`server.heads.HeadCache`. Alone on
        its SQLite file this relay sees every change and drops the entry itself; on a shared
        database other relays' changes come as broker notes that may be lost, so entries expire
        after ``member_cache_s``.

        Raises:
            Forbidden: ``user_id`` is not one of its members.
        """
        alone = self.broker is None and self.settings.db_url.startswith("sqlite")
        ttl_s = float("inf") if alone else self.settings.member_cache_s
        return await self.heads.member_head(conversation, user_id, ttl_s)

    async def _commit(
        self,
        user: str,
        user_id: int,
        cid: str,
        mid: str,
        raw: bytes,
        members: list[membership.MemberKey],
        exclude: Connection | None,
        t0: float,
        expires_at_ms: int = 0,
        wrap_kids: list[str] | None = None,
    ) -> frames.Stored:
        """Store through the writer, then fan out to online members here and, through the
        broker, on other relays. ``expires_at_ms``: the envelope's expiry hint ``xp`` (v3 header,
        the content's ``exp`` rounded up to the hour; 0 = none), after which the relay no longer
        hands it out and retention deletes it. ``wrap_kids``: level 4, the header's ``rkids``
        (aligned with ``members``), recorded on each delivery; None at levels 1-3."""
        t1 = time.perf_counter()
        result = await self.writer.run(
            store.NewMessage(cid, user_id, mid, raw, [m.user_id for m in members], expires_at_ms, wrap_kids)
        )
        t2 = time.perf_counter()
        if result.duplicate:
            log.debug("duplicate user=%s seq=%d", user, result.seq)
        else:
            user_ids = [m.user_id for m in members]
            if self.ordered:
                n = self.pull_for(user_ids)
            else:
                n = self.hub.deliver(user_ids, self.levels.frame_for(result.seq, cid, user, raw), exclude=exclude)
            if self.broker is not None:
                self.broker.publish_message(result.seq, user_ids)
            log.debug(
                "stored seq=%d conv=%s from=%s bytes=%d recipients=%d online=%d",
                result.seq,
                cid,
                user,
                len(raw),
                len(members),
                n,
            )
        self.metrics.record(t1 - t0, t2 - t1, time.perf_counter() - t2)
        return frames.Stored(mid, result.seq, cid, result.duplicate)

    async def deliver_stored(self, seqs: list[int], user_ids: list[int]) -> int:
        """Deliver already stored messages to those of ``user_ids`` connected to this relay
        (used for messages stored by another relay), each only if it was stored for that user
        (the deliveries table decides, not the note). Returns the frames queued."""
        if self.ordered:
            return self.pull_for(user_ids)
        local = [uid for uid in user_ids if self.hub.online(uid)]
        if not local:
            return 0
        async with self.sessions() as session:
            rows = await queries.deliveries_by_seq(session, local, seqs)
        return sum(
            self.hub.deliver([uid], self.levels.frame_for(m.seq, m.conversation_id, m.sender, m.envelope))
            for uid, m in rows
        )

    async def resync_since(self, since_ms: int) -> int:
        """After a broker outage: send every connected user what was stored for them since
        ``since_ms`` (Unix ms); clients drop what they already have by message id."""
        if self.ordered:  # every connection reads on from its own cursor
            return sum(self.pull(conn) for conn in self.hub.all())
        n = 0
        for conn in self.hub.all():
            async with self.sessions() as session:
                rows = await queries.delivered_since(session, conn.user_id, since_ms)
            for m in rows:
                data = self.levels.frame_for(m.seq, m.conversation_id, m.sender, m.envelope)
                n += conn.enqueue(data(conn) if callable(data) else data)
        return n

    def forget_members(self, conversation: str | None = None, publish: bool = True) -> None:
        """Drop cached member lists: one conversation's, or all (after a key rotation); other
        relays are told through the broker unless ``publish`` is False."""
        self.heads.forget(conversation)
        if publish and self.broker is not None:
            self.broker.publish_forget(conversation)

    def notify(self, user_ids: list[int], event: frames.Event, publish: bool = True) -> None:
        """Send an ``event`` frame to every online connection of ``user_ids`` (on every relay)."""
        self.hub.deliver(sorted(set(user_ids)), frames.encode(event))
        if publish and self.broker is not None:
            self.broker.publish_event(sorted(set(user_ids)), event)

    # -- sync by cursor, acks ------------------------------------------------------------------------
    async def sync_page(self, conn: Connection, after: int, limit: int) -> tuple[int, bool] | None:
        """Queue one page of ``msg`` frames after ``after``: at most ``limit`` messages and at most
        half the connection's queue budget in bytes, so a catching-up reader is never dropped as
        slow. Returns ``(cursor, more)`` for the ``synced`` frame, or None if the queue overflowed
        (the connection is closing with 1013)."""
        async with self.sessions() as session:
            page = await queries.sync_page(session, conn.user_id, after, limit + 1)
        budget = self.settings.send_queue_bytes // 2
        cursor, sent, used = after, 0, 0
        for m in page[:limit]:
            frame = self.levels.frame_for(m.seq, m.conversation_id, m.sender, m.envelope)
            data = frame(conn) if callable(frame) else frame
            if sent and used + len(data) > budget:
                break
            if not conn.enqueue(data):
                return None
            cursor, sent, used = m.seq, sent + 1, used + len(data)
        return cursor, sent < len(page)

    def caught_up(self, conn: Connection, cursor: int, more: bool) -> None:
        """After a sync page: once the reader caught up, live delivery reads on from ``cursor``
        (ordered delivery on a shared database)."""
        if self.ordered and not more:
            conn.delivered = max(conn.delivered or 0, cursor)
            self.pull(conn)

    async def ack(self, conn: Connection, seq: int) -> None:
        """Record ``conn``'s user acknowledged everything up to ``seq``; tell the senders
        (``delivered``, on every relay they are connected to here)."""
        acked = await self.writer.run(store.ack_up_to(conn.user_id, seq))
        for acked_seq, sender_id in acked:
            self.hub.deliver([sender_id], frames.encode(frames.Delivered(acked_seq, conn.user)))

    # -- ordered delivery on a shared database ----------------------------------------------------
    def pull_for(self, user_ids: list[int]) -> int:
        """Wake the connections of ``user_ids`` here to read what is new for them; how many."""
        return sum(self.pull(conn) for uid in set(user_ids) for conn in self.hub.of(uid))

    def pull(self, conn: Connection) -> bool:
        """Make ``conn`` read, in ``seq`` order, every message for its user after its delivery
        cursor (once more if a read is running already). False if it is not ready for that."""
        if conn.delivered is None or conn.closing:
            return False
        if conn.pulling:
            conn.pull_again = True
            return True
        conn.pulling = True
        task = asyncio.ensure_future(self._pull(conn))
        self._pulls.add(task)
        task.add_done_callback(self._pulls.discard)
        return True

    async def _pull(self, conn: Connection) -> None:
        try:
            while not conn.closing and conn.delivered is not None:  # pull() starts it with a cursor
                conn.pull_again = False
                async with self.sessions() as session:
                    page = await queries.sync_page(session, conn.user_id, conn.delivered, PULL_PAGE)
                for m in page:
                    data = self.levels.frame_for(m.seq, m.conversation_id, m.sender, m.envelope)
                    if not conn.enqueue(data(conn) if callable(data) else data):
                        return  # a slow reader: closed (1013), it catches up by sync
                    conn.delivered = m.seq
                if len(page) < PULL_PAGE and not conn.pull_again:
                    return
        except Exception:
            log.exception("delivery to user=%s failed; the next message or sync retries", conn.user)
        finally:
            conn.pulling = False
