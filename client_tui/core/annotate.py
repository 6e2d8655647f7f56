"""Edits, deletes and reactions: what a document that refers to another message (``ref``) does to
it, on the receiving side and for my own (applied here as they are sent).

The rules (docs/PROTOCOL.md §13): only the author of a message may edit or delete it, judged
against the *verified* sender of the stored message (the signature checked when it was opened),
never against anything the action claims; anyone in the conversation may react, once per emoji,
and take it back. An action naming no message stored here, or one from someone else than the
author, is kept as an ``ignored`` record with its code (:data:`ErrorCode.NOT_AUTHOR`,
:data:`ErrorCode.UNKNOWN_REFERENCE`) and a log line, and changes nothing. An action on a message
already deleted (or expired) here is moot: it is kept, hidden, without a warning.

An edit keeps the earlier texts (``Doc.versions``, at most :data:`MAX_VERSIONS`); a delete
turns the message into a tombstone (:func:`tombstone`): text, document and envelope are removed
from the cache, only its ids stay (so a copy delivered again stays deleted). An action that was
applied keeps neither its text nor its envelope either: the message it changed holds what it did.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shared.errors import ErrorCode

from .events import RecordChanged
from .record import OUTGOING_STATES, Doc, Record, RecordState, Version

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client")

MAX_VERSIONS = 50
"""Earlier texts kept per message: the first one and the newest after it (a member editing
without end cannot grow the cache without bound)."""
MAX_EMOJI_PER_MESSAGE = 32
"""Distinct reactions kept per message; more are ignored (logged)."""

REFUSALS = {
    ErrorCode.NOT_AUTHOR: "only the author of a message may edit or delete it",
    ErrorCode.UNKNOWN_REFERENCE: "it refers to a message that is not on this device",
    ErrorCode.ACTOR_NOT_MEMBER: "its sender is not a member of the conversation (removed)",
}

STATE_TYPES = ("edit", "delete", "react", "read", "expire", "title")
"""Documents that change the conversation or another message: applied only from a current member."""


def member_now(c: ChatClient, rec: Record) -> bool:
    """Is ``rec``'s sender a member of its conversation's verified head (the newest epoch this
    client verified)? Without a verified log: unless the envelope check warned ``sender_removed``."""
    chain = c.membership.chains.get(rec.conversation)
    head = chain.head if chain is not None else None
    if head is not None:
        return rec.sender in head.usernames
    return rec.info.warning != "sender_removed"


def refuse_non_member(c: ChatClient, rec: Record) -> bool:
    """Refuse (``ignored``, :data:`ErrorCode.ACTOR_NOT_MEMBER`, a log line) the state-changing
    document ``rec`` if its sender is not a member now (docs/PROTOCOL.md §13.8); True if refused."""
    if rec.content.t not in STATE_TYPES or member_now(c, rec):
        return False
    _refuse(rec, ErrorCode.ACTOR_NOT_MEMBER, f"{rec.sender} is not a member of {rec.conversation} now")
    return True


def live(c: ChatClient, rec: Record) -> Record:
    """The object the client already holds for stored record ``rec`` (my message in the outbox,
    or stored this session and waiting for delivery receipts), else ``rec``: a change must be made
    to that one, or the next receipt would store its stale copy over the change."""
    for item in c.outgoing.items:
        if item.record.lid == rec.lid:
            return item.record
    held = c.inbox.mine_by_seq.get(rec.seq) if rec.seq is not None else None
    return held if held is not None and held.lid == rec.lid else rec


async def target_of(c: ChatClient, conversation: str, ref: str | None, author: str | None = None) -> Record | None:
    """The stored record ``ref`` names in ``conversation``: ``author``'s if they have one with that
    id (a member may reuse someone else's id; it then only ever names their own), else the first
    stored (the object the client holds for it, :func:`live`)."""
    if c.history is None or not ref:
        return None
    found = await c.history.by_mid(ref, conversation)
    own = [r for r in found if r.sender == author]
    chosen = (own or found or [None])[0]
    return live(c, chosen) if chosen is not None else None


def tombstone(rec: Record, reason: str) -> None:
    """Remove what ``rec`` says (text, document, envelope) and keep its ids: ``deleted`` with
    ``reason`` (``deleted`` or ``expired``)."""
    rec.state, rec.reason, rec.detail = RecordState.DELETED, reason, ""
    rec.text, rec.envelope, rec.content = None, None, Doc()
    rec.info.timings = {}


def strip(rec: Record) -> None:
    """An action that was applied (or sent): keep its ids and type, drop its text and envelope."""
    rec.text, rec.envelope, rec.content = None, None, Doc(t=rec.content.t)


def _refuse(rec: Record, code: ErrorCode, detail: str) -> None:
    rec.state, rec.reason, rec.detail = RecordState.IGNORED, code, detail
    log.warning(
        "%s from %s in %s (mid %s) ignored: %s (%s)", rec.content.t, rec.sender, rec.conversation, rec.mid, code, detail
    )


async def judge(c: ChatClient, rec: Record) -> Record | None:
    """The message the edit, delete or reaction ``rec`` may change, or None: then ``rec`` is
    refused (``ignored``, with its code) or moot (its target is deleted; ``rec`` unchanged)."""
    d = rec.content
    target = await target_of(c, rec.conversation, d.ref, rec.sender)
    if target is None:
        _refuse(rec, ErrorCode.UNKNOWN_REFERENCE, f"no message {d.ref} in this conversation here (yet)")
        if rec.state not in OUTGOING_STATES and d.ref:
            c.pending.hold(rec)  # applied if the message arrives after it (client_tui.core.pending)
        return None
    if target.state == RecordState.DELETED:
        log.info("%s from %s of a deleted message %s: nothing to do", d.t, rec.sender, d.ref)
        return None
    if not target.is_message:
        _refuse(rec, ErrorCode.UNKNOWN_REFERENCE, f"{d.ref} is not a message (a {target.content.t} or a line)")
        return None
    if d.t in ("edit", "delete") and target.sender != rec.sender:
        _refuse(rec, ErrorCode.NOT_AUTHOR, f"{d.ref} was written by {target.sender}, not by {rec.sender}")
        return None
    return target


def change(target: Record, rec: Record) -> bool:
    """Apply the edit, delete or reaction ``rec`` (already judged) to ``target``; False when it
    changes nothing (a reaction already there or older than the one applied, too many distinct
    reactions). Edits and reactions take effect in their author's order, ``(ts, ctr)`` as signed
    in the document, whatever order the relay delivered them in."""
    d, t = rec.content, target.content
    stamp = [rec.ts, rec.ctr or 0]
    if d.t == "edit":
        return _edit(target, rec, stamp)
    if d.t == "delete":
        tombstone(target, "deleted")
        return True
    emoji = d.emoji or ""
    toggle = f"{rec.sender}\x00{emoji}"
    if stamp <= t.toggles.get(toggle, [-1, -1]):
        log.info("reaction %s from %s on %s older than the one applied: no change", emoji, rec.sender, target.mid)
        return False
    users = t.reactions.get(emoji, [])
    if d.on and emoji not in t.reactions and len(t.reactions) >= MAX_EMOJI_PER_MESSAGE:
        log.warning(
            "reaction from %s on %s ignored: %d distinct reactions already", rec.sender, target.mid, len(t.reactions)
        )
        return False
    t.toggles[toggle] = stamp
    if d.on == (rec.sender in users):
        return True  # the newest word is what is shown already; its stamp is kept
    users = [*users, rec.sender] if d.on else [u for u in users if u != rec.sender]
    if users:
        t.reactions[emoji] = users
    else:
        t.reactions.pop(emoji, None)
    return True


def _edit(target: Record, rec: Record, stamp: list[int]) -> bool:
    """The edit ``rec`` of ``target``: the current text if it is the author's newest so far, else
    an earlier version (in ``ts`` order); False for one applied already."""
    t = target.content
    current = [t.edited, t.edited_ctr or 0] if t.edited is not None else None
    if current is not None and stamp <= current:
        late = Version(rec.text or "", rec.ts)
        if stamp == current or late in t.versions or (rec.ts, rec.text) == (t.edited, target.text):
            return False  # the same edit again (applied before a crash, delivered again)
        log.info("edit of %s by %s older than the text shown: kept as an earlier version", target.mid, rec.sender)
        at = next((i for i, v in enumerate(t.versions) if i > 0 and v.ts > rec.ts), len(t.versions))
        t.versions.insert(max(at, 1), late)
    else:
        t.versions.append(Version(target.text or "", t.edited or target.ts))
        target.text, t.edited, t.edited_ctr = rec.text, rec.ts, rec.ctr or 0
    if len(t.versions) > MAX_VERSIONS:
        del t.versions[1]
    return True


async def apply(c: ChatClient, rec: Record) -> Record | None:
    """Judge and apply the edit, delete or reaction ``rec`` (received, or mine being sent): the
    changed message is stored and announced (:class:`RecordChanged`) and returned; ``rec`` is
    stripped once applied (or moot), or left ``ignored`` with its code. The caller stores ``rec``."""
    async with c.messaging.lock:  # read, change, store: one at a time
        target = await judge(c, rec)
        if target is None:
            if rec.state != RecordState.IGNORED:
                strip(rec)
            return None
        changed = change(target, rec)
        if rec.state not in OUTGOING_STATES:
            strip(rec)  # mine keeps its document until the relay stored it (it may be sealed again)
        if changed and c.history is not None:
            await c.history.put(target)
    if changed:
        await c.events.put(RecordChanged(target))
    return target
