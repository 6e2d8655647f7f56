"""Helpers shared by the vector generator and the tests that read the vectors.

* Loading: the committed JSON files, the fixed test identities (``keys.json``) and the RSA key
  pool (``key_pool.json``) as ``shared.keys`` objects.
* A reference builder for L4 envelopes written from docs/PROTOCOL.md with ``cryptography`` calls
  only (no ``shared.envelope`` internals), so that negative vectors can be made that ``seal``
  refuses to make: other OAEP parameters, a header changed after signing, a re-signed tamper.

THE KEYS IN THIS FOLDER ARE PUBLIC TEST KEYS. Never use them for anything else.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.keys import Identity

VECTORS_DIR = Path(__file__).resolve().parent
SIG_CONTEXT = "e2ee-chat/v3/sig"
KC_CONTEXT = b"e2ee-chat/v3/key-commitment"
TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms
NOTICE = "PUBLIC TEST KEYS AND VECTORS for e2ee-chat (docs/PROTOCOL.md). Never use these keys for anything else."
OAEP_256 = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


# -- encoding ----------------------------------------------------------------------------------
def b64u(data: bytes) -> str:
    """Unpadded base64url (written independently of ``shared.b64``)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64u(text: str) -> bytes:
    """Decode unpadded base64url (lenient; for building vectors, not for checking them)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def compact_json(obj: object) -> bytes:
    """JSON with no whitespace, members in the given order (the form our encoder writes)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def det(label: str, n: int) -> bytes:
    """``n`` bytes derived from ``label`` (fixed inputs for the known-answer vectors)."""
    out = b""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"e2ee-chat/vectors/{label}/{counter}".encode()).digest()
        counter += 1
    return out[:n]


# -- loading -----------------------------------------------------------------------------------
def load(name: str) -> dict:
    """The committed vector file ``name`` (e.g. ``"l4.json"``) as a dict."""
    return json.loads((VECTORS_DIR / name).read_text("utf-8"))


def _identity(entry: dict) -> Identity:
    wrap = serialization.load_pem_private_key(entry["wrap_private_pkcs8_pem"].encode(), password=None)
    sign = ed25519.Ed25519PrivateKey.from_private_bytes(unb64u(entry["sign_private_seed"]))
    assert isinstance(wrap, rsa.RSAPrivateKey)
    return Identity(entry["username"], wrap, sign)


@cache
def identities() -> dict[str, Identity]:
    """The fixed test users of ``keys.json`` (alice, bob, carol, mallory) by name."""
    return {name: _identity(e) for name, e in load("keys.json")["users"].items()}


@cache
def relay_private() -> rsa.RSAPrivateKey:
    """The fixed test relay RSA key of ``keys.json`` (used by the L3 vectors)."""
    key = serialization.load_pem_private_key(load("keys.json")["relay"]["wrap_private_pkcs8_pem"].encode(), None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


@cache
def key_pool() -> tuple[Identity, ...]:
    """64 fixed RSA-2048 + Ed25519 test identities (``key_pool.json``) for property tests."""
    out = []
    for e in load("key_pool.json")["identities"]:
        wrap = serialization.load_der_private_key(
            unb64u(e["wrap_private_pkcs8_der"]), password=None, unsafe_skip_rsa_key_validation=True
        )  # our own committed test keys: skip the ~40 ms consistency check per key
        sign = ed25519.Ed25519PrivateKey.from_private_bytes(unb64u(e["sign_private_seed"]))
        assert isinstance(wrap, rsa.RSAPrivateKey)
        out.append(Identity(e["username"], wrap, sign))
    return tuple(out)


# -- reference L4 builder (docs/PROTOCOL.md §5) --------------------------------------------------
def signing_input(doc: dict) -> bytes:
    """The bytes the sender signs: context, protected, the encrypted keys joined by ",", iv,
    ciphertext, tag, joined by "." (all as transmitted)."""
    keys = ",".join(r["encrypted_key"] for r in doc["recipients"])
    return ".".join((SIG_CONTEXT, doc["protected"], keys, doc["iv"], doc["ciphertext"], doc["tag"])).encode("ascii")


def resign(doc: dict, signer: ed25519.Ed25519PrivateKey) -> dict:
    """Replace ``sig`` with ``signer``'s signature over the current members."""
    doc["sig"] = b64u(signer.sign(signing_input(doc)))
    return doc


def key_commitment(cek: bytes) -> str:
    """``kc``: b64url HMAC-SHA-256(key = CEK, "e2ee-chat/v3/key-commitment")."""
    mac = hmac.HMAC(cek, hashes.SHA256())
    mac.update(KC_CONTEXT)
    return b64u(mac.finalize())


def header_for(
    sender: Identity,
    conversation: str,
    recipients: Sequence[Identity],
    *,
    mid: bytes,
    cek: bytes,
    xp: int = 0,
    ep: int = 1,
    mh: str = "M" * 42 + "A",
) -> dict:
    """The protected header as a dict, members in the documented order."""
    return {
        "alg": "RSA-OAEP-256",
        "enc": "A256GCM",
        "typ": "e2ee-chat/msg",
        "cty": "application/e2ee-chat+json",
        "v": 3,
        "mid": b64u(mid),
        "cid": conversation,
        "snd": sender.username,
        "skid": sender.sign_kid,
        "xp": xp,
        "ep": ep,
        "mh": mh,
        "kc": key_commitment(cek),
        "rkids": [r.wrap_kid for r in recipients],
    }


def build(
    sender: Identity,
    recipients: Sequence[Identity],
    plaintext: bytes,
    *,
    header: dict | None = None,
    header_bytes: bytes | None = None,
    conversation: str = "conv-1",
    cek: bytes,
    iv: bytes,
    mid: bytes,
    xp: int = 0,
    ep: int = 1,
    mh: str = "M" * 42 + "A",
    oaep: dict[str, padding.OAEP] | None = None,
    wrap_keys: dict[str, bytes] | None = None,
    aad: bytes | None = None,
    signer: ed25519.Ed25519PrivateKey | None = None,
) -> dict:
    """Seal by the document, with knobs ``seal`` does not have (for negative vectors).

    Args:
        header / header_bytes: replace the protected header (dict, or its exact JSON bytes).
        oaep: per-recipient OAEP padding by username (default RSA-OAEP-256).
        wrap_keys: per-recipient key to wrap instead of ``cek`` (e.g. a 16-byte key).
        aad: AES-GCM AAD to use instead of the ``protected`` member.
        signer: key that signs (default: the sender's).
    Returns:
        The envelope as a dict (serialize with :func:`compact_json`).
    """
    if header_bytes is None:
        header = header or header_for(sender, conversation, recipients, mid=mid, cek=cek, xp=xp, ep=ep, mh=mh)
        header_bytes = compact_json(header)
    protected = b64u(header_bytes)
    sealed = AESGCM(cek).encrypt(iv, plaintext, aad if aad is not None else protected.encode("ascii"))
    oaep = oaep or {}
    wrap_keys = wrap_keys or {}
    doc = {
        "protected": protected,
        "recipients": [
            {
                "header": {"kid": r.wrap_kid},
                "encrypted_key": b64u(
                    r.public.wrap_key.encrypt(wrap_keys.get(r.username, cek), oaep.get(r.username, OAEP_256))
                ),
            }
            for r in recipients
        ],
        "iv": b64u(iv),
        "ciphertext": b64u(sealed[:-16]),
        "tag": b64u(sealed[-16:]),
        "sig": "",
    }
    return resign(doc, signer or sender.sign_private)
