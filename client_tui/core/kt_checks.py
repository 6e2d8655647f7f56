"""The checks of key transparency answers that need no state (docs/PROTOCOL.md §14), used by
:mod:`client_tui.core.transparency`: a key answer's ``kt`` proof against the keys answered, the
alert for a relay that answers the log's routes with errors, a gossiped head kept until the
relay proves it (:class:`Unproven`), and two signed heads no proof joins (:class:`Evidence`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared import kt
from shared.errors import ConsistencyProofInvalid, InclusionProofInvalid
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
