"""One message as the client knows it: :class:`Record`, its :class:`RecordState`, and what the
client learned about it on the way (:class:`MessageInfo`, a typed record instead of a free dict).

The history cache (:mod:`client_tui.core.history`) stores a record's info as JSON; an older
cache's keys that are no longer used are ignored when it is read back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

import msgspec


class RecordState(StrEnum):
    """Where a message record is (a ``StrEnum``: stored in the cache as its word)."""

    SEALING = "sealing"  # mine: being encrypted (sealed again after a restart in the middle)
    SENDING = "sending"  # mine: sealed, in the outbox, not stored by the relay yet
    BLOCKED = "blocked"  # mine: waits for a key decision or for the author's consent to a larger audience
    STORED = "stored"  # mine: the relay stored it (``seq`` known)
    DELIVERED = "delivered"  # mine: every other member acknowledged it
    FAILED = "failed"  # mine: the relay refused it, or it could not be sealed
    RECEIVED = "received"  # someone's message, opened and verified
    UNREADABLE = "unreadable"  # could not be opened or verified ("could not verify")
    SYSTEM = "system"  # a line about a membership change (client_tui.core.membership)
    IGNORED = "ignored"  # an edit, delete or reaction opened and verified but refused (``reason`` says why)
    DELETED = "deleted"  # deleted by its sender or expired: text, document and envelope are gone (ids kept)


OUTGOING_STATES = (RecordState.SEALING, RecordState.SENDING, RecordState.BLOCKED)
"""States of my own messages that the relay has not stored yet (the outbox)."""

UNSENT_POS = float(2**53)
"""Where my unsent messages are placed (``Record.pos``): at ``UNSENT_POS + UNSENT_STEP * k``, k in the
order they were written. Every other record's pos is at most a relay seq (``frames.Seq``: below
2**53) plus fractions, so unsent messages come after every other line by construction, and a line
landing before them moves none of them (one history write per landed line, not one per unsent
message as well)."""

UNSENT_STEP = 2.0
"""The spacing of floats between 2**53 and 2**54: each step is exact (2**52 steps)."""


class AgreedAudience(msgspec.Struct):
    """Whom the author agreed to send a message to: the members of epoch ``ep`` (-1: none known)."""

    ep: int
    members: list[str]


class MessageInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the client learned about a message besides its text.

    Attributes:
        mine: written by this account.
        timings: milliseconds per primitive of sealing or opening it (``encrypt``, ``sign``, ``unwrap``,
            ...; ``wrap``: a list, one per recipient).
        skid, rkids: the sender's signing key id; the recipients' wrap key ids, in header order.
        wrap_kid: which of my keys opened it (a retired one after a rotation).
        warning: a mark for the sender or the line (``key_not_accepted``, ``sender_removed``,
            ``membership_fork``, ...), empty if none.
        recipients: usernames it was sealed to (mine).  delivered_to: who acknowledged it (mine).
        audience: the audience its author agreed to (a message waiting for consent).
        retried_as: the local id of the new message a failed one was sent again as.
        claimed_mid, field: an unreadable message: the id its header claimed, the field at fault.
        opened_later: opened after a key decision or a rotation, not when it arrived.
        system: ``membership`` for a line about a membership change; ``ep``, ``op``, ``hash``,
            ``verified``, ``detail``: that line's statement and what was checked.
    """

    mine: bool = False
    timings: dict[str, float | list[float]] = {}
    skid: str | None = None
    rkids: list[str] = []
    wrap_kid: str | None = None
    warning: str = ""
    recipients: list[str] = []
    delivered_to: list[str] = []
    audience: AgreedAudience | None = None
    retried_as: str | None = None
    claimed_mid: str | None = None
    field: str | None = None
    opened_later: bool = False
    system: str | None = None
    ep: int | None = None
    op: str | None = None
    hash: str | None = None
    verified: bool | None = None
    detail: str | None = None

    def encode(self) -> str:
        """The JSON the history cache keeps (fields at their defaults left out)."""
        return msgspec.json.encode(self).decode()

    @classmethod
    def decode(cls, text: str | bytes) -> MessageInfo:
        """Read back what :meth:`encode` (or an older client's dict) wrote: unknown keys, and keys
        whose value has another form than today's, are left out (a cache is never unreadable for
        them).

        Raises:
            msgspec.DecodeError: not JSON.
        """
        try:
            return msgspec.json.decode(text, type=cls)
        except msgspec.ValidationError:
            doc = msgspec.json.decode(text)
        kept = {}
        for key, value in doc.items() if isinstance(doc, dict) else ():
            try:
                msgspec.convert({key: value}, cls)
            except msgspec.ValidationError:
                continue
            kept[key] = value
        return msgspec.convert(kept, cls)


MESSAGE_TYPES = ("text", "reply", "attachment")
"""Document types that are a message of their own (a row of the log; they count as unread)."""
LINE_TYPES = ("expire", "title")
"""Document types shown as a line about the conversation (a timer set, a title changed)."""
ACTION_TYPES = ("edit", "delete", "react", "read")
"""Document types that act on another message (``ref``): never a row of their own."""


class Version(msgspec.Struct):
    """An earlier text of an edited message: ``body``; ``ts``: when it was written (ms, its
    author's clock)."""

    body: str
    ts: int


class Doc(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The typed document a record carries (``shared.content``, docs/PROTOCOL.md), in the form the
    history cache seals beside the text, and what later documents did to it.

    Attributes:
        t: the document type (``text``, ``reply``, ``edit``, ``delete``, ``react``, ``read``,
            ``attachment``, ``expire``, ``title``).
        ref: the message id it refers to (reply, edit, delete, react, read).
        emoji, on: a reaction and whether it is set (True) or taken back.
        upto: a read receipt's relay seq (everything at or below it was read).
        seconds: an ``expire`` document's timer (0: off).  title: a ``title`` document's title.
        att: an attachment's metadata as the document carries it (``shared.content.AttachmentRef``
            as a dict: id, key, name, type, size, sha256, chunk).
        exp: when the message expires (ms since the epoch), if a timer was set.
        versions: the earlier texts of an edited message, oldest first.
        edited: when the text shown was written, if it is an edit (ms, its author's clock).
        edited_ctr: that edit's counter (with ``edited``, the author's order of edits).
        reactions: emoji -> the users who reacted with it, in the order they did.
        toggles: ``"user\x00emoji"`` -> ``[ts, ctr]`` of that user's newest reaction document
            with that emoji applied here (set or taken back): an older one changes nothing.
    """

    t: str = "text"
    ref: str | None = None
    emoji: str | None = None
    on: bool = True
    upto: int | None = None
    seconds: int | None = None
    title: str | None = None
    att: dict | None = None
    exp: int | None = None
    versions: list[Version] = []
    edited: int | None = None
    edited_ctr: int | None = None
    reactions: dict[str, list[str]] = {}
    toggles: dict[str, list[int]] = {}


@dataclass
class Record:
    """One message as the client knows it (mine or received), in a conversation.

    Attributes:
        lid: local id (random, stable for the life of the record).
        conversation, sender: as in the verified header (or as delivered, for unreadable ones).
        text: the plaintext; ``None`` for a message that could not be verified.
        mid, seq: message id and the relay's sequence (``None`` until known).
        pos: display order: ``seq`` once stored; a fraction after the last seq for a line made
            here (membership, a failed message); at :data:`UNSENT_POS` and above while unsent.
        ts: sent-at in ms (the sender's clock) or the local time for unreadable ones.
        ctr: the sender's counter in this conversation.
        state: mine: ``sealing`` -> ``sending`` -> ``stored`` -> ``delivered`` (or ``blocked``
            by a key change or a larger audience, or ``failed``); received: ``received``; or
            ``unreadable``; or ``system``: a line about a membership change (``client_tui.core.membership``).
        reason, detail: error code and message (unreadable or failed).
        envelope: the envelope bytes the relay stored (ciphertext).
        info: what else the client learned about it (:class:`MessageInfo`).
        content: the typed document and what later documents did to it (:class:`Doc`);
            ``text`` is its body as shown (the newest version of an edited message).
    """

    lid: str
    conversation: str
    sender: str
    text: str | None
    mid: str | None = None
    seq: int | None = None
    pos: float = 0.0
    ts: int = 0
    ctr: int | None = None
    state: RecordState = RecordState.RECEIVED
    reason: str = ""
    detail: str = ""
    envelope: bytes | None = None
    info: MessageInfo = field(default_factory=MessageInfo)
    content: Doc = field(default_factory=Doc)

    @property
    def mine(self) -> bool:
        """Written by this account."""
        return self.info.mine

    @property
    def is_message(self) -> bool:
        """A message of its own (text, reply, attachment) that opened: it can be replied to,
        edited, deleted and reacted to."""
        return self.content.t in MESSAGE_TYPES and self.state not in _NOT_MESSAGES

    @property
    def visible(self) -> bool:
        """Shown as a row of the message log: messages, lines about the conversation, membership
        lines, what could not be verified and the actions refused; never an action applied
        (edit, delete, reaction, read receipt) nor what was deleted or expired."""
        if self.state == RecordState.DELETED:
            return False
        if self.state in (RecordState.UNREADABLE, RecordState.SYSTEM, RecordState.IGNORED):
            return True
        return self.content.t in MESSAGE_TYPES or self.content.t in LINE_TYPES


_NOT_MESSAGES = (RecordState.UNREADABLE, RecordState.SYSTEM, RecordState.IGNORED, RecordState.DELETED)


def now_ms() -> int:
    """The wall clock in milliseconds since the epoch (a record's ``ts``)."""
    return int(time.time() * 1000)
