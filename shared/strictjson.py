"""Strict decoding shared by the L4 envelope and the L3 envelope (docs/PROTOCOL.md §1).

JSON is decoded by a strict msgspec struct first; these helpers classify what it refused (syntax,
trailing data, a repeated member, the shape, in that order), refuse repeated member names that a
struct decoder would silently accept (RFC 7515 §5.2), and check identifiers and 32-byte ids.
"""

from __future__ import annotations

import json
import re

from .b64 import b64u_decode
from .errors import DuplicateMember, EnvelopeMalformed, TrailingData

__all__ = [
    "MAX_SAFE_INTEGER",
    "MAX_ID_CHARS",
    "KEY_ID_LEN",
    "json_error",
    "reject_duplicate_members",
    "check_id",
    "check_kid",
    "as_bytes",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer a JSON number carries exactly everywhere (RFC 7493 §2.2, JavaScript's
``Number.MAX_SAFE_INTEGER``): the bound of every counter, epoch, timestamp and seq on the wire."""
MAX_ID_CHARS = 64  # conversation ids and usernames in headers
KEY_ID_LEN = 43  # unpadded base64url of 32 bytes (a key id or a hash)
_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_KID_RE = re.compile(r"[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]")  # 43 chars, canonical for 32 bytes
_json_scan = json.JSONDecoder()
_JSON_WS = " \t\n\r"


def json_error(data: bytes, exc: Exception, field: str, what: str) -> EnvelopeMalformed:
    """Classify a failed strict decode, in the documented order: JSON syntax, trailing bytes after
    the value, a repeated member name, then (the struct's complaint) the shape."""
    try:
        text = data.decode("utf-8")
        start = len(text) - len(text.lstrip(_JSON_WS))
        _, end = _json_scan.raw_decode(text, start)
        if text[end:].strip(_JSON_WS):
            return TrailingData(f"{what}: bytes follow the JSON value at offset {end}", field=field)
        json.loads(text, object_pairs_hook=_unique_pairs)
    except _Duplicate as dup:
        return DuplicateMember(f"{what}: member {str(dup)[:32]!r} appears twice", field=field)
    except (ValueError, RecursionError):
        pass
    return EnvelopeMalformed(f"{what} is not valid: {exc}", field=field)


class _Duplicate(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, value in pairs:
        if name in out:
            raise _Duplicate(name)
        out[name] = value
    return out


def reject_duplicate_members(data: bytes, strings: int, field: str, what: str) -> None:
    """Refuse repeated member names (RFC 7515 §5.2 leaves it to the parser which one wins).

    ``data`` already decoded into its strict struct, which holds exactly ``strings`` JSON strings
    (member names and string values). Without escapes no string contains a quote, so the quote
    count tells whether any member was repeated (a C-speed scan); with escapes the slow path parses.
    """
    if b"\\" not in data and data.count(b'"') == 2 * strings:
        return
    try:
        json.loads(data, object_pairs_hook=_unique_pairs)
    except _Duplicate as dup:
        raise DuplicateMember(f"{what}: member {str(dup)[:32]!r} appears twice", field=field) from None
    except (ValueError, RecursionError):
        raise EnvelopeMalformed(f"{what} is not valid JSON", field=field) from None
    if b"\\" not in data:  # unreachable for input the struct accepted; refuse rather than guess
        raise EnvelopeMalformed(f"{what} has unexpected members", field=field)


def check_id(value: str, field: str) -> None:
    if not _ID_RE.fullmatch(value):
        raise EnvelopeMalformed(f"{field}: must be 1-{MAX_ID_CHARS} characters from A-Z a-z 0-9 . _ -", field=field)


def check_kid(kid: str, field: str) -> None:
    if not _KID_RE.fullmatch(kid):
        if len(kid) != KEY_ID_LEN:
            raise EnvelopeMalformed(f"{field}: a key id or hash is {KEY_ID_LEN} base64url characters", field=field)
        b64u_decode(kid, field)  # raises Base64Invalid with the precise reason


def as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError:
            raise EnvelopeMalformed("envelope is not valid UTF-8", field="envelope") from None
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise EnvelopeMalformed("envelope must be bytes", field="envelope")
