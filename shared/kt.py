"""The key transparency log: its leaves, its signed tree heads, and the proofs a key answer carries
(docs/PROTOCOL.md §14; the tree is :mod:`shared.merkle`, RFC 9162 §2.1).

Every key publication (registration: counter 0) and every rotation (counter n ≥ 1) is one leaf, in
the order the relay stored them. A leaf's data is the canonical JSON (sorted keys, no spaces,
UTF-8) of::

    {"v": 1, "user": <canonical username>, "n": <counter>, "wrap_kid": <43>, "sign_kid": <43>,
     "sig": <b64url SHA-256 of the rotation signature, 43 chars> | null}

A signed tree head is ``{"tree_size", "root_hash" (b64url, 32 bytes), "timestamp" (ms), "signature"
(b64url, 64 bytes)}``; the relay's log key (Ed25519) signs the 56+ bytes
``"e2ee-chat/v1/kt-head\\n" || tree_size (8 bytes, big-endian) || timestamp (8) || root_hash (32)``.

Pure: no I/O. Errors: :class:`~shared.errors.TreeHeadInvalid`,
:class:`~shared.errors.InclusionProofInvalid`, :class:`~shared.errors.ConsistencyProofInvalid`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519

from . import digests, merkle
from .b64 import b64u_decode, b64u_encode
from .errors import E2EEError, InclusionProofInvalid, TreeHeadInvalid
from .names import is_canonical_username

__all__ = [
    "HEAD_CONTEXT",
    "MAX_PAGE",
    "MAX_TREE_SIZE",
    "KEY_ID_LEN",
    "LEAF_VERSION",
    "KeyLeaf",
    "TreeHead",
    "Inclusion",
    "sign_head",
    "decode_proof",
    "encode_proof",
    "sig_hash",
]

HEAD_CONTEXT = b"e2ee-chat/v1/kt-head\n"
LEAF_VERSION = 1
KEY_ID_LEN = 43
MAX_PAGE = 1000  # entries in one GET /v1/kt/entries answer
MAX_TREE_SIZE = 2**53 - 1  # JSON-safe integers


def sig_hash(signature: bytes) -> str:
    """The leaf's ``sig``: b64url SHA-256 of a rotation signature (64 bytes in), 43 characters out."""
    return b64u_encode(digests.sha256(signature))


def _int(doc: dict[str, Any], name: str, error: type[E2EEError], top: int = MAX_TREE_SIZE) -> int:
    v = doc.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
        raise error(f"{name} must be an integer in 0..{top}", field=name)
    return v


def _bytes(doc: dict[str, Any], name: str, length: int, error: type[E2EEError]) -> bytes:
    v = doc.get(name)
    try:
        raw = b64u_decode(v, name) if isinstance(v, str) else None
    except E2EEError:
        raw = None
    if raw is None or len(raw) != length:
        raise error(f"{name} must be {length} bytes, base64url", field=name)
    return raw


@dataclass(frozen=True)
class KeyLeaf:
    """One key publication in the log.

    Attributes:
        username: the canonical username the keys are published under.
        counter: 0 for the first keys, n for the n-th rotation (the key history's index).
        wrap_kid, sign_kid: key ids (SHA-256 of the SPKI DER, b64url, 43 characters).
        sig: :func:`sig_hash` of the rotation signature; None for first keys.
    """

    username: str
    counter: int
    wrap_kid: str
    sign_kid: str
    sig: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The leaf's JSON object (see the module docstring)."""
        return {
            "v": LEAF_VERSION,
            "user": self.username,
            "n": self.counter,
            "wrap_kid": self.wrap_kid,
            "sign_kid": self.sign_kid,
            "sig": self.sig,
        }

    def data(self) -> bytes:
        """The leaf data: canonical JSON of :meth:`to_json` (UTF-8, sorted keys, no spaces)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def hash(self) -> bytes:
        """The leaf hash, ``SHA-256(0x00 || data)`` (32 bytes)."""
        return merkle.leaf_hash(self.data())

    @property
    def kids(self) -> tuple[str, str]:
        """``(wrap_kid, sign_kid)``."""
        return self.wrap_kid, self.sign_kid

    @classmethod
    def from_json(cls, doc: object) -> KeyLeaf:
        """Parse a leaf object strictly.

        Raises:
            InclusionProofInvalid: not a leaf of version 1 (``field`` names the member).
        """
        if not isinstance(doc, dict) or set(doc) != {"v", "user", "n", "wrap_kid", "sign_kid", "sig"}:
            raise InclusionProofInvalid("a log leaf has exactly v, user, n, wrap_kid, sign_kid, sig", field="leaf")
        if doc["v"] != LEAF_VERSION:
            raise InclusionProofInvalid(f"log leaf version {doc['v']!r}: only 1 is known", field="v")
        user = doc["user"]
        if not isinstance(user, str) or not is_canonical_username(user):
            raise InclusionProofInvalid("a log leaf's user is a canonical username", field="user")
        for name in ("wrap_kid", "sign_kid", "sig"):
            v = doc[name]
            if not (v is None and name == "sig") and (not isinstance(v, str) or len(v) != KEY_ID_LEN):
                raise InclusionProofInvalid(f"a log leaf's {name} is {KEY_ID_LEN} base64url characters", field=name)
        return cls(user, _int(doc, "n", InclusionProofInvalid), doc["wrap_kid"], doc["sign_kid"], doc["sig"])


@dataclass(frozen=True)
class TreeHead:
    """A signed tree head: ``size`` leaves under ``root`` (32 bytes) at ``timestamp_ms``, signed
    (64-byte Ed25519 ``signature``) by the relay's log key."""

    size: int
    root: bytes
    timestamp_ms: int
    signature: bytes

    def signed_bytes(self) -> bytes:
        """What the log key signs: ``HEAD_CONTEXT || size (u64 BE) || timestamp (u64 BE) || root``."""
        return HEAD_CONTEXT + self.size.to_bytes(8, "big") + self.timestamp_ms.to_bytes(8, "big") + self.root

    def verify(self, log_key: ed25519.Ed25519PublicKey) -> None:
        """Check the signature.

        Raises:
            TreeHeadInvalid: not signed by ``log_key``.
        """
        try:
            log_key.verify(self.signature, self.signed_bytes())
        except InvalidSignature:
            raise TreeHeadInvalid(
                f"the tree head of size {self.size} is not signed by the relay's log key", field="signature"
            ) from None

    def to_json(self) -> dict[str, Any]:
        """``{"tree_size", "root_hash", "timestamp", "signature"}`` (bytes as b64url)."""
        return {
            "tree_size": self.size,
            "root_hash": b64u_encode(self.root),
            "timestamp": self.timestamp_ms,
            "signature": b64u_encode(self.signature),
        }

    @classmethod
    def from_json(cls, doc: object) -> TreeHead:
        """Parse a signed head strictly (the signature is checked by :meth:`verify`).

        Raises:
            TreeHeadInvalid: malformed (``field`` names the member).
        """
        if not isinstance(doc, dict) or set(doc) != {"tree_size", "root_hash", "timestamp", "signature"}:
            raise TreeHeadInvalid("a tree head has exactly tree_size, root_hash, timestamp, signature", field="head")
        return cls(
            _int(doc, "tree_size", TreeHeadInvalid),
            _bytes(doc, "root_hash", merkle.HASH_BYTES, TreeHeadInvalid),
            _int(doc, "timestamp", TreeHeadInvalid),
            _bytes(doc, "signature", 64, TreeHeadInvalid),
        )


def sign_head(log_key: ed25519.Ed25519PrivateKey, size: int, root: bytes, timestamp_ms: int) -> TreeHead:
    """The relay's signed tree head over ``size`` leaves and their 32-byte ``root`` at ``timestamp_ms``."""
    unsigned = TreeHead(size, root, timestamp_ms, b"")
    return TreeHead(size, root, timestamp_ms, log_key.sign(unsigned.signed_bytes()))


def encode_proof(proof: list[bytes]) -> list[str]:
    """Proof hashes as b64url strings (43 characters each)."""
    return [b64u_encode(p) for p in proof]


def decode_proof(doc: object, error: type[E2EEError]) -> list[bytes]:
    """A proof from its JSON form: at most 64 b64url strings of 32 bytes.

    Raises:
        ``error``: malformed (``field`` ``proof``).
    """
    if not isinstance(doc, list) or len(doc) > merkle.MAX_PROOF_HASHES:
        raise error(f"a proof is a list of at most {merkle.MAX_PROOF_HASHES} hashes", field="proof")
    return [_bytes({"proof": p}, "proof", merkle.HASH_BYTES, error) for p in doc]


@dataclass(frozen=True)
class Inclusion:
    """A key answer's ``kt`` member: leaf ``index`` with its ``leaf``, the audit ``proof`` and the
    signed ``head`` it leads to."""

    index: int
    leaf: KeyLeaf
    proof: list[bytes]
    head: TreeHead

    def to_json(self) -> dict[str, Any]:
        """``{"index", "leaf", "proof", "head"}``."""
        return {
            "index": self.index,
            "leaf": self.leaf.to_json(),
            "proof": encode_proof(self.proof),
            "head": self.head.to_json(),
        }

    @classmethod
    def from_json(cls, doc: object) -> Inclusion:
        """Parse strictly.

        Raises:
            InclusionProofInvalid, TreeHeadInvalid: malformed.
        """
        if not isinstance(doc, dict) or set(doc) != {"index", "leaf", "proof", "head"}:
            raise InclusionProofInvalid("a key answer's kt has exactly index, leaf, proof, head", field="kt")
        return cls(
            _int(doc, "index", InclusionProofInvalid),
            KeyLeaf.from_json(doc["leaf"]),
            decode_proof(doc["proof"], InclusionProofInvalid),
            TreeHead.from_json(doc["head"]),
        )

    def verify(self) -> None:
        """Check that the leaf is leaf ``index`` of the tree under ``head`` (the head's signature
        is the caller's to check, against the pinned log key).

        Raises:
            InclusionProofInvalid: it is not.
        """
        merkle.verify_inclusion(self.index, self.head.size, self.leaf.hash(), self.proof, self.head.root)
