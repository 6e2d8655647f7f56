"""Cross-relay fan-out over Redis pub/sub (redis-py asyncio), for several relays sharing one
PostgreSQL database.

After a commit a relay publishes the message's ``seq`` and recipient ids — never the envelope —
on ``<channel>:fanout``; every other relay loads the envelope from the shared database and
delivers it to its own connected users — only through the deliveries table, so a note can make a
relay deliver a message only to users it was stored for. Every note carries an HMAC-SHA-256
(RFC 2104) under a key derived from the relays' shared JWT key (HKDF-SHA-256, RFC 5869, info
``e2ee-chat/v1/broker-note``) and its time; a note without a valid tag, or older than
``NOTE_MAX_AGE_MS``, is dropped and counted (``rejected``): whoever can publish on Redis cannot
speak for a relay. Events (key and membership changes) and member-cache
invalidations travel the same way. The database stays the source of truth: while Redis is
unreachable relays keep storing and delivering locally; when it comes back each relay re-sends
its connected users what was stored since the outage began (clients drop duplicates by message
id) and asks the other relays to do the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING

import msgspec
import redis.asyncio as aioredis
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from redis.exceptions import RedisError

from shared import digests, frames

if TYPE_CHECKING:
    from .relay import Relay

log = logging.getLogger("e2ee.relay.broker")
RESYNC_MARGIN_MS = 5000  # clock skew between relays and the time a publish was in flight
OUTBOX_LIMIT = 100_000
NOTE_MAX_AGE_MS = 120_000  # a note older than this (or this far in the future) is a replay: dropped
TAG_BYTES = 32


class Note(msgspec.Struct, omit_defaults=True):
    """One pub/sub message. ``k``: msg | event | forget | resync | revoke; ``r``: the publishing
    relay; ``s``: ended session ids and ``why`` their reason (revoke)."""

    k: str
    r: str
    t: int = 0  # when it was published, Unix ms
    seq: int = 0
    u: list[int] = []
    e: frames.Event | None = None
    c: str | None = None
    since: int = 0
    s: list[str] = []
    why: str = ""


_decode = msgspec.json.Decoder(Note).decode
_encode = msgspec.json.Encoder().encode


def _now_ms() -> int:
    return int(time.time() * 1000)


def note_key(jwt_key: bytes | ed25519.Ed25519PrivateKey) -> bytes:
    """The 32-byte HMAC key for notes, derived from the JWT key every relay of a group shares
    (an HS256 secret, or the Ed25519 private key) with HKDF-SHA-256 (RFC 5869)."""
    if isinstance(jwt_key, ed25519.Ed25519PrivateKey):
        jwt_key = jwt_key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
    return HKDF(hashes.SHA256(), 32, salt=None, info=b"e2ee-chat/v1/broker-note").derive(jwt_key)


def seal_note(key: bytes, note: Note) -> bytes:
    """``tag || JSON`` with tag = HMAC-SHA-256(key, JSON) (32 bytes)."""
    payload = _encode(note)
    return digests.hmac_sha256(key, payload) + payload


def open_note(key: bytes, data: bytes, now_ms: int) -> Note | None:
    """The note in ``data`` if its tag verifies (constant time) and it is fresh; else None."""
    if len(data) <= TAG_BYTES:
        return None
    tag, payload = data[:TAG_BYTES], data[TAG_BYTES:]
    if not digests.equal(tag, digests.hmac_sha256(key, payload)):
        return None
    try:
        note = _decode(payload)
    except msgspec.DecodeError:
        return None
    return note if abs(now_ms - note.t) <= NOTE_MAX_AGE_MS else None


class RedisBroker:
    """Publish after commit, subscribe and deliver what other relays stored.

    Args:
        url: ``redis://host:port/db``.
        channel: channel prefix (relays that should see each other use the same one).
        relay: this process's :class:`server.relay.Relay`.
    """

    def __init__(self, url: str, channel: str, relay: Relay, key: bytes) -> None:
        self.url = url
        self.key = key
        self.channel = f"{channel}:fanout"
        self.relay = relay
        self.relay_id = secrets.token_hex(8)
        self.up = False
        self.down_since_ms: int | None = None  # the subscription broke: resync our users when back
        self._lost_since_ms: int | None = None  # publishes failed: ask the others to resync
        self.published = 0
        self.received = 0
        self.rejected = 0  # notes without a valid tag, or stale
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue(OUTBOX_LIMIT)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start the subscription and the publisher (they reconnect with backoff)."""
        self._tasks = [
            asyncio.create_task(self._subscribe(), name="broker-sub"),
            asyncio.create_task(self._publish_loop(), name="broker-pub"),
        ]

    async def stop(self) -> None:
        """Stop both tasks; notes still in the outbox are dropped."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    # -- publishing -------------------------------------------------------------------------------
    def publish_message(self, seq: int, user_ids: list[int]) -> None:
        """Tell the other relays that ``seq`` was stored for ``user_ids`` (ids only, no payload)."""
        self._put(Note("msg", self.relay_id, seq=seq, u=user_ids))

    def publish_event(self, user_ids: list[int], event: frames.Event) -> None:
        """Tell the other relays to send ``event`` to the connections of ``user_ids`` they hold."""
        self._put(Note("event", self.relay_id, u=user_ids, e=event))

    def publish_revoke(self, sids: list[str], reason: str) -> None:
        """Tell the other relays that these login sessions ended (refuse their tokens, close their
        websockets)."""
        self._put(Note("revoke", self.relay_id, s=sids, why=reason))

    def publish_forget(self, conversation: str | None) -> None:
        """Tell the other relays to drop their cached head of ``conversation`` (None: all of them)."""
        self._put(Note("forget", self.relay_id, c=conversation))

    def _put(self, note: Note) -> None:
        note.t = _now_ms()
        try:
            self._outbox.put_nowait(seal_note(self.key, note))
        except asyncio.QueueFull:
            self._lost(_now_ms())

    def _lost(self, since_ms: int) -> None:
        """The other relays may have missed what was stored since ``since_ms``: the publisher
        asks them to resync from there with its next successful publish."""
        if self._lost_since_ms is None:
            log.warning("broker: notes not published; other relays will resync when it returns")
        self._lost_since_ms = since_ms if self._lost_since_ms is None else min(self._lost_since_ms, since_ms)
        with contextlib.suppress(asyncio.QueueFull):
            self._outbox.put_nowait(b"")  # wake the publisher

    def _mark_down(self) -> None:
        if self.down_since_ms is None:
            self.down_since_ms = _now_ms()
            log.warning("broker unreachable: storing and delivering locally; will resync")
        self.up = False

    async def _publish_loop(self) -> None:
        client = aioredis.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)
        backoff = 0.2
        try:
            while True:
                data = [await self._outbox.get()]
                while not self._outbox.empty() and len(data) < 500:
                    data.append(self._outbox.get_nowait())
                data = [d for d in data if d]
                lost_since = self._lost_since_ms
                if lost_since is not None:  # tell the others what they may have missed
                    data.insert(
                        0,
                        seal_note(
                            self.key, Note("resync", self.relay_id, t=_now_ms(), since=lost_since - RESYNC_MARGIN_MS)
                        ),
                    )
                if not data:
                    continue
                try:
                    async with client.pipeline(transaction=False) as pipe:
                        for d in data:
                            pipe.publish(self.channel, d)
                        await pipe.execute()
                except (RedisError, OSError) as exc:
                    log.warning("broker publish failed (%s)", type(exc).__name__)
                    self._lost(lost_since if lost_since is not None else _now_ms())
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                self.published += len(data)
                if self._lost_since_ms == lost_since:
                    self._lost_since_ms = None
                backoff = 0.2
        finally:
            await client.aclose()

    # -- subscribing --------------------------------------------------------------------------------
    async def _subscribe(self) -> None:
        backoff = 0.2
        while True:
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=2, health_check_interval=2)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                self.up = True
                backoff = 0.2
                log.info("broker connected channel=%s relay=%s", self.channel, self.relay_id)
                if self.down_since_ms is not None:
                    down_since, self.down_since_ms = self.down_since_ms, None
                    self._lost(down_since)  # the others may have missed our notes meanwhile
                    n = await self.relay.resync_since(down_since - RESYNC_MARGIN_MS)
                    log.info("broker back: resent %d frames stored since the outage", n)
                async for msg in pubsub.listen():
                    if msg.get("type") == "message":
                        await self._handle(msg["data"])
            except (RedisError, OSError) as exc:
                if self.up or self.down_since_ms is None:
                    log.warning("broker connection lost (%s)", type(exc).__name__)
                self._mark_down()
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py 8 leaves PubSub.aclose unannotated
                    await client.aclose()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _handle(self, data: bytes) -> None:
        note = open_note(self.key, data, _now_ms())
        if note is None:
            self.rejected += 1
            if self.rejected == 1 or self.rejected % 1000 == 0:
                log.warning(
                    "broker: dropped a note without a valid tag or stale (%d bytes; %d so far)",
                    len(data),
                    self.rejected,
                )
            return
        if note.r == self.relay_id:
            return
        self.received += 1
        try:
            if note.k == "msg":
                await self.relay.deliver_stored([note.seq], note.u)
            elif note.k == "event" and note.e is not None:
                self.relay.notify(note.u, note.e, publish=False)
            elif note.k == "forget":
                self.relay.forget_members(note.c, publish=False)
            elif note.k == "revoke":
                self.relay.end_sessions(note.s, note.why, publish=False)
            elif note.k == "resync":
                await self.relay.resync_since(note.since)
        except Exception:
            log.exception("broker: failed to handle a %s note", note.k)
