"""The local history keys a message by (sender, mid), never by the relay's seq: a different message
that arrives under a seq the cache already holds (a relay that handed the seq out again after
deleting the message, or a hostile one) is kept beside the stored one and a warning is logged;
before, the cache refused it as a duplicate and the message was lost at the next start."""

from __future__ import annotations

import logging
import os
import sqlite3

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from client_tui.core.history import History
from client_tui.core.history_schema import SCHEMA_VERSION
from client_tui.core.record import Record


def v1_body(key: bytes, r: Record) -> bytes:
    """A row's ``body`` as a version-1 client sealed it: the text alone, under its own AAD."""
    nonce = os.urandom(12)
    aad = f"e2ee-chat/v1/history.{r.lid}.{r.conversation}.{r.sender}".encode()
    return nonce + AESGCM(key).encrypt(nonce, (r.text or "").encode(), aad)


async def test_a_different_message_under_a_stored_seq_is_kept_and_logged(offline_bob, caplog):
    bob, relay = offline_bob
    caplog.set_level(logging.WARNING, logger="e2ee.client")
    first = relay.seal("alice", "first")
    await relay.deliver(first, sender="alice", seq=3)
    await relay.deliver(relay.seal("carol", "second, under the same seq"), sender="carol", seq=3)
    await relay.deliver(first, sender="alice", seq=3)  # the same message again: a duplicate by mid
    stored = await bob.history.recent("conv-1")
    assert [(r.sender, r.text, r.seq) for r in stored] == [
        ("alice", "first", 3),
        ("carol", "second, under the same seq", 3),
    ]
    assert await bob.history.count() == 2
    assert [r.getMessage() for r in caplog.records if "keeping both" in r.getMessage()] == [
        f"seq 3 is also the seq of a stored message (alice, mid {stored[0].mid}, lid {stored[0].lid}): keeping both"
    ]


async def test_the_same_unreadable_delivery_twice_is_stored_once_and_a_different_one_beside_it(tmp_path):
    h = await History.open(tmp_path / "history.sqlite3", os.urandom(32))
    try:
        bad = Record(
            "l1",
            "conv-1",
            "alice",
            None,
            None,
            7,
            7.0,
            1,
            None,
            "unreadable",
            "signature_invalid",
            envelope=b"envelope one",
        )
        assert await h.put(bad)
        again = Record(
            "l2",
            "conv-1",
            "alice",
            None,
            None,
            7,
            7.0,
            1,
            None,
            "unreadable",
            "signature_invalid",
            envelope=b"envelope one",
        )
        assert not await h.put(again)
        other = Record(
            "l3",
            "conv-1",
            "alice",
            None,
            None,
            7,
            7.0,
            1,
            None,
            "unreadable",
            "signature_invalid",
            envelope=b"envelope two",
        )
        assert await h.put(other)
        assert [r.lid for r in await h.recent("conv-1")] == ["l1", "l3"]
        assert (await h.by_seq(7)).lid == "l3"  # the newest under a seq given out twice
    finally:
        await h.close()


OLD_MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, lid TEXT NOT NULL UNIQUE, conversation TEXT NOT NULL,
    sender TEXT NOT NULL, mid TEXT, seq INTEGER UNIQUE, pos REAL NOT NULL, ts INTEGER NOT NULL,
    ctr INTEGER, state TEXT NOT NULL, body BLOB, reason TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '', envelope BLOB, info TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX messages_sender_mid ON messages(sender, mid) WHERE mid IS NOT NULL;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


async def test_a_cache_written_with_a_unique_seq_is_rebuilt_keeping_every_row(tmp_path):
    """A cache from before (``seq INTEGER UNIQUE``, user_version 0): opened, its rows and cursor are
    all there, readable, and a second message under a stored seq is now kept."""
    key, path = os.urandom(32), tmp_path / "history.sqlite3"
    old = [
        Record(f"lid{i}", "conv-1", "alice", f"text {i}", f"mid{i}", i, float(i), 1000 + i, i, "received")
        for i in (1, 2, 5)
    ]
    db = sqlite3.connect(path)
    db.executescript(OLD_MESSAGES)
    for r in old:
        db.execute(
            "INSERT INTO messages (lid, conversation, sender, mid, seq, pos, ts, ctr, state, body) "
            "VALUES (?,?,?,?,?,?,?,?,?,?)",
            (r.lid, r.conversation, r.sender, r.mid, r.seq, r.pos, r.ts, r.ctr, r.state, v1_body(key, r)),
        )
    db.execute("""INSERT INTO meta VALUES ('cursor', '5')""")
    db.commit()
    db.close()
    h = await History.open(path, key)
    try:
        assert [(r.lid, r.text, r.seq, r.mid) for r in await h.recent("conv-1")] == [
            (r.lid, r.text, r.seq, r.mid) for r in old
        ]
        assert (await h.meta())["cursor"] == 5
        reused = Record("lid9", "conv-1", "bob", "under seq 5 again", "mid9", 5, 5.0, 2000, 1, "received")
        assert await h.put(reused, {"cursor": 6})
        dup = Record("lid10", "conv-1", "alice", "text 2", "mid2", 8, 8.0, 2000, 2, "received")
        assert not await h.put(dup)  # (sender, mid) is still unique
        assert [r.lid for r in await h.recent("conv-1")] == ["lid1", "lid2", "lid5", "lid9"]
    finally:
        await h.close()
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        indexes = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")}
        assert {"messages_sender_mid", "messages_conversation", "messages_state", "messages_seq"} <= indexes
    finally:
        check.close()
