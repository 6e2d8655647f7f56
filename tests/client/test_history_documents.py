"""The history cache keeps each record's typed document (sealed, beside its text), hides what is
not a row of the log (actions applied, what was deleted), and finds what expires; a version-1
cache (text-only bodies, no ``visible``/``exp`` columns) is upgraded with every row readable."""

from __future__ import annotations

import os
import sqlite3

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from client_tui.core.annotate import strip, tombstone
from client_tui.core.history import History
from client_tui.core.history_schema import SCHEMA_VERSION
from client_tui.core.record import Doc, Record, RecordState, Version

V1_MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, lid TEXT NOT NULL UNIQUE, conversation TEXT NOT NULL,
    sender TEXT NOT NULL, mid TEXT, seq INTEGER, pos REAL NOT NULL, ts INTEGER NOT NULL, ctr INTEGER,
    state TEXT NOT NULL, body BLOB, reason TEXT NOT NULL DEFAULT '', detail TEXT NOT NULL DEFAULT '',
    envelope BLOB, info TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA user_version=1;
"""


def rec(lid: str, seq: int, text: str | None, doc: Doc | None = None, sender: str = "alice") -> Record:
    mid, pos, ts, state = f"mid-{lid}", float(seq), 1000 + seq, RecordState.RECEIVED
    envelope, content = b"ciphertext-" + lid.encode(), doc or Doc()
    return Record(lid, "conv-1", sender, text, mid, seq, pos, ts, seq, state, envelope=envelope, content=content)


async def test_documents_round_trip_sealed_and_only_rows_of_the_log_are_listed(tmp_path):
    key = os.urandom(32)
    h = await History.open(tmp_path / "history.sqlite3", key)
    try:
        edited = rec("a", 1, "second text", Doc(versions=[Version("first text", 1001)], edited=1500))
        edited.content.reactions = {"👍": ["bob", "carol"]}
        reply = rec("b", 2, "a reply", Doc(t="reply", ref="mid-a"), sender="bob")
        action = rec("c", 3, "🎉", Doc(t="react", ref="mid-a", emoji="🎉"), sender="carol")
        strip(action)
        gone = rec("d", 4, "soon gone", Doc(exp=5000))
        for r in (edited, reply, action, gone):
            assert await h.put(r)
        assert [r.lid for r in await h.recent("conv-1")] == ["a", "b", "d"]
        back = (await h.by_mid("mid-a", "conv-1"))[0]
        assert (back.text, back.content) == ("second text", edited.content)
        assert (await h.by_lid("b")).content == Doc(t="reply", ref="mid-a")
        assert (await h.by_lid("c")).content == Doc(t="react")  # applied: only its type is kept
        assert [r.lid for r in await h.expiring(4999)] == []
        assert [r.lid for r in await h.expiring(5000)] == ["d"]
        assert await h.next_exp() == 5000
        tombstone(gone, "expired")
        await h.put(gone)
        assert await h.next_exp() is None and await h.expiring(10**12) == []
        assert [r.lid for r in await h.recent("conv-1")] == ["a", "b"]
        assert await h.count("conv-1") == 2
        dead = await h.by_lid("d")
        assert (dead.state, dead.reason, dead.text, dead.envelope) == (RecordState.DELETED, "expired", None, None)
        again = rec("e", 9, "soon gone", Doc(exp=5000))
        again.mid = "mid-d"
        assert not await h.put(again)  # the same (sender, mid) delivered again stays deleted
    finally:
        await h.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("history.sqlite3*"))
    for secret in (b"second text", b"first text", b"soon gone", "👍".encode(), b"reply", b"react", b"ciphertext-d"):
        assert secret not in raw, secret


async def test_a_version_1_cache_is_upgraded_and_its_text_bodies_read(tmp_path):
    key, path = os.urandom(32), tmp_path / "history.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(V1_MESSAGES)
    nonce = os.urandom(12)
    body = nonce + AESGCM(key).encrypt(nonce, b"old text", b"e2ee-chat/v1/history.l1.conv-1.alice")
    db.execute(
        "INSERT INTO messages (lid, conversation, sender, mid, seq, pos, ts, ctr, state, body) "
        "VALUES ('l1', 'conv-1', 'alice', 'm1', 1, 1.0, 1001, 1, 'received', ?)",
        (body,),
    )
    db.commit()
    db.close()
    h = await History.open(path, key)
    try:
        (old,) = await h.recent("conv-1")
        assert (old.text, old.content, old.state) == ("old text", Doc(), "received")
        old.content.reactions = {"👍": ["bob"]}
        await h.put(old)
        assert (await h.by_lid("l1")).content.reactions == {"👍": ["bob"]}
    finally:
        await h.close()
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        cols = {r[1] for r in check.execute("PRAGMA table_info('messages')")}
        assert {"visible", "exp"} <= cols
    finally:
        check.close()
