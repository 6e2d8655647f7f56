"""The keystore's contents once opened (:class:`KeyBundle`), and their secret JSON form: the key
pairs with their times, and the public halves of the pairs erased for forward secrecy.

The file around it (Argon2id, AES-256-GCM, the header, the atomic 0600 write) is
:mod:`client_tui.core.keystore`, which documents the secret JSON's members; this module only
turns a bundle into that JSON and back (:func:`to_secret`, :func:`from_secret`). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from shared.b64 import b64u_decode, b64u_encode
from shared.errors import E2EEError, ErrorCode
from shared.keys import Identity, PublicIdentity

__all__ = ["ErasedKey", "KeyBundle", "KeystoreError", "WrongPassphrase", "from_secret", "now_ms", "to_secret"]

LOCAL_KEY_BYTES = 32


class KeystoreError(E2EEError):
    """The keystore file is missing, damaged, or not for this account."""

    code = ErrorCode.KEYSTORE_ERROR


class WrongPassphrase(KeystoreError):
    """The passphrase does not open this keystore (or the file was altered)."""

    code = ErrorCode.WRONG_PASSPHRASE


def now_ms() -> int:
    """The wall clock, in ms since the Unix epoch (the keystore's times)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class ErasedKey:
    """A retired key pair whose private keys were deleted (forward secrecy): its public half only.

    Attributes:
        public: the wrap (RSA) and sign (Ed25519) public keys; the key ids are recomputed from them.
        retired_ms: when the pair stopped being current, ms since the Unix epoch.
        erased_ms: when its private keys were deleted, ms since the Unix epoch.
    """

    public: PublicIdentity
    retired_ms: int
    erased_ms: int


@dataclass(frozen=True)
class KeyBundle:
    """Everything a keystore holds once opened.

    Attributes:
        identity: the current key pairs.
        local_key: 32-byte AES-256-GCM key of the local history cache (empty in a file too old).
        retired: earlier key pairs, newest first (kept to open messages sealed before a rotation).
        trust_key: 32-byte AES-256-GCM key of the sealed trust store (empty in a file too old).
        pending: new key pairs of a rotation not yet committed (saved before publishing), or None.
        upgrade: the file should be saved again (a legacy passphrase form, or a key or time missing).
        created_ms: wrap key id -> when that pair (current, pending or retired) was made, ms since
            the Unix epoch.
        retired_ms: wrap key id -> when that retired pair stopped being current, ms.
        erased: the public halves of retired pairs whose private keys were deleted, oldest first.
    """

    identity: Identity
    local_key: bytes = field(repr=False)
    retired: tuple[Identity, ...] = ()
    trust_key: bytes = field(default=b"", repr=False)
    pending: Identity | None = None
    upgrade: bool = False
    created_ms: Mapping[str, int] = field(default_factory=dict)
    retired_ms: Mapping[str, int] = field(default_factory=dict)
    erased: tuple[ErasedKey, ...] = ()

    def private_pairs(self) -> tuple[Identity, ...]:
        """Every pair whose private keys this bundle holds: current, pending, retired."""
        return (self.identity, *([self.pending] if self.pending is not None else []), *self.retired)

    def complete(self, now: int | None = None) -> KeyBundle:
        """This bundle with a fresh ``local_key``/``trust_key`` where one is missing, and ``now``
        (ms since the Unix epoch; default the wall clock) as the time of each pair made or
        retired at an unknown time (a file older than the key schedule): ``upgrade`` is set then."""
        at = now_ms() if now is None else now
        created = {i.wrap_kid: self.created_ms.get(i.wrap_kid, at) for i in self.private_pairs()}
        retired = {i.wrap_kid: self.retired_ms.get(i.wrap_kid, at) for i in self.retired}
        missing = created != dict(self.created_ms) or retired != dict(self.retired_ms)
        return dataclasses.replace(
            self,
            local_key=self.local_key or os.urandom(LOCAL_KEY_BYTES),
            trust_key=self.trust_key or os.urandom(LOCAL_KEY_BYTES),
            upgrade=self.upgrade or not (self.local_key and self.trust_key) or missing,
            created_ms=created,
            retired_ms=retired,
        )

    def erase(self, wrap_kid: str, now: int) -> KeyBundle:
        """This bundle without the private keys of the retired pair ``wrap_kid``, its public half
        kept under ``erased`` (erased at ``now``, ms since the Unix epoch).

        Raises:
            KeystoreError: ``wrap_kid`` is not a retired pair of this bundle (the current and the
                pending pairs are never erased).
        """
        gone = next((r for r in self.retired if r.wrap_kid == wrap_kid), None)
        if gone is None:
            raise KeystoreError(f"no retired key {wrap_kid[:8]}… to erase", field="wrap_kid")
        retired_at = self.retired_ms.get(wrap_kid, now)
        return dataclasses.replace(
            self,
            retired=tuple(r for r in self.retired if r.wrap_kid != wrap_kid),
            created_ms={k: v for k, v in self.created_ms.items() if k != wrap_kid},
            retired_ms={k: v for k, v in self.retired_ms.items() if k != wrap_kid},
            erased=(*self.erased, ErasedKey(gone.public, retired_at, now)),
        )

    def with_erased(self, others: tuple[ErasedKey, ...]) -> KeyBundle:
        """This bundle with each retired pair that ``others`` lists (the erasures another process
        saved in the same keystore) erased too, with the time it was erased there."""
        bundle = self
        for e in others:
            if any(r.wrap_kid == e.public.wrap_kid for r in bundle.retired):
                bundle = bundle.erase(e.public.wrap_kid, e.erased_ms)
        return bundle

    def public_keys(self) -> tuple[PublicIdentity, ...]:
        """The public halves of every pair of this account: current, pending, retired, erased."""
        return (*(i.public for i in self.private_pairs()), *(e.public for e in self.erased))


def _pair(identity: Identity, bundle: KeyBundle, *, retired: bool = False) -> dict:
    """A key pair of the secret JSON: its private keys and the times the bundle knows for it."""
    times = {"created_ms": bundle.created_ms.get(identity.wrap_kid)}
    if retired:
        times["retired_ms"] = bundle.retired_ms.get(identity.wrap_kid)
    return {
        **{k: v for k, v in times.items() if v is not None},
        "wrap_private": b64u_encode(
            identity.wrap_private.private_bytes(
                serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        ),
        "sign_private": b64u_encode(
            identity.sign_private.private_bytes(
                serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
            )
        ),
    }


def _unpair(username: str, doc: dict) -> Identity:
    wrap = serialization.load_der_private_key(b64u_decode(doc["wrap_private"], "wrap_private"), password=None)
    sign = ed25519.Ed25519PrivateKey.from_private_bytes(b64u_decode(doc["sign_private"], "sign_private"))
    if not isinstance(wrap, rsa.RSAPrivateKey):
        raise KeystoreError("keystore wrap key is not RSA")
    return Identity(username, wrap, sign)


def _time(doc: dict, name: str) -> int | None:
    """A time member (ms since the Unix epoch) of the secret JSON, or None when it is absent."""
    value = doc.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} is not a time in ms")
    return value


def _erased_doc(e: ErasedKey) -> dict:
    pub = e.public.to_json()
    return {
        "wrap_key": pub["wrap_key"],
        "sign_key": pub["sign_key"],
        "retired_ms": e.retired_ms,
        "erased_ms": e.erased_ms,
    }


def _unerased(username: str, doc: dict) -> ErasedKey:
    if set(doc) - {"wrap_key", "sign_key", "retired_ms", "erased_ms"}:
        raise ValueError("an erased key holds more than its public half")  # a private key never belongs here
    public = PublicIdentity.from_json({"username": username, "wrap_key": doc["wrap_key"], "sign_key": doc["sign_key"]})
    retired_at, erased_at = _time(doc, "retired_ms"), _time(doc, "erased_ms")
    if retired_at is None or erased_at is None:
        raise ValueError("an erased key lacks its times")
    return ErasedKey(public, retired_at, erased_at)


def to_secret(bundle: KeyBundle) -> dict:
    """The secret JSON of ``bundle`` (what the keystore encrypts; members in
    :mod:`client_tui.core.keystore`'s docstring).

    Raises:
        KeystoreError: the private half of an erased pair is still in ``bundle``: an erased key is
            never written again.
    """
    erased = {k for e in bundle.erased for k in (e.public.wrap_kid, e.public.sign_kid)}
    if any({i.wrap_kid, i.sign_kid} & erased for i in bundle.private_pairs()):
        raise KeystoreError("refusing to save the private half of an erased key", field="erased")
    return {
        **_pair(bundle.identity, bundle),
        "local_key": b64u_encode(bundle.local_key),
        "trust_key": b64u_encode(bundle.trust_key),
        "retired": [_pair(r, bundle, retired=True) for r in bundle.retired],
        "pending": _pair(bundle.pending, bundle) if bundle.pending is not None else None,
        "erased": [_erased_doc(e) for e in bundle.erased],
    }


def from_secret(username: str, secret: dict, *, legacy: bool = False) -> KeyBundle:
    """The bundle of the secret JSON ``secret`` of ``username``'s keystore. ``legacy``: the file
    needs saving again anyway (an older passphrase form).

    A retired pair that ``erased`` lists with both its key ids (a process that did not know of the
    erase wrote it back) is dropped, and an entry listed twice is kept once; the bundle is then
    marked ``upgrade`` so the file is saved without them.

    Raises:
        KeystoreError: a member is missing or malformed; the current or the pending pair is listed
            as erased (neither is ever erased); an erased entry names one key id of a pair it holds
            but not the other (which half is right is unknown: nothing is dropped).
    """
    try:
        identity = _unpair(username, secret)
        retired_docs = secret.get("retired", [])
        retired = tuple(_unpair(username, r) for r in retired_docs)
        local_key = b64u_decode(secret["local_key"], "local_key") if "local_key" in secret else b""
        trust_key = b64u_decode(secret["trust_key"], "trust_key") if "trust_key" in secret else b""
        pending = _unpair(username, secret["pending"]) if secret.get("pending") else None
        erased = tuple(_unerased(username, e) for e in secret.get("erased", []))
        docs = [(identity, secret), *zip(retired, retired_docs, strict=True)]
        docs += [(pending, secret["pending"])] if pending is not None else []
        created = {i.wrap_kid: t for i, d in docs if (t := _time(d, "created_ms")) is not None}
        retired_at = {
            r.wrap_kid: t
            for r, d in zip(retired, retired_docs, strict=True)
            if (t := _time(d, "retired_ms")) is not None
        }
    except (KeyError, TypeError, ValueError, AttributeError, E2EEError) as exc:
        if isinstance(exc, KeystoreError):
            raise
        raise KeystoreError("the keystore's contents are damaged") from None
    unique = tuple({e.public.wrap_kid: e for e in reversed(erased)}.values())[::-1]  # a repeated entry: once
    pairs = {(e.public.wrap_kid, e.public.sign_kid) for e in unique}
    gone = {k for pair in pairs for k in pair}
    for held, what in ((identity, "current"), (pending, "pending")):
        if held is not None and {held.wrap_kid, held.sign_kid} & gone:  # never erased: a published key lost
            raise KeystoreError(f"the keystore is damaged: its {what} key is listed as erased")
    if any({r.wrap_kid, r.sign_kid} & gone and (r.wrap_kid, r.sign_kid) not in pairs for r in retired):
        raise KeystoreError("the keystore is damaged: an erased key's public half differs from the key pair it names")
    kept = tuple(r for r in retired if (r.wrap_kid, r.sign_kid) not in pairs)
    return KeyBundle(
        identity,
        local_key,
        kept,
        trust_key,
        pending,
        upgrade=legacy or not (local_key and trust_key) or len(kept) != len(retired) or len(unique) != len(erased),
        created_ms=created,
        retired_ms=retired_at,
        erased=unique,
    )
