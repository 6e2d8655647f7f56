"""The envelope's form (docs/PROTOCOL.md §5): the format's constants, the protected header, the
JSON shape, :func:`parse` (every check that needs no cryptography), and the two byte strings the
cryptography of :mod:`shared.envelope` runs over: the signing input and the key commitment.

The primitives' parameters (``_OAEP``) and the raw structures are private to the package.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import padding

from ..b64 import b64u_decode
from ..content import MEDIA_TYPE, Content
from ..errors import (
    Base64Invalid,
    DuplicateRecipient,
    EnvelopeMalformed,
    EnvelopeTooLarge,
    NonceInvalid,
    RecipientListInvalid,
    SignatureInvalid,
    TagInvalid,
    TooManyRecipients,
    UnsupportedAlgorithm,
)
from ..strictjson import MAX_SAFE_INTEGER, as_bytes, check_id, check_kid, json_error, reject_duplicate_members

__all__ = [
    "ALG",
    "ENC",
    "TYP",
    "CTY",
    "VERSION",
    "REFUSED_VERSIONS",
    "SIG_CONTEXT",
    "KC_CONTEXT",
    "CEK_BYTES",
    "NONCE_BYTES",
    "TAG_BYTES",
    "MESSAGE_ID_BYTES",
    "SIGNATURE_BYTES",
    "DEFAULT_MAX_ENVELOPE_BYTES",
    "DEFAULT_MAX_RECIPIENTS",
    "MAX_SAFE_INTEGER",
    "EXPIRY_GRANULARITY_MS",
    "expiry_hint",
    "Header",
    "ParsedEnvelope",
    "Opened",
    "parse",
    "check",
]

ALG = "RSA-OAEP-256"
ENC = "A256GCM"
TYP = "e2ee-chat/msg"
CTY = MEDIA_TYPE
"""``application/e2ee-chat+json``: the plaintext is a padded content document (``shared.content``)."""
VERSION = 3
REFUSED_VERSIONS = (1, 2)
"""Earlier versions, refused with ``unsupported_algorithm`` (v2: ``ts``/``ctr`` readable, text plaintext)."""
SIG_CONTEXT = b"e2ee-chat/v3/sig"
KC_CONTEXT = b"e2ee-chat/v3/key-commitment"
EXPIRY_GRANULARITY_MS = 3_600_000
"""``xp`` is the content's ``exp`` rounded up to a whole hour (Unix ms), so the relay learns an hour."""

CEK_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
MESSAGE_ID_BYTES = 16
SIGNATURE_BYTES = 64

DEFAULT_MAX_ENVELOPE_BYTES = 256 * 1024
"""Default limit on a serialized envelope, in bytes (the relay announces its own in ``hello``)."""
DEFAULT_MAX_RECIPIENTS = 256
"""Default limit on the number of recipients."""


_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


class Header(msgspec.Struct, forbid_unknown_fields=True):
    """The protected header (JSON object; all members required, no others allowed).

    Attributes:
        alg: "RSA-OAEP-256".  enc: "A256GCM".  typ: "e2ee-chat/msg".
        cty: "application/e2ee-chat+json" (the plaintext is a padded content document).
        v: format version (3).
        mid: message id, base64url of 16 random bytes (22 chars).
        cid: conversation id (1-64 of ``[A-Za-z0-9._-]``).
        snd: sender username (1-64 of ``[A-Za-z0-9._-]``).
        skid: key id of the sender's Ed25519 signing key.
        xp: expiry hint for the relay: the content's ``exp`` rounded up to the hour (Unix ms, a
            multiple of 3,600,000), 0 = never. (``ts`` and ``ctr`` are inside the content from v3.)
        ep: the membership epoch sealed to, 0..2**53-1.
        mh: the hash of that epoch's membership statement (b64url, 43 chars).
        kc: key commitment, b64url HMAC-SHA-256(CEK, KC_CONTEXT) (43 chars).
        rkids: the recipients' wrap key ids, in the order of ``recipients`` (= the epoch's members).
    """

    alg: str
    enc: str
    typ: str
    cty: str
    v: int
    mid: str
    cid: str
    snd: str
    skid: str
    xp: int
    ep: int
    mh: str
    kc: str
    rkids: list[str]


class _RecipientHeader(msgspec.Struct, forbid_unknown_fields=True):
    kid: str


class _Recipient(msgspec.Struct, forbid_unknown_fields=True):
    header: _RecipientHeader
    encrypted_key: str


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    protected: str
    recipients: list[_Recipient]
    iv: str
    ciphertext: str
    tag: str
    sig: str


@dataclass(frozen=True)
class _Binary:
    """The decoded base64url members of a parsed envelope (decoded once, in :func:`parse`)."""

    iv: bytes
    ciphertext: bytes
    tag: bytes
    sig: bytes
    wrapped: tuple[bytes, ...]


_envelope_decoder = msgspec.json.Decoder(_Envelope)
_header_decoder = msgspec.json.Decoder(Header)
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class ParsedEnvelope:
    """An envelope whose shape, sizes and encodings were checked; nothing was decrypted.

    Attributes:
        header: the decoded protected header.
        raw: the envelope as received (bytes).
        message_id: ``header.mid`` decoded (16 bytes).
    """

    header: Header
    raw: bytes
    message_id: bytes
    _env: _Envelope
    _bin: _Binary

    @property
    def recipient_kids(self) -> list[str]:
        """Recipient wrap key ids in envelope order (equal to ``header.rkids``)."""
        return self.header.rkids


@dataclass(frozen=True)
class Opened:
    """Result of :func:`open`.

    Attributes:
        content: the decoded content document (``shared.content``: its kind, ``ts``, ``ctr``, ``exp``).
        header: the verified protected header (sender, conversation, ids, epoch, expiry hint).
        plaintext: the decrypted bytes as sealed (canonical JSON and its padding; its length is the
            bucket the relay saw).
    """

    content: Content
    header: Header
    plaintext: bytes

    @property
    def text(self) -> str:
        """The document's ``body`` (text, reply, edit, attachment caption), or "" for a kind without one."""
        body = getattr(self.content, "body", "")
        return body if isinstance(body, str) else ""

    @property
    def ts(self) -> int:
        """Sent-at, Unix ms, sender's clock (the content's ``ts``)."""
        return self.content.ts

    @property
    def ctr(self) -> int:
        """The sender's counter in the conversation (the content's ``ctr``)."""
        return self.content.ctr


def expiry_hint(exp: int) -> int:
    """The header's ``xp`` for a content ``exp`` (Unix ms; 0 = never): rounded up to the next whole
    hour (a multiple of :data:`EXPIRY_GRANULARITY_MS`), 0 for 0."""
    return -(-exp // EXPIRY_GRANULARITY_MS) * EXPIRY_GRANULARITY_MS


def parse(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
    max_recipients: int = DEFAULT_MAX_RECIPIENTS,
) -> ParsedEnvelope:
    """Check an envelope's size, shape and encodings without any cryptography.

    Used by the relay on every send and by :func:`open` before any crypto runs. The checks run in
    the order of docs/PROTOCOL.md §5.7 (steps 1-17); the first failure is raised.

    Args:
        data: the serialized envelope (UTF-8 JSON bytes; ``str`` is encoded as UTF-8).
        max_bytes: size limit in bytes, checked first (default 256 KiB).
        max_recipients: limit on ``recipients`` (default 256).

    Returns:
        A :class:`ParsedEnvelope` (header decoded, base64url members decoded once).

    Raises:
        EnvelopeTooLarge: more than ``max_bytes``.
        TrailingData: bytes after the JSON object (of the envelope or of the header).
        DuplicateMember: a JSON member name repeated.
        EnvelopeMalformed: not the documented JSON shape; bad ``mid``/``cid``/``snd``/``skid``/
            ``xp``/``ep``/``mh``/``kc``.
        TooManyRecipients: more than ``max_recipients`` entries.
        UnsupportedAlgorithm: ``alg``/``enc``/``typ``/``v``/``cty`` not the v3 values (a v1 or v2
            envelope: ``field`` ``v``, checked before the header's shape).
        DuplicateRecipient: a key id twice.  RecipientListInvalid: entries differ from ``rkids``.
        Base64Invalid: a member is not canonical unpadded base64url.
        NonceInvalid: ``iv`` is not 12 bytes.  TagInvalid: ``tag`` is not 16 bytes.
        SignatureInvalid: ``sig`` is not 64 bytes.
    """
    data, env, header, mid, iv, tag, sig = _form(data, max_bytes, max_recipients)
    ciphertext = b64u_decode(env.ciphertext, "ciphertext")
    wrapped = tuple(b64u_decode(r.encrypted_key, "encrypted_key") for r in env.recipients)
    return ParsedEnvelope(header, data, mid, env, _Binary(iv, ciphertext, tag, sig, wrapped))


def check(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
    max_recipients: int = DEFAULT_MAX_RECIPIENTS,
) -> Header:
    """What the relay checks of an envelope before it stores it: :func:`parse` without decoding
    ``ciphertext`` and the ``encrypted_key`` values, which only recipients read (docs/PROTOCOL.md
    §5.7: steps 1-16 and the ``sig`` part of step 17; of the rest only the lengths: a length
    base64url can have). The relay stores the bytes it was given, so a ciphertext or wrapped key
    that is not canonical base64url is refused by its recipients' :func:`parse` (``base64_invalid``),
    and it is covered by the sender's signature: only the sender can have made it so.

    Args:
        data: the serialized envelope (UTF-8 JSON bytes; ``str`` is encoded as UTF-8).
        max_bytes: size limit in bytes, checked first.
        max_recipients: limit on ``recipients``.

    Returns:
        the protected header (not authenticated: the relay holds no keys).

    Raises:
        the errors of :func:`parse`, in its order; Base64Invalid for a ``ciphertext`` or
        ``encrypted_key`` of a length no base64url text has (``len % 4 == 1``).
    """
    _data, env, header, *_ = _form(data, max_bytes, max_recipients)
    if len(env.ciphertext) % 4 == 1:
        raise Base64Invalid("ciphertext: not unpadded base64url", field="ciphertext")
    for r in env.recipients:
        if len(r.encrypted_key) % 4 == 1:
            raise Base64Invalid("encrypted_key: not unpadded base64url", field="encrypted_key")
    return header


def _form(
    data: bytes, max_bytes: int, max_recipients: int
) -> tuple[bytes, _Envelope, Header, bytes, bytes, bytes, bytes]:
    """Steps 1-16 of §5.7 and ``sig`` of step 17: ``(data, env, header, mid, iv, tag, sig)``."""
    data = as_bytes(data)
    if len(data) > max_bytes:
        raise EnvelopeTooLarge(f"envelope is {len(data)} bytes; limit {max_bytes}", field="envelope")
    try:
        env = _envelope_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise json_error(data, exc, "envelope", "envelope") from None
    reject_duplicate_members(data, 11 + 5 * len(env.recipients), "envelope", "envelope")
    if not env.recipients:
        raise RecipientListInvalid("envelope has no recipients", field="recipients")
    if len(env.recipients) > max_recipients:
        raise TooManyRecipients(f"{len(env.recipients)} recipients; limit {max_recipients}", field="recipients")
    header_json = b64u_decode(env.protected, "protected")
    try:
        header = _header_decoder.decode(header_json)
    except (msgspec.DecodeError, RecursionError) as exc:
        _refuse_old_version(header_json)
        raise json_error(header_json, exc, "protected", "protected header") from None
    reject_duplicate_members(header_json, 24 + len(header.rkids), "protected", "protected header")
    if header.alg != ALG or header.enc != ENC:
        raise UnsupportedAlgorithm(f"alg/enc must be {ALG}/{ENC}", field="alg")
    if header.typ != TYP or header.v != VERSION:
        raise UnsupportedAlgorithm(f"typ/v must be {TYP}/{VERSION}", field="v")
    if header.cty != CTY:
        raise UnsupportedAlgorithm(f"cty must be {CTY}", field="cty")
    mid = b64u_decode(header.mid, "mid")
    if len(mid) != MESSAGE_ID_BYTES:
        raise EnvelopeMalformed("mid: must encode 16 bytes", field="mid")
    check_id(header.cid, "cid")
    check_id(header.snd, "snd")
    check_kid(header.skid, "skid")
    if not 0 <= header.xp <= MAX_SAFE_INTEGER or header.xp % EXPIRY_GRANULARITY_MS:
        raise EnvelopeMalformed("xp must be 0 or a whole hour in ms (a multiple of 3600000) ≤ 2**53-1", field="xp")
    if not 0 <= header.ep <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("ep must be in 0..2**53-1", field="ep")
    check_kid(header.mh, "mh")
    check_kid(header.kc, "kc")
    kids = [r.header.kid for r in env.recipients]
    if len(set(kids)) != len(kids) or len(set(header.rkids)) != len(header.rkids):
        raise DuplicateRecipient("a recipient key id appears twice", field="recipients")
    if kids != header.rkids:
        raise RecipientListInvalid("recipient key ids differ from the protected rkids", field="recipients")
    for kid in kids:
        check_kid(kid, "kid")
    iv = b64u_decode(env.iv, "iv")
    if len(iv) != NONCE_BYTES:
        raise NonceInvalid(f"iv is {len(iv)} bytes; must be {NONCE_BYTES}", field="iv")
    tag = b64u_decode(env.tag, "tag")
    if len(tag) != TAG_BYTES:
        raise TagInvalid(f"tag is {len(tag)} bytes; must be {TAG_BYTES}", field="tag")
    sig = b64u_decode(env.sig, "sig")
    if len(sig) != SIGNATURE_BYTES:
        raise SignatureInvalid(f"sig is {len(sig)} bytes; must be {SIGNATURE_BYTES}", field="sig")
    return data, env, header, mid, iv, tag, sig


_version_decoder = msgspec.json.Decoder(dict[str, object])


def _refuse_old_version(header_json: bytes) -> None:
    """A header that is not of v3's shape but names an earlier ``v`` is refused as that version
    (``unsupported_algorithm``, field ``v``), not as malformed: v1/v2 carry ``ts``/``ctr``."""
    try:
        version = _version_decoder.decode(header_json).get("v")
    except (msgspec.DecodeError, RecursionError):
        return
    if type(version) is int and version in REFUSED_VERSIONS:
        raise UnsupportedAlgorithm(f"envelope version {version} is no longer accepted; v{VERSION} only", field="v")


def _commitment(cek: bytes) -> hmac.HMAC:
    mac = hmac.HMAC(cek, hashes.SHA256())
    mac.update(KC_CONTEXT)
    return mac


_SIG_PREFIX = SIG_CONTEXT.decode() + "."


def _signing_bytes(protected: str, keys: str, iv: str, ciphertext: str, tag: str) -> bytes:
    """§5.5's signing input from the transmitted base64url texts (``keys``: the ``encrypted_key``
    values joined by commas)."""
    return (_SIG_PREFIX + ".".join((protected, keys, iv, ciphertext, tag))).encode()


def _signing_input(env: _Envelope) -> bytes:
    return _signing_bytes(
        env.protected, ",".join(r.encrypted_key for r in env.recipients), env.iv, env.ciphertext, env.tag
    )


def _compact(protected: str, kids: list[str], keys: list[str], iv: str, ciphertext: str, tag: str, sig: str) -> bytes:
    """The envelope's compact JSON (§5.1), byte for byte what ``_encoder`` writes for the same
    members: every value is base64url text, which JSON never escapes, so the members are placed
    as they are (a seal writes ~2 KB of JSON; this is a third cheaper than encoding a struct)."""
    entries = ",".join(f'{{"header":{{"kid":"{k}"}},"encrypted_key":"{e}"}}' for k, e in zip(kids, keys, strict=True))
    return (
        f'{{"protected":"{protected}","recipients":[{entries}],"iv":"{iv}","ciphertext":"{ciphertext}",'
        f'"tag":"{tag}","sig":"{sig}"}}'
    ).encode()
