"""Whom a message is sealed to (a part of :class:`client_tui.core.membership.Membership`): the
:class:`Audience` of the newest verified epoch, and which keys its members are sealed to.

The newest verified epoch binds each member's wrap and signing key ids (docs/PROTOCOL.md §12.7).
They are sealed to only if they are the keys this user accepts for that member *now*: the pinned
ones (for oneself, one's current keys). Keys replaced since - an earlier pinned key, a key a
verified rotation retired, one's own retired keys - are never sealed to: the reason to replace a key
is that it may have leaked, and whoever holds it could read what is sealed to it. Sealing then
waits for that member's ``update`` statement (one's own is posted at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.errors import ErrorCode
from shared.keys import PublicIdentity
from shared.membership import Member, Statement, member_of

from .errors import AudienceGrew, ClientError, KeyChangeBlocked, MemberKeyReplaced
from .events import ContactChanged
from .record import AgreedAudience
from .trust import Contact

if TYPE_CHECKING:
    from .membership import Membership
    from .record import Record


@dataclass(frozen=True)
class Audience:
    """Whom a message is sealed to: the newest verified epoch of a conversation.

    Attributes:
        cid, epoch, head: the conversation, the epoch and its statement hash (the header's
            ``cid``, ``ep``, ``mh``).
        members: the epoch's usernames, in member order.
        recipients: their keys as the log binds them, in the same order (the ``rkids``).
    """

    cid: str
    epoch: int
    head: str
    members: tuple[str, ...]
    recipients: list[PublicIdentity]

    def admit(self, record: Record) -> None:
        """Remember (first seal) or check the audience ``record`` was written for.

        Raises:
            AudienceGrew: members joined since it was written; it waits for its author.
        """
        written = record.info.audience
        if written is None:
            record.info.audience = AgreedAudience(self.epoch, list(self.members))
            return
        new = tuple(sorted(set(self.members) - set(written.members)))
        if new:
            raise AudienceGrew(
                f"{', '.join(new)} joined after this message was written (epoch {written.ep}): "
                "it is not sent to them unless you agree",
                field=new[0],
                users=new,
            )


async def own_keys_in(ms: Membership, head: Statement) -> Statement:
    """``head`` binds keys I replaced for me: move my current ones in first (an ``update``
    statement signed with the bound key), so nothing is sealed to the old ones; returns the
    verified head after (``head`` if nothing was to move or the update was not posted)."""
    c = ms.client
    mine = head.member(c.username)
    if mine is None or c.identity is None or mine == member_of(c.identity.public) or head.cid in ms._updating:
        return head
    from .membership_ops import update_keys

    ms._updating.add(head.cid)
    try:
        await update_keys(ms, head.cid)
    finally:
        ms._updating.discard(head.cid)
    return ms.head(head.cid) or head


async def sealed_to(ms: Membership, m: Member) -> PublicIdentity:
    """The keys the log binds for ``m``, if they are the keys this user accepts for
    ``m.username`` now (pinned, or my own): never keys replaced since.

    Raises:
        MemberKeyReplaced: they were replaced (a rotation, an accepted key change; or, for a member
            never seen, the relay's key history has newer ones): wait for their update.
        KeyChangeBlocked: other keys than the accepted ones, or a change waiting for a decision.
        ClientError: ``not_found``: no such key in the relay's history (first use).
    """
    c = ms.client
    bound = (m.wrap_kid, m.sign_kid)
    if m.username == c.username:
        me = c.identity.public if c.identity is not None else None
        if me is not None and (me.wrap_kid, me.sign_kid) == bound:
            return me
        if any((i.wrap_kid, i.sign_kid) == bound for i in c.my_public_keys(old_only=True)):  # retired or erased
            raise _replaced(
                m.username, "your new keys are not in this conversation's log yet (an update statement moves them in)"
            )
    else:
        contact = c.contacts.get(m.username)
        if contact is None:
            return await _first_use(ms, m)
        if contact.kids == bound:
            return contact.identity  # (a pending change still blocks sending: ChatClient.blocked_by)
        if any((p.wrap_kid, p.sign_kid) == bound for p in contact.previous):
            raise _replaced(
                m.username,
                f"{m.username} replaced the keys this conversation's log still binds; "
                "their client moves the new ones in when it next connects",
            )
        if contact.pending_kids != bound:
            await c.fetch_keys(m.username)  # shows the key change (KeyChanged) if the relay has one
    raise KeyChangeBlocked(
        f"{m.username}'s key in this conversation is not the one you accepted: review it before sending",
        field=m.username,
        users=(m.username,),
    )


async def _first_use(ms: Membership, m: Member) -> PublicIdentity:
    """A member never seen: pin the keys the log binds (a statement that verified chose them), if
    the relay's key history has them and nothing newer."""
    ms._published.pop(m.username, None)  # asked afresh: are they still the newest?
    ident = await ms._fetch_key(m.username, m.sign_kid, m.wrap_kid)
    if ident is None:
        raise ClientError(
            f"the relay has no key {m.wrap_kid[:8]}… of {m.username}", code=ErrorCode.NOT_FOUND, field=m.username
        )
    newest = ms._published.get(m.username, [ident])[-1]
    if (newest.wrap_kid, newest.sign_kid) != (ident.wrap_kid, ident.sign_kid):
        raise _replaced(
            m.username,
            f"{m.username} published newer keys than the ones this conversation's log "
            "binds; their client moves them in when it next connects",
        )
    _pin(ms, ident)  # first use, from a statement that verified
    return ident


def _pin(ms: Membership, ident: PublicIdentity) -> None:
    c = ms.client
    if c.trust is not None:
        c.trust.pin(ident.username, ident)  # with the note "pinned again" after a lost trust store
    else:
        c.contacts[ident.username] = Contact(ident)
    c._save_state()
    c.events.put_nowait(ContactChanged(ident.username))


def _replaced(user: str, why: str) -> MemberKeyReplaced:
    return MemberKeyReplaced(
        f"nothing is sealed to {user}'s replaced keys (whoever holds them could read it): {why}", field=user
    )
