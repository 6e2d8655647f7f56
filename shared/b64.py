"""Strict unpadded base64url (RFC 4648 §5, as used by JOSE: RFC 7515 §2).

Decoding refuses padding, the standard alphabet's ``+`` and ``/``, whitespace, any other character
and non-canonical encodings (non-zero unused bits in the last character), so that one byte string
has exactly one accepted text form. Both directions run in pybase64's SIMD C code (15x faster
than ``binascii`` for a 10 KB value here: 2 us against 30 us to decode 13.6 KB).
"""

from __future__ import annotations

import binascii

import pybase64

from .errors import Base64Invalid

__all__ = ["b64u_encode", "b64u_decode"]

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}
# Mask of the unused low bits of the last character, by ``len % 4`` (2 -> 4 bits, 3 -> 2 bits).
_UNUSED_BITS = {2: 0x0F, 3: 0x03}


def b64u_encode(data: bytes) -> str:
    """Encode ``data`` as unpadded base64url text of ``ceil(4 * len(data) / 3)`` characters."""
    return pybase64.b64encode_as_string(data, altchars=b"-_").rstrip("=")


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
    # pybase64 (SIMD) checks the alphabet itself, except "+" and "/" (accepted with altchars,
    # with a deprecation warning) and padding, which this format forbids: refused first.
    if n % 4 == 1 or b"=" in raw or b"+" in raw or b"/" in raw:
        raise Base64Invalid(f"{field}: not unpadded base64url", field=field)
    try:
        data = pybase64.b64decode(raw + b"=" * (-n % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise Base64Invalid(f"{field}: not unpadded base64url", field=field) from None
    mask = _UNUSED_BITS.get(n % 4)
    if mask is not None and _INDEX[raw[-1]] & mask:
        raise Base64Invalid(f"{field}: non-canonical base64url (unused bits set)", field=field)
    return data
