"""Input refused before any cryptography runs: malformed, over a limit, or an unacceptable key."""

from __future__ import annotations

from .base import E2EEError
from .codes import ErrorCode

__all__ = [
    "MalformedInput",
    "FrameInvalid",
    "InvalidRequest",
    "UnsupportedMediaType",
    "StatementMalformed",
    "EnvelopeMalformed",
    "Base64Invalid",
    "NonceInvalid",
    "TagInvalid",
    "UnsupportedAlgorithm",
    "TrailingData",
    "DuplicateMember",
    "RecipientListInvalid",
    "DuplicateRecipient",
    "AttachmentMalformed",
    "ContentInvalid",
    "LimitExceeded",
    "EnvelopeTooLarge",
    "TooManyRecipients",
    "BodyTooLarge",
    "BlobTooLarge",
    "QuotaExceeded",
    "ContentTooLarge",
    "KeyInvalid",
    "KeyRefused",
    "KeyTypeRefused",
    "KeySizeRefused",
    "KeyExponentRefused",
]


# -- malformed input (caught before any crypto runs) -----------------------------------------------
class MalformedInput(E2EEError):
    """Input does not have the documented shape (JSON, fields, types, lengths)."""

    code = ErrorCode.MALFORMED


class FrameInvalid(MalformedInput):
    """A websocket or REST frame is not valid JSON of a known frame type."""

    code = ErrorCode.FRAME_INVALID


class InvalidRequest(MalformedInput):
    """A request is well-formed JSON but a value is not acceptable (e.g. a username)."""

    code = ErrorCode.INVALID_REQUEST


class UnsupportedMediaType(MalformedInput):
    """A JSON route was sent a body whose ``Content-Type`` is not ``application/json``."""

    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE
    status = 415


class StatementMalformed(MalformedInput):
    """A membership statement is not of the documented form (encoding, canonical JSON, fields)."""

    code = ErrorCode.STATEMENT_MALFORMED


class EnvelopeMalformed(MalformedInput):
    """An envelope is not a valid e2ee-chat JWE (General JSON Serialization)."""

    code = ErrorCode.ENVELOPE_MALFORMED


class Base64Invalid(EnvelopeMalformed):
    """A field is not canonical unpadded base64url (RFC 4648 §5, RFC 7515 §2)."""

    code = ErrorCode.BASE64_INVALID


class NonceInvalid(EnvelopeMalformed):
    """The AES-GCM nonce (``iv``) is not exactly 12 bytes."""

    code = ErrorCode.NONCE_INVALID


class TagInvalid(EnvelopeMalformed):
    """The AES-GCM authentication tag is not exactly 16 bytes."""

    code = ErrorCode.TAG_INVALID


class UnsupportedAlgorithm(EnvelopeMalformed):
    """``alg``/``enc``/``typ``/``v`` name something this version does not implement."""

    code = ErrorCode.UNSUPPORTED_ALGORITHM


class TrailingData(EnvelopeMalformed):
    """Bytes other than JSON whitespace follow the envelope's (or the header's) JSON value."""

    code = ErrorCode.TRAILING_DATA


class DuplicateMember(EnvelopeMalformed):
    """A JSON object repeats a member name (RFC 7515 §5.2: parsers disagree on which one wins)."""

    code = ErrorCode.DUPLICATE_MEMBER


class RecipientListInvalid(EnvelopeMalformed):
    """Recipient entries do not match the protected ``rkids`` list (order, duplicates, count)."""

    code = ErrorCode.RECIPIENT_LIST_INVALID


class DuplicateRecipient(RecipientListInvalid):
    """The same recipient key id appears twice (in ``rkids`` or in ``recipients``)."""

    code = ErrorCode.RECIPIENT_DUPLICATED


class AttachmentMalformed(MalformedInput):
    """An attachment blob's header (magic, version, chunk size) or a reference's field (key
    length, hash length, size) is not of the documented form (``shared.attachment``)."""

    code = ErrorCode.ATTACHMENT_MALFORMED


class ContentInvalid(MalformedInput):
    """A decrypted content document (``shared.content``) is not of the documented form: not JSON
    of a known kind, a member missing, unknown, repeated, of the wrong type or out of its limits
    (``field`` names it, e.g. ``ref``, ``att.key``). Raised by clients only (the relay never reads
    content)."""

    code = ErrorCode.CONTENT_INVALID


# -- limits ----------------------------------------------------------------------------------------
class LimitExceeded(E2EEError):
    """A documented size or count limit was exceeded."""

    code = ErrorCode.LIMIT_EXCEEDED
    status = 413


class EnvelopeTooLarge(LimitExceeded):
    """The serialized envelope (or its plaintext) is larger than the limit in bytes."""

    code = ErrorCode.ENVELOPE_TOO_LARGE


class TooManyRecipients(LimitExceeded):
    """More recipients than the limit."""

    code = ErrorCode.TOO_MANY_RECIPIENTS


class BodyTooLarge(LimitExceeded):
    """A request body is larger than the route's cap (checked from ``Content-Length`` before
    reading, and while reading a chunked body)."""

    code = ErrorCode.BODY_TOO_LARGE


class BlobTooLarge(BodyTooLarge):
    """An attachment blob is larger than the relay's ``max_blob_bytes`` (refused from its
    ``Content-Length`` before reading, or while it streams in), or a file too large to fit."""

    code = ErrorCode.BLOB_TOO_LARGE


class QuotaExceeded(LimitExceeded):
    """Storing the blob would take the uploader over their ``blob_quota_bytes`` (the blobs they
    have stored on the relay, in bytes)."""

    code = ErrorCode.QUOTA_EXCEEDED


class ContentTooLarge(LimitExceeded):
    """A content document is over ``shared.content.MAX_CONTENT_BYTES`` (64 KiB)."""

    code = ErrorCode.CONTENT_TOO_LARGE


# -- keys ------------------------------------------------------------------------------------------
class KeyInvalid(E2EEError):
    """A public or private key is of the wrong type, too small, or cannot be parsed."""

    code = ErrorCode.KEY_INVALID
    status = 422


class KeyRefused(KeyInvalid):
    """A key that parses but is refused by policy; ``owner`` names whose key it is."""

    code = ErrorCode.KEY_REFUSED

    def __init__(self, message: str, *, field: str | None = None, owner: str = "?") -> None:
        super().__init__(message, field=field)
        self.owner = owner


class KeyTypeRefused(KeyRefused):
    """A key of the wrong type: a wrap key that is not RSA, a signing key that is not Ed25519."""

    code = ErrorCode.KEY_TYPE_REFUSED


class KeySizeRefused(KeyRefused):
    """An RSA wrap key outside 2048..4096 bits."""

    code = ErrorCode.KEY_SIZE_REFUSED


class KeyExponentRefused(KeyRefused):
    """An RSA wrap key whose public exponent is not 65537."""

    code = ErrorCode.KEY_EXPONENT_REFUSED
