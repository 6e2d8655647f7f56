"""Rotating one's own keys in two phases, and noticing a rotation done elsewhere (a part of
:class:`client_tui.core.ChatClient`).

1. **Save pending**: the new key pairs are written into the keystore as ``pending`` beside the
   current ones. If that fails (full disk, unwritable folder) nothing was published: the account
   is as it was, and :class:`RotationNotSaved` says so.
2. **Publish**: a v2 rotation statement (:mod:`shared.rotation`) signed by the current signing
   key. If the relay cannot be reached the pending keys stay; the next :meth:`rotate_keys` (or the
   next login) publishes the same keys.
3. **Commit locally**: the keystore's current keys become the new ones, the old ones ``retired``.
   If this save fails the account still works: the new keys are in the keystore as ``pending``
   (they open messages sealed to them), this process uses them, and the next login commits.

A client that is open while its own account rotates elsewhere (another device or process on the
same keystore) learns of it from the relay's ``key_changed`` event for itself, reloads the
keystore, and opens again every message it could not open because it was sealed to the new key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from shared import envelope, frames, rotation
from shared.b64 import b64u_encode
from shared.digests import sha256
from shared.errors import E2EEError, ErrorCode
from shared.keys import Identity, PublicIdentity

from . import documents, keystore, measure
from .contacts import Contacts
from .events import ContactChanged, LocalDataWarning, RecordChanged
from .record import MessageInfo, Record, RecordState
from .trust import Contact

if TYPE_CHECKING:
    from .history import History
    from .inbox import Inbox
    from .membership import Membership

log = logging.getLogger("e2ee.client")

RETRY_REASONS = (
    ErrorCode.NOT_A_RECIPIENT,
    ErrorCode.UNWRAP_FAILED,
    ErrorCode.UNKNOWN_SENDER_KEY,
    ErrorCode.KEY_CHANGE_UNREVIEWED,
)
"""Reasons a message may open later: a key this client did not have yet, or a decision not taken."""


def _file_digest(path: Path) -> bytes | None:
    """SHA-256 of the file at ``path`` (32 bytes), None if it cannot be read."""
    try:
        return sha256(path.read_bytes())
    except OSError:
        return None


class RotationNotSaved(keystore.KeystoreError):
    """The new keys could not be saved before publishing: nothing changed, the old keys stay."""

    code = ErrorCode.ROTATION_NOT_SAVED


class RotationConflict(E2EEError):
    """The relay's current keys are not the ones this keystore holds as current."""

    code = ErrorCode.CONFLICT


class Rotation(Contacts):
    """Mixin of :class:`~client_tui.core.ChatClient`: two-phase rotation, own-rotation pickup."""

    # what it uses of ChatClient besides Contacts' (set in its __init__): for the type checker only
    kdf: dict | None
    hello: frames.Hello | None
    history: History | None
    inbox: Inbox
    membership: Membership
    _passphrase: str | None
    _bundle: keystore.KeyBundle | None
    _keys_lock: asyncio.Lock
    wall_clock: Callable[[], int]
    _keystore_digest: bytes | None

    if TYPE_CHECKING:

        @property
        def keystore_path(self) -> Path: ...

    async def rotate_keys(self, passphrase: str | None = None, bits: int | None = None) -> Identity:
        """Replace my keys (two phases, see the module docstring) and return the new identity.

        A pending rotation left by an earlier failure is completed with the same new keys.

        Raises:
            RotationNotSaved: phase 1 failed (nothing was published; the account is unchanged).
            ClientError: the relay refused or could not be reached (the new keys stay pending).
            keystore.KeystoreError: no passphrase to save the keys with.
        """
        assert self.identity is not None and self._bundle is not None
        passphrase = passphrase or self._passphrase
        if not passphrase:
            raise keystore.KeystoreError("the passphrase is needed to save new keys", field="passphrase")
        async with self._keys_lock:
            new = await self._rotate(passphrase, bits)
        from . import membership_ops

        await membership_ops.after_rotation(self.membership)  # move the new keys into each membership log
        return new

    async def _rotate(self, passphrase: str, bits: int | None) -> Identity:
        bundle = await self._with_disk_erasures(passphrase)
        new = bundle.pending
        if new is None:
            new = await asyncio.to_thread(Identity.generate, self.username, bits or self.identity.wrap_private.key_size)
            made = {**bundle.created_ms, new.wrap_kid: self.wall_clock()}
            staged = dataclasses.replace(bundle, pending=new, created_ms=made, upgrade=False)
            try:
                await asyncio.to_thread(keystore.save_bundle, self.keystore_path, staged, passphrase, self.kdf)
                self._note_keystore()
            except OSError as exc:
                raise RotationNotSaved(
                    f"the new keys could not be saved ({exc.strerror or exc}): nothing was "
                    "published and your keys are unchanged; free some space and try again",
                    field="keystore",
                ) from None
            self._bundle = staged
        await self._publish(new)
        await self._commit_rotation(new, passphrase)
        return new

    async def _with_disk_erasures(self, passphrase: str) -> keystore.KeyBundle:
        """The open bundle, less the retired keys another process erased in the keystore file
        since it was read (``client_tui.core.epochs``): a save from here must never write their
        private halves back. Call it holding ``_keys_lock``; the file unreadable: the open bundle.
        A file unchanged since this session last read or wrote it is not decrypted again.

        Raises:
            RotationConflict: another session changed the current or pending keys in the file (its
                own rotation): a save from this session would drop them, so nothing is saved.
        """
        if self._keystore_digest is not None and self._keystore_digest == _file_digest(self.keystore_path):
            return self._bundle
        try:
            disk = await asyncio.to_thread(keystore.load_bundle, self.keystore_path, passphrase)
        except (E2EEError, OSError) as exc:
            log.warning("keystore not read again before saving: %s", getattr(exc, "code", exc))
            return self._bundle
        ours, theirs = self._bundle, disk
        if (ours.identity.wrap_kid, getattr(ours.pending, "wrap_kid", None)) != (
            theirs.identity.wrap_kid,
            getattr(theirs.pending, "wrap_kid", None),
        ):
            raise RotationConflict(
                "another session of this account changed its keys in the keystore: nothing is saved from this "
                "one (it would drop them); log in again to use them",
                field="keystore",
            )
        merged = self._bundle.with_erased(disk.erased)
        if merged.retired != self._bundle.retired:
            gone = len(self._bundle.retired) - len(merged.retired)
            log.info("%d retired key(s) erased by another process on this keystore", gone)
            self._bundle, self.retired = merged, merged.retired
        return merged

    async def _publish(self, new: Identity) -> None:
        """Phase 2: publish ``new`` under a v2 statement (idempotent: done already is fine)."""
        doc = await self.rest.request("GET", f"/v1/users/{self.username}/keys/history")
        rows = doc.get("keys", []) if isinstance(doc, dict) and doc.get("username") == self.username else []
        current = next((r for r in rows if r.get("current")), None)
        if current is not None and (current.get("wrap_kid"), current.get("sign_kid")) == (new.wrap_kid, new.sign_kid):
            return  # published before (the answer was lost, or the commit failed)
        old = self.identity
        if current is None or (current.get("wrap_kid"), current.get("sign_kid")) != (old.wrap_kid, old.sign_kid):
            raise RotationConflict(
                "the relay's current keys are not this keystore's: refusing to rotate from them", field="wrap_key"
            )
        statement = rotation.Rotation(
            self.username, (old.wrap_kid, old.sign_kid), (new.wrap_kid, new.sign_kid), len(rows)
        )
        pub = new.public.to_json()
        await self.rest.request(
            "POST",
            "/v1/keys/rotate",
            {
                "wrap_key": pub["wrap_key"],
                "sign_key": pub["sign_key"],
                "counter": statement.counter,
                "signature": b64u_encode(rotation.sign(old.sign_private, statement)),
            },
        )

    async def _commit_rotation(self, new: Identity, passphrase: str) -> None:
        """Phase 3: the new keys become current (in memory at once; on disk if the save works)."""
        old, bundle = self.identity, self._bundle
        retired = (old, *[r for r in bundle.retired if r.wrap_kid != old.wrap_kid])
        now = self.wall_clock()
        committed = dataclasses.replace(
            bundle,
            identity=new,
            retired=retired,
            pending=None,
            upgrade=False,
            created_ms={**bundle.created_ms, new.wrap_kid: bundle.created_ms.get(new.wrap_kid, now)},
            retired_ms={**bundle.retired_ms, old.wrap_kid: now},
        )
        try:
            await asyncio.to_thread(keystore.save_bundle, self.keystore_path, committed, passphrase, self.kdf)
            self._note_keystore()
            self._bundle = committed
        except OSError as exc:  # the keystore holds the new keys as pending: nothing is lost
            text = (
                f"Your new keys are published, but the keystore could not be updated ({exc.strerror or exc}). "
                "They are kept in it as pending keys and this session uses them; the rotation is completed "
                "the next time you log in (free some space first)."
            )
            log.warning("rotation committed in memory only: %s", exc)
            self.local_warnings.append(text)
            await self.events.put(LocalDataWarning(text))
        self._adopt(new, retired)

    def _adopt(self, new: Identity, retired: tuple[Identity, ...]) -> None:
        old = self.identity
        self.identity, self.retired = new, retired
        me = self.contacts.get(self.username)
        previous = [*(me.previous if me else []), *([old.public] if old is not None else [])]
        self.contacts[self.username] = Contact(new.public, verified=True, previous=previous)
        self._save_state()
        self.events.put_nowait(ContactChanged(self.username))

    async def _finish_rotation(self) -> None:
        """After login: a pending rotation whose keys the relay already serves is committed; one
        the relay does not serve stays pending (the next :meth:`rotate_keys` publishes it)."""
        async with self._keys_lock:
            await self._finish_pending()

    async def _finish_pending(self) -> None:
        bundle = self._bundle
        if bundle is None or bundle.pending is None:
            return
        try:
            served = await self._fetch_identity(self.username)
        except E2EEError as exc:
            log.warning("pending rotation left as it is: %s", exc.code)
            return
        if (served.wrap_kid, served.sign_kid) == (bundle.pending.wrap_kid, bundle.pending.sign_kid):
            log.info("completing the rotation published earlier")
            await self._commit_rotation(bundle.pending, self._passphrase)

    async def _own_keys_changed(self) -> None:
        """My keys changed on the relay (a ``key_changed`` event for me): reload the keystore, in
        case another process or device rotated them, and open again what could not be opened."""
        if not self._passphrase:
            return
        async with self._keys_lock:
            try:
                bundle = await asyncio.to_thread(keystore.load_bundle, self.keystore_path, self._passphrase)
                self._note_keystore()
            except E2EEError as exc:
                log.warning("could not reload the keystore after my keys changed: %s", exc.code)
                return
            before = {i.wrap_kid for i in self._my_identities()}
            if bundle.identity.wrap_kid not in before:  # rotated elsewhere: the keystore has newer keys
                log.info("my keys were rotated elsewhere: now %s…", bundle.identity.wrap_kid[:8])
                self._bundle = bundle.complete(self.wall_clock())
                self._adopt(bundle.identity, bundle.retired)
            elif bundle.pending is not None and bundle.pending.wrap_kid not in before:
                self._bundle = bundle.complete(self.wall_clock())
                await self._finish_pending()
            gained = {i.wrap_kid for i in self._my_identities()} - before
        if gained:
            await self._retry_unreadable(RETRY_REASONS)

    def _note_keystore(self) -> None:
        """Remember the keystore file as this session just read or wrote it (its SHA-256)."""
        self._keystore_digest = _file_digest(self.keystore_path)

    def _my_identities(self) -> tuple[Identity, ...]:
        """Every key pair of mine that may open a message: current, pending, retired."""
        pending = self._bundle.pending if self._bundle is not None else None
        return (self.identity, *([pending] if pending is not None else []), *self.retired)

    def my_public_keys(self, *, old_only: bool = False) -> tuple[PublicIdentity, ...]:
        """The public halves of every key pair this account has had: current, pending, retired,
        and erased (private halves deleted for forward secrecy, ``client_tui.core.epochs``);
        with ``old_only`` the retired and erased ones only. What checks my own keys in public
        (the key transparency monitor, membership logs, my old signatures) uses this, so an
        erased key stays known as mine; only opening a message needs :meth:`_my_identities`."""
        erased = tuple(e.public for e in self._bundle.erased) if self._bundle is not None else ()
        old = (*(i.public for i in self.retired), *erased)
        if old_only or self.identity is None:
            return old
        pending = self._bundle.pending if self._bundle is not None else None
        return (self.identity.public, *([pending.public] if pending is not None else []), *old)

    async def _retry_held(self, user: str) -> None:
        """After a decision on ``user``'s keys: open again their messages held back or refused for it."""
        await self._retry_unreadable((ErrorCode.KEY_CHANGE_UNREVIEWED, ErrorCode.UNKNOWN_SENDER_KEY), sender=user)

    async def _retry_unreadable(self, reasons: tuple[str, ...], sender: str | None = None) -> int:
        """Open again every cached message that did not open for one of ``reasons`` (optionally
        only ``sender``'s); those that open now become received text. Returns how many did."""
        if self.history is None or self.identity is None:
            return 0
        opened = 0
        for rec in await self.history.unreadable(reasons, sender):
            if await self._reopen(rec):
                opened += 1
        if opened:
            log.info("%d message(s) opened on a second try", opened)
        return opened

    async def _reopen(self, rec: Record) -> bool:
        if rec.envelope is None or rec.seq is None:
            return False
        max_bytes = self.hello.max_envelope if self.hello else envelope.DEFAULT_MAX_ENVELOPE_BYTES
        try:
            parsed = envelope.parse(rec.envelope, max_bytes=max_bytes)
            h = parsed.header
            found = self.pinned_sign_key(h.snd, h.skid, rec.seq)
            if found is None:
                return False
            me = self.inbox.identity_for(h.rkids)
            opened, timings = await asyncio.to_thread(
                measure.open_, parsed, me, found[0], conversation=rec.conversation, sender=rec.sender
            )
            text, doc, ts, ctr = documents.read(opened)
        except (E2EEError, msgspec.DecodeError):
            return False
        if (h.snd, h.mid) in self.inbox.seen:
            return False
        self.inbox.seen.add((h.snd, h.mid))
        rec.text, rec.content, rec.state, rec.reason, rec.detail = text, doc, RecordState.RECEIVED, "", ""
        rec.mid, rec.ts, rec.ctr = h.mid, ts, ctr
        rec.info = MessageInfo(
            timings=timings,
            skid=h.skid,
            rkids=list(h.rkids),
            warning=found[1],
            mine=h.snd == self.username,
            wrap_kid=me.wrap_kid,
            opened_later=True,
        )
        await self.inbox.act(rec)  # an edit, reaction or receipt held back: applied now
        await self.history.put(rec)
        await self.events.put(RecordChanged(rec))
        return True
