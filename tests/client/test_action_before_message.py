"""A hostile relay hands over an action before the message it acts on (attacker F5): the action is
held and applied when the message arrives, with the same checks; a delete that came first means
the message is never shown."""

import logging

from client_tui.core import ChatClient, keystore, pending
from client_tui.core.record import RecordState, now_ms
from shared import envelope
from shared.content import Delete, Edit, React, Text
from tests.helpers.config import FAST_KDF


def sealer(relay, sender):
    members = relay.log_of("conv-1", ["alice", "bob", "carol"])[-1].usernames
    to = [relay.ids[u].public for u in members]
    return lambda doc: envelope.seal(doc, relay.ids[sender], "conv-1", to, **relay.epoch)


def mid_of(sealed):
    return envelope.parse(sealed).header.mid


async def test_a_delete_delivered_before_its_message_still_deletes_it(offline_bob):
    bob, relay = offline_bob
    seal = sealer(relay, "alice")
    t0 = now_ms()
    msg = seal(Text("my password is hunter2", ts=t0, ctr=1))
    delete = seal(Delete(ref=mid_of(msg), ts=t0 + 1000, ctr=2))
    await relay.deliver(delete, sender="alice")
    (held,) = await bob.history.by_mid(mid_of(delete), "conv-1")
    assert (held.state, held.reason) == (RecordState.IGNORED, "unknown_reference")
    await relay.deliver(msg, sender="alice")
    (rec,) = await bob.history.by_mid(mid_of(msg), "conv-1")
    assert (rec.state, rec.text, rec.envelope) == (RecordState.DELETED, None, None)
    assert bob.unread.get("conv-1", 0) == 0
    (done,) = await bob.history.by_mid(mid_of(delete), "conv-1")
    assert (done.state, done.reason) == (RecordState.RECEIVED, "")


async def test_an_edit_and_a_reaction_before_the_message_apply_on_arrival(offline_bob):
    bob, relay = offline_bob
    t0 = now_ms()
    msg = sealer(relay, "alice")(Text("draft", ts=t0, ctr=1))
    await relay.deliver(sealer(relay, "alice")(Edit("final", ref=mid_of(msg), ts=t0 + 1000, ctr=2)), sender="alice")
    await relay.deliver(
        sealer(relay, "carol")(React(ref=mid_of(msg), emoji="👍", on=True, ts=t0 + 500, ctr=1)), sender="carol"
    )
    await relay.deliver(msg, sender="alice")
    (rec,) = await bob.history.by_mid(mid_of(msg), "conv-1")
    assert (rec.state, rec.text) == (RecordState.RECEIVED, "final")
    assert [v.body for v in rec.content.versions] == ["draft"]
    assert rec.content.reactions == {"👍": ["carol"]}


async def test_a_held_edit_by_someone_else_is_never_applied(offline_bob):
    bob, relay = offline_bob
    t0 = now_ms()
    msg = sealer(relay, "alice")(Text("mine", ts=t0, ctr=1))
    forged = sealer(relay, "carol")(Delete(ref=mid_of(msg), ts=t0 + 1000, ctr=1))
    await relay.deliver(forged, sender="carol")
    await relay.deliver(msg, sender="alice")
    (rec,) = await bob.history.by_mid(mid_of(msg), "conv-1")
    assert (rec.state, rec.text) == (RecordState.RECEIVED, "mine")
    (row,) = await bob.history.by_mid(mid_of(forged), "conv-1")
    assert (row.state, row.reason) == (RecordState.IGNORED, "unknown_reference")


async def test_at_most_max_pending_actions_are_held_per_conversation(offline_bob, monkeypatch, caplog):
    bob, relay = offline_bob
    monkeypatch.setattr(pending, "MAX_PENDING", 3)
    seal = sealer(relay, "carol")
    t0 = now_ms()
    msgs = [sealer(relay, "alice")(Text(f"m{i}", ts=t0, ctr=i + 1)) for i in range(4)]
    for i, m in enumerate(msgs):
        await relay.deliver(seal(React(ref=mid_of(m), emoji="👍", on=True, ts=t0 + i, ctr=i + 1)), sender="carol")
    assert len(bob.pending.held["conv-1"]) == 3
    assert "pending react from carol" in caplog.text and logging.WARNING in {r.levelno for r in caplog.records}
    for m in msgs:
        await relay.deliver(m, sender="alice")
    reactions = [(await bob.history.by_mid(mid_of(m), "conv-1"))[0].content.reactions for m in msgs]
    assert reactions == [{}, {"👍": ["carol"]}, {"👍": ["carol"]}, {"👍": ["carol"]}]
    assert bob.pending.held["conv-1"] == []


async def test_a_held_delete_is_still_applied_after_a_restart(offline_bob, tmp_path):
    bob, relay = offline_bob
    seal = sealer(relay, "alice")
    t0 = now_ms()
    msg = seal(Text("burn after reading", ts=t0, ctr=1))
    await relay.deliver(seal(Delete(ref=mid_of(msg), ts=t0 + 1000, ctr=2)), sender="alice")
    await bob.close()
    again = ChatClient(bob.server_url, "bob", tmp_path / "clients", kdf=FAST_KDF)
    try:
        await again.open_local(keystore.load_bundle(again.keystore_path, "bob passphrase"), "bob passphrase")
        again.contacts.update(bob.contacts)
        again.members["conv-1"] = ["alice", "bob", "carol"]
        again._key_fetched_at = dict(bob._key_fetched_at)
        assert [r.content.t for r in again.pending.held["conv-1"]] == ["delete"]
        again.membership.chains.setdefault("conv-1", bob.membership.chains["conv-1"])
        relay.client = again  # the same relay (its log, its seqs) now talks to the restarted client
        await relay.deliver(msg, sender="alice")
        (rec,) = await again.history.by_mid(mid_of(msg), "conv-1")
        assert (rec.state, rec.text) == (RecordState.DELETED, None)
    finally:
        await again.close()
