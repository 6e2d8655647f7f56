"""Two real clients chat through a real relay process (uvicorn + SQLite file) on 127.0.0.1."""

from __future__ import annotations

import sqlite3

import pytest

from client_tui.core import ClientError, MessageReceived
from client_tui.core.record import now_ms
from shared import envelope
from shared.content import Text
from tests.helpers.clients import barrier, close_all, next_message


async def test_bob_decrypts_exactly_what_alice_sent_and_carol_gets_nothing(make_client, relay):
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("pair", ["bob"])
    for c in (alice, bob, carol):
        await c.connect()
        await c.wait_synced()
    texts = ["hi bob", "emoji 👋🏽 and CJK 你好 and RTL مرحبا", "x" * 1024, "line one\nline two\t\x1b[31m"]
    for text in texts:
        sent = await alice.send_text(conv, text)
        got = await next_message(bob)
        assert got.text == text
        assert (got.sender, got.conversation, got.mid, got.seq) == ("alice", conv, sent.mid, sent.seq)
    assert [m.counter for m in [got]] == [len(texts)]
    await barrier(carol)  # every frame the relay queued to carol before this was handled
    carol_events = []
    while not carol.events.empty():
        carol_events.append(carol.events.get_nowait())
    assert not [e for e in carol_events if isinstance(e, MessageReceived)]
    # carol is not a member: the relay refuses her send to the conversation
    carol.members[conv] = ["alice", "bob", "carol"]
    with pytest.raises(ClientError) as err:
        await carol.send_text(conv, "let me in")
    assert err.value.code == "forbidden"
    await close_all(alice, bob, carol)

    db = sqlite3.connect(relay.data_dir / "relay.db")
    stored = db.execute("SELECT envelope FROM messages ORDER BY seq").fetchall()
    db.close()
    assert len(stored) == len(texts)
    for (env,), text in zip(stored, texts, strict=True):
        assert text.encode() not in env


async def test_offline_member_gets_everything_in_order_by_sync(make_client):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.connect()
    sent = [await alice.send_text(conv, f"message {i}") for i in range(5)]
    await bob.connect()
    got = [await next_message(bob) for _ in range(5)]
    assert [m.text for m in got] == [f"message {i}" for i in range(5)]
    assert [m.seq for m in got] == [s.seq for s in sent]
    await close_all(alice, bob)


async def test_repeated_send_of_the_same_envelope_is_stored_once(make_client, relay):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.connect()
    aud = await alice.recipients_for(conv)
    data = envelope.seal(
        Text("once", ts=now_ms(), ctr=1), alice.identity, conv, aud.recipients, epoch=aud.epoch, head=aud.head
    )
    futs = []
    for _ in range(2):
        futs.append(await alice.send_envelope(conv, data, timeout=10))
    assert futs[0] == futs[1]
    await close_all(alice, bob)
    db = sqlite3.connect(relay.data_dir / "relay.db")
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    db.close()
