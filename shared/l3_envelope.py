"""Level 3 messages: the compact JWE envelope under an L3 session key, and the session itself.

Part of :mod:`shared.l3` (import it from there: ``from shared import l3``; the handshake that yields a
:class:`Session` is in ``l3.py``). docs/PROTOCOL.md §6 is the normative text.

Messages (both directions)
    JWE Compact Serialization with ``alg`` = ``dir`` (RFC 7518 §4.5: the encrypted key part is
    empty) and ``enc`` = ``A256GCM`` (RFC 7518 §5.3) under the session key ``K``, a random
    96-bit nonce per message, AAD = ASCII of the protected header part. The protected header
    names the session (``kid``), the direction (``dir``: ``c2r`` client to relay, ``r2c`` relay
    to client; no reflection), a per-direction sequence number (``seq``: replays are visible),
    and the message's id, conversation, sender and time.

This module also holds what the handshake shares with the messages: the format's constants, the
:class:`Session` type and the compact serialization's parsing (5 parts, header, iv, tag).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import digests
from .b64 import b64u_decode, b64u_encode
from .envelope.format import (
    DEFAULT_MAX_ENVELOPE_BYTES,
    MAX_SAFE_INTEGER,
    MESSAGE_ID_BYTES,
    NONCE_BYTES,
    TAG_BYTES,
)
from .errors import (
    DecryptionFailed,
    DirectionMismatch,
    EnvelopeMalformed,
    EnvelopeTooLarge,
    NonceInvalid,
    Replayed,
    SessionMismatch,
    TagInvalid,
    TrailingData,
    UnsupportedAlgorithm,
)
from .strictjson import check_id, json_error, reject_duplicate_members

__all__ = [
    "ALG",
    "C2R",
    "DIRECTIONS",
    "ENC",
    "Header",
    "Opened",
    "R2C",
    "SESSION_ID_BYTES",
    "SESSION_ID_CONTEXT",
    "SESSION_KEY_BYTES",
    "Session",
    "TYP",
    "VERSION",
    "open",
    "seal",
    "session_id",
]
"""Seal and open, the session type and the message format's constants (all re-exported by :mod:`shared.l3`)."""

ALG = "dir"
ENC = "A256GCM"
TYP = "e2ee-chat/l3"
VERSION = 1

SESSION_KEY_BYTES = 32
SESSION_ID_BYTES = 16  # 22 base64url characters
SESSION_ID_CONTEXT = b"e2ee-chat/v1/l3-sid\x00"
C2R = "c2r"
R2C = "r2c"
DIRECTIONS = (C2R, R2C)


class Header(msgspec.Struct, forbid_unknown_fields=True):
    """The protected header of an L3 message (all members required, no others allowed).

    Attributes:
        alg: "dir".  enc: "A256GCM".  typ: "e2ee-chat/l3".  v: 1.
        kid: the session id (22 base64url characters, see :attr:`Session.id`).
        dir: "c2r" (client to relay) or "r2c" (relay to client).
        seq: per-session, per-direction sequence number, 1, 2, 3 ... (at most 2**53-1).
        mid: message id, base64url of 16 bytes; the relay keeps the sender's ``mid`` when it
            re-encrypts a message for each recipient.
        cid: conversation id.  snd: sender username (both 1-64 of ``[A-Za-z0-9._-]``).
        ts: sent-at, Unix time in ms (the sender's), 0..2**53-1.
    """

    alg: str
    enc: str
    typ: str
    v: int
    kid: str
    dir: str
    seq: int
    mid: str
    cid: str
    snd: str
    ts: int


_header_decoder = msgspec.json.Decoder(Header)
_H = TypeVar("_H", bound=msgspec.Struct)
_encoder = msgspec.json.Encoder()
# JSON strings in each header: member names + string values (see strictjson.reject_duplicate_members).
_HEADER_STRINGS = 11 + 8


class Session:
    """A 32-byte L3 session key, held privately, with its public id.

    Obtained only from :func:`start_handshake` (client) or :func:`accept_handshake` (relay); the
    key itself is never exposed. ``repr`` shows the id only.

    Attributes:
        id: base64url of the first 16 bytes of SHA-256("e2ee-chat/v1/l3-sid" || 0x00 || key),
            22 characters; carried as ``kid`` in every L3 header.
    """

    __slots__ = ("_aead", "id")
    _aead: AESGCM
    id: str

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a Session comes from start_handshake() or accept_handshake()")

    @classmethod
    def _from_key(cls, key: bytes) -> Session:
        # Private: handshakes and the known-answer vectors build sessions from a key.
        if len(key) != SESSION_KEY_BYTES:
            raise ValueError("an L3 session key is 32 bytes")
        obj = object.__new__(cls)
        object.__setattr__(obj, "_aead", AESGCM(key))
        object.__setattr__(obj, "id", session_id(key))
        return obj

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Session is immutable")

    def __repr__(self) -> str:
        return f"Session(id={self.id!r})"


def session_id(key: bytes) -> str:
    """The public id of a 32-byte session key: b64url(SHA-256(context || key)[:16]), 22 chars."""
    return b64u_encode(digests.sha256(SESSION_ID_CONTEXT, key)[:SESSION_ID_BYTES])


@dataclass(frozen=True)
class Opened:
    """Result of :func:`open`.

    Attributes:
        plaintext: the decrypted bytes (UTF-8 text).
        header: the authenticated header (direction, sequence, message id, conversation, sender).
    """

    plaintext: bytes
    header: Header

    @property
    def text(self) -> str:
        """The plaintext decoded as UTF-8 (invalid sequences replaced)."""
        return self.plaintext.decode("utf-8", "replace")


# -- compact serialization -----------------------------------------------------------------------
def _split(token: str | bytes, max_bytes: int) -> list[bytes]:
    if isinstance(token, str):
        try:
            token = token.encode("ascii")
        except UnicodeEncodeError:
            raise EnvelopeMalformed("a compact JWE is ASCII text", field="envelope") from None
    if not isinstance(token, bytes):
        raise EnvelopeMalformed("a compact JWE is a string", field="envelope")
    if not token.isascii():
        raise EnvelopeMalformed("a compact JWE is ASCII text", field="envelope")
    if len(token) > max_bytes:
        raise EnvelopeTooLarge(f"envelope is {len(token)} bytes; limit {max_bytes}", field="envelope")
    parts = token.split(b".")
    if len(parts) > 5:
        raise TrailingData("a compact JWE has 5 parts; more follow", field="envelope")
    if len(parts) < 5:
        raise EnvelopeMalformed(f"a compact JWE has 5 parts, not {len(parts)}", field="envelope")
    return parts


def _decode_header(part: bytes, decoder: msgspec.json.Decoder[_H], strings: int) -> _H:
    raw = b64u_decode(part, "protected")
    try:
        header = decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise json_error(raw, exc, "protected", "protected header") from None
    reject_duplicate_members(raw, strings, "protected", "protected header")
    return header


def _iv_ct_tag(parts: list[bytes]) -> tuple[bytes, bytes, bytes]:
    iv = b64u_decode(parts[2], "iv")
    if len(iv) != NONCE_BYTES:
        raise NonceInvalid(f"iv is {len(iv)} bytes; must be {NONCE_BYTES}", field="iv")
    tag = b64u_decode(parts[4], "tag")
    if len(tag) != TAG_BYTES:
        raise TagInvalid(f"tag is {len(tag)} bytes; must be {TAG_BYTES}", field="tag")
    return iv, b64u_decode(parts[3], "ciphertext"), tag


def _compact(protected: str, encrypted_key: bytes, iv: bytes, sealed: bytes) -> str:
    return ".".join(
        (
            protected,
            b64u_encode(encrypted_key),
            b64u_encode(iv),
            b64u_encode(sealed[:-TAG_BYTES]),
            b64u_encode(sealed[-TAG_BYTES:]),
        )
    )


# -- messages ------------------------------------------------------------------------------------
def _seal_with(
    session: Session,
    plaintext: bytes,
    *,
    direction: str,
    conversation: str,
    sender: str,
    seq: int,
    message_id: str,
    sent_at_ms: int,
    iv: bytes,
    max_bytes: int,
) -> str:
    # Test-only seam (vectors inject iv, message_id and sent_at_ms). Not public API.
    if direction not in DIRECTIONS:
        raise EnvelopeMalformed("direction must be 'c2r' or 'r2c'", field="dir")
    check_id(conversation, "cid")
    check_id(sender, "snd")
    if len(b64u_decode(message_id, "mid")) != MESSAGE_ID_BYTES:
        raise EnvelopeMalformed("mid: must encode 16 bytes", field="mid")
    if not 1 <= seq <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("seq must be in 1..2**53-1", field="seq")
    if not 0 <= sent_at_ms <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("ts must be in 0..2**53-1", field="ts")
    estimate = (len(plaintext) * 4 + 2) // 3 + 400
    if estimate > max_bytes:
        raise EnvelopeTooLarge(f"envelope would be ~{estimate} bytes; limit {max_bytes}", field="plaintext")
    header = Header(
        alg=ALG,
        enc=ENC,
        typ=TYP,
        v=VERSION,
        kid=session.id,
        dir=direction,
        seq=seq,
        mid=message_id,
        cid=conversation,
        snd=sender,
        ts=sent_at_ms,
    )
    protected = b64u_encode(_encoder.encode(header))
    sealed = session._aead.encrypt(iv, plaintext, protected.encode("ascii"))
    token = _compact(protected, b"", iv, sealed)
    if len(token) > max_bytes:
        raise EnvelopeTooLarge(f"envelope is {len(token)} bytes; limit {max_bytes}", field="plaintext")
    return token


def seal(
    session: Session,
    plaintext: bytes | str,
    *,
    direction: str,
    conversation: str,
    sender: str,
    seq: int,
    message_id: str | None = None,
    sent_at_ms: int | None = None,
    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
) -> str:
    """Encrypt one message under the session key (JWE Compact, ``dir`` + A256GCM).

    Args:
        session: the connection's session.
        plaintext: the message (text is encoded as UTF-8).
        direction: "c2r" on the client, "r2c" on the relay.
        conversation: conversation id; sender: the sender's username (1-64 of ``[A-Za-z0-9._-]``).
        seq: this direction's next sequence number in this session (1, 2, ...).
        message_id: base64url of 16 bytes; the relay passes the sender's on when it re-encrypts.
            Default: 16 fresh random bytes.
        sent_at_ms: Unix time in ms; default now. The relay passes the sender's on.
        max_bytes: limit on the token in bytes (default 256 KiB).

    Returns:
        The token, ASCII: 4/3 * len(plaintext) + about 330 characters.

    Raises:
        EnvelopeTooLarge; EnvelopeMalformed (bad direction, ids, seq or time); Base64Invalid (mid).
    """
    if isinstance(plaintext, str):
        plaintext = plaintext.encode("utf-8")
    return _seal_with(
        session,
        plaintext,
        direction=direction,
        conversation=conversation,
        sender=sender,
        seq=seq,
        message_id=message_id if message_id is not None else b64u_encode(os.urandom(MESSAGE_ID_BYTES)),
        sent_at_ms=sent_at_ms if sent_at_ms is not None else int(time.time() * 1000),
        iv=os.urandom(NONCE_BYTES),
        max_bytes=max_bytes,
    )


def open(  # the module's public verb, used as l3.open(...)
    session: Session,
    token: str | bytes,
    *,
    direction: str,
    after_seq: int | None = None,
    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
) -> Opened:
    """Check and decrypt one L3 message.

    Checks, in order (docs/PROTOCOL.md §6.3): size and 5 parts; header JSON and values (alg dir,
    enc A256GCM, typ e2ee-chat/l3, v 1); empty encrypted key; ``kid`` = this session; the forms
    of dir, mid, cid, snd, seq and ts; nonce and tag lengths; AES-256-GCM with the protected
    header as AAD; then, on the authenticated header, ``dir`` = ``direction`` and
    ``seq`` > ``after_seq``.

    Args:
        session: the connection's session.
        token: the L3 token (``str`` or ASCII ``bytes``).
        direction: the direction expected here: "c2r" on the relay, "r2c" on the client.
        after_seq: the highest ``seq`` already accepted in this direction (None: no check).
        max_bytes: size limit in bytes.

    Returns:
        :class:`Opened` with the plaintext and the authenticated header.

    Raises:
        EnvelopeTooLarge, EnvelopeMalformed, TrailingData, DuplicateMember, Base64Invalid,
        UnsupportedAlgorithm, NonceInvalid, TagInvalid; SessionMismatch; DirectionMismatch;
        Replayed; DecryptionFailed.
    """
    parts = _split(token, max_bytes)
    h = _decode_header(parts[0], _header_decoder, _HEADER_STRINGS)
    if h.alg != ALG or h.enc != ENC:
        raise UnsupportedAlgorithm(f"alg/enc must be {ALG}/{ENC}", field="alg")
    if h.typ != TYP or h.v != VERSION:
        raise UnsupportedAlgorithm(f"typ/v must be {TYP}/{VERSION}", field="typ")
    if parts[1]:
        raise EnvelopeMalformed("with alg 'dir' the encrypted key part is empty", field="encrypted_key")
    # compare bytes: compare_digest raises TypeError for str with non-ASCII characters
    if not digests.equal(h.kid.encode("utf-8", "surrogatepass"), session.id.encode("ascii")):
        raise SessionMismatch("the envelope belongs to another session", field="kid")
    if h.dir not in DIRECTIONS:
        raise EnvelopeMalformed("dir must be 'c2r' or 'r2c'", field="dir")
    if len(b64u_decode(h.mid, "mid")) != MESSAGE_ID_BYTES:
        raise EnvelopeMalformed("mid: must encode 16 bytes", field="mid")
    check_id(h.cid, "cid")
    check_id(h.snd, "snd")
    if not 1 <= h.seq <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("seq must be in 1..2**53-1", field="seq")
    if not 0 <= h.ts <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("ts must be in 0..2**53-1", field="ts")
    iv, ciphertext, tag = _iv_ct_tag(parts)
    try:
        plaintext = session._aead.decrypt(iv, ciphertext + tag, parts[0])
    except InvalidTag:
        raise DecryptionFailed("AES-GCM authentication failed", field="ciphertext") from None
    # The header is authentic from here on: a wrong direction or an old seq was sent as such.
    if h.dir != direction:
        raise DirectionMismatch(f"expected dir {direction!r}, got {h.dir!r} (reflected?)", field="dir")
    if after_seq is not None and h.seq <= after_seq:
        raise Replayed(f"seq {h.seq} is not above {after_seq}", field="seq")
    return Opened(plaintext, h)
