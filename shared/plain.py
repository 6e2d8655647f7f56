"""The plain envelope of levels 1-3: what the relay stores and reads when it is *not* blind.

``{"mid": b64url(16 bytes), "cid": conversation id, "snd": sender, "ts": ms, "text": UTF-8 text}``
At levels 1 and 2 it travels as is (inside TLS at most); at level 3 it is rebuilt by the relay
from an L3 message (``shared.l3``), stored readable, and re-encrypted for each recipient. It
exists so the bench can measure the levels the seed article compares on the same message path.
"""

from __future__ import annotations

import os
import time

import msgspec

from .b64 import b64u_decode, b64u_encode
from .envelope import DEFAULT_MAX_ENVELOPE_BYTES, MAX_SAFE_INTEGER, MESSAGE_ID_BYTES
from .errors import EnvelopeMalformed, EnvelopeTooLarge
from .strictjson import check_id

__all__ = ["PlainEnvelope", "make", "check", "parse"]


class PlainEnvelope(msgspec.Struct, forbid_unknown_fields=True):
    """A readable message. ``text`` at most the envelope limit; ids as in the L4 header."""

    mid: str
    cid: str
    snd: str
    ts: int
    text: str


_decoder = msgspec.json.Decoder(PlainEnvelope)
encode = msgspec.json.Encoder().encode


def make(text: str, conversation: str, sender: str) -> PlainEnvelope:
    """A new plain envelope with a random 128-bit ``mid`` and the current time."""
    return PlainEnvelope(b64u_encode(os.urandom(MESSAGE_ID_BYTES)), conversation, sender, int(time.time() * 1000), text)


def check(env: PlainEnvelope) -> PlainEnvelope:
    """Check ids and time of a plain envelope.

    Raises:
        EnvelopeMalformed, Base64Invalid.
    """
    if len(b64u_decode(env.mid, "mid")) != MESSAGE_ID_BYTES:
        raise EnvelopeMalformed("mid: must encode 16 bytes", field="mid")
    check_id(env.cid, "cid")
    check_id(env.snd, "snd")
    if not 0 <= env.ts <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("ts must be in 0..2**53-1", field="ts")
    return env


def parse(data: bytes, *, max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES) -> PlainEnvelope:
    """Decode and check a plain envelope (size first).

    Raises:
        EnvelopeTooLarge, EnvelopeMalformed, Base64Invalid.
    """
    if len(data) > max_bytes:
        raise EnvelopeTooLarge(f"envelope is {len(data)} bytes; limit {max_bytes}", field="envelope")
    try:
        env = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise EnvelopeMalformed(f"plain envelope is not valid: {exc}", field="envelope") from None
    return check(env)
