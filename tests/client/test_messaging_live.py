"""Replies, edits, deletes, reactions, read receipts and disappearing messages between real
clients through a real relay (in this process): only the author edits or deletes (a hostile
member's forged edit and delete are refused on every other client), expired messages are gone
from both clients' stores, read receipts reach the sender - and to the relay each of them is an
envelope like a text message (same size bucket, same header members)."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from client_tui.core import NotAuthor, ReadUpTo, RecordChanged
from client_tui.core.record import Doc, RecordState
from shared.b64 import b64u_decode
from tests.helpers.clients import Recorder, messages_of, wait_event


async def trio(make_client):
    """alice, bob and carol online in one conversation; carol plays the hostile member."""
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("three", ["bob", "carol"])
    for c in (alice, bob, carol):
        await c.refresh_conversations()
        await c.connect()
        await c.wait_synced()
    return alice, bob, carol, conv


async def stored_texts(client, conv) -> list[str | None]:
    return [r.text for r in await messages_of(client, conv)]


async def settle(*clients) -> None:
    for c in clients:
        await c.settle()


async def test_only_the_author_edits_or_deletes_a_hostile_members_edit_is_refused(make_client):
    alice, bob, carol, conv = await trio(make_client)
    original = await alice.messaging.send(conv, "the plan", wait=True)
    await settle(bob, carol)
    try:
        await carol.messaging.edit(original.mid, "carol's plan")
        raise AssertionError("carol's client refused to edit alice's message")
    except NotAuthor:
        pass
    # a hostile client skips that check: its edit and delete are sealed and sent all the same
    forged_edit = await carol.outgoing.queue(conv, "carol's plan", False, Doc(t="edit", ref=original.mid))
    forged_delete = await carol.outgoing.queue(conv, None, False, Doc(t="delete", ref=original.mid))
    for item in (forged_edit, forged_delete):
        await carol.outgoing.stored(item, 20)
    await settle(alice, bob)
    for c in (alice, bob):
        refused = [r for r in await messages_of(c, conv) if r.state == RecordState.IGNORED]
        assert sorted((r.sender, r.content.t, r.reason) for r in refused) == [
            ("carol", "delete", "not_author"),
            ("carol", "edit", "not_author"),
        ]
        (plan,) = await c.history.by_mid(original.mid, conv)
        assert (plan.text, plan.content.versions) == ("the plan", [])
    await alice.messaging.edit(original.mid, "the better plan", wait=True)
    await settle(bob)
    (edited,) = await bob.history.by_mid(original.mid, conv)
    assert (edited.text, [v.body for v in edited.content.versions]) == ("the better plan", ["the plan"])
    await alice.messaging.delete(original.mid, wait=True)
    await settle(bob, carol)
    for c in (alice, bob, carol):
        (gone,) = await c.history.by_mid(original.mid, conv)
        assert (gone.state, gone.text, gone.envelope) == (RecordState.DELETED, None, None)
        assert "the better plan" not in await stored_texts(c, conv)


async def test_replies_and_reactions_arrive_and_aggregate(make_client):
    alice, bob, carol, conv = await trio(make_client)
    question = await alice.messaging.send(conv, "lunch?", wait=True)
    await settle(bob, carol)
    answer = await bob.messaging.send(conv, "yes", reply=question.mid, wait=True)
    await bob.messaging.react(question.mid, "👍", wait=True)
    await carol.messaging.react(question.mid, "👍", wait=True)
    await carol.messaging.react(question.mid, "🎉", wait=True)
    await carol.messaging.react(question.mid, "🎉", wait=True)  # toggled: taken back
    await settle(alice, bob, carol)
    for c in (alice, bob, carol):
        (q,) = await c.history.by_mid(question.mid, conv)
        reactions = {emoji: sorted(users) for emoji, users in q.content.reactions.items()}  # in arrival order
        assert (c.username, reactions) == (c.username, {"👍": ["bob", "carol"]})
        (a,) = await c.history.by_mid(answer.mid, conv)
        assert (a.text, a.content.t, a.content.ref) == ("yes", "reply", question.mid)
    assert [t for t in await stored_texts(alice, conv)] == ["lunch?", "yes"]  # reactions are no rows


async def test_read_receipts_reach_the_sender_and_the_relay_sees_a_message(make_client, relay):
    alice, bob, _, conv = await trio(make_client)
    sent = await alice.messaging.send(conv, "did you read this?", wait=True)
    await settle(bob)
    (received,) = [r for r in await messages_of(bob, conv) if r.mid == sent.mid]
    bob.receipts.seen(received)
    receipt = await bob.receipts.flush(conv)
    assert receipt is not None and receipt.content.t == "read"
    ev = await wait_event(alice, ReadUpTo, lambda e: e.reader == "bob", timeout=20)
    assert (ev.conversation, ev.seq) == (conv, sent.seq)
    (mine,) = await alice.history.by_mid(sent.mid, conv)
    assert alice.receipts.readers(mine) == ["bob"]
    bob.receipts.seen(received)  # the same position again: no second receipt
    assert await bob.receipts.flush(conv) is None
    # the relay stored the receipt as it stores a message: same header members, same size bucket
    await settle(bob)
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        rows = dict(db.execute("SELECT mid, envelope FROM messages").fetchall())
    finally:
        db.close()
    text, read = (json.loads(rows[mid]) for mid in (sent.mid, receipt.mid))
    assert set(json.loads(b64u_decode(text["protected"]))) == set(json.loads(b64u_decode(read["protected"])))
    assert len(text["ciphertext"]) == len(read["ciphertext"])  # one padding bucket


async def test_opting_out_sends_no_receipt(make_client):
    alice, bob, _, conv = await trio(make_client)
    sent = await alice.messaging.send(conv, "private read", wait=True)
    await settle(bob)
    bob.receipts.enabled = False
    (received,) = [r for r in await messages_of(bob, conv) if r.mid == sent.mid]
    bob.receipts.seen(received)
    assert await bob.receipts.flush(conv) is None and bob.outbox == []


async def test_disappearing_messages_leave_both_stores_after_the_timer(make_client):
    alice, bob, _, conv = await trio(make_client)
    recorders = [Recorder(c) for c in (alice, bob)]
    await alice.messaging.set_timer(conv, 1, wait=True)
    await settle(bob)
    assert bob.expiry.timers == {conv: 1}
    sent = await alice.messaging.send(conv, "self-destructs", wait=True)
    assert sent.content.exp == sent.ts + 1000
    for rec in recorders:
        await rec.until(
            lambda r: any(
                isinstance(e, RecordChanged) and e.record.mid == sent.mid and e.record.state == "deleted"
                for e in r.events
            ),
            timeout=20,
        )
    for c in (alice, bob):
        (gone,) = await c.history.by_mid(sent.mid, conv)
        assert (gone.state, gone.reason, gone.text, gone.envelope) == (RecordState.DELETED, "expired", None, None)
        texts = await stored_texts(c, conv)
        assert "self-destructs" not in texts and texts == [None]  # the timer line stays
        await c.history.close()
        c.history = None
        for path in c.history_path.parent.glob("history.sqlite3*"):
            assert b"self-destructs" not in path.read_bytes()
    for rec in recorders:
        await rec.stop()
    await asyncio.sleep(0)
