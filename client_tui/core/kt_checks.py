"""The checks of key transparency answers that need no state (docs/PROTOCOL.md §14), used by
:mod:`client_tui.core.transparency`: a key answer's ``kt`` proof against the keys answered, the
alert for a relay that answers the log's routes with errors or leaves them unanswered, a gossiped
head kept until the relay proves it (:class:`Unproven`), two signed heads no proof joins
(:class:`Evidence`), and the alert for a gossiped head not signed by the pinned log key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared import kt
from shared.errors import ConsistencyProofInvalid, InclusionProofInvalid, SplitView, TreeHeadInvalid
from shared.keys import PublicIdentity

from .errors import ClientError


@dataclass
class Unproven:
    """A head ``by`` showed us (gossip) that the relay has not answered a consistency request
    for yet, and how many times it was asked (``tries``)."""

    head: kt.TreeHead
    by: str
    tries: int

    def to_json(self) -> dict[str, Any]:
        """``{"head", "by", "tries"}`` as kept in ``kt-head.json``."""
        return {"head": self.head.to_json(), "by": self.by, "tries": self.tries}

    @classmethod
    def from_json(cls, doc: object) -> Unproven:
        """Parse a kept entry. Raises TypeError or TreeHeadInvalid: malformed."""
        if not isinstance(doc, dict) or not isinstance(doc.get("by"), str) or not isinstance(doc.get("tries"), int):
            raise TypeError("an unproven head is {head, by, tries}")
        return cls(kt.TreeHead.from_json(doc.get("head")), doc["by"], doc["tries"])


@dataclass(frozen=True)
class Evidence:
    """Two heads the relay signed that no consistency proof joins: the one ``held`` and the one
    ``shown`` (by ``by``: another user, or "the relay" itself). Anyone holding the log key can
    check both signatures: the relay's own evidence of a fork or a rewritten history."""

    held: kt.TreeHead
    shown: kt.TreeHead
    by: str

    def to_json(self) -> dict[str, Any]:
        """``{"held", "shown", "by"}`` as kept in ``kt-head.json``."""
        return {"held": self.held.to_json(), "shown": self.shown.to_json(), "by": self.by}

    @classmethod
    def from_json(cls, doc: object) -> Evidence:
        """Parse a kept pair. Raises TypeError or TreeHeadInvalid: malformed."""
        if not isinstance(doc, dict) or not isinstance(doc.get("by"), str):
            raise TypeError("evidence is {held, shown, by}")
        return cls(kt.TreeHead.from_json(doc.get("held")), kt.TreeHead.from_json(doc.get("shown")), doc["by"])


def refused(what: str, exc: ClientError, field: str) -> ConsistencyProofInvalid:
    """The relay answered a request of the log's with an error: what it signed cannot be checked."""
    return ConsistencyProofInvalid(
        f"the relay refused to show your client {what} ({exc.code}): its key directory cannot be checked, "
        "and keys planted under your name would not be noticed",
        field=field,
    )


def foreign_head(seen_by: str, size: int) -> TreeHeadInvalid:
    """A head ``seen_by``'s message carried is not signed by the pinned log key: what is known."""
    return TreeHeadInvalid(
        f"{seen_by}'s message carries a key directory head ({size} keys) that is not signed by "
        f"the relay's log key you pinned: either {seen_by}'s client made it up, or the relay gave "
        f"{seen_by} another log key and shows them a key directory of its own (a split view). "
        f"Compare the log key with {seen_by} (e2ee-chat audit prints it)",
        field=seen_by,
    )


def never_proven(u: Unproven, held_size: int) -> SplitView:
    """``u`` was left unproven ``u.tries`` times while the relay answered everything else."""
    return SplitView(
        f"the relay has not proven, asked {u.tries} times, that the key directory {u.by} "
        f"showed you ({u.head.size} keys) and the one it shows you ({held_size} keys) are one log: "
        f"it answers everything else, not that; treat it as showing you and {u.by} "
        "different key directories",
        field=u.by,
    )


def never_answered(starts: int) -> ConsistencyProofInvalid:
    """The monitor's requests were left unanswered at ``starts`` starts in a row, after a login."""
    return ConsistencyProofInvalid(
        f"the relay has not answered your client's requests for its key directory at your last "
        f"{starts} starts, though it answered the login: keys planted under your name, or "
        "a directory it shows others, cannot be noticed while it does not",
        field="head",
    )


def checked(username: str, ident: PublicIdentity, raw: object) -> kt.Inclusion:
    """The parsed ``kt`` member of a key answer for ``username`` whose leaf is ``ident``'s keys
    and whose audit path leads to its head's root (the head itself is not checked here).

    Raises:
        InclusionProofInvalid: no proof, a leaf naming another user or other keys, a bad path.
        TreeHeadInvalid: a malformed head.
    """
    if raw is None:
        raise InclusionProofInvalid(
            f"the relay answered {username}'s keys without a proof that they are in its key transparency log: "
            "refused, nothing pinned",
            field="kt",
        )
    inc = kt.Inclusion.from_json(raw)
    if ident.username != username or inc.leaf.username != username or inc.leaf.kids != (ident.wrap_kid, ident.sign_kid):
        raise InclusionProofInvalid(
            f"the relay's log leaf for {username}'s keys names other keys "
            f"({inc.leaf.username}, {inc.leaf.wrap_kid[:8]}…): refused, nothing pinned",
            field="leaf",
        )
    inc.verify()
    return inc
