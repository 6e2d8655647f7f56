"""What differs between the security levels at the relay, behind one object (DESIGN §2).

The websocket endpoint and the send path ask :class:`LevelPolicy` and never test the level
themselves: what ``hello`` announces (level 3 adds a fresh challenge and the relay's key), who an
``auth`` frame authenticates (level 1: the user it names; levels 2-4: the token; level 3 also the
session-key handshake), how a send's envelope is read (level 3: decrypted under the connection's
session key; levels 1-2: a readable envelope; level 4: an end-to-end envelope the relay cannot
read), and how a stored message is framed for a connection (level 3: re-encrypted for each
connection; otherwise the same bytes for everyone).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import msgspec
from cryptography.hazmat.primitives.asymmetric import rsa

from shared import envelope, frames, l3, plain
from shared.b64 import b64u_encode
from shared.errors import EnvelopeMalformed
from shared.keys import spki_der

from .hub import Connection
from .settings import Settings

FrameFor = bytes | Callable[[Connection], bytes]
"""A ``msg`` frame: the same bytes for every connection, or built per connection (level 3)."""


class LevelPolicy:
    """The relay's level (1-4, set at start) and what follows from it.

    Attributes:
        level: 1..4.
        relay_private: level 3: the relay's RSA-3072 key clients wrap their session keys to; else None.
        relay_key_b64: level 3: its SPKI DER, b64url (``GET /v1/relay-key``, ``hello.relay_key``); else None.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.level = settings.level
        self.relay_private: rsa.RSAPrivateKey | None = settings.resolve_relay_key() if self.level == 3 else None
        self.relay_key_b64 = (
            b64u_encode(spki_der(self.relay_private.public_key())) if self.relay_private is not None else None
        )

    def hello(self) -> tuple[frames.Hello, bytes | None]:
        """A connection's ``hello`` and, at level 3, the fresh challenge it carries
        (``l3.CHALLENGE_BYTES`` random bytes; the handshake must name it, so no replayed handshake
        opens a session)."""
        s = self.settings
        challenge = os.urandom(l3.CHALLENGE_BYTES) if self.level == 3 else None
        return frames.Hello(
            version=envelope.VERSION,
            level=self.level,
            max_frame=s.max_frame_bytes,
            max_envelope=s.max_envelope_bytes,
            max_recipients=s.max_recipients,
            auth_timeout_s=s.auth_timeout_s,
            challenge=b64u_encode(challenge) if challenge is not None else None,
            relay_key=self.relay_key_b64,
        ), challenge

    @property
    def uses_tokens(self) -> bool:
        """Levels 2-4 authenticate by JWT; level 1 takes the name the client gives."""
        return self.level > 1

    async def handshake(self, auth: frames.Auth, challenge: bytes | None) -> l3.Session | None:
        """Level 3: the session key from the ``auth`` frame's handshake (one RSA-OAEP unwrap, in a
        thread); None at other levels.

        Raises:
            the handshake's errors (UnwrapFailed, RelayKeyMismatch, ChallengeMismatch, ...).
        """
        if self.level != 3:
            return None
        assert self.relay_private is not None and challenge is not None  # level 3 has both
        assert auth.l3_key  # RelayProtocol refuses a level-3 auth frame without it
        return await asyncio.to_thread(l3.accept_handshake, auth.l3_key, self.relay_private, challenge)

    def readable(self, raw: bytes) -> plain.PlainEnvelope | None:
        """Levels 1-3: the readable envelope of a send that came as one (``shared.plain``; a level-3
        websocket send is opened by :meth:`open_l3` instead); None at level 4, whose end-to-end
        envelopes the relay checks but cannot read.

        Raises:
            the errors of ``plain.parse`` (EnvelopeTooLarge, EnvelopeMalformed, ...).
        """
        if self.level == 4:
            return None
        return plain.parse(raw, max_bytes=self.settings.max_envelope_bytes)

    def open_l3(self, conn: Connection, raw: bytes) -> plain.PlainEnvelope:
        """Level 3: decrypt a client's message under its session key (the relay reads it); the
        direction and the sequence number are checked (no reflection, no replay).

        Raises:
            EnvelopeMalformed: not a JSON string holding a compact JWE; the errors of ``l3.open``.
        """
        assert conn.session is not None
        try:
            token = msgspec.json.decode(raw, type=str)
        except msgspec.DecodeError:
            raise EnvelopeMalformed("level 3: the envelope is a JWE compact string", field="envelope") from None
        opened = l3.open(
            conn.session, token, direction=l3.C2R, after_seq=conn.c2r_seq, max_bytes=self.settings.max_envelope_bytes
        )
        h = opened.header
        conn.c2r_seq = h.seq
        return plain.check(plain.PlainEnvelope(h.mid, h.cid, h.snd, h.ts, opened.plaintext.decode("utf-8")))

    def frame_for(self, seq: int, cid: str, sender: str, raw: bytes) -> FrameFor:
        """The ``msg`` frame for a stored envelope: the same bytes for every connection (levels
        1, 2 and 4), or built per connection under its session key (level 3)."""
        if self.level != 3:
            return frames.encode(frames.Message(seq, cid, sender, msgspec.Raw(raw)))
        m = plain.parse(raw, max_bytes=len(raw))
        return lambda conn: frames.encode(frames.Message(seq, cid, sender, msgspec.Raw(_seal_l3(conn, m))))


def _seal_l3(conn: Connection, m: plain.PlainEnvelope) -> bytes:
    """Level 3: a ``msg`` payload re-encrypted for ``conn`` (one AES-GCM encryption)."""
    assert conn.session is not None
    conn.r2c_seq += 1
    token = l3.seal(
        conn.session,
        m.text,
        direction=l3.R2C,
        conversation=m.cid,
        sender=m.snd,
        seq=conn.r2c_seq,
        message_id=m.mid,
        sent_at_ms=m.ts,
        max_bytes=1 << 30,
    )
    return msgspec.json.encode(token)
