"""The content document: what an L4 envelope's ciphertext carries (docs/PROTOCOL.md §13).

A message's plaintext is one small JSON object, tagged by ``t``, padded to a size bucket, so the
relay (which sees only the ciphertext's length) cannot tell a reaction or an edit from a text::

    {"body":"hi","ctr":7,"t":"text","ts":1764628800000}␠␠␠…  (spaces up to the bucket)

Every document carries ``ts`` (sender's clock, Unix ms, 0..2**53-1), ``ctr`` (the sender's
counter in the conversation, 1..2**53-1; they moved here from the readable header in envelope v3)
and optionally ``exp`` (expires-at, Unix ms, 1..2**53-1; absent or 0 = never) and ``kth`` (the
newest key transparency head the sender verified, :class:`KtHead`: gossip, PROTOCOL.md §14.5). The kinds
(``t``; ``ref`` is a message id: canonical base64url of 16 bytes, 22 characters, as ``mid``):

========== ===================================== ==========================================
``t``      members                                meaning
========== ===================================== ==========================================
text       body                                   a message
reply      body, ref                              a message quoting message ``ref``
edit       body, ref                              new text for my message ``ref``
delete     ref                                    delete my message ``ref`` everywhere
react      ref, emoji, on (bool)                  add (``on`` true) or remove a reaction
read       ref, upto                              I read up to ``ref`` (relay ``seq`` ``upto``)
attachment att (:class:`AttachmentRef`), body      a file; ``body`` its caption (may be "")
expire     seconds                                the conversation's disappearing timer (0 = off)
title      title                                  the conversation's new title
========== ===================================== ==========================================

Limits: ``body`` UTF-8 text (non-empty except a caption), bounded by the document limit
(:data:`MAX_CONTENT_BYTES`, 64 KiB padded); ``emoji`` 1-16 code points, at most 64 UTF-8 bytes, no
whitespace or control characters; ``title`` 1-200 characters, no control characters; ``seconds``
0..:data:`MAX_EXPIRE_SECONDS`; ``upto`` 0..2**53-1.

Encoding (:func:`encode`): canonical JSON (members sorted by name, no whitespace, ``exp`` omitted
when 0, strings escaped as ECMAScript's ``JSON.stringify`` does) followed by ASCII spaces (0x20) up
to the bucket of its length (:func:`bucket`). JSON allows whitespace after a value (RFC 8259 §2),
so any JSON parser reads a padded document as it is (checked: msgspec, Python's ``json``, Node's
and Chromium's ``JSON.parse``). Decoding (:func:`decode`) drops trailing spaces and parses strictly:
no unknown or repeated members, exact types, every limit above. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal

import msgspec

from .attachment import MAX_CHUNK, MIN_CHUNK
from .b64 import b64u_decode
from .errors import Base64Invalid, ContentInvalid, ContentTooLarge, E2EEError, TreeHeadInvalid
from .kt import TreeHead
from .strictjson import MAX_SAFE_INTEGER, check_kid

__all__ = [
    "MEDIA_TYPE",
    "MAX_CONTENT_BYTES",
    "MIN_BUCKET",
    "MAX_EXPIRE_SECONDS",
    "MAX_EMOJI_CHARS",
    "MAX_EMOJI_BYTES",
    "MESSAGE_ID_CHARS",
    "MAX_TITLE_CHARS",
    "MAX_NAME_CHARS",
    "SCHEMES",
    "DEFAULT_SCHEME",
    "Scheme",
    "KtHead",
    "Document",
    "Text",
    "Reply",
    "Edit",
    "Delete",
    "React",
    "Read",
    "AttachmentRef",
    "Attachment",
    "Expire",
    "Title",
    "Content",
    "bucket",
    "check",
    "canonical",
    "encode",
    "decode",
]

MEDIA_TYPE: Final = "application/e2ee-chat+json"
"""The envelope's ``cty`` for a content document (envelope v3)."""
MAX_CONTENT_BYTES: Final = 64 * 1024
"""Largest padded document, in bytes (a bucket of both schemes, so padding never passes it)."""
MIN_BUCKET: Final = 256
"""Every document is padded to at least this many bytes (both schemes)."""
MAX_EXPIRE_SECONDS: Final = 366 * 24 * 3600
MAX_EMOJI_CHARS: Final = 16
MAX_EMOJI_BYTES: Final = 64
MAX_TITLE_CHARS: Final = 200
MAX_NAME_CHARS: Final = 255
MESSAGE_ID_CHARS: Final = 22  # base64url of 16 bytes

Scheme = Literal["padme", "pow2"]
SCHEMES: Final[tuple[Scheme, ...]] = ("padme", "pow2")
DEFAULT_SCHEME: Final[Scheme] = "padme"
"""Padmé: at the bench's payloads it adds 107 / 15 / 463 bytes to a 100 B / 1 KB / 10 KB text where
powers of two add 107 / 975 / 6,095 (``e2ee-bench padding``; docs/PROTOCOL.md §13.2)."""

_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")
_BLOB_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")  # opaque: never "." or "..", never a path segment of its own
_EMOJI_BAD_RE = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
_MEDIA_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}")
_PATH_RE = re.compile(r"`\$((?:\.[A-Za-z0-9_]+)*)`")
_NAMED_RE = re.compile(r"field `([A-Za-z0-9_]+)`")


class KtHead(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A signed key transparency tree head (``shared.kt.TreeHead``'s JSON: ``tree_size``,
    ``root_hash`` b64url 32 bytes, ``timestamp`` ms, ``signature`` b64url 64 bytes) that the sender
    verified, carried inside the ciphertext so the relay can neither read nor strip it (gossip)."""

    tree_size: int
    root_hash: str
    timestamp: int
    signature: str

    @classmethod
    def of(cls, head: TreeHead) -> KtHead:
        """The member for ``head``."""
        doc = head.to_json()
        return cls(doc["tree_size"], doc["root_hash"], doc["timestamp"], doc["signature"])

    def head(self) -> TreeHead:
        """The signed head it carries (its signature is the receiver's to check).

        Raises:
            TreeHeadInvalid: malformed.
        """
        return TreeHead.from_json(msgspec.structs.asdict(self))


class Document(
    msgspec.Struct, tag_field="t", forbid_unknown_fields=True, frozen=True, kw_only=True, omit_defaults=True
):
    """What every content document carries. ``ts``: sent-at, Unix ms (sender's clock),
    0..2**53-1. ``ctr``: per-sender-per-conversation counter, 1..2**53-1. ``exp``: expires-at,
    Unix ms, 0 = never (omitted from the JSON when 0)."""

    ts: int
    ctr: int
    exp: int = 0
    kth: KtHead | None = None  # omitted from the JSON when None

    @property
    def kind(self) -> str:
        """The document's ``t`` (``"text"``, ``"react"`` ...)."""
        return str(self.__struct_config__.tag)


class Text(Document, tag="text", frozen=True):
    """A message: ``body`` non-empty UTF-8 text."""

    body: str


class Reply(Document, tag="reply", frozen=True):
    """A message quoting message ``ref`` (a ``mid``, 22 chars)."""

    body: str
    ref: str


class Edit(Document, tag="edit", frozen=True):
    """New ``body`` for the sender's own message ``ref`` (receivers check the sender)."""

    body: str
    ref: str


class Delete(Document, tag="delete", frozen=True):
    """Delete the sender's own message ``ref`` on every device (receivers check the sender)."""

    ref: str


class React(Document, tag="react", frozen=True):
    """Reaction ``emoji`` (1-16 code points, ≤ 64 bytes) to message ``ref``: added when ``on``,
    removed when not."""

    ref: str
    emoji: str
    on: bool


class Read(Document, tag="read", frozen=True):
    """A read receipt: the reader saw everything up to message ``ref``, whose relay ``seq`` is
    ``upto`` (0..2**53-1): every message of the conversation at or below that seq is read."""

    ref: str
    upto: int


class AttachmentRef(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """How to fetch and open a file (docs/PROTOCOL.md §13.3).

    Attributes:
        id: the relay's blob id (1-64 of ``[A-Za-z0-9._-]``).
        key: the 32-byte file key, base64url (43 chars).
        name: file name, display only (1-255 characters; no control characters, ``/`` or ``\\``;
            not ``.`` or ``..``).
        type: media type ``type/subtype`` (RFC 6838 characters, each part 1-63).
        size: plaintext bytes, 0..2**53-1.
        sha256: SHA-256 over the whole encrypted blob, base64url (43 chars).
        chunk: plaintext bytes per chunk, ``shared.attachment.MIN_CHUNK``..``MAX_CHUNK`` (1 KiB..4 MiB).
    """

    id: str
    key: str
    name: str
    type: str
    size: int
    sha256: str
    chunk: int


class Attachment(Document, tag="attachment", frozen=True):
    """A file (:class:`AttachmentRef`) with a caption ``body`` (may be empty)."""

    att: AttachmentRef
    body: str


class Expire(Document, tag="expire", frozen=True):
    """The conversation's disappearing-message timer: ``seconds`` (0 = off, at most 366 days)."""

    seconds: int


class Title(Document, tag="title", frozen=True):
    """The conversation's new ``title`` (1-200 characters, no control characters)."""

    title: str


Content = Text | Reply | Edit | Delete | React | Read | Attachment | Expire | Title
"""Any content document (a tagged union on ``t``)."""

_decoder = msgspec.json.Decoder(Content)
_encoder = msgspec.json.Encoder(order="sorted")


def bucket(length: int, scheme: Scheme = DEFAULT_SCHEME) -> int:
    """The padded size, in bytes, of a document of ``length`` bytes.

    ``"pow2"``: the smallest power of two ≥ ``length`` and ≥ :data:`MIN_BUCKET` (256, 512, 1024 ...;
    overhead < 100 %). ``"padme"``: Padmé (Nikitin et al., "Reducing Metadata Leakage from
    Encrypted Files and Communication with PURBs", PETS 2019, §4): with ``E = floor(log2 L)`` and
    ``S = floor(log2 E) + 1``, round ``L`` up to a multiple of ``2 ** (E - S)``; at least 256
    (overhead < 6.25 % above 256 B, ≤ 12 % in general; it leaks O(log log L) bits, as powers of two do).

    Raises:
        ValueError: ``length`` is negative or ``scheme`` unknown.
    """
    if length < 0:
        raise ValueError("length must be ≥ 0")
    if scheme not in SCHEMES:
        raise ValueError(f"unknown padding scheme {scheme!r}; one of {SCHEMES}")
    if length <= MIN_BUCKET:
        return MIN_BUCKET
    if scheme == "pow2":
        return 1 << (length - 1).bit_length()
    e = length.bit_length() - 1
    mask = (1 << (e - e.bit_length())) - 1
    return (length + mask) & ~mask


def _bad(message: str, field: str) -> ContentInvalid:
    return ContentInvalid(f"{field}: {message}", field=field)


def _int(value: int, low: int, field: str) -> None:
    if not low <= value <= MAX_SAFE_INTEGER:
        raise _bad(f"must be in {low}..2**53-1", field)


def _b64(value: str, size: int, field: str) -> None:
    try:
        if len(b64u_decode(value, field)) != size:
            raise _bad(f"must encode {size} bytes", field)
    except Base64Invalid as exc:
        raise _bad(exc.message.split(": ", 1)[-1], field) from None


def _text(value: str, field: str, *, empty: bool = False) -> None:
    if not value and not empty:
        raise _bad("must not be empty", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad("is not valid Unicode (a lone surrogate)", field) from None


def _check_att(att: AttachmentRef) -> None:
    if not _BLOB_ID_RE.fullmatch(att.id):
        raise _bad("1-64 characters from A-Z a-z 0-9 _ - (the relay's opaque blob id)", "att.id")
    try:
        check_kid(att.sha256, "att.sha256")
    except E2EEError as exc:
        raise _bad(exc.message.split(": ", 1)[-1], exc.field or "att") from None
    _b64(att.key, 32, "att.key")
    if not 1 <= len(att.name) <= MAX_NAME_CHARS or _CONTROL_RE.search(att.name) or att.name in (".", ".."):
        raise _bad(f"1-{MAX_NAME_CHARS} characters, no control characters, not . or ..", "att.name")
    if "/" in att.name or "\\" in att.name:
        raise _bad("a file name, not a path (no / or \\)", "att.name")
    _text(att.name, "att.name")
    if not _MEDIA_TYPE_RE.fullmatch(att.type):
        raise _bad("must be a media type type/subtype (RFC 6838)", "att.type")
    _int(att.size, 0, "att.size")
    if not MIN_CHUNK <= att.chunk <= MAX_CHUNK:
        raise _bad(f"must be in {MIN_CHUNK}..{MAX_CHUNK}", "att.chunk")


def check(doc: Content) -> Content:
    """Check every limit of the module docstring on a document built in code or decoded.

    Returns:
        ``doc`` itself.

    Raises:
        ContentInvalid: a member out of its range or form; ``field`` names it (``"ref"``,
            ``"att.key"`` ...).
    """
    if not isinstance(doc, Document) or isinstance(doc, type):
        raise ContentInvalid("not a content document", field="t")
    _int(doc.ts, 0, "ts")
    _int(doc.ctr, 1, "ctr")
    _int(doc.exp, 0, "exp")
    if doc.kth is not None:
        try:
            doc.kth.head()
        except TreeHeadInvalid as exc:
            raise _bad(exc.message, f"kth.{exc.field}") from None
    ref = getattr(doc, "ref", None)
    if ref is not None:
        if len(ref) != MESSAGE_ID_CHARS:
            raise _bad("a message id is 22 base64url characters (16 bytes)", "ref")
        _b64(ref, 16, "ref")
    if isinstance(doc, Text | Reply | Edit):
        _text(doc.body, "body")
    elif isinstance(doc, Attachment):
        _text(doc.body, "body", empty=True)
        _check_att(doc.att)
    elif isinstance(doc, React):
        if not 1 <= len(doc.emoji) <= MAX_EMOJI_CHARS or len(doc.emoji.encode("utf-8", "surrogatepass")) > 64:
            raise _bad(f"1-{MAX_EMOJI_CHARS} code points, at most {MAX_EMOJI_BYTES} bytes", "emoji")
        if _EMOJI_BAD_RE.search(doc.emoji):
            raise _bad("no whitespace or control characters", "emoji")
        _text(doc.emoji, "emoji")
    elif isinstance(doc, Read):
        _int(doc.upto, 0, "upto")
    elif isinstance(doc, Expire):
        if not 0 <= doc.seconds <= MAX_EXPIRE_SECONDS:
            raise _bad(f"must be in 0..{MAX_EXPIRE_SECONDS}", "seconds")
    elif isinstance(doc, Title):
        if not 1 <= len(doc.title) <= MAX_TITLE_CHARS or _CONTROL_RE.search(doc.title):
            raise _bad(f"1-{MAX_TITLE_CHARS} characters, no control characters", "title")
        _text(doc.title, "title")
    return doc


def canonical(doc: Content) -> bytes:
    """The document's canonical JSON (members sorted, no whitespace), unpadded; checked first.

    Raises:
        ContentInvalid: as :func:`check`.
    """
    return _encoder.encode(check(doc))


def encode(doc: Content, scheme: Scheme = DEFAULT_SCHEME) -> bytes:
    """The plaintext to seal: canonical JSON followed by spaces up to ``bucket(len, scheme)``.

    Args:
        doc: a content document.
        scheme: ``"padme"`` or ``"pow2"`` (see :func:`bucket`).

    Returns:
        UTF-8 bytes, 256..65,536 long, a size of the scheme's buckets.

    Raises:
        ContentInvalid: as :func:`check`.
        ContentTooLarge: the canonical JSON is over :data:`MAX_CONTENT_BYTES` (``field`` ``body``
            for a document with a body, else ``content``).
    """
    data = canonical(doc)
    if len(data) > MAX_CONTENT_BYTES:
        field = "body" if hasattr(doc, "body") else "content"
        raise ContentTooLarge(f"content is {len(data)} bytes; limit {MAX_CONTENT_BYTES}", field=field)
    return data + b" " * (bucket(len(data), scheme) - len(data))


def decode(data: bytes) -> Content:
    """Strip the padding (trailing spaces) of a decrypted plaintext and parse it strictly.

    Any bucket is accepted (the receiver does not care which scheme the sender used).

    Args:
        data: the plaintext, at most :data:`MAX_CONTENT_BYTES`.

    Returns:
        the document (:data:`Content`), checked as by :func:`check`.

    Raises:
        ContentTooLarge: over :data:`MAX_CONTENT_BYTES` (checked first).
        ContentInvalid: not UTF-8 JSON of one of the kinds: bytes other than spaces after the
            JSON value, a missing, unknown or repeated member, a wrong type (``field`` names the
            member, e.g. ``"t"``, ``"att.size"``; ``"content"`` for a syntax error), or a
            member out of its limits.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ContentInvalid("content must be bytes", field="content")
    data = bytes(data)
    if len(data) > MAX_CONTENT_BYTES:
        raise ContentTooLarge(f"content is {len(data)} bytes; limit {MAX_CONTENT_BYTES}", field="content")
    text = data.rstrip(b" ")
    if not (text.startswith(b"{") and text.endswith(b"}")):
        raise ContentInvalid("content must be one JSON object followed only by spaces", field="content")
    try:
        doc = _decoder.decode(text)
    except msgspec.ValidationError as exc:
        raise _shape_error(str(exc)) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise ContentInvalid(f"content is not a JSON document: {exc}", field="content") from None
    if b"\\" in text or text.count(b'"') != 2 * _strings(doc):
        _reject_repeats(text)
    return check(doc)


def _shape_error(message: str) -> ContentInvalid:
    """A msgspec validation message (``Expected `int`, got `str` - at `$.att.size```) as an error
    naming the member."""
    path = _PATH_RE.search(message)
    parts = [p for p in (path.group(1) if path else "").split(".") if p]
    named = _NAMED_RE.search(message)  # "missing required field `body`", "unknown field `x`"
    if named:
        parts.append(named.group(1))
    field = ".".join(parts) or "content"
    return ContentInvalid(f"content: {message}", field=field)


def _strings(obj: msgspec.Struct) -> int:
    """How many JSON strings (member names and string values) the canonical form of ``obj`` has."""
    count = 2 if obj.__struct_config__.tag is not None else 0
    for name in obj.__struct_fields__:
        value = getattr(obj, name)
        if name == "exp" and value == 0:
            continue
        count += 1 + (1 if isinstance(value, str) else _strings(value) if isinstance(value, msgspec.Struct) else 0)
    return count


def _reject_repeats(text: bytes) -> None:
    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for name, value in pairs:
            if name in out:
                raise ContentInvalid(f"member {name[:32]!r} appears twice", field=name[:32])
            out[name] = value
        return out

    try:
        json.loads(text, object_pairs_hook=unique)
    except (ValueError, RecursionError):
        raise ContentInvalid("content is not a JSON document", field="content") from None
