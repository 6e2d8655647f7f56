"""The rules of edits, deletes, reactions and expiry on the receiving side (``Inbox.act``, the
step every verified document goes through), on bob's offline client: alice's message arrives as a
real envelope; the actions are verified records from alice, carol (a member, not the author) and
for ids bob never stored."""

from __future__ import annotations

import secrets

from client_tui.core import RecordChanged
from client_tui.core.record import Doc, MessageInfo, Record, RecordState, now_ms
from shared import frames
from tests.helpers.clients import messages_of, wait_event


def action(sender: str, doc: Doc, text: str | None = None, seq: int = 100) -> Record:
    """A verified document from ``sender`` as the inbox builds it, before ``Inbox.act``."""
    return Record(
        secrets.token_hex(8), "conv-1", sender, text, secrets.token_hex(11)[:22], seq, float(seq), now_ms(), 1,
        RecordState.RECEIVED, envelope=b"envelope", info=MessageInfo(), content=doc,
    )  # fmt: skip


async def received(bob, relay, sender: str = "alice", text: str = "original") -> Record:
    await relay.deliver(relay.seal(sender, text), sender=sender)
    return next(r for r in await messages_of(bob, "conv-1") if r.text == text)


async def act(bob, rec: Record) -> Record:
    await bob.inbox.act(rec)
    await bob.history.put(rec)
    return rec


async def test_only_the_author_edits_and_earlier_texts_stay(offline_bob):
    bob, relay = offline_bob
    msg = await received(bob, relay)
    forged = await act(bob, action("carol", Doc(t="edit", ref=msg.mid), "carol's words"))
    assert (forged.state, forged.reason) == (RecordState.IGNORED, "not_author")
    assert forged.text == "carol's words" and forged.visible  # shown as refused, with what it said
    assert (await bob.history.by_lid(msg.lid)).text == "original"
    edit = await act(bob, action("alice", Doc(t="edit", ref=msg.mid), "corrected"))
    assert (edit.state, edit.text, edit.envelope, edit.visible) == (RecordState.RECEIVED, None, None, False)
    now = await bob.history.by_lid(msg.lid)
    assert (now.text, [v.body for v in now.content.versions], now.content.edited) == (
        "corrected",
        ["original"],
        edit.ts,
    )
    assert [r.text for r in await messages_of(bob, "conv-1")] == ["corrected", "carol's words"]


async def test_only_the_author_deletes_and_the_local_copy_is_gone(offline_bob):
    bob, relay = offline_bob
    msg = await received(bob, relay, text="delete me")
    forged = await act(bob, action("carol", Doc(t="delete", ref=msg.mid)))
    assert (forged.state, forged.reason) == (RecordState.IGNORED, "not_author")
    assert (await bob.history.by_lid(msg.lid)).text == "delete me"
    await act(bob, action("alice", Doc(t="delete", ref=msg.mid)))
    gone = await bob.history.by_lid(msg.lid)
    assert (gone.state, gone.reason, gone.text, gone.envelope) == (RecordState.DELETED, "deleted", None, None)
    assert "delete me" not in [r.text for r in await messages_of(bob, "conv-1")]
    late = await act(bob, action("alice", Doc(t="edit", ref=msg.mid), "too late"))
    assert late.state == RecordState.RECEIVED and (await bob.history.by_lid(msg.lid)).text is None  # moot
    await bob.history.close()
    bob.history = None
    for path in bob.history_path.parent.glob("history.sqlite3*"):
        assert b"delete me" not in path.read_bytes()


async def test_reactions_aggregate_one_per_user_per_emoji_and_toggle(offline_bob):
    bob, relay = offline_bob
    msg = await received(bob, relay)
    for sender, emoji, on in [
        ("carol", "👍", True),
        ("alice", "👍", True),
        ("carol", "👍", True),  # twice: still one
        ("carol", "🎉", True),
        ("alice", "👍", False),
    ]:
        await act(bob, action(sender, Doc(t="react", ref=msg.mid, emoji=emoji, on=on)))
    assert (await bob.history.by_lid(msg.lid)).content.reactions == {"👍": ["carol"], "🎉": ["carol"]}


async def test_an_action_for_an_unknown_message_is_ignored_with_its_code(offline_bob):
    bob, relay = offline_bob
    await received(bob, relay)
    for doc in (Doc(t="edit", ref="A" * 22), Doc(t="delete", ref="A" * 22), Doc(t="react", ref="A" * 22, emoji="👍")):
        rec = await act(bob, action("alice", doc, "x" if doc.t == "edit" else None))
        assert (rec.state, rec.reason) == (RecordState.IGNORED, "unknown_reference")


async def test_expired_messages_leave_the_store_by_the_timer(offline_bob):
    bob, relay = offline_bob
    msg = await received(bob, relay, text="short-lived")
    msg.content.exp = now_ms() + 300
    await bob.history.put(msg)
    bob.expiry.note(msg.content.exp)
    ev = await wait_event(bob, RecordChanged, lambda e: e.record.lid == msg.lid and not e.new, timeout=10)
    assert (ev.record.state, ev.record.reason) == (RecordState.DELETED, "expired")
    assert "short-lived" not in [r.text for r in await messages_of(bob, "conv-1")]
    assert await bob.history.next_exp() is None
    stale = await act(bob, action("alice", Doc(exp=now_ms() - 1), "already expired"))
    assert (stale.state, stale.text) == (RecordState.DELETED, None)


async def test_a_delivery_receipt_after_a_change_keeps_the_change(offline_bob):
    """My stored message is held in memory for its delivery receipts: a reaction (or an edit, a
    delete) applied to it is applied to that object, so the receipt that follows does not store
    the copy from before the change over it."""
    bob, _ = offline_bob
    mine = await bob.messaging.send("conv-1", "my message")
    await bob.outgoing.mark_stored(bob.outgoing.by_mid[mine.mid], 7)
    await act(bob, action("carol", Doc(t="react", ref=mine.mid, emoji="👍")))
    await bob.inbox.on_delivered(frames.Delivered(7, "carol"))
    stored = await bob.history.by_lid(mine.lid)
    assert (stored.content.reactions, stored.info.delivered_to) == ({"👍": ["carol"]}, ["carol"])
    await act(bob, action("bob", Doc(t="delete", ref=mine.mid)))  # my own delete, as sync brings it back
    await bob.inbox.on_delivered(frames.Delivered(7, "alice"))
    gone = await bob.history.by_lid(mine.lid)
    assert (gone.state, gone.text) == (RecordState.DELETED, None)  # not resurrected as "delivered"


async def test_a_message_deleted_before_it_left_is_withdrawn_and_nothing_is_sent(offline_bob):
    bob, _ = offline_bob
    first = await bob.messaging.send("conv-1", "sent soon")
    unsent = await bob.messaging.send("conv-1", "never mind")
    assert [r.text for r in bob.outbox] == ["sent soon", "never mind"]
    assert await bob.messaging.delete(unsent.mid) is unsent
    assert [r.text for r in bob.outbox] == ["sent soon"]  # no delete document either
    gone = await bob.history.by_lid(unsent.lid)
    assert (gone.state, gone.text, gone.envelope) == (RecordState.DELETED, None, None)
    assert bob.progress.counters["conv-1"] == first.ctr  # its counter given back: no gap for the others
