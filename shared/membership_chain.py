"""Verifying a conversation's membership log (docs/PROTOCOL.md §12.4-12.6).

:func:`verify_next` checks that one statement follows the previous one (link, actor, key,
signature, policy); :class:`Chain` keeps a verified log and detects forks; :func:`check_audience`
checks an envelope's ``ep``/``mh``/``rkids``/``snd`` against it. Pure code: the caller resolves
an actor's signing key by id (its pinned contacts, or the relay's key history checked by key id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519

from .errors import (
    ActorKeyMismatch,
    ActorNotMember,
    AudienceMismatch,
    ChainBroken,
    ConversationMismatch,
    EpochMismatch,
    EpochSkipped,
    MembershipFork,
    PolicyViolation,
    StatementSignatureInvalid,
)
from .keys import key_id
from .membership import Statement, signing_input

__all__ = ["Chain", "KeyResolver", "check_audience", "check_continuity", "detect_fork", "verify_next"]


def _may_change(prev: Statement, actor: str) -> bool:
    return prev.admins is None or actor in prev.admins


def _check_policy(prev: Statement, st: Statement) -> None:
    """The change ``prev`` -> ``st`` is the one ``st.op`` names, by an actor allowed to make it."""
    before = {m.username: m for m in prev.members}
    after = {m.username: m for m in st.members}
    kept = set(before) & set(after)
    same_entries = all(before[u] == after[u] for u in kept if not (st.op == "update" and u == st.actor))
    problems = []
    if not same_entries:
        problems.append("it changes the key ids of members it does not name")
    if st.op != "title" and st.title != prev.title:
        problems.append("only a title statement changes the title")
    if st.op == "add":
        if not set(before) < set(after):
            problems.append("an add must only add members")
        if st.admins != prev.admins:
            problems.append("an add must keep the admins")
        if not _may_change(prev, st.actor):
            problems.append(f"{st.actor} is not an admin")
    elif st.op == "remove":
        gone = set(before) - set(after)
        if not (set(after) < set(before)):
            problems.append("a remove must only remove members")
        expected = None if prev.admins is None else tuple(a for a in prev.admins if a in after)
        if st.admins != expected:
            problems.append("a remove keeps the admins, less those removed")
        if not _may_change(prev, st.actor) and gone != {st.actor}:
            problems.append(f"{st.actor} is not an admin and may only remove themself")
    elif st.op == "title":
        if set(after) != set(before) or st.admins != prev.admins or st.title == prev.title:
            problems.append("a title statement changes the title and nothing else")
        if not _may_change(prev, st.actor):
            problems.append(f"{st.actor} is not an admin")
    elif st.op == "admins":
        if set(after) != set(before) or st.admins == prev.admins:
            problems.append("an admins statement changes the admins and nothing else")
        if not _may_change(prev, st.actor):
            problems.append(f"{st.actor} is not an admin")
    elif st.op == "update":
        if set(after) != set(before) or st.admins != prev.admins or before[st.actor] == after[st.actor]:
            problems.append("an update changes the actor's own key ids and nothing else")
    else:  # create after epoch 0
        problems.append("create is only for epoch 0")
    if problems:
        raise PolicyViolation(f"epoch {st.ep} ({st.op} by {st.actor}): {'; '.join(problems)}", field="op")


def _check_link(prev: Statement | None, st: Statement, cid: str) -> None:
    """The structural part of :func:`verify_next` (no key needed): conversation, epoch, link,
    actor a member, ``akid`` the actor's signing key id there."""
    if st.cid != cid:
        raise ConversationMismatch(f"statement of conversation {st.cid!r} in the log of {cid!r}", field="cid")
    if prev is None:
        if st.ep != 0 or st.op != "create":
            raise EpochSkipped(f"a log starts with a creation at epoch 0, not {st.op} at {st.ep}", field="ep")
        if st.prev is not None:
            raise ChainBroken("a creation has no prev", field="prev")
        basis = st
    else:
        if st.ep != prev.ep + 1:
            raise EpochSkipped(f"epoch {st.ep} after epoch {prev.ep}", field="ep")
        if st.prev != prev.hash:
            raise ChainBroken(f"epoch {st.ep} does not link to the verified epoch {prev.ep}", field="prev")
        basis = prev
    entry = basis.member(st.actor)
    if entry is None:
        raise ActorNotMember(f"{st.actor} is not a member of epoch {basis.ep}", field="actor")
    if st.akid != entry.sign_kid:
        raise ActorKeyMismatch(f"{st.actor} signs with another key than theirs in epoch {basis.ep}", field="akid")


def verify_next(
    prev: Statement | None, st: Statement, actor_key: ed25519.Ed25519PublicKey, *, cid: str | None = None
) -> None:
    """Check that ``st`` follows ``prev`` (None: ``st`` must create the log of ``cid``).

    Order (PROTOCOL.md §12.4), the first failure raised:
    conversation; epoch; ``prev`` link; actor a member (of ``prev``, or of ``st`` for a creation);
    ``akid`` = the actor's signing key id there, and = the key id of ``actor_key``; the Ed25519
    signature; the policy (op and admins).

    Args:
        prev: the verified statement of the previous epoch, or None.
        st: the statement to check (from :func:`parse`).
        actor_key: the actor's Ed25519 public key (the caller looks it up by ``st.akid``).
        cid: the conversation expected (default ``prev.cid``, or ``st.cid`` for a creation).

    Raises:
        ConversationMismatch, EpochSkipped, ChainBroken, ActorNotMember, ActorKeyMismatch,
        StatementSignatureInvalid, PolicyViolation.
    """
    _check_link(prev, st, cid if cid is not None else (prev.cid if prev is not None else st.cid))
    if key_id(actor_key) != st.akid:
        raise ActorKeyMismatch(f"the key given for {st.actor} is not the one the statement names", field="akid")
    try:
        actor_key.verify(st.sig, signing_input(st.body_b64))
    except InvalidSignature:
        raise StatementSignatureInvalid(f"epoch {st.ep}: {st.actor}'s signature does not verify", field="sig") from None
    if prev is not None:
        _check_policy(prev, st)


def detect_fork(a: Statement, b: Statement) -> None:
    """Two statements seen for one epoch of one conversation must be the same statement.

    Raises:
        MembershipFork: same ``cid`` and ``ep``, different hashes.
    """
    if a.cid == b.cid and a.ep == b.ep and a.hash != b.hash:
        raise MembershipFork(f"two different statements for epoch {a.ep}", field="ep")


def check_continuity(chain: Chain, ep: int, hash_: str) -> None:
    """A log verified now must extend the one verified before (``ep``, ``hash_``: the head I had).

    Raises:
        MembershipFork: the log ends before epoch ``ep`` (older than verified: a removal or change
            withheld), or its statement for ``ep`` is another one (two statements for one epoch).
    """
    st = chain.at(ep)
    if st is None:
        end = chain.head.ep if chain.head is not None else None
        raise MembershipFork(f"the relay's log ends at epoch {end}; epoch {ep} was verified here before", field="ep")
    if st.hash != hash_:
        raise MembershipFork(f"the relay's statement for epoch {ep} is not the one verified here before", field="ep")


KeyResolver = Callable[[str, str], ed25519.Ed25519PublicKey]
"""``resolve(username, sign_kid) -> Ed25519PublicKey`` whose key id is ``sign_kid``."""


class Chain:
    """The verified log of one conversation, from its creation (in memory).

    ``extend`` verifies statements one after the other and keeps the verified prefix: a statement
    that fails is never acted on, and what follows it is not even looked at.
    """

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.statements: list[Statement] = []

    @property
    def head(self) -> Statement | None:
        return self.statements[-1] if self.statements else None

    def at(self, ep: int) -> Statement | None:
        """The verified statement of epoch ``ep`` (None if not verified)."""
        return self.statements[ep] if 0 <= ep < len(self.statements) else None

    def extend(self, statements: Iterable[Statement], resolve: KeyResolver) -> list[Statement]:
        """Verify and append ``statements`` (already verified epochs are compared, not re-verified).

        Returns:
            the statements newly verified, in order.

        Raises:
            MembershipFork: a statement differs from the one already verified for its epoch.
            the errors of :func:`verify_next` (the chain keeps what verified before it);
            whatever ``resolve`` raises.
        """
        added = []
        for st in statements:
            known = self.at(st.ep) if st.cid == self.cid else None
            if known is not None:
                detect_fork(known, st)
                continue
            prev = self.head
            _check_link(prev, st, self.cid)  # before any key lookup: a wrong link needs none
            verify_next(prev, st, resolve(st.actor, st.akid), cid=self.cid)
            self.statements.append(st)
            added.append(st)
        return added


def check_audience(chain: Chain, *, ep: int, mh: str, sender: str, rkids: list[str]) -> Statement:
    """Check an envelope's membership fields against a verified log (PROTOCOL.md §12.6).

    Args:
        chain: the verified log of the envelope's conversation (``cid`` already checked).
        ep, mh, sender, rkids: the envelope header's ``ep``, ``mh``, ``snd`` and ``rkids``.

    Returns:
        the statement of epoch ``ep``.

    Raises:
        EpochMismatch: epoch ``ep`` is not in the verified log (fetch the log, then ask again), or
            its hash is not ``mh`` (the sender saw another statement for that epoch: a fork).
        AudienceMismatch: ``snd`` is not a member of epoch ``ep``, or ``rkids`` are not exactly
            its members' wrap key ids in member order.
    """
    st = chain.at(ep)
    if st is None:
        head = chain.head.ep if chain.head is not None else None
        raise EpochMismatch(f"sealed to epoch {ep}; the verified log ends at epoch {head}", field="ep")
    if st.hash != mh:
        raise EpochMismatch(
            f"sealed to another statement for epoch {ep} than the one verified here (a fork)", field="mh"
        )
    if st.member(sender) is None:
        raise AudienceMismatch(f"{sender} is not a member of epoch {ep}", field="snd")
    if rkids != st.wrap_kids:
        raise AudienceMismatch(
            f"the recipients are not exactly the {len(st.members)} members of epoch {ep}", field="rkids"
        )
    return st
