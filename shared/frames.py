"""Websocket frames between client and relay (JSON text frames, one object each).

Every frame is an object with a ``type`` member. Decoding is strict (msgspec): unknown types,
unknown members, wrong types and missing members raise :class:`FrameInvalid`. See
docs/PROTOCOL.md §4.3 for the table of frames and limits.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from .errors import FrameInvalid
from .membership import CID_PATTERN
from .strictjson import MAX_SAFE_INTEGER

ConversationId = Annotated[str, msgspec.Meta(pattern=f"^{CID_PATTERN}\\Z")]
"""A conversation id as :data:`shared.membership.CID_PATTERN` says (it goes into URL paths)."""

__all__ = [
    "Auth",
    "Send",
    "Sync",
    "Ack",
    "Ping",
    "Hello",
    "Ready",
    "Stored",
    "Message",
    "Synced",
    "Delivered",
    "Pong",
    "Event",
    "Error",
    "decode_client_frame",
    "decode_relay_frame",
]


# -- client -> relay -----------------------------------------------------------------------------
class Auth(msgspec.Struct, tag="auth", forbid_unknown_fields=True):
    """First frame: authenticates the connection (unless the token came in the Authorization
    header at levels 2 and 4).

    ``token``: the JWT (levels 2-4; may be empty if it was sent in the header).
    ``user``: level 1 only — the claimed username, taken without any check (the point of L1).
    ``l3_key``: level 3 only, required — the session-key handshake (``shared.l3.start_handshake``)
    made with the relay key and the ``challenge`` from this connection's ``hello``.
    """

    token: str = ""
    user: str | None = None
    l3_key: str | None = None


class Send(msgspec.Struct, tag="send", forbid_unknown_fields=True):
    """Send an envelope to a conversation. ``envelope`` is kept as raw JSON bytes: the L4 JWE
    object (level 4), an L3 compact JWE as a JSON string (level 3), or a plain envelope object
    ``{"mid", "cid", "snd", "ts", "text"}`` (levels 1 and 2; see ``shared.plain``)."""

    conversation: ConversationId
    envelope: msgspec.Raw


Seq = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
"""A relay sequence number or cursor: 0 .. 2**53-1 (exact in JavaScript, fits every database)."""


class Sync(msgspec.Struct, tag="sync", forbid_unknown_fields=True):
    """Ask for stored messages with ``seq > after``, at most ``limit`` (1..500)."""

    after: Seq = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 200


class Ack(msgspec.Struct, tag="ack", forbid_unknown_fields=True):
    """Recipient acknowledges every message up to and including ``seq``."""

    seq: Seq


class Ping(msgspec.Struct, tag="ping", forbid_unknown_fields=True):
    """Round-trip probe; the relay answers ``pong`` with the same ``nonce``."""

    nonce: int = 0


ClientFrame = Auth | Send | Sync | Ack | Ping


# -- relay -> client -----------------------------------------------------------------------------
class Hello(msgspec.Struct, tag="hello"):
    """First frame from the relay: protocol version, security level and limits (bytes)."""

    version: int
    level: int
    max_frame: int
    max_envelope: int
    max_recipients: int
    auth_timeout_s: float
    challenge: str | None = None  # level 3: 16 random bytes (b64url) to prove in the handshake
    relay_key: str | None = None  # level 3: the relay's RSA key, SPKI DER b64url (pin it)


class Ready(msgspec.Struct, tag="ready"):
    """Authentication accepted; ``user`` is the token's subject. ``expires_in``: seconds (by the
    relay's clock) until the relay closes the connection (4401) unless an ``auth`` frame renews
    it first; None at level 1. Also the answer to a renewal."""

    user: str
    expires_in: int | None = None


class Stored(msgspec.Struct, tag="stored"):
    """The envelope ``mid`` is durably stored with sequence ``seq`` (sent after the commit)."""

    mid: str
    seq: Seq
    conversation: ConversationId
    duplicate: bool = False


class Message(msgspec.Struct, tag="msg"):
    """A stored envelope delivered to a member (live fan-out or sync)."""

    seq: Seq
    conversation: ConversationId
    sender: str
    envelope: msgspec.Raw


class Synced(msgspec.Struct, tag="synced"):
    """End of one sync page; ``more`` says whether another page follows ``cursor``."""

    cursor: Seq
    more: bool


class Delivered(msgspec.Struct, tag="delivered"):
    """Receipt to the sender: ``user`` acknowledged message ``seq``."""

    seq: Seq
    user: str


class Pong(msgspec.Struct, tag="pong"):
    nonce: int


class Event(msgspec.Struct, tag="event"):
    """Something changed that a client should re-fetch.

    ``kind``: ``key_changed`` (``user`` published new keys: fetch them, compare with the pinned
    ones), ``members_changed`` (``conversation`` gained or lost members: reload it).
    """

    kind: str
    user: str | None = None
    conversation: ConversationId | None = None


class Error(msgspec.Struct, tag="error"):
    """A typed error: ``code`` from docs/PROTOCOL.md, ``field`` if any, extra ``detail``."""

    code: str
    message: str
    field: str | None = None
    detail: dict[str, object] | None = None
    ref: str | None = None  # the ``mid`` of the send this error answers, if any


RelayFrame = Hello | Ready | Stored | Message | Synced | Delivered | Pong | Event | Error

_client_decoder = msgspec.json.Decoder(ClientFrame)
_relay_decoder = msgspec.json.Decoder(RelayFrame)
encode = msgspec.json.Encoder().encode


def decode_client_frame(data: bytes | str) -> ClientFrame:
    """Decode one client->relay frame.

    Raises:
        FrameInvalid: not JSON, unknown ``type``, unknown or missing members, wrong types,
            nesting deeper than the decoder allows; never any other exception.
    """
    try:
        return _client_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise FrameInvalid(f"frame is not valid: {exc}", field="frame") from None
    except RecursionError:  # JSON nested deeper than the decoder's stack (e.g. inside ``envelope``)
        raise FrameInvalid("frame is nested too deeply", field="frame") from None
    except (UnicodeEncodeError, TypeError):  # a str with lone surrogates, or not bytes/str at all
        raise FrameInvalid("frame is not UTF-8 JSON text", field="frame") from None


def decode_relay_frame(data: bytes | str) -> RelayFrame:
    """Decode one relay->client frame.

    Raises:
        FrameInvalid: not JSON, unknown ``type``, unknown or missing members, wrong types,
            nesting deeper than the decoder allows; never any other exception.
    """
    try:
        return _relay_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise FrameInvalid(f"frame is not valid: {exc}", field="frame") from None
    except RecursionError:  # JSON nested deeper than the decoder's stack (e.g. inside ``envelope``)
        raise FrameInvalid("frame is nested too deeply", field="frame") from None
    except (UnicodeEncodeError, TypeError):  # a str with lone surrogates, or not bytes/str at all
        raise FrameInvalid("frame is not UTF-8 JSON text", field="frame") from None
