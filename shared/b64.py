"""Strict unpadded base64url (RFC 4648 §5, as used by JOSE: RFC 7515 §2).

Decoding refuses padding, the standard alphabet's ``+`` and ``/``, whitespace, any other character
and non-canonical encodings (non-zero unused bits in the last character), so that one byte string
has exactly one accepted text form. Both directions run in C (``bytes.translate`` and ``binascii``):
decoding 64 KiB costs about as much as one AES-GCM pass over it.
"""

from __future__ import annotations

import binascii

from .errors import Base64Invalid

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}
_TO_STD = bytes.maketrans(b"-_", b"+/")
_TO_URL = bytes.maketrans(b"+/", b"-_")
# Mask of the unused low bits of the last character, by ``len % 4`` (2 -> 4 bits, 3 -> 2 bits).
_UNUSED_BITS = {2: 0x0F, 3: 0x03}


def b64u_encode(data: bytes) -> str:
    """Encode ``data`` as unpadded base64url text of ``ceil(4 * len(data) / 3)`` characters."""
    return binascii.b2a_base64(data, newline=False).rstrip(b"=").translate(_TO_URL).decode("ascii")


def b64u_check(text: str | bytes, field: str = "value") -> int:
    """Check that ``text`` is canonical unpadded base64url, without decoding it (the relay
    checks envelopes it never decrypts); the same rules and errors as :func:`b64u_decode`.

    Returns:
        the length in bytes that ``text`` decodes to (``len(text) * 3 // 4``).

    Raises:
        Base64Invalid: as :func:`b64u_decode`.
    """
    return len(_checked(text, field)) * 3 // 4


def b64u_decode(text: str | bytes, field: str = "value") -> bytes:
    """Decode canonical unpadded base64url ``text`` (``len(text) % 4 != 1``; 0 characters = 0 bytes).

    Args:
        text: the encoded value (``str``, or ASCII ``bytes``).
        field: name of the field, used in the error.

    Raises:
        Base64Invalid: not a string; padding (``=``); a character outside ``[A-Za-z0-9_-]``
            (``+``, ``/``, whitespace, non-ASCII ...); an impossible length (``len % 4 == 1``); or
            non-zero unused bits in the last character. ``field`` names the field.
    """
    raw = _checked(text, field)
    try:
        return binascii.a2b_base64(raw.translate(_TO_STD) + b"=" * (-len(raw) % 4), strict_mode=True)
    except binascii.Error:  # unreachable after the checks; kept as a guard
        raise Base64Invalid(f"{field}: not unpadded base64url", field=field) from None


def _checked(text: str | bytes, field: str) -> bytes:
    """``text`` as ASCII bytes once it passed every rule of :func:`b64u_decode`."""
    if isinstance(text, str):
        try:
            raw = text.encode("ascii")
        except UnicodeEncodeError:
            raise Base64Invalid(f"{field}: not unpadded base64url (non-ASCII)", field=field) from None
    elif isinstance(text, bytes):
        raw = text
    else:
        raise Base64Invalid(f"{field}: expected a base64url string", field=field)
    n = len(raw)
    if n % 4 == 1 or raw.translate(None, _ALPHABET):
        raise Base64Invalid(f"{field}: not unpadded base64url", field=field)
    mask = _UNUSED_BITS.get(n % 4)
    if mask is not None and _INDEX[raw[-1]] & mask:
        raise Base64Invalid(f"{field}: non-canonical base64url (unused bits set)", field=field)
    return raw
