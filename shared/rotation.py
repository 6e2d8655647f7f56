"""Key rotation statements: a user's new keys, signed by the signing key they replace.

**Version 2** (every new rotation): the Ed25519 signature (RFC 8032) of the pinned-to-be-replaced
signing key over the ASCII bytes, lines joined by ``\\n`` (usernames and key ids hold no newline)::

    e2ee-chat/v2/rotate
    <username>            canonical (shared.names)
    <old wrap kid>        43 characters each
    <old sign kid>
    <new wrap kid>
    <new sign kid>
    <counter>             decimal: 1 for a user's first rotation, 2 for the next ...

So a statement names whose keys it rotates, which keys it replaces and where in the chain it
stands: it cannot be replayed for another user, for other old keys, or to put an older key back
(a rollback). The relay checks it before it publishes the new keys and keeps it in the key history;
clients verify the chain themselves (``client_tui.core.chain``) and accept only its newest key.

**Version 1** (history rows written before v2): ``"e2ee-chat/v1/rotate." + new_wrap_kid + "." +
new_sign_kid``. It is still verified for old history rows; the relay no longer accepts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519

from .errors import InvalidRequest, SignatureInvalid
from .keys import KEY_ID_LEN
from .names import is_canonical_username

__all__ = ["CONTEXT", "CONTEXT_V1", "VERSION", "MAX_COUNTER", "Rotation", "sign", "verify", "statement_v1", "verify_v1"]

CONTEXT = "e2ee-chat/v2/rotate"
CONTEXT_V1 = "e2ee-chat/v1/rotate"
VERSION = 2
MAX_COUNTER = 2**53 - 1


@dataclass(frozen=True)
class Rotation:
    """What a v2 rotation statement says.

    Attributes:
        username: canonical username whose keys rotate.
        old: ``(wrap_kid, sign_kid)`` replaced (the signer's own key pair).
        new: ``(wrap_kid, sign_kid)`` published.
        counter: 1-based position of this rotation in the user's chain (1..2**53-1).
    """

    username: str
    old: tuple[str, str]
    new: tuple[str, str]
    counter: int

    def statement(self) -> bytes:
        """The bytes the old signing key signs (ASCII, see the module docstring).

        Raises:
            InvalidRequest: a member is not of its documented form.
        """
        kids = (*self.old, *self.new)
        if not is_canonical_username(self.username):
            raise InvalidRequest("rotation: the username is not canonical", field="username")
        if any(not isinstance(k, str) or len(k) != KEY_ID_LEN or not k.isascii() or "\n" in k for k in kids):
            raise InvalidRequest(f"rotation: key ids are {KEY_ID_LEN} base64url characters", field="kid")
        if not isinstance(self.counter, int) or not 1 <= self.counter <= MAX_COUNTER:
            raise InvalidRequest("rotation: the counter must be in 1..2**53-1", field="counter")
        return "\n".join((CONTEXT, self.username, *kids, str(self.counter))).encode("ascii")


def sign(old_sign_private: ed25519.Ed25519PrivateKey, rotation: Rotation) -> bytes:
    """Sign a v2 rotation statement with the signing key being replaced; 64-byte signature."""
    return old_sign_private.sign(rotation.statement())


def verify(old_sign_key: ed25519.Ed25519PublicKey, rotation: Rotation, signature: bytes) -> None:
    """Check a v2 rotation statement (``signature`` by ``old_sign_key``).

    Raises:
        SignatureInvalid: not a signature by ``old_sign_key`` over exactly this statement.
        InvalidRequest: the statement's members are malformed.
    """
    try:
        old_sign_key.verify(signature, rotation.statement())
    except InvalidSignature:
        raise SignatureInvalid("rotation statement is not signed by the key it replaces", field="signature") from None


def statement_v1(new_wrap_kid: str, new_sign_kid: str) -> bytes:
    """The bytes of a legacy (v1) statement: ``CONTEXT_V1.<wrap_kid>.<sign_kid>`` (ASCII)."""
    return f"{CONTEXT_V1}.{new_wrap_kid}.{new_sign_kid}".encode("ascii")


def verify_v1(old_sign_key: ed25519.Ed25519PublicKey, new_wrap_kid: str, new_sign_kid: str, signature: bytes) -> None:
    """Check a legacy v1 statement of an old history row.

    Raises:
        SignatureInvalid: the signature is not by ``old_sign_key`` over this statement.
    """
    try:
        old_sign_key.verify(signature, statement_v1(new_wrap_kid, new_sign_kid))
    except (InvalidSignature, UnicodeEncodeError):
        raise SignatureInvalid(
            "rotation statement (v1) is not signed by the key it replaces", field="signature"
        ) from None
