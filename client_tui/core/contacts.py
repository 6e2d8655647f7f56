"""Contacts and key decisions of the client core (a part of :class:`client_tui.core.ChatClient`).

Trust decisions live here, in the client (DESIGN §10): whose key a key answer is (only the name
asked for), whether a changed key is the newest of a rotation chain the pinned key signed, what the
user compared before "verify" (the decision carries the key ids that were on screen), and how a
message's sender is marked. What was decided is kept in the sealed trust store
(:mod:`client_tui.core.trust`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared import digests
from shared.errors import E2EEError, ErrorCode, KeyAnswerMismatch, KeyChangeUnreviewed, RetiredSenderKey
from shared.keys import Identity, PublicIdentity, fingerprint, safety_number
from shared.names import canonical_username

from . import chain
from .errors import ClientError, MemberWithoutKey
from .events import ContactChanged, KeyChanged, LocalDataWarning
from .record import Record, RecordState, now_ms
from .trust import Contact, TrustStore

if TYPE_CHECKING:
    from .events import Event
    from .outbox import Outbox
    from .rest import Rest
    from .transparency import Transparency

log = logging.getLogger("e2ee.client")


MEMBERSHIP_WARNINGS = ("sender_removed", "audience_removed")
"""A received message's warnings from the membership log (``Membership.check_envelope``): shown ⚠."""


class KeyNotShown(E2EEError):
    """A verify or accept decision names key ids that are not (or no longer) the ones to decide
    on: the key changed while the user compared it, or the user did not compare the new one."""

    code = ErrorCode.KEY_NOT_SHOWN


@dataclass(frozen=True)
class Shown:
    """What the Keys dialog or ``keys show`` puts in front of the user to compare for ``user``:
    the pending keys during a change (``new``), else the pinned ones. ``kids`` go back into the
    decision (:meth:`Contacts.verify_contact`)."""

    user: str
    kids: tuple[str, str]
    safety: str
    new: bool
    previous_safety: str | None


class Contacts:
    """Mixin of :class:`~client_tui.core.ChatClient`: pinned contacts and key decisions."""

    # what it uses of ChatClient (set in its __init__): declared for the type checker only
    username: str
    identity: Identity | None
    retired: tuple[Identity, ...]
    profile: Path
    events: asyncio.Queue[Event]
    rest: Rest
    transparency: Transparency
    outgoing: Outbox
    members: dict[str, list[str]]
    local_warnings: list[str]
    trust: TrustStore | None
    _loose: dict[str, Contact]
    _key_fetched_at: dict[str, float]

    if TYPE_CHECKING:

        def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...
        async def _retry_held(self, user: str) -> None: ...
        async def _own_keys_changed(self) -> None: ...
        def my_public_keys(self, *, old_only: bool = False) -> tuple[PublicIdentity, ...]: ...

    @property
    def contacts(self) -> dict[str, Contact]:
        """Pinned contacts by canonical username (the trust store's, once the keystore is open)."""
        return self.trust.contacts if self.trust is not None else self._loose

    def _open_trust(self, trust_key: bytes, existed: bool) -> None:
        """Open the sealed trust store; tell the user about anything damaged or missing."""
        self.trust = TrustStore.open(self.profile, self.username, trust_key, existed=existed)
        for text in self.trust.warnings:
            self.local_warnings.append(text)
            self.events.put_nowait(LocalDataWarning(text))
        me = self.contacts.get(self.username)
        if me is None or me.kids != (self.identity.wrap_kid, self.identity.sign_kid):
            self.contacts[self.username] = Contact(
                self.identity.public,
                verified=True,
                previous=[*(me.previous if me else []), *([me.identity] if me else [])],
            )

    def _save_state(self) -> None:
        """Seal and write the trust store (0600, atomic); a failed write is retried on the next."""
        if self.trust is not None:
            self.trust.save()

    # -- fetching and pinning -----------------------------------------------------------------------
    async def _fetch_identity(self, user: str) -> PublicIdentity:
        """``user``'s current keys as the relay answers them, for exactly that (canonical) name.

        Raises:
            InvalidRequest: ``user`` is not a valid username.  KeyAnswerMismatch: the answer names
            someone else.  KeyInvalid: an unacceptable key.  TransparencyFailed: the keys are not
            proven to be in the relay's key transparency log (§14).  ClientError: relay errors.
        """
        user = canonical_username(user)
        doc = await self.rest.request("GET", f"/v1/users/{user}/keys")
        named = doc.get("username") if isinstance(doc, dict) else None
        if named != user:
            log.warning("key answer for %s names %r: refused, nothing pinned", user, str(named)[:40])
            raise KeyAnswerMismatch(
                f"the relay answered a key fetch for {user} with the keys of "
                f"{str(named)[:40]!r}: refused, nothing pinned",
                field="username",
            )
        ident = PublicIdentity.from_json(doc)
        await self.transparency.check_key_answer(ident, doc)  # in the relay's log, or refused (alerted)
        return ident

    async def _fetch_for_send(self, user: str) -> PublicIdentity:
        """:meth:`fetch_keys` for someone to write to: a user without a published key is named.

        Raises:
            MemberWithoutKey; as :meth:`fetch_keys`.
        """
        try:
            return await self.fetch_keys(user)
        except ClientError as exc:
            if exc.code == ErrorCode.NOT_FOUND and exc.field != "username":
                raise MemberWithoutKey(
                    f"{user} has published no key: nobody can write to them yet", field=user
                ) from None
            raise

    async def fetch_keys(self, user: str) -> PublicIdentity:
        """Fetch ``user``'s published keys and pin them on first use; return the pinned keys.

        A key that differs from the pinned one is checked against the relay's key history
        (:mod:`client_tui.core.chain`): keys older than ones already seen are refused as a rollback
        (:class:`KeyChanged` with ``rollback``); others are kept as ``pending`` with the chain's
        verdict, sending to that user blocked until :meth:`accept_key` or :meth:`verify_contact`.

        Raises:
            KeyAnswerMismatch: the answer names another user (nothing pinned).
            ClientError: ``not_found`` (no such user or no key published), relay errors.
        """
        ident = await self._fetch_identity(user)
        name = ident.username
        self._key_fetched_at[name] = time.monotonic()
        contact = self.contacts.get(name)
        new = (ident.wrap_kid, ident.sign_kid)
        if contact is None:
            if self.trust is not None:
                self.trust.pin(name, ident)
            else:
                self._loose[name] = Contact(ident)
            self._save_state()
            await self.events.put(ContactChanged(name))
        elif contact.kids == new:
            if contact.pending is not None and ident.sign_kid in contact.retired_after:
                # a verified chain replaced the pinned key: serving it again is a rollback, not a retraction
                log.warning("rollback: the relay served %s's replaced keys %s… again", name, new[0][:8])
                await self.events.put(KeyChanged(name, contact.kids, new, False, rollback=True))
            elif contact.pending is not None:  # the relay serves the pinned key again
                contact.pending = contact.pending_signed_by_old = None
                self._save_state()
                await self.events.put(ContactChanged(name))
        elif contact.pending_kids != new:
            if name == self.username and self.identity is not None:
                log.warning("the relay serves other keys for me (%s…) than mine (%s…)", new[0][:8], contact.kids[0][:8])
                self._spawn(self._own_keys_changed())
                return contact.identity
            verdict = await chain.judge(self, contact, ident)
            if verdict.rollback:
                log.warning("rollback: the relay served %s's keys %s…, older than ones already seen", name, new[0][:8])
                await self.events.put(KeyChanged(name, contact.kids, new, False, rollback=True))
                return contact.identity
            if verdict.signed is True:  # a rotation the pinned key signed: followed (DESIGN §10)
                self._follow(name, contact, ident)
                return contact.identity
            contact.pending, contact.pending_signed_by_old = ident, verdict.signed
            contact.changes.append(
                {
                    "at": now_ms(),
                    "old": list(contact.kids),
                    "new": list(new),
                    "signed_by_old": verdict.signed,
                    "decision": None,
                }
            )
            self._save_state()
            log.warning(
                "key change for %s: pinned %s…, relay serves %s… (signed by old key: %s)",
                name,
                contact.kids[0][:8],
                new[0][:8],
                verdict.signed,
            )
            await self.events.put(KeyChanged(name, contact.kids, new, verdict.signed))
        return self.contacts[name].identity

    def _follow(self, name: str, contact: Contact, ident: PublicIdentity) -> None:
        """``name`` rotated their keys and every link from the pinned keys to ``ident`` is signed
        (:mod:`client_tui.core.chain`): the new keys are pinned at once and keep the verified mark
        (the key the user pinned or verified vouched for them). Nothing blocks: with keys replaced
        on a schedule (forward secrecy, every 7 days by default) a prompt per contact per week
        would teach users to accept any change. A substitution (no signed chain) still waits."""
        old = contact.kids
        contact.previous.append(contact.identity)
        contact.identity, contact.pending, contact.pending_signed_by_old = ident, None, None
        at = now_ms()
        contact.changes.append(
            {"at": at, "old": list(old), "new": [ident.wrap_kid, ident.sign_kid], "signed_by_old": True,
             "decision": "followed", "decided_at": at}
        )  # fmt: skip
        self._save_state()
        log.info("%s rotated to %s… (signed by their pinned key): followed", name, ident.wrap_kid[:8])
        self.events.put_nowait(KeyChanged(name, old, (ident.wrap_kid, ident.sign_kid), True, followed=True))
        self.events.put_nowait(ContactChanged(name))
        with contextlib.suppress(RuntimeError):  # no running loop: nothing queued to unblock
            self._spawn(self._after_decision(name))

    # -- decisions ------------------------------------------------------------------------------------
    def shown_key(self, user: str) -> Shown | None:
        """What to put in front of the user to compare for ``user`` (None: nothing pinned).

        During a pending change that is the *new* keys' safety number (the old one is given as
        ``previous_safety``): the number the user compares is always the one of the keys that
        "verify" would pin.
        """
        user = self._contact_name(user)
        contact, me = self.contacts.get(user), self.contacts.get(self.username)
        if contact is None or me is None:
            return None
        target = contact.pending or contact.identity
        return Shown(
            user,
            (target.wrap_kid, target.sign_kid),
            safety_number(me.identity, target),
            contact.pending is not None,
            safety_number(me.identity, contact.identity) if contact.pending is not None else None,
        )

    def compare(self, user: str, typed: str, decision: str = "verified") -> tuple[str, str]:
        """Check what the user typed after comparing - the safety number (60 digits, spaces
        ignored, compared in constant time) or the key-id prefixes ``WRAP.SIGN`` (at least 12
        characters each) that ``keys show`` printed - against the keys to decide on now.

        Returns:
            the key ids to pass to :meth:`verify_contact` (or :meth:`accept_key`: ``decision``
            "accepted" names it in the error).

        Raises:
            KeyNotShown: it matches neither (nothing is decided).
        """
        shown = self.shown_key(user)
        if shown is None:
            raise KeyNotShown(f"no keys pinned for {user}", field="compare")
        digits = "".join(ch for ch in typed if not ch.isspace())
        wanted = shown.safety.replace(" ", "")
        if digits.isdigit() and digests.equal(digits.encode(), wanted.encode()):
            return shown.kids
        wrap, _, sign = typed.strip().partition(".")
        if len(wrap) >= 12 and len(sign) >= 12 and shown.kids[0].startswith(wrap) and shown.kids[1].startswith(sign):
            return shown.kids
        raise KeyNotShown(
            f"what you compared is not the safety number of {user}'s "
            f"{'new' if shown.new else 'pinned'} keys: nothing was {decision}",
            field="compare",
        )

    def _contact_name(self, user: str) -> str:
        """``user`` as the contacts are keyed: as given if pinned so (a name the relay delivered is
        looked up, never reshaped), else its canonical form (InvalidRequest if it has none)."""
        return user if user in self.contacts else canonical_username(user)

    def _decide(self, user: str, decision: str, shown: tuple[str, str] | None) -> None:
        user = self._contact_name(user)
        contact = self.contacts.get(user)
        if contact is None:
            raise KeyNotShown(f"no keys pinned for {user}", field="user")
        current = contact.pending_kids or contact.kids
        if shown is None and contact.pending is not None and decision == "verified":
            raise KeyNotShown(
                f"{user}'s key changed: compare the new safety number, then verify exactly the keys that were shown",
                field="kids",
            )
        if shown is not None and tuple(shown) != current:
            what = "changed again" if contact.pending is not None else "is not the one pinned"
            log.warning(
                "%s decision for %s refused: the keys shown (%s…) are not the ones to decide on (%s…)",
                decision,
                user,
                str(shown[0])[:8],
                current[0][:8],
            )
            raise KeyNotShown(
                f"{user}'s key {what} while you compared: nothing was {decision}. Compare the number now shown.",
                field="kids",
            )
        if contact.pending is not None:
            pinned = contact.identity
            contact.previous.append(pinned)
            contact.identity, contact.pending = contact.pending, None
            contact.pending_signed_by_old = None
            contact.verified = decision == "verified"
            for ch in contact.changes:
                if ch.get("decision") is None:
                    ch["decision"], ch["decided_at"] = decision, now_ms()
        elif decision == "verified":
            contact.verified = True
        if decision == "verified":
            contact.note = ""
        self._save_state()
        self.events.put_nowait(ContactChanged(user))
        with contextlib.suppress(RuntimeError):  # no running loop: nothing queued to unblock
            self._spawn(self._after_decision(user))

    async def _after_decision(self, user: str) -> None:
        await self.outgoing.unblock()
        await self._retry_held(user)

    def accept_key(self, user: str, shown: tuple[str, str] | None = None) -> None:
        """Accept ``user``'s changed key: it becomes the pinned key (unverified); blocked messages
        to conversations with them are sealed again and sent.

        Args:
            shown: the ``(wrap_kid, sign_kid)`` the user saw; refused if they are not the pending ones.

        Raises:
            KeyNotShown: ``shown`` are not the keys pending now.
        """
        self._decide(user, "accepted", shown)

    def verify_contact(self, user: str, shown: tuple[str, str] | None = None) -> None:
        """Mark ``user``'s keys verified after comparing their safety number.

        Args:
            shown: the ``(wrap_kid, sign_kid)`` whose number was on screen (:meth:`shown_key`).
                Required during a pending change (the pending keys are pinned as verified only if
                they are exactly these); without a pending change it defaults to the pinned keys.

        Raises:
            KeyNotShown: no ``shown`` during a pending change, or ``shown`` are not the keys to
                decide on (the key changed while the user compared: nothing is pinned or verified).
        """
        self._decide(user, "verified", shown)

    def blocked_by(self, conversation: str) -> list[str]:
        """Members of ``conversation`` whose key change waits for the user's decision."""
        return [u for u in self.members.get(conversation, []) if u in self.contacts and self.contacts[u].pending]

    def mark(self, record: Record) -> str:
        """How to show a record's sender: ``verified`` | ``unverified`` | ``previous`` (signed by
        a key the sender has since replaced) | ``warning`` (a pending key, or sealed to an epoch with
        a member removed since) | ``unreadable``. ✔ only for the pinned, verified key. A message
        sealed to a key of mine erased for forward secrecy is ``unverified``: nothing failed a check
        (no ✖ "could not verify"), its body says why it cannot be opened."""
        if record.state == RecordState.UNREADABLE:
            return "unverified" if record.reason == ErrorCode.KEY_ERASED else "unreadable"
        if record.info.warning in MEMBERSHIP_WARNINGS:
            return "warning"
        contact = self.contacts.get(record.sender)
        skid = record.info.skid
        if contact is None or not skid:
            return "warning" if record.info.warning else "unverified"
        if skid == contact.identity.sign_kid and skid not in contact.retired_after:
            return "verified" if contact.verified else "unverified"
        if contact.pending is not None and skid == contact.pending.sign_kid:
            return "warning"
        if record.sender == self.username and skid in {k.sign_kid for k in self.my_public_keys()}:
            return "verified"  # one of my own keys, current or replaced by my own rotation
        until = contact.retired_after.get(skid, -1)
        if until is not None and until >= 0 and record.seq is not None and record.seq <= until:
            # signed before a rotation the chain verifies replaced it: as trusted as the key now pinned
            return "verified" if contact.verified else "unverified"
        return "previous"

    def pinned_sign_key(self, user: str, skid: str, seq: int | None):
        """The key that verifies ``user``'s envelope signed with ``skid`` (stored at ``seq``), and
        a warning: ``""`` (pinned key), ``previous_key`` (a replaced key, for a message the relay
        stored before the replacement was published), ``key_not_accepted`` (a pending key the
        pinned key signed). None if no key of ``user`` has that id.

        Raises:
            RetiredSenderKey: a replaced key, on a message stored after its replacement.
            KeyChangeUnreviewed: a pending key the pinned key did not sign, not accepted yet.
        """
        contact = self.contacts.get(user)
        if contact is not None:
            if contact.identity.sign_kid == skid:
                return contact.identity.sign_key, self._retired_check(user, contact, skid, seq)
            if contact.pending is not None and contact.pending.sign_kid == skid:
                if contact.pending_signed_by_old:
                    return contact.pending.sign_key, "key_not_accepted"
                raise KeyChangeUnreviewed(f"{user}'s key changed: review it to read this", field="skid")
            for prev in reversed(contact.previous):
                if prev.sign_kid == skid:
                    return prev.sign_key, self._retired_check(user, contact, skid, seq) or "previous_key"
        if user == self.username and self.identity is not None:
            for pub in self.my_public_keys(old_only=True):  # retired and erased keys of mine (public halves)
                if pub.sign_kid == skid:
                    return pub.sign_key, "previous_key"
        return None

    @staticmethod
    def _retired_check(user: str, contact: Contact, skid: str, seq: int | None) -> str:
        """``previous_key`` if ``skid`` was replaced (per a verified chain) and the message was
        stored before the replacement was published; ``""`` if it was never replaced.

        Raises:
            RetiredSenderKey: stored after the replacement was published (or at an unknown place).
        """
        if skid not in contact.retired_after:
            return ""
        until = contact.retired_after[skid]
        if until is not None and seq is not None and seq <= until:
            return "previous_key"
        raise RetiredSenderKey(
            f"signed by a key {user} replaced, and stored (seq {seq}) after the replacement "
            f"was published (seq {until}): it is not shown as {user}'s",
            field="skid",
        )


def fingerprints(ident: PublicIdentity) -> tuple[str, str]:
    """The two fingerprints (wrap, sign) of ``ident`` as shown to users."""
    return fingerprint(ident.wrap_kid), fingerprint(ident.sign_kid)


def kid_token(kids: tuple[str, str], n: int = 12) -> str:
    """The key-id prefixes ``keys show`` prints and ``keys verify --compare`` accepts: ``WRAP.SIGN``."""
    return f"{kids[0][:n]}.{kids[1][:n]}"
