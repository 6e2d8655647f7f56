"""Level 3: a session key shared by one client and the relay, and the envelope it protects.

At L3 the relay reads every message (it is the L3 *demonstration*: transport-level secrecy of the
frames, not end-to-end). docs/PROTOCOL.md §6 is the normative text.

Handshake (once per websocket connection, after authentication)
    The relay's ``hello`` carries a fresh 16-byte ``challenge``; the relay's RSA key (2048-4096
    bits, e = 65537) is published and pinned by clients. The client draws a 32-byte session key
    ``K`` and sends a JWE Compact Serialization (RFC 7516 §7.1)::

        b64url(header) "." b64url(RSA-OAEP-256(relay key, K)) "." b64url(iv) "."
        b64url(AES-256-GCM_K(challenge)) "." b64url(tag)

    with header ``{"alg":"RSA-OAEP-256","enc":"A256GCM","typ":"e2ee-chat/l3-hs","v":1,
    "kid":<relay key id>}`` and AAD = ASCII of the first part (RFC 7516 §5.1). ``K`` is that JWE's
    content encryption key, so any JOSE library can produce the handshake. The relay unwraps
    ``K``, decrypts, and accepts only its own challenge for this connection (no replay).

Messages (both directions)
    JWE Compact Serialization with ``alg`` = ``dir`` (RFC 7518 §4.5: the encrypted key part is
    empty) and ``enc`` = ``A256GCM`` (RFC 7518 §5.3) under ``K``, a random 96-bit nonce per message,
    AAD = ASCII of the protected header part. The protected header names the session (``kid``),
    the direction (``dir``: ``c2r`` client to relay, ``r2c`` relay to client; no reflection), a
    per-direction sequence number (``seq``: replays are visible), and the message's id,
    conversation, sender and time.

Use :func:`start_handshake` / :func:`accept_handshake` to obtain a :class:`Session`, then
:func:`seal` / :func:`open`. No caller chooses a key or a nonce.

This module holds the handshake; the messages (:func:`seal`, :func:`open`, :class:`Header`,
:class:`Opened`), the :class:`Session` type and the format's constants are in
``shared/l3_envelope.py`` and re-exported here, so ``from shared import l3`` gives the whole API.
"""

from __future__ import annotations

import os

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import digests
from .b64 import b64u_decode, b64u_encode
from .envelope.format import _OAEP, NONCE_BYTES
from .errors import (
    ChallengeMismatch,
    DecryptionFailed,
    EnvelopeMalformed,
    RelayKeyMismatch,
    UnsupportedAlgorithm,
    UnwrapFailed,
)
from .keys import check_wrap_public_key, key_id
from .l3_envelope import (
    ALG,
    C2R,
    DIRECTIONS,
    ENC,
    R2C,
    SESSION_ID_BYTES,
    SESSION_ID_CONTEXT,
    SESSION_KEY_BYTES,
    TYP,
    VERSION,
    Header,
    Opened,
    Session,
    _compact,
    _decode_header,
    _encoder,
    _iv_ct_tag,
    _split,
    open,
    seal,
    session_id,
)
from .l3_envelope import _seal_with as _seal_with  # test-only seam (the known-answer vectors)

__all__ = [
    "ALG",
    "C2R",
    "CHALLENGE_BYTES",
    "DIRECTIONS",
    "ENC",
    "HS_ALG",
    "HS_TYP",
    "Header",
    "HandshakeHeader",
    "MAX_HANDSHAKE_BYTES",
    "Opened",
    "R2C",
    "SESSION_ID_BYTES",
    "SESSION_ID_CONTEXT",
    "SESSION_KEY_BYTES",
    "Session",
    "TYP",
    "VERSION",
    "accept_handshake",
    "open",
    "seal",
    "session_id",
    "start_handshake",
]
"""The public API: handshake both sides, seal and open, the session type and the format's constants."""

HS_ALG = "RSA-OAEP-256"
HS_TYP = "e2ee-chat/l3-hs"
CHALLENGE_BYTES = 16
MAX_HANDSHAKE_BYTES = 4096
"""Largest accepted handshake token in bytes (an RSA-4096 handshake is about 900)."""


class HandshakeHeader(msgspec.Struct, forbid_unknown_fields=True):
    """Protected header of the handshake: alg "RSA-OAEP-256", enc "A256GCM",
    typ "e2ee-chat/l3-hs", v 1, kid = the relay wrap key's id (43 characters)."""

    alg: str
    enc: str
    typ: str
    v: int
    kid: str


_hs_decoder = msgspec.json.Decoder(HandshakeHeader)
# JSON strings in the header: member names + string values (see strictjson.reject_duplicate_members).
_HS_HEADER_STRINGS = 5 + 4


# -- handshake -----------------------------------------------------------------------------------
def _check_challenge(challenge: bytes) -> None:
    if not isinstance(challenge, bytes) or len(challenge) != CHALLENGE_BYTES:
        raise EnvelopeMalformed(f"the challenge is {CHALLENGE_BYTES} bytes", field="challenge")


def _handshake_with(relay_key: rsa.RSAPublicKey, challenge: bytes, *, key: bytes, iv: bytes) -> str:
    # Test-only seam (vectors inject key and iv). Not public API.
    header = HandshakeHeader(alg=HS_ALG, enc=ENC, typ=HS_TYP, v=VERSION, kid=key_id(relay_key))
    protected = b64u_encode(_encoder.encode(header))
    sealed = AESGCM(key).encrypt(iv, challenge, protected.encode("ascii"))
    return _compact(protected, relay_key.encrypt(key, _OAEP), iv, sealed)


def start_handshake(relay_key: rsa.RSAPublicKey, challenge: bytes) -> tuple[Session, str]:
    """Client side: draw a session key, wrap it to the relay, prove it with the challenge.

    Args:
        relay_key: the relay's pinned RSA public key (2048-4096 bits, e = 65537).
        challenge: the 16 bytes from this connection's ``hello`` (``challenge``, base64url-decoded).

    Returns:
        ``(session, token)``: the session to seal/open with, and the handshake token (JWE Compact,
        RSA-OAEP-256 + A256GCM, ~ 4/3 * modulus bytes + 150 characters) to send in ``l3_key``.

    Raises:
        KeyInvalid (KeyTypeRefused, KeySizeRefused, KeyExponentRefused): unacceptable relay key.
        EnvelopeMalformed: the challenge is not 16 bytes.
    """
    check_wrap_public_key(relay_key, "relay")
    _check_challenge(challenge)
    key = AESGCM.generate_key(bit_length=256)
    token = _handshake_with(relay_key, challenge, key=key, iv=os.urandom(NONCE_BYTES))
    return Session._from_key(key), token


def accept_handshake(
    token: str | bytes,
    relay_private: rsa.RSAPrivateKey,
    challenge: bytes,
    *,
    max_bytes: int = MAX_HANDSHAKE_BYTES,
) -> Session:
    """Relay side: unwrap the client's session key and check it carries this connection's challenge.

    Costs one RSA private-key operation. Checks, in order: size and 5 parts; header (alg
    RSA-OAEP-256, enc A256GCM, typ e2ee-chat/l3-hs, v 1); ``kid`` is this relay's key id;
    nonce and tag lengths; RSA-OAEP-256 unwrap to exactly 32 bytes; AES-256-GCM; the challenge.

    Args:
        token: the handshake token (JWE Compact Serialization).
        relay_private: the relay's RSA private key.
        challenge: the 16 bytes sent to this connection in ``hello``.
        max_bytes: size limit, default 4096.

    Returns:
        The :class:`Session` shared with this client.

    Raises:
        EnvelopeTooLarge, EnvelopeMalformed, TrailingData, DuplicateMember, Base64Invalid,
        UnsupportedAlgorithm, NonceInvalid, TagInvalid; RelayKeyMismatch (wrapped to another
        key); UnwrapFailed; DecryptionFailed; ChallengeMismatch (replayed or for another connection).
    """
    _check_challenge(challenge)
    parts = _split(token, max_bytes)
    header = _decode_header(parts[0], _hs_decoder, _HS_HEADER_STRINGS)
    if header.alg != HS_ALG or header.enc != ENC:
        raise UnsupportedAlgorithm(f"alg/enc must be {HS_ALG}/{ENC}", field="alg")
    if header.typ != HS_TYP or header.v != VERSION:
        raise UnsupportedAlgorithm(f"typ/v must be {HS_TYP}/{VERSION}", field="typ")
    if header.kid != key_id(relay_private.public_key()):
        raise RelayKeyMismatch("the session key is wrapped to another relay key", field="kid")
    wrapped = b64u_decode(parts[1], "encrypted_key")
    iv, ciphertext, tag = _iv_ct_tag(parts)
    if len(wrapped) != (relay_private.key_size + 7) // 8:
        raise UnwrapFailed("encrypted_key has the wrong length for the relay key", field="encrypted_key")
    try:
        key = relay_private.decrypt(wrapped, _OAEP)
    except ValueError:
        raise UnwrapFailed("RSA-OAEP-256 unwrap failed", field="encrypted_key") from None
    if len(key) != SESSION_KEY_BYTES:
        raise UnwrapFailed(f"session key is {len(key)} bytes; must be 32", field="encrypted_key")
    try:
        proof = AESGCM(key).decrypt(iv, ciphertext + tag, parts[0])
    except InvalidTag:
        raise DecryptionFailed("AES-GCM authentication failed", field="ciphertext") from None
    if not digests.equal(proof, challenge):
        raise ChallengeMismatch("the handshake carries another challenge", field="challenge")
    return Session._from_key(key)
