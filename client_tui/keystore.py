"""Private keys at rest: one file per account, encrypted under the user's passphrase.

File (UTF-8 JSON, mode 0600, written atomically)::

    {"format": "e2ee-chat-keystore", "v": 1, "username": ..., "wrap_kid": ..., "sign_kid": ...,
     "kdf": {"name": "argon2id", "salt": b64url(16), "iterations": 3, "memory_kib": 65536, "lanes": 4},
     "nonce": b64url(12), "ciphertext": b64url(AES-256-GCM(secret JSON) || tag)}

The key is Argon2id(passphrase) (RFC 9106), 32 bytes; the AAD is the canonical JSON of every
member except ``ciphertext``, so the header cannot be changed without the passphrase check
failing. The secret JSON holds the RSA key as PKCS#8 DER and the Ed25519 seed, both base64url.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from shared.b64 import b64u_decode, b64u_encode
from shared.errors import E2EEError
from shared.keys import Identity

FORMAT = "e2ee-chat-keystore"
DEFAULT_KDF = {"iterations": 3, "memory_kib": 65536, "lanes": 4}


class KeystoreError(E2EEError):
    """The keystore file is missing, damaged, or not for this account."""

    code = "keystore_error"


class WrongPassphrase(KeystoreError):
    """The passphrase does not open this keystore (or the file was altered)."""

    code = "wrong_passphrase"


def _derive(passphrase: str, kdf: dict, salt: bytes) -> bytes:
    return Argon2id(
        salt=salt, length=32, iterations=kdf["iterations"], lanes=kdf["lanes"], memory_cost=kdf["memory_kib"]
    ).derive(passphrase.encode("utf-8"))


def _aad(header: dict) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def save(path: Path, identity: Identity, passphrase: str, kdf: dict | None = None) -> None:
    """Encrypt ``identity``'s private keys under ``passphrase`` and write ``path`` (0600, atomic).

    ``kdf`` overrides Argon2id costs (``iterations``, ``memory_kib``, ``lanes``); ~0.2 s by default.

    Raises:
        KeystoreError: empty passphrase.
    """
    if not passphrase:
        raise KeystoreError("a passphrase is required", field="passphrase")
    params = {"name": "argon2id", "salt": b64u_encode(os.urandom(16)), **(kdf or DEFAULT_KDF)}
    nonce = os.urandom(12)
    header = {
        "format": FORMAT, "v": 1, "username": identity.username,
        "wrap_kid": identity.wrap_kid, "sign_kid": identity.sign_kid, "kdf": params, "nonce": b64u_encode(nonce),
    }
    secret = json.dumps({
        "wrap_private": b64u_encode(identity.wrap_private.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())),
        "sign_private": b64u_encode(identity.sign_private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())),
    }).encode()
    key = _derive(passphrase, params, b64u_decode(params["salt"]))
    doc = {**header, "ciphertext": b64u_encode(AESGCM(key).encrypt(nonce, secret, _aad(header)))}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".keystore-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path, passphrase: str) -> Identity:
    """Decrypt the keystore at ``path``.

    Raises:
        KeystoreError: missing or malformed file.
        WrongPassphrase: the passphrase is wrong or the file was altered.
    """
    try:
        doc = json.loads(Path(path).read_text())
        header = {k: v for k, v in doc.items() if k != "ciphertext"}
        if header.get("format") != FORMAT or header.get("v") != 1:
            raise KeystoreError(f"{path} is not an e2ee-chat keystore")
        kdf = header["kdf"]
        key = _derive(passphrase, kdf, b64u_decode(kdf["salt"], "salt"))
        nonce = b64u_decode(header["nonce"], "nonce")
        sealed = b64u_decode(doc["ciphertext"], "ciphertext")
    except FileNotFoundError:
        raise KeystoreError(f"no keystore at {path}") from None
    except (ValueError, KeyError, TypeError, E2EEError) as exc:
        if isinstance(exc, KeystoreError):
            raise
        raise KeystoreError(f"keystore {path} is damaged") from None
    try:
        secret = json.loads(AESGCM(key).decrypt(nonce, sealed, _aad(header)))
    except InvalidTag:
        raise WrongPassphrase("wrong passphrase (or the keystore file was altered)", field="passphrase") from None
    wrap = serialization.load_der_private_key(b64u_decode(secret["wrap_private"]), password=None)
    sign = ed25519.Ed25519PrivateKey.from_private_bytes(b64u_decode(secret["sign_private"]))
    if not isinstance(wrap, rsa.RSAPrivateKey):
        raise KeystoreError("keystore wrap key is not RSA")
    identity = Identity(header["username"], wrap, sign)
    if identity.wrap_kid != header["wrap_kid"] or identity.sign_kid != header["sign_kid"]:
        raise KeystoreError("keystore keys do not match its key ids")
    return identity
