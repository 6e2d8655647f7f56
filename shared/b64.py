"""Strict unpadded base64url (RFC 4648 §5, as used by JOSE: RFC 7515 §2).

Decoding refuses padding, the standard alphabet's ``+`` and ``/``, any other character and
non-canonical encodings (non-zero unused bits in the last character), so that one byte string has
exactly one accepted text form.
"""

from __future__ import annotations

import base64
import binascii

from .errors import Base64Invalid

_STD = str.maketrans("-_", "+/")
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}


def b64u_encode(data: bytes) -> str:
    """Encode ``data`` as unpadded base64url text (length ceil(4*len/3))."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(text: str, field: str = "value") -> bytes:
    """Decode canonical unpadded base64url ``text``.

    Raises:
        Base64Invalid: padding, a character outside ``[A-Za-z0-9_-]``, an impossible length
            (``len % 4 == 1``) or non-zero trailing bits; ``field`` names the field.
    """
    if not isinstance(text, str):
        raise Base64Invalid(f"{field}: expected a base64url string", field=field)
    n = len(text)
    if n % 4 == 1 or "=" in text or "+" in text or "/" in text:
        raise Base64Invalid(f"{field}: not unpadded base64url", field=field)
    if n % 4:
        last = _INDEX.get(text[-1])
        mask = 0x0F if n % 4 == 2 else 0x03
        if last is None or last & mask:
            raise Base64Invalid(f"{field}: non-canonical base64url", field=field)
    try:
        return binascii.a2b_base64(text.translate(_STD) + "=" * (-n % 4), strict_mode=True)
    except (binascii.Error, ValueError):
        raise Base64Invalid(f"{field}: not unpadded base64url", field=field) from None
