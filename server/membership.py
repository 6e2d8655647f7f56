"""The relay's side of the membership log (docs/PROTOCOL.md §12): it checks each statement before
storing it, derives the member table from the log's head, and serves the log.

The relay holds no member's key, so it can refuse or withhold a statement, never invent one:
every client verifies the log again from the creation statement and acts only on what verifies.
What the relay checks here is what keeps its own routing honest: the actor is the authenticated
user and signs with a key it published, the chain links to the stored head, the policy holds, and
every bound key id is one that member published. Its member table (who gets deliveries, whose
sends it accepts, which wrap keys it expects) is then exactly the verified head's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from shared import membership
from shared.errors import (
    ActorKeyMismatch,
    Conflict,
    ConversationMismatch,
    E2EEError,
    EpochStale,
    Forbidden,
    InvalidRequest,
    LegacyConversation,
    MembershipConflict,
    NotFound,
    RecipientsMismatch,
)
from shared.keys import load_signing_public_key
from shared.membership import Statement
from shared.membership_chain import verify_next

from .models import Conversation, Member, MembershipStatement, User, UserKey
from .store import now_ms


@dataclass(frozen=True)
class MemberKey:
    user_id: int
    username: str
    wrap_kid: str | None  # the key id the log binds (None only in a legacy conversation)


@dataclass(frozen=True)
class Head:
    """A conversation's newest epoch as the relay stored it: what sends are checked against.

    ``epoch``/``head`` are None for a legacy conversation (no log). ``members`` are in the
    statement's order (sorted by username bytes), which is the order of an envelope's ``rkids``.
    """

    epoch: int | None
    head: str | None
    members: list[MemberKey]

    def refusal(self, ep: int, mh: str, rkids: list[str]) -> E2EEError | None:
        """Why an envelope sealed to epoch ``ep`` (hash ``mh``) for ``rkids`` cannot be stored
        here, or None: LegacyConversation, EpochStale (fetch the log, seal again), or
        RecipientsMismatch (``rkids`` are not the head's bound wrap keys in member order)."""
        if self.epoch is None:
            return LegacyConversation(
                "this conversation predates signed membership: start a new one", field="conversation"
            )
        if ep != self.epoch or mh != self.head:
            return EpochStale(
                f"sealed to epoch {ep}; the membership log is at epoch {self.epoch}", epoch=self.epoch, head=self.head
            )
        if rkids != [m.wrap_kid for m in self.members]:
            kids = set(rkids)
            return RecipientsMismatch(
                [m.username for m in self.members if m.wrap_kid not in kids],
                sorted(kids - {m.wrap_kid for m in self.members}),
            )
        return None


async def load_head(session: AsyncSession, cid: str) -> Head:
    """The head and member table of ``cid`` (no members and no epoch for an unknown conversation)."""
    conv = (await session.execute(select(Conversation.epoch, Conversation.head).where(Conversation.id == cid))).first()
    rows = await session.execute(
        select(User.id, User.username, Member.wrap_kid)
        .join(Member, Member.user_id == User.id)
        .where(Member.conversation_id == cid)
    )
    members = sorted((MemberKey(uid, name, kid) for uid, name, kid in rows), key=lambda m: m.username.encode())
    return Head(conv[0] if conv else None, conv[1] if conv else None, members)


@dataclass(frozen=True)
class Checked:
    """A statement the relay verified, with what storing it needs."""

    statement: Statement
    actor_id: int
    user_ids: dict[str, int]  # every member's user id, by username
    duplicate: bool = False  # the very statement is already stored (a retry)


async def _stored(session: AsyncSession, cid: str, ep: int) -> Statement | None:
    signed = (
        await session.execute(
            select(MembershipStatement.statement).where(
                MembershipStatement.conversation_id == cid, MembershipStatement.epoch == ep
            )
        )
    ).scalar_one_or_none()
    return membership.parse(signed) if signed is not None else None


async def check(session: AsyncSession, st: Statement, subject: str, *, cid: str | None, max_members: int) -> Checked:
    """Verify a statement posted by ``subject`` against the stored log (read-only).

    Args:
        st: the statement, its form already checked (``shared.membership.parse``).
        subject: the authenticated user (the statement's actor must be them).
        cid: the conversation of the route (None: a creation).
        max_members: the relay's limit on members.

    Raises:
        ConversationMismatch; Forbidden (actor is not the caller); Conflict
        (a creation for an existing id); NotFound (no such conversation or user); LegacyConversation;
        MembershipConflict (that epoch is taken: fetch the log); the chain errors of
        ``membership_chain.verify_next`` (EpochSkipped, ChainBroken, ActorNotMember,
        ActorKeyMismatch, StatementSignatureInvalid, PolicyViolation); ActorKeyMismatch also for a
        signing key the actor replaced, on anything but an ``update``; InvalidRequest (a bound key
        id its member never published, an update to other keys than the actor's current ones,
        too many or too few members).
    """
    if cid is not None and st.cid != cid:
        raise ConversationMismatch("the statement names another conversation than the route", field="cid")
    if cid is None and st.op != "create":
        raise InvalidRequest("a new conversation starts with a create statement", field="op")
    if st.actor != subject:
        raise Forbidden("a statement is posted by its actor", field="actor")
    conv = (
        await session.execute(select(Conversation.epoch, Conversation.head).where(Conversation.id == st.cid))
    ).first()
    prev = None
    if cid is None:
        if conv is not None:
            raise Conflict("a conversation with this id exists", field="cid")
        if len(st.members) < 2:
            raise InvalidRequest("a conversation starts with at least 2 members", field="members")
    else:
        if conv is None:
            raise NotFound("no such conversation", field="conversation")
        if conv.epoch is None:
            raise LegacyConversation(
                "this conversation predates signed membership: start a new one", field="conversation"
            )
        if st.ep <= conv.epoch:
            stored = await _stored(session, st.cid, st.ep)
            if stored is not None and stored.hash == st.hash:
                return Checked(st, 0, {}, duplicate=True)
            raise MembershipConflict(
                f"epoch {st.ep} is taken; the log is at epoch {conv.epoch}", epoch=conv.epoch, head=conv.head
            )
        prev = await _stored(session, st.cid, conv.epoch)
    if len(st.members) > max_members:
        raise InvalidRequest(f"a conversation has at most {max_members} members", field="members")
    names = {m.username for m in st.members} | {st.actor}
    rows = (
        await session.execute(
            select(User.username, User.id, UserKey.wrap_kid, UserKey.sign_kid, UserKey.sign_key, UserKey.current)
            .join(UserKey, UserKey.user_id == User.id)
            .where(User.username.in_(names))
        )
    ).all()
    user_ids = {r.username: r.id for r in rows}
    missing = sorted(names - set(user_ids))
    if missing:
        raise NotFound(f"unknown users: {', '.join(missing)}", field="members")
    published = {(r.username, r.wrap_kid, r.sign_kid) for r in rows}
    unpublished = sorted(m.username for m in st.members if m not in published)
    if unpublished:
        raise InvalidRequest(f"key ids that were never published by {', '.join(unpublished)}", field="members")
    signers = [r for r in rows if r.username == st.actor and r.sign_kid == st.akid]
    if not signers:
        raise ActorKeyMismatch(f"{st.actor} never published the signing key {st.akid[:8]}…", field="akid")
    current = next(((r.wrap_kid, r.sign_kid) for r in rows if r.username == st.actor and r.current), None)
    actor = st.member(st.actor)
    if st.op == "update" and (actor is None or actor[1:] != current):
        raise InvalidRequest("an update moves the actor's current keys in", field="members")
    if st.op != "update" and not any(r.current for r in signers):  # a replaced (stolen?) key signs only
        raise ActorKeyMismatch(
            f"{st.actor} replaced the signing key {st.akid[:8]}…: it signs only the update that moves the new keys in",
            field="akid",
        )
    key = signers[0].sign_key
    verify_next(prev, st, load_signing_public_key(key, st.actor), cid=st.cid)
    return Checked(st, user_ids[st.actor], user_ids)


def append(checked: Checked) -> Callable[[Session], tuple[list[int], list[int]]]:
    """A write op storing a checked statement and making the member table its members; returns
    ``(user ids before, user ids after)``.

    Raises (when run):
        Conflict: a creation whose id was taken meanwhile.
        MembershipConflict: another statement took this epoch meanwhile.
    """
    st = checked.statement

    def op(s: Session) -> tuple[list[int], list[int]]:
        t = now_ms()
        if st.op == "create":
            if s.get(Conversation, st.cid) is not None:
                raise Conflict("a conversation with this id exists", field="cid")
            s.add(
                Conversation(
                    id=st.cid, title=st.title, created_by=checked.actor_id, created_at_ms=t, epoch=st.ep, head=st.hash
                )
            )
            s.flush()
        else:
            conv = s.execute(select(Conversation.epoch, Conversation.head).where(Conversation.id == st.cid)).first()
            if conv is None or conv.epoch != st.ep - 1 or conv.head != st.prev:
                raise MembershipConflict(
                    f"epoch {st.ep} was taken meanwhile", epoch=conv and conv.epoch, head=conv and conv.head
                )
            s.execute(
                update(Conversation).where(Conversation.id == st.cid).values(epoch=st.ep, head=st.hash, title=st.title)
            )
        s.add(
            MembershipStatement(
                conversation_id=st.cid,
                epoch=st.ep,
                hash=st.hash,
                statement=st.signed,
                actor_id=checked.actor_id,
                members=json.dumps(list(st.usernames)),
                created_at_ms=t,
            )
        )
        before = {m.user_id: m for m in s.execute(select(Member).where(Member.conversation_id == st.cid)).scalars()}
        after = {checked.user_ids[m.username]: m for m in st.members}
        gone = sorted(set(before) - set(after))
        if gone:
            s.execute(delete(Member).where(Member.conversation_id == st.cid, Member.user_id.in_(gone)))
        for uid, m in after.items():
            row = before.get(uid)
            if row is None:
                s.add(
                    Member(
                        conversation_id=st.cid, user_id=uid, joined_at_ms=t, wrap_kid=m.wrap_kid, sign_kid=m.sign_kid
                    )
                )
            else:
                row.wrap_kid, row.sign_kid = m.wrap_kid, m.sign_kid
        return sorted(before), sorted(after)

    return op


async def log_for(session: AsyncSession, cid: str, username: str, after: int = -1) -> tuple[list[str], int, str]:
    """The statements of ``cid`` with epoch > ``after``, oldest first, that ``username`` may read,
    with the epoch and hash of the last one: all of them for a member; for a former member, up to
    the statement that removed them (so they can verify who did).

    Raises:
        NotFound: no such conversation. LegacyConversation: it has no log.
        Forbidden: ``username`` was never a member.
    """
    conv = (await session.execute(select(Conversation.epoch).where(Conversation.id == cid))).first()
    if conv is None:
        raise NotFound("no such conversation", field="conversation")
    if conv.epoch is None:
        raise LegacyConversation("this conversation predates signed membership: it has no log", field="conversation")
    rows = (
        await session.execute(
            select(
                MembershipStatement.epoch,
                MembershipStatement.statement,
                MembershipStatement.members,
                MembershipStatement.hash,
            )
            .where(MembershipStatement.conversation_id == cid)
            .order_by(MembershipStatement.epoch)
        )
    ).all()
    member_at = [username in json.loads(r.members) for r in rows]
    if not any(member_at):
        raise Forbidden("not a member of this conversation", field="conversation")
    last = len(rows) - 1
    if not member_at[-1]:  # a former member: up to (and with) the statement that removed them
        last = max(i for i, m in enumerate(member_at) if m) + 1
    served = rows[: last + 1]
    return [r.statement for r in served if r.epoch > after], served[-1].epoch, served[-1].hash
