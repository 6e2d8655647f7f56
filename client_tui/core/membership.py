"""The client's side of the membership log (docs/PROTOCOL.md §12).

Who is in a conversation is what its log says, as this client verified it from the creation
statement, never what the relay lists. :class:`Membership` (one per :class:`ChatClient`):

* **verifies** each conversation's log (``shared.membership_chain.Chain``), remembers the verified
  head per conversation in the sealed trust store (``client_tui.core.trust``), and notices a fork (another
  statement for an epoch verified before, or a log older than one verified before) and a withheld
  change (the relay says the log is at an epoch it does not show);
* **tells the user**: every verified change is a line in the conversation (a ``system`` record
  naming its actor, with "signature verified"); a change that does not verify is a warning line
  and is never acted on;
* **writes** the user's own changes (create, add, remove, title, admins, update) as signed
  statements, retrying on a concurrent change;
* **seals only to the newest verified epoch** (:meth:`audience`), and none while a newer one is
  known to exist, binding each member's key ids from the log: a member's key is the one the log
  names, if it is the one this user accepts for them now (:mod:`client_tui.core.member_keys`);
* **checks every envelope** against the log (``ep``/``mh``, the sender, ``rkids``) before opening it,
  and marks one sealed to an epoch with a member removed since;
* keeps **each message to the audience it was written for** (:meth:`Audience.admit`): a larger
  audience waits for its author (:class:`AudienceGrew`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from shared import membership
from shared.b64 import b64u_encode
from shared.errors import (
    ActorKeyMismatch,
    E2EEError,
    EnvelopeMalformed,
    ErrorCode,
    LegacyConversation,
    MembershipFork,
    MembershipWithheld,
    TransparencyFailed,
)
from shared.keys import PublicIdentity
from shared.membership import Statement, member_of
from shared.membership_chain import Chain, check_continuity

from . import member_keys
from . import membership_lines as lines
from .errors import NOT_ANSWERED, ClientError, KeyChangeBlocked
from .events import RecordChanged
from .member_keys import Audience
from .membership_check import EnvelopeCheck
from .record import MessageInfo, Record, RecordState, now_ms

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client.membership")
MAX_WARNINGS = 200  # per conversation, remembered so that a warning is shown once
POST_ATTEMPTS = 3


class Membership(EnvelopeCheck):
    """The membership logs of one account (see the module's docstring)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.chains: dict[str, Chain] = {}
        self.claimed: dict[str, tuple[int | None, str | None]] = {}  # the relay's head, as it last said
        self._heads: dict[str, dict] = {}  # cid -> {"ep", "hash"}: verified before (the file)
        self._warned: dict[str, list[str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._published: dict[str, list[PublicIdentity]] = {}
        self._updating: set[str] = set()
        self._refused: dict[str, bool] = {}  # the last sync stopped at a statement that failed
        self._beyond: dict[str, int] = {}  # the epoch of a statement shown after the head that failed (last sync)
        self._evidence: dict[str, int] = {}  # the newest epoch an envelope was sealed to, if not verified
        self._seen: dict[str, int] = {}  # ... as a member signed it (checked): kept in the trust store

    # -- the verified heads, in the sealed trust store ---------------------------------------------
    def load(self) -> None:
        """Read the verified heads from the trust store (``trust.membership``: per conversation
        ``{"ep", "hash", "warned"}``). A lost trust store loses them (the user is told by it): forks
        against what it held can no longer be noticed."""
        self._heads, self._warned, self._seen = {}, {}, {}
        for cid, doc in (self.client.trust.membership if self.client.trust is not None else {}).items():
            try:
                if "ep" in doc:
                    self._heads[cid] = {"ep": int(doc["ep"]), "hash": str(doc["hash"])}
                if "seen" in doc:
                    self._seen[cid] = int(doc["seen"])
                self._warned[cid] = [str(k) for k in doc.get("warned", [])]
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("verified head of %s in the trust store is damaged: forgotten", cid)

    def _save(self) -> None:
        trust = self.client.trust
        if trust is None:
            return
        trust.membership = {
            cid: {
                **self._heads.get(cid, {}),
                "warned": self._warned.get(cid, []),
                **({"seen": self._seen[cid]} if cid in self._seen else {}),
            }
            for cid in set(self._heads) | set(self._warned) | set(self._seen)
        }
        self.client._save_state()

    def verified_before(self, cid: str) -> bool:
        """A log of ``cid`` was verified here (this session, or a head kept in the trust store): a
        relay that now lists it without one (as made before signed membership) is lying."""
        return self.head(cid) is not None or cid in self._heads

    def head(self, cid: str) -> Statement | None:
        """The newest verified statement of ``cid`` (this session), or None."""
        chain = self.chains.get(cid)
        return chain.head if chain is not None else None

    # -- verifying the relay's log -------------------------------------------------------------------
    async def sync(self, cid: str) -> Chain:
        """Fetch ``cid``'s log after the verified head, verify it, and show what changed.

        A statement that fails is shown as a warning and the chain stops before it; a log that
        contradicts the one verified before (a fork, or older than it) and a head the relay names
        but shows no statement for (a withheld change) are warnings too. Nothing is raised for
        those: :meth:`audience` decides what may still be sealed.

        Raises:
            ClientError: the relay could not be asked (``unreachable``) or refused (``forbidden``,
                ``not_found``, ``legacy_conversation``).
        """
        async with self._locks.setdefault(cid, asyncio.Lock()):
            chain = self.chains.setdefault(cid, Chain(cid))
            after = chain.head.ep if chain.head is not None else -1
            doc = await self.client.rest.request(
                "GET",
                f"/v1/conversations/{membership.check_conversation_id(cid)}/log"
                + (f"?after={after}" if after >= 0 else ""),
            )
            claimed = self.claimed[cid] = (doc.get("epoch"), doc.get("head"))
            before = chain.head
            self._beyond.pop(cid, None)
            self._refused[cid] = await self._extend(chain, doc.get("statements", []))
            await self._compare(cid, chain, claimed)
            if chain.head is not None and chain.head is not before and not self._contradicts(chain):
                self._remember(chain.head)
                await self._keep(chain)
            return chain

    async def _compare(self, cid: str, chain: Chain, claimed: tuple) -> None:
        """Warn when the relay's log or head contradicts what was verified here."""
        known, head = self._heads.get(cid), chain.head
        if head is None or self._refused.get(cid):
            return
        try:
            if known is not None:
                check_continuity(chain, known["ep"], known["hash"])
            if isinstance(claimed[0], int) and claimed[0] < head.ep:
                raise MembershipFork(
                    f"the relay's log ends at epoch {claimed[0]}; epoch {head.ep} was verified here", field="ep"
                )
            if isinstance(claimed[0], int) and claimed[0] == head.ep and head.hash != claimed[1]:
                raise MembershipFork(
                    f"the relay's head for epoch {claimed[0]} is not the statement verified here", field="ep"
                )
        except MembershipFork as exc:
            await self._warn(cid, f"fork:{claimed[0]}:{claimed[1]}", "relay", lines.fork(exc), exc)
            return
        if isinstance(claimed[0], int) and claimed[0] > head.ep:
            exc = MembershipWithheld(f"the relay says epoch {claimed[0]}, shows {head.ep}", field="ep")
            await self._warn(cid, f"withheld:{claimed[0]}", "relay", lines.withheld(claimed[0], head.ep), exc)

    def _contradicts(self, chain: Chain) -> bool:
        """``chain`` (verified from the relay's log, e.g. after the copy kept here was lost) holds
        another statement for the epoch of the head kept in the trust store: a fork. It is never
        remembered, sealed to, or used to check envelopes."""
        known = self._heads.get(chain.cid)
        st = chain.at(known["ep"]) if known is not None else None
        return st is not None and st.hash != known["hash"]

    async def _keep(self, chain: Chain) -> None:
        """Keep the verified statements in the history cache, so the log is there after a restart
        without the relay (:meth:`_restore`)."""
        if self.client.history is not None:
            await self.client.history.set_meta(**{f"membership:{chain.cid}": [st.signed for st in chain.statements]})

    async def _restore(self, cid: str) -> Chain | None:
        """The log verified in an earlier session, from the history cache: accepted only if its
        statements link by hash (``prev``) from a creation up to the head kept in the sealed trust
        store, so nothing in it can have changed. None if there is none or it does not link."""
        known, history = self._heads.get(cid), self.client.history
        if known is None or history is None:
            return None
        try:
            statements = [membership.parse(t) for t in (await history.meta()).get(f"membership:{cid}", [])]
        except E2EEError:
            return None
        linked = all(
            st.cid == cid and st.ep == i and st.prev == (statements[i - 1].hash if i else None)
            for i, st in enumerate(statements)
        )
        if not statements or not linked or (statements[-1].ep, statements[-1].hash) != (known["ep"], known["hash"]):
            log.warning("the membership log of %s kept on this machine does not match its verified head", cid)
            return None
        chain = self.chains[cid] = Chain(cid)
        chain.statements = statements
        self._adopt(chain.head)
        return chain

    def _remember(self, head: Statement) -> None:
        known = self._heads.get(head.cid)
        if known is None or head.ep > known["ep"]:
            self._heads[head.cid] = {"ep": head.ep, "hash": head.hash}
            self._save()
        self._adopt(head)

    async def apply_own(self, st: Statement) -> None:
        """A statement of mine that the relay accepted: it is my new verified head (verified like
        any other), whatever the relay shows next."""
        async with self._locks.setdefault(st.cid, asyncio.Lock()):
            chain = self.chains.setdefault(st.cid, Chain(st.cid))
            prev = chain.head
            for added in chain.extend([st], self._resolve):
                await self._system(
                    st.cid,
                    lines.line_id(added),
                    added.actor,
                    lines.verified(added, prev),
                    added.ts,
                    _verified_line(added),
                )
            self._remember(st)
            await self._keep(chain)

    async def _extend(self, chain: Chain, signed: list[str]) -> bool:
        """Verify ``signed`` onto ``chain``; show each new statement; warn at the first that fails
        (returns True then)."""
        for text in signed:
            prev = chain.head
            try:
                st = membership.parse(text)
                await self._fetch_key(st.actor, st.akid)
                added = chain.extend([st], self._resolve)
            except E2EEError as exc:
                if isinstance(exc, ClientError) and exc.code in NOT_ANSWERED:
                    raise
                claim = _claim(text)
                if claim is None or claim.cid != chain.cid or claim.ep > (prev.ep if prev is not None else -1):
                    # something after the verified head that does not verify: a change exists that cannot be
                    # shown (a forged one, or a real one altered: maybe a removal). Nothing is sealed past it.
                    self._beyond[chain.cid] = max(
                        (prev.ep if prev is not None else -1) + 1,
                        claim.ep if claim is not None and claim.cid == chain.cid else 0,
                    )
                await self._warn(
                    chain.cid,
                    f"{exc.code}:{membership.statement_hash(text) if claim else text[:32]}",
                    claim.actor if claim else "relay",
                    lines.invalid(claim, prev, exc),
                    exc,
                )
                return True
            for st in added:
                known = self._heads.get(chain.cid)
                if known is None or st.ep > known["ep"]:
                    await self._system(
                        st.cid, lines.line_id(st), st.actor, lines.verified(st, prev), st.ts, _verified_line(st)
                    )
        return False

    def _resolve(self, user: str, kid: str):
        """The Ed25519 key ``kid`` of ``user`` (found by :meth:`_fetch_key` first)."""
        for ident in self._accepted(user):
            if ident.sign_kid == kid:
                return ident.sign_key
        for ident in self._published.get(user, ()):
            if ident.sign_kid == kid:
                return ident.sign_key
        raise ActorKeyMismatch(f"{user} has published no signing key {kid[:8]}…", field="akid")

    def _accepted(self, user: str) -> list[PublicIdentity]:
        """Keys this user accepted for ``user`` (pinned, earlier, pending), or my own."""
        c = self.client
        if user == c.username and c.identity is not None:
            return list(c.my_public_keys())  # erased keys too: they signed statements in the logs
        contact = c.contacts.get(user)
        if contact is None:
            return []
        return [contact.identity, *contact.previous, *([contact.pending] if contact.pending else [])]

    async def _fetch_key(
        self, user: str, sign_kid: str | None = None, wrap_kid: str | None = None
    ) -> PublicIdentity | None:
        """A key pair ``user`` published with these ids (the relay's key history; the ids are
        recomputed from the keys, so the relay cannot answer another key under them)."""

        def find() -> PublicIdentity | None:
            for ident in (*self._accepted(user), *self._published.get(user, ())):
                if sign_kid in (None, ident.sign_kid) and wrap_kid in (None, ident.wrap_kid):
                    return ident
            return None

        found = find()
        if found is None:
            try:
                doc = await self.client.rest.request("GET", f"/v1/users/{user}/keys/history")
                await self.client.transparency.check_history(user, doc)  # each key proven in the log
                self._published[user] = [
                    PublicIdentity.from_json(k) for k in doc.get("keys", []) if k.get("username") == user
                ]
            except ClientError as exc:
                if exc.code in NOT_ANSWERED:
                    raise
                log.info("no key history for %s: %s", user, exc.code)
            except TransparencyFailed as exc:  # alerted; none of the answer's keys is used
                log.warning("key history of %s refused: %s", user, exc.code)
            found = find()
        return found

    # -- what the user sees ----------------------------------------------------------------------------
    async def _system(self, cid: str, lid: str, sender: str, text: str, ts: int, info: MessageInfo) -> None:
        c = self.client
        rec = Record(lid, cid, sender, text, pos=c._next_pos(), ts=ts, state=RecordState.SYSTEM, info=info)
        if c.history is not None:
            await c.history.put(rec)
        await c.events.put(RecordChanged(rec, new=True))

    async def _warn(self, cid: str, key: str, actor: str, text: str, exc: E2EEError) -> None:
        """Show a warning line once (remembered across restarts) and log it."""
        seen = self._warned.setdefault(cid, [])
        if key in seen:
            log.info("membership of %s: %s (%s), again", cid, exc.message, exc.code)
            return
        log.warning("membership of %s: %s (%s)", cid, exc.message, exc.code)
        seen.append(key)
        del seen[:-MAX_WARNINGS]
        self._save()
        await self._system(
            cid,
            f"w-{b64u_encode(os.urandom(9))}",
            actor,
            text,
            now_ms(),
            MessageInfo(system="membership", warning=exc.code, detail=exc.message),
        )

    def _adopt(self, head: Statement) -> None:
        """The verified head decides the members and the title this client shows and seals to."""
        c = self.client
        me_in = head.member(c.username) is not None
        c.members[head.cid] = list(head.usernames)
        c.titles[head.cid] = head.title
        (c.inactive.discard if me_in else c.inactive.add)(head.cid)
        mine = head.member(c.username)
        if (
            mine is not None
            and c.identity is not None
            and mine != member_of(c.identity.public)
            and head.cid not in self._updating
        ):  # my keys changed: move the new ones into this log
            from .membership_ops import update_keys

            self._updating.add(head.cid)
            c._spawn(update_keys(self, head.cid)).add_done_callback(lambda _: self._updating.discard(head.cid))

    # -- sealing ---------------------------------------------------------------------------------------
    async def audience(self, cid: str) -> Audience:
        """The newest verified epoch of ``cid`` and its members' keys, to seal to.

        Raises:
            LegacyConversation: made before signed membership (no log).
            MembershipWithheld / MembershipFork: the relay's head is not the verified one (it
                withholds a change, or shows another history): nothing is sealed until it is.
            KeyChangeBlocked: a member's key in the log is not one this user accepted, or a
                member's key change waits for a decision.
            ClientError: the log could not be fetched; ``forbidden`` when I am not a member.
        """
        chain = self.chains.get(cid)
        claimed = self.claimed.get(cid)
        if claimed is not None and claimed[0] is None and self.verified_before(cid):
            raise MembershipFork(
                "the relay lists this conversation without a membership log, but its log was "
                "verified here: nothing is sent until the relay serves it again",
                field="ep",
            )
        if claimed is not None and claimed[0] is None:
            raise LegacyConversation(
                "this conversation predates signed membership: it is read-only; start a new one", field="conversation"
            )
        if chain is None:
            chain = await self._restore(cid)
        if chain is None or chain.head is None or claimed is None or claimed != (chain.head.ep, chain.head.hash):
            try:
                chain = await self.sync(cid)
            except ClientError as exc:  # offline: the log verified before (a message written now is sealed
                if exc.code not in NOT_ANSWERED or chain is None:  # to it, checked again on sending)
                    raise
        head, claimed = chain.head, self.claimed.get(cid)
        if head is None:
            raise MembershipWithheld("no statement of this conversation's log verifies", field="ep")
        head = await member_keys.own_keys_in(self, head)
        # A newer epoch is known to exist (the relay names it, shows a statement for it that does not
        # verify, a message was sealed to it - kept across restarts once its signature verified) and no
        # statement for it verifies: it may remove someone (a removal altered by one byte fails too),
        # so nothing is sealed until it verifies. (A fork or an older log: the relay will refuse what
        # this seals, and the user was warned.)
        known = self._heads.get(cid, {}).get("ep", -1)  # verified before (a restart, then an older log)
        newer = max(
            claimed[0] if claimed and isinstance(claimed[0], int) else -1,
            self._beyond.get(cid, -1),
            self._evidence.get(cid, -1),
            self._seen.get(cid, -1),
            known,
        )
        if newer > head.ep:
            raise MembershipWithheld(lines.withheld(newer, head.ep), field="ep")
        if self._contradicts(chain):
            raise MembershipFork(
                f"the relay's log has another statement for epoch {known} than the one verified "
                "here: nothing is sent until it serves that one",
                field="ep",
            )
        if head.member(self.client.username) is None:
            raise ClientError(
                "you are not a member of this conversation", code=ErrorCode.FORBIDDEN, field="conversation"
            )
        recipients = [await member_keys.sealed_to(self, m) for m in head.members]
        blocked = self.client.blocked_by(cid)
        if blocked:
            raise KeyChangeBlocked(
                f"{', '.join(blocked)}'s key changed: accept or verify it before sending",
                field=blocked[0],
                users=tuple(blocked),
            )
        return Audience(cid, head.ep, head.hash, head.usernames, recipients)


def _verified_line(st: Statement) -> MessageInfo:
    """The info of the line that shows a verified statement."""
    return MessageInfo(system="membership", ep=st.ep, op=st.op, hash=st.hash, verified=True)


def _claim(text: str) -> Statement | None:
    """What a refused statement claims (to name its actor in the warning), if it parses."""
    try:
        return membership.parse(text)
    except (E2EEError, EnvelopeMalformed):
        return None
