"""Private keys at rest: one file per account, encrypted under the user's passphrase.

File (UTF-8 JSON, mode 0600, written atomically by :mod:`client_tui.core.private`)::

    {"format": "e2ee-chat-keystore", "v": 1, "username": ..., "wrap_kid": ..., "sign_kid": ...,
     "kdf": {"name": "argon2id", "salt": b64url(16), "iterations": 3, "memory_kib": 65536, "lanes": 4},
     "passphrase_form": "rfc8265-opaque",
     "nonce": b64url(12), "ciphertext": b64url(AES-256-GCM(secret JSON) || tag)}

The key is Argon2id(passphrase) (RFC 9106), 32 bytes, where the passphrase is first prepared
with PRECIS OpaqueString (RFC 8265 §4.2: NFC, non-ASCII spaces to U+0020;
:func:`shared.names.normalise_secret`), so a passphrase typed in composed or decomposed Unicode
opens the same file. A file without ``passphrase_form`` was written before that rule: it is tried
with the normalised form, then once with the raw text, and re-saved in the new form
(:attr:`KeyBundle.upgrade`). The AAD is the canonical JSON of every member except
``ciphertext``, so the header cannot be changed without the passphrase check failing. The header
holds only public values (names, key ids, KDF parameters, nonce).

The secret JSON holds:

* ``wrap_private`` (RSA, PKCS#8 DER) and ``sign_private`` (Ed25519 raw seed), base64url;
* ``local_key`` (32 random bytes, base64url): the key of the local history cache (see
  :mod:`client_tui.core.history`); added on first use to older files;
* ``trust_key`` (32 random bytes, base64url): the key of the sealed trust store (see
  :mod:`client_tui.core.trust`); added on first open to older files;
* ``created_ms``: when the current pair was made (ms since the Unix epoch);
* ``retired``: earlier key pairs (same members, plus ``retired_ms``: when they stopped being
  current) kept after a key rotation, so that messages sealed to an old key before the rotation was
  seen can still be opened;
* ``pending``: new key pairs (with ``created_ms``) saved *before* they are published by a rotation
  (phase 1 of :mod:`client_tui.core.rotate`), or null. Until the rotation is committed locally they
  open messages sealed to them, so a failure between publishing and committing loses nothing;
* ``erased``: the PUBLIC halves of retired pairs whose private keys were deleted for forward
  secrecy (:mod:`client_tui.core.epochs`): ``{"wrap_key", "sign_key"`` (base64url SPKI DER),
  ``"retired_ms", "erased_ms"}``. Never a private key: :func:`save_bundle` refuses a bundle that
  still holds the private half of an erased pair, and :func:`load_bundle` drops one it finds.

A file written before the key schedule lacks the times: :meth:`KeyBundle.complete` gives each pair
``now`` (its grace starts at that open) and the file is saved again (:attr:`KeyBundle.upgrade`).

Export and import move the encrypted file as it is: it stays encrypted under the passphrase.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from shared.b64 import b64u_decode, b64u_encode
from shared.errors import E2EEError, InvalidRequest
from shared.keys import Identity
from shared.names import normalise_secret, secret_candidates

from .keybundle import (  # the bundle and its secret JSON; re-exported: keystore.KeyBundle is the usual name
    LOCAL_KEY_BYTES,
    ErasedKey,
    KeyBundle,
    KeystoreError,
    WrongPassphrase,
    from_secret,
    now_ms,
    to_secret,
)
from .private import create_private, write_private

__all__ = [
    "ErasedKey",
    "KeyBundle",
    "KeystoreError",
    "WrongPassphrase",
    "export_to",
    "import_from",
    "load",
    "load_bundle",
    "now_ms",
    "peek",
    "save",
    "save_bundle",
]

FORMAT = "e2ee-chat-keystore"
DEFAULT_KDF = {"iterations": 3, "memory_kib": 65536, "lanes": 4}
PASSPHRASE_FORM = "rfc8265-opaque"  # noqa: S105 - the name of a normalisation, not a secret


def _prepared(passphrase: str) -> str:
    try:
        return normalise_secret(passphrase, "passphrase")
    except InvalidRequest as exc:
        raise KeystoreError(exc.message, field="passphrase") from None


def _derive(passphrase: str, kdf: dict, salt: bytes) -> bytes:
    return Argon2id(
        salt=salt, length=32, iterations=kdf["iterations"], lanes=kdf["lanes"], memory_cost=kdf["memory_kib"]
    ).derive(passphrase.encode("utf-8"))


def _aad(header: dict) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def save(
    path: Path,
    identity: Identity,
    passphrase: str,
    kdf: dict | None = None,
    *,
    local_key: bytes | None = None,
    retired: tuple[Identity, ...] | list[Identity] = (),
    trust_key: bytes | None = None,
    pending: Identity | None = None,
) -> bytes:
    """Encrypt ``identity``'s private keys under ``passphrase`` and write ``path`` (0600, atomic).

    ``kdf`` overrides Argon2id costs (``iterations``, ``memory_kib``, ``lanes``); ~0.2 s by default.
    CPU-bound: call it from a thread in an event loop.

    Returns:
        the history key stored in the file (``local_key``, or a new random one).

    Raises:
        KeystoreError: empty passphrase, or one with a disallowed character.
        OSError: the file could not be written (the old file is left as it was).
    """
    bundle = KeyBundle(
        identity,
        local_key or os.urandom(LOCAL_KEY_BYTES),
        tuple(retired),
        trust_key or os.urandom(LOCAL_KEY_BYTES),
        pending,
    ).complete()
    save_bundle(path, bundle, passphrase, kdf)
    return bundle.local_key


def save_bundle(path: Path, bundle: KeyBundle, passphrase: str, kdf: dict | None = None) -> None:
    """Write every part of ``bundle`` (current, pending and retired keys with their times, the
    public halves of erased keys, history and trust-store keys) to ``path``, encrypted under
    ``passphrase`` (prepared with RFC 8265 OpaqueString).

    CPU-bound (Argon2id): call it from a thread in an event loop.

    Raises:
        KeystoreError: empty passphrase, one with a disallowed character, a key missing, or the
            private half of an erased pair still in ``bundle`` (nothing is written then).
        OSError: the file could not be written (the old file is left as it was).
    """
    if not passphrase:
        raise KeystoreError("a passphrase is required", field="passphrase")
    prepared = _prepared(passphrase)
    if len(bundle.local_key) != LOCAL_KEY_BYTES or len(bundle.trust_key) != LOCAL_KEY_BYTES:
        raise KeystoreError("history and trust-store keys must be 32 bytes", field="local_key")
    secret = json.dumps(to_secret(bundle)).encode()  # KeystoreError: an erased key's private half
    identity = bundle.identity
    params = {"name": "argon2id", "salt": b64u_encode(os.urandom(16)), **(kdf or DEFAULT_KDF)}
    nonce = os.urandom(12)
    header = {
        "format": FORMAT,
        "v": 1,
        "username": identity.username,
        "wrap_kid": identity.wrap_kid,
        "sign_kid": identity.sign_kid,
        "kdf": params,
        "passphrase_form": PASSPHRASE_FORM,
        "nonce": b64u_encode(nonce),
    }
    key = _derive(prepared, params, b64u_decode(params["salt"]))
    doc = {**header, "ciphertext": b64u_encode(AESGCM(key).encrypt(nonce, secret, _aad(header)))}
    write_private(Path(path), json.dumps(doc, indent=1).encode())


def _open(path: Path, passphrase: str) -> tuple[dict, dict, bool]:
    """Decrypt ``path``; returns ``(header, secret, legacy)`` where ``legacy`` says the file was
    written before passphrases were normalised (it should be saved again)."""
    try:
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        header = {k: v for k, v in doc.items() if k != "ciphertext"}
        if header.get("format") != FORMAT or header.get("v") != 1:
            raise KeystoreError(f"{path} is not an e2ee-chat keystore")
        kdf = header["kdf"]
        if kdf.get("name") != "argon2id":
            raise KeystoreError(f"keystore {path} uses an unknown KDF")
        salt = b64u_decode(kdf["salt"], "salt")
        nonce = b64u_decode(header["nonce"], "nonce")
        sealed = b64u_decode(doc["ciphertext"], "ciphertext")
    except FileNotFoundError:
        raise KeystoreError(f"no keystore at {path}", field="path") from None
    except (ValueError, KeyError, TypeError, AttributeError, E2EEError) as exc:
        if isinstance(exc, KeystoreError):
            raise
        raise KeystoreError(f"keystore {path} is damaged") from None
    legacy = header.get("passphrase_form") != PASSPHRASE_FORM
    try:  # a passphrase that cannot be normalised cannot have made a new-form file
        candidates = secret_candidates(passphrase) if legacy else [normalise_secret(passphrase, "passphrase")]
    except InvalidRequest:
        candidates = []
    for candidate in candidates:
        try:
            key = _derive(candidate, kdf, salt)
            return header, json.loads(AESGCM(key).decrypt(nonce, sealed, _aad(header))), legacy
        except InvalidTag:
            continue
        except (ValueError, KeyError, TypeError):
            raise KeystoreError(f"keystore {path} is damaged") from None
    raise WrongPassphrase("wrong passphrase (or the keystore file was altered)", field="passphrase")


def load_bundle(path: Path, passphrase: str) -> KeyBundle:
    """Decrypt the keystore at ``path``: current keys, history key and retired keys.

    CPU-bound (Argon2id): call it from a thread in an event loop.

    Raises:
        KeystoreError: missing or malformed file.
        WrongPassphrase: the passphrase is wrong or the file was altered.
    """
    header, secret, legacy = _open(path, passphrase)
    try:
        bundle = from_secret(header["username"], secret, legacy=legacy)
    except (KeyError, TypeError) as exc:
        raise KeystoreError(f"keystore {path} is damaged") from exc
    except KeystoreError as exc:
        raise KeystoreError(f"keystore {path}: {exc.message}", field=exc.field) from None
    if bundle.identity.wrap_kid != header["wrap_kid"] or bundle.identity.sign_kid != header["sign_kid"]:
        raise KeystoreError("keystore keys do not match its key ids")
    return bundle


def load(path: Path, passphrase: str) -> Identity:
    """Decrypt the keystore at ``path`` and return the current keys.

    Raises:
        KeystoreError: missing or malformed file.
        WrongPassphrase: the passphrase is wrong or the file was altered.
    """
    return load_bundle(path, passphrase).identity


def peek(path: Path) -> dict:
    """The public header of a keystore (username, key ids, KDF) without the passphrase.

    Raises:
        KeystoreError: missing or not a keystore.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise KeystoreError(f"no keystore at {path}", field="path") from None
    except (ValueError, OSError):
        raise KeystoreError(f"{path} is not an e2ee-chat keystore") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise KeystoreError(f"{path} is not an e2ee-chat keystore")
    return {k: v for k, v in doc.items() if k != "ciphertext"}


def export_to(path: Path, dest: Path) -> Path:
    """Copy the (still encrypted) keystore to ``dest`` with mode 0600; refuses to overwrite.

    Raises:
        KeystoreError: no keystore at ``path``, or ``dest`` exists.
    """
    peek(path)
    dest = Path(dest)
    try:
        create_private(dest, Path(path).read_bytes())
    except FileExistsError:
        raise KeystoreError(f"{dest} exists; not overwritten", field="dest") from None
    return dest


def import_from(src: Path, path: Path, passphrase: str, username: str, *, overwrite: bool = False) -> KeyBundle:
    """Install the keystore file ``src`` as ``path`` after checking it opens with ``passphrase``
    and belongs to ``username``. CPU-bound (Argon2id).

    Raises:
        KeystoreError: ``src`` is not a keystore, is for another user, or ``path`` exists
            (without ``overwrite``).
        WrongPassphrase: the passphrase does not open ``src``.
    """
    bundle = load_bundle(src, passphrase)
    if bundle.identity.username != username:
        raise KeystoreError(f"{src} holds the keys of {bundle.identity.username!r}, not {username!r}", field="username")
    if Path(path).exists() and not overwrite:
        raise KeystoreError(f"a keystore exists at {path}; not overwritten", field="path")
    write_private(Path(path), Path(src).read_bytes())
    return bundle
