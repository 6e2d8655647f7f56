"""Key rotation statements: a user's new keys, signed by the user's current signing key.

The statement is the ASCII bytes ``"e2ee-chat/v1/rotate." + new_wrap_kid + "." + new_sign_kid``,
signed with Ed25519 (RFC 8032) by the signing key being replaced. The relay checks it before it
publishes the new keys and keeps it in the key history, so a client can check that a key change
was made by the holder of the key it pinned (a key served without such a chain is suspicious).
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519

from .errors import SignatureInvalid

CONTEXT = "e2ee-chat/v1/rotate"


def statement(new_wrap_kid: str, new_sign_kid: str) -> bytes:
    """The bytes the old signing key signs: ``CONTEXT.<wrap_kid>.<sign_kid>`` (ASCII)."""
    return f"{CONTEXT}.{new_wrap_kid}.{new_sign_kid}".encode("ascii")


def sign(old_sign_private: ed25519.Ed25519PrivateKey, new_wrap_kid: str, new_sign_kid: str) -> bytes:
    """Sign a rotation statement; returns the 64-byte Ed25519 signature."""
    return old_sign_private.sign(statement(new_wrap_kid, new_sign_kid))


def verify(old_sign_key: ed25519.Ed25519PublicKey, new_wrap_kid: str, new_sign_kid: str, signature: bytes) -> None:
    """Check a rotation statement.

    Raises:
        SignatureInvalid: the signature is not by ``old_sign_key`` over this statement.
    """
    try:
        old_sign_key.verify(signature, statement(new_wrap_kid, new_sign_kid))
    except InvalidSignature:
        raise SignatureInvalid("rotation statement is not signed by the current signing key",
                               field="signature") from None
