"""The recipient's check of an envelope against the membership log (docs/PROTOCOL.md §5.7 steps
18-21), before any key is used: the delivery context, my recipient entry, then the header's epoch
(``ep``), head hash (``mh``), sender (``snd``) and recipient key ids (``rkids``) against the log this
client verified.

A part of :class:`client_tui.core.membership.Membership` (mixed in): it uses the verified chains, the
evidence of unseen epochs and the warning lines that ``Membership`` keeps.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from shared import envelope
from shared.errors import ConversationMismatch, E2EEError, EpochMismatch, NotARecipient, SenderMismatch
from shared.membership_chain import Chain, check_audience

from . import membership_lines as lines
from .errors import NOT_ANSWERED, ClientError, LogUnavailable

if TYPE_CHECKING:
    from .membership import Membership

__all__ = ["EnvelopeCheck"]

log = logging.getLogger("e2ee.client.membership")


class EnvelopeCheck:
    """``check_envelope()`` and what it needs to know of a signature (mixed into ``Membership``)."""

    client: Any

    async def check_envelope(self: Membership, header, conversation: str, sender: str, parsed=None) -> str:
        """PROTOCOL.md §5.7 steps 18-21 on a received envelope's header, before any key is used:
        the delivery context, my recipient entry, then its ``ep``, ``mh``, ``snd`` and ``rkids``
        against the verified log of its conversation (fetched first if the epoch is not verified).

        An epoch newer than the verified head stops sealing (:meth:`audience`); once ``parsed``'s
        signature verifies under the sender's accepted key, that stays so across restarts.

        Returns:
            a warning for a message sealed to an earlier epoch whose members included someone the
            verified head no longer has: ``sender_removed`` (its sender was removed since: it may
            have been written after that), ``audience_removed`` (sealed to a removed member too,
            who could read it); ``""`` otherwise.

        Raises:
            ConversationMismatch, SenderMismatch, NotARecipient, EpochMismatch, AudienceMismatch
            (shown as "could not verify"); LogUnavailable (the relay is unreachable: the message
            comes again after the reconnect).
        """
        if header.cid != conversation:
            raise ConversationMismatch(
                "envelope belongs to another conversation than the one it was delivered in", field="cid"
            )
        if header.snd != sender:
            raise SenderMismatch("envelope names another sender than the one that sent it", field="snd")
        c = self.client
        if c.identity is not None and not {i.wrap_kid for i in c._my_identities()} & set(header.rkids):
            raise c.epochs.erased_for(header.rkids) or NotARecipient(  # as open() would
                "no recipient entry for my key id", field="recipients"
            )
        chain = self.chains.get(header.cid) or await self._restore(header.cid)
        if chain is None or chain.at(header.ep) is None:
            try:
                chain = await self.sync(header.cid)
            except ClientError as exc:
                if exc.code in NOT_ANSWERED:
                    raise LogUnavailable(header.cid) from None
                log.info("log of %s not fetched: %s", header.cid, exc.code)
                chain = self.chains.setdefault(header.cid, Chain(header.cid))
        try:
            if self._contradicts(chain):
                raise EpochMismatch(
                    "the only log the relay shows contradicts the one verified here (a fork)", field="mh"
                )
            sealed_to = check_audience(chain, ep=header.ep, mh=header.mh, sender=header.snd, rkids=header.rkids)
        except EpochMismatch as exc:
            if chain.head is not None and header.ep > chain.head.ep:  # evidence of a change not shown
                self._evidence[header.cid] = max(self._evidence.get(header.cid, -1), header.ep)
                if header.ep > self._seen.get(header.cid, -1) and self._signed(parsed):
                    self._seen[header.cid] = header.ep
                    self._save()
                await self._warn(
                    header.cid,
                    f"unseen:{header.ep}:{header.mh}",
                    header.snd,
                    lines.unseen(header.snd, header.ep, chain.head.ep),
                    exc,
                )
            raise
        gone = set(sealed_to.usernames) - set(chain.head.usernames)  # removed since the epoch it was sealed to
        return "" if not gone else "sender_removed" if header.snd in gone else "audience_removed"

    def _signed(self: Membership, parsed) -> bool:
        """Does ``parsed`` carry its sender's signature under a key this user accepted for them?"""
        if parsed is None:
            return False
        try:
            found = self.client.pinned_sign_key(parsed.header.snd, parsed.header.skid, None)
            if found is not None:
                envelope.verify_signature(parsed, found[0])
                return True
        except E2EEError:
            pass
        return False
