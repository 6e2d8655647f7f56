"""The sealed trust store: what this client decided to trust, encrypted and authenticated on disk.

One file per account, ``trust.sealed`` beside the keystore (mode 0600, written atomically by
:mod:`client_tui.core.private`)::

    {"format": "e2ee-chat-trust", "v": 1, "username": ..., "nonce": b64url(12),
     "ciphertext": b64url(AES-256-GCM(payload JSON) || tag)}

The key is the keystore's ``trust_key`` (32 random bytes, inside the passphrase-protected keystore);
the AAD is the canonical JSON of every member but ``ciphertext``. The payload holds the pinned
keys of every contact, their verified flags, pending key changes, earlier keys with the relay
sequence after which each stopped counting, the key-change log, the highest rotation counter seen
per contact, and the verified membership heads per conversation.

Nothing in it can be edited or lost quietly: a file that does not decrypt, does not parse, or
belongs to another account is renamed aside (``trust.sealed.damaged-<time>``), never overwritten;
a store that existed and is gone is reported as missing. Either way the user is told in words what
was lost, and every contact pinned afterwards carries a note that it was pinned again after the
loss, not on first sight. A legacy plaintext ``contacts.json`` is imported once and set aside.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.b64 import b64u_decode, b64u_encode
from shared.errors import E2EEError
from shared.keys import PublicIdentity

from .private import load_local_json, set_aside, write_private

log = logging.getLogger("e2ee.client.trust")

FORMAT = "e2ee-chat-trust"
FILE_NAME = "trust.sealed"
LEGACY_FILE = "contacts.json"


@dataclass
class Contact:
    """A pinned contact (trust on first use), as the trust store keeps it.

    Attributes:
        identity: the pinned keys.
        verified: the user compared the safety number of exactly these keys and marked them verified.
        pending: a changed key waiting for the user's decision (sending is blocked meanwhile).
        previous: keys pinned before, oldest first.
        changes: key-change log: ``{"at", "old", "new", "signed_by_old", "decision"[, "decided_at"]}``.
        pending_signed_by_old: a verified rotation chain leads from the pinned keys to ``pending``
            (True), does not (False), or the relay gave no evidence (None).
        newest_rotation: the highest rotation counter ever verified for this contact (rollback check).
        retired_after: sign key id of each replaced key -> the relay sequence of the last message the
            relay stored before the replacement was published (None: not known).
        note: a warning to show with the contact (e.g. pinned again after the trust store was lost).
    """

    identity: PublicIdentity
    verified: bool = False
    pending: PublicIdentity | None = None
    previous: list[PublicIdentity] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)
    pending_signed_by_old: bool | None = None
    newest_rotation: int | None = None
    retired_after: dict[str, int | None] = field(default_factory=dict)
    note: str = ""

    @property
    def kids(self) -> tuple[str, str]:
        """``(wrap_kid, sign_kid)`` of the pinned keys."""
        return self.identity.wrap_kid, self.identity.sign_kid

    @property
    def pending_kids(self) -> tuple[str, str] | None:
        return (self.pending.wrap_kid, self.pending.sign_kid) if self.pending is not None else None

    def to_json(self) -> dict:
        return {
            "identity": self.identity.to_json(),
            "verified": self.verified,
            "pending": self.pending.to_json() if self.pending else None,
            "pending_signed_by_old": self.pending_signed_by_old,
            "previous": [p.to_json() for p in self.previous],
            "changes": self.changes,
            "newest_rotation": self.newest_rotation,
            "retired_after": self.retired_after,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, doc: dict) -> Contact:
        """Inverse of :meth:`to_json` (key ids recomputed). Raises E2EEError, KeyError, TypeError."""
        return cls(
            PublicIdentity.from_json(doc["identity"]),
            bool(doc.get("verified", False)),
            PublicIdentity.from_json(doc["pending"]) if doc.get("pending") else None,
            [PublicIdentity.from_json(p) for p in doc.get("previous", [])],
            list(doc.get("changes", [])),
            doc.get("pending_signed_by_old"),
            doc.get("newest_rotation"),
            dict(doc.get("retired_after", {})),
            str(doc.get("note", "")),
        )


class TrustStore:
    """Contacts and membership heads of one account, sealed under the keystore's ``trust_key``.

    Create with :meth:`open`. ``warnings`` holds what the user must be told (in words) about
    local data that was damaged or missing; ``lost`` is set when pins were lost, and contacts
    pinned from then on carry a note saying so.
    """

    def __init__(self, profile: Path, username: str, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the trust-store key is 32 bytes")
        self.path = Path(profile) / FILE_NAME
        self.username = username
        self._aead = AESGCM(key)
        self.contacts: dict[str, Contact] = {}
        self.membership: dict[str, dict] = {}
        self.lost: str = ""  # when and why pins were lost ("" if never)
        self.history_made = False
        self.warnings: list[str] = []
        self.save_failed: str = ""

    # -- open ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, profile: Path, username: str, key: bytes, *, existed: bool) -> TrustStore:
        """Read the store (or start one).

        Args:
            profile: the account's folder.
            username: the account (checked against the file's header).
            key: the keystore's 32-byte ``trust_key``.
            existed: the keystore already held this key before this open, so a store should exist.

        Never raises for damaged or missing files: they are set aside and reported in ``warnings``.
        """
        store = cls(profile, username, key)
        if store.path.exists():
            try:
                store._load(store.path.read_bytes())
            except _Damaged as exc:
                store._lose("damaged", f"it could not be read ({exc})", aside=True)
        elif (Path(profile) / LEGACY_FILE).exists():
            store._import_legacy(Path(profile) / LEGACY_FILE)
        elif existed:
            store._lose("missing", "the file is missing", aside=False)
        return store

    def _load(self, blob: bytes) -> None:
        try:
            doc = load_local_json(blob, FILE_NAME)
            header = {k: v for k, v in doc.items() if k != "ciphertext"}
            if header.get("format") != FORMAT or header.get("v") != 1:
                raise _Damaged("not a trust store")
            if header.get("username") != self.username:
                raise _Damaged("it belongs to another account")
            sealed = b64u_decode(doc["ciphertext"], "ciphertext")
            payload = load_local_json(
                self._aead.decrypt(b64u_decode(header["nonce"], "nonce"), sealed, _aad(header)), FILE_NAME
            )
        except InvalidTag:
            raise _Damaged("its authentication tag does not match: altered, or not sealed with this keystore") from None
        except (ValueError, KeyError, TypeError, AttributeError, E2EEError) as exc:
            if isinstance(exc, _Damaged):
                raise
            raise _Damaged("it is not valid JSON of the trust-store form") from None
        contacts = {}
        try:
            for name, c in payload["contacts"].items():
                contacts[name] = Contact.from_json(c)
            self.membership = dict(payload.get("membership", {}))
        except (E2EEError, KeyError, TypeError, AttributeError, ValueError):
            raise _Damaged("a contact in it is malformed") from None
        self.contacts = contacts
        self.lost = str(payload.get("lost", ""))
        self.history_made = bool(payload.get("history_made", False))

    def _import_legacy(self, path: Path) -> None:
        """Read the plaintext ``contacts.json`` of an older client once, then set it aside."""
        try:
            doc = load_local_json(path.read_bytes(), path.name)
            self.contacts = {name: Contact.from_json(c) for name, c in doc.items()}
        except (ValueError, KeyError, TypeError, AttributeError, E2EEError, OSError):
            aside = set_aside(path, "damaged")
            self._lose(
                "damaged", f"the old contacts file could not be read; it was set aside as {aside.name}", aside=False
            )
            return
        aside = set_aside(path, "imported")
        log.warning("contacts imported from the unprotected %s (set aside as %s)", path.name, aside.name)
        self.warnings.append(
            f"Your {len(self.contacts)} contact(s) were moved from the old unprotected file "
            f"{path.name} into the sealed trust store; the old file was kept as {aside.name}."
        )
        self.save()

    def _lose(self, what: str, why: str, *, aside: bool) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime())
        where = ""
        if aside:
            try:
                where = f" It was set aside as {set_aside(self.path, 'damaged').name} (never overwritten)."
            except OSError as exc:
                where = f" It could not be set aside ({exc.strerror}); it is left as it is."
        self.lost = f"{what} on {stamp}"
        self.contacts, self.membership = {}, {}
        text = (
            f"Your trust store ({FILE_NAME}) was {what}: {why}.{where} The keys you had pinned, which "
            "contacts you had verified, the key-change log and the verified group memberships are lost. "
            "Contacts will be pinned again as they are next seen and marked as re-pinned, not as new: "
            "compare safety numbers again."
        )
        log.warning("trust store %s: %s", what, why)
        self.warnings.append(text)

    # -- write ----------------------------------------------------------------------------------------
    def save(self) -> bool:
        """Seal and write the store (atomic, 0600). A failed write (full disk, unwritable folder)
        leaves the previous file, is logged and reported in ``save_failed``; the next save tries
        again. Returns whether it was written."""
        nonce = os.urandom(12)
        header = {"format": FORMAT, "v": 1, "username": self.username, "nonce": b64u_encode(nonce)}
        payload = json.dumps(
            {
                "contacts": {n: c.to_json() for n, c in self.contacts.items()},
                "membership": self.membership,
                "lost": self.lost,
                "history_made": self.history_made,
            }
        ).encode()
        doc = {**header, "ciphertext": b64u_encode(self._aead.encrypt(nonce, payload, _aad(header)))}
        try:
            write_private(self.path, json.dumps(doc).encode())
        except OSError as exc:
            if not self.save_failed:
                log.warning("trust store not saved: %s", exc.strerror or exc)
            self.save_failed = exc.strerror or str(exc)
            return False
        self.save_failed = ""
        return True

    def pin(self, name: str, identity: PublicIdentity, **kw) -> Contact:
        """Pin ``identity`` as ``name``'s keys (first sight, or again after a loss: then with a note)."""
        contact = Contact(identity, **kw)
        if self.lost and name != self.username:
            contact.note = (
                f"pinned again after your trust store was {self.lost}, not on first sight: compare the safety number"
            )
            log.warning("%s pinned again after the trust store was %s", name, self.lost)
        self.contacts[name] = contact
        return contact


class _Damaged(Exception):
    pass


def _aad(header: dict) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
