"""Key transparency against real relays (PROTOCOL.md §14): a relay that plants a key under a user's
name is caught by that user's monitor at the next start; a relay that forks the log for one user is
caught by a consistency failure once the real log moves on, and by the gossiped head of another
user (split_view); a relay that rewrites history is caught by every client holding an older head,
and by ``e2ee-chat audit``; an honest relay raises nothing. Clients are real ChatClients over HTTP
and websockets; the hostile relay is bench/tools/hostile.py with bench/tools/hostile_kt.py."""

from __future__ import annotations

import json
import sqlite3

import pytest

from client_tui.core import RecordChanged, TransparencyAlert
from shared import kt
from shared.errors import ConsistencyProofInvalid, InclusionProofInvalid, LogKeyMismatch, SplitView
from tests.helpers.clients import barrier
from tests.helpers.config import PASSWORD, passphrase
from tests.helpers.relays import attacks


def codes(client) -> list[str]:
    """The codes of the transparency alerts ``client`` raised (each also went out as an event)."""
    return [str(a.code) for a in client.transparency.alerts]


async def test_a_planted_key_passes_the_proofs_and_its_owner_is_alerted_at_the_next_start(world):
    relay = world.hostile("plant-key:mallory")
    mallory = await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    served = await alice.fetch_keys("bob")  # the planted leaf is in the log: the inclusion proof holds
    assert (served.wrap_kid, served.sign_kid) == (mallory.identity.wrap_kid, mallory.identity.sign_kid)
    assert codes(alice) == [] and len(attacks(relay, "plant-key")) == 1
    await bob.close()
    again = await world.client(relay, "bob", register=False, connect=False)  # bob starts again
    await world.rec(again).until(lambda r: r.of(TransparencyAlert))
    (alert,) = world.rec(again).of(TransparencyAlert)
    assert alert.code == "log_key_mismatch" and "never published" in alert.text
    assert mallory.identity.wrap_kid[:8] in alert.text
    with pytest.raises(LogKeyMismatch):  # and again at every start, until the relay explains itself
        mine = (again.identity.wrap_kid, again.identity.sign_kid)
        await again.transparency.monitor({mine}, {mine})


async def test_a_log_forked_for_one_user_fails_consistency_and_a_gossiped_head_shows_the_split(world):
    relay = world.hostile("split-view:mallory")
    mallory = await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    honest = alice.transparency.head
    assert honest is not None and honest.size == 3
    served = await alice.fetch_keys("bob")  # the fork: honest leaves + "bob: mallory's keys", signed
    assert served.wrap_kid == mallory.identity.wrap_kid and alice.transparency.head.size == 4
    assert codes(alice) == []  # the fork extends what alice saw: alone, she cannot tell
    await world.client(relay, "carol", connect=False)  # the real log moves on: 4 leaves, another root
    await bob.transparency.refresh()
    await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())  # bob's head, as a message carries it
    (split,) = alice.transparency.alerts
    assert isinstance(split, SplitView) and split.field == "bob"
    assert "showing you and bob different key directories" in split.message
    with pytest.raises(ConsistencyProofInvalid):  # and the next key answer from the real log
        await alice.fetch_keys("carol")
    assert "carol" not in alice.contacts
    assert codes(alice) == ["split_view", "consistency_proof_invalid"]


async def test_a_relay_that_rewrites_history_is_caught_by_a_client_holding_an_older_head(world):
    relay = world.relay()
    await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    mallory = world.identities["mallory"]
    held = alice.transparency.head
    relay.stop()
    forged = kt.KeyLeaf("bob", 0, mallory.wrap_kid, mallory.sign_kid)  # bob's first key, rewritten
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:
        db.execute(
            "UPDATE kt_log SET leaf = ?, leaf_hash = ? WHERE idx = 0",
            (forged.data().decode(), forged.hash()),
        )
    db.close()
    relay.start()
    with pytest.raises(ConsistencyProofInvalid) as err:
        await alice.transparency.refresh()
    assert f"{held.size}" in err.value.message and alice.transparency.head == held  # the held head stays
    assert codes(alice) == ["consistency_proof_invalid"]


async def test_an_honest_relay_raises_nothing_through_rotations_and_key_fetches(world):
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    for _ in range(2):
        await bob.rotate_keys()
        await alice.fetch_keys("bob")
        await alice.transparency.accept(bob.transparency.head or await bob.transparency.refresh(), seen_by="bob")
    await bob.close()
    again = await world.client(relay, "bob", register=False, connect=False)
    assert again.transparency.head.size == 4 and len(again.transparency.mine) == 3
    assert codes(alice) == codes(again) == []
    state = json.loads((alice.profile / "kt-head.json").read_text())
    assert kt.TreeHead.from_json(state["head"]) == alice.transparency.head
    assert (alice.profile / "kt-head.json").stat().st_mode & 0o777 == 0o600


async def test_a_key_history_row_without_its_own_log_proof_is_refused(world):
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await bob.rotate_keys()
    doc = await alice.rest.request("GET", "/v1/users/bob/keys/history")
    await alice.transparency.check_history("bob", doc)  # as served: both keys proven
    first, second = doc["keys"]
    for forged in (
        {"keys": [first, {**second, "kt": None}]},  # a rotation the log does not hold
        {"keys": [first, {**second, "kt": first["kt"]}]},  # another key's proof
    ):
        with pytest.raises(InclusionProofInvalid):
            await alice.transparency.check_history("bob", forged)
    with pytest.raises(InclusionProofInvalid):  # bob's keys answered as carol's history
        await alice.transparency.check_history("carol", doc)
    assert codes(alice) == ["inclusion_proof_invalid"] * 3


async def test_gossiped_heads_that_agree_raise_nothing_and_a_forged_one_changes_nothing(world):
    relay = world.relay()
    bob = await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await world.client(relay, "carol", connect=False)
    await bob.transparency.refresh()  # bob now holds 3 keys, alice 2
    await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())
    assert alice.transparency.head.size == 3 and codes(alice) == []  # proven consistent, now held
    held = alice.transparency.head
    forged = {**bob.transparency.gossip_out(), "tree_size": 9}  # a head the relay never signed
    await alice.transparency.gossip_in("bob", forged)
    await alice.transparency.gossip_in("bob", {"not": "a head"})
    assert alice.transparency.head == held and codes(alice) == ["tree_head_invalid"]


async def test_an_honest_relay_raises_no_alert_over_a_conversation_with_rotations(world):
    relay = world.relay()
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await bob.refresh_conversations()
    sent = 0

    def moved(r) -> int:  # bob's update statements alice verified ("moved to new keys …" lines)
        return len({e.record.lid for e in r.of(RecordChanged) if (e.record.text or "").startswith("moved to new keys")})

    for n in range(3):
        for i in range(20):
            await (alice if i % 2 else bob).send_text(conv, f"message {sent}")
            sent += 1
        await bob.rotate_keys()  # a leaf more; alice judges the chain (the history's proofs) on key_changed
        await world.rec(alice).until(lambda r, n=n: moved(r) > n)  # the log binds bob's new keys
        alice.accept_key("bob", shown=alice.shown_key("bob").kids)
    await alice.send_text(conv, "after the rotations")
    await barrier(bob)
    from_alice = [f"message {n}" for n in range(sent) if n % 20 % 2]
    assert world.rec(bob).texts == [*from_alice, "after the rotations"]
    await bob.transparency.refresh()
    await alice.transparency.refresh()
    assert alice.transparency.head.size == bob.transparency.head.size == 5  # 2 registrations, 3 rotations
    assert alice.transparency.head.root == bob.transparency.head.root
    await alice.transparency.gossip_in("bob", bob.transparency.gossip_out())
    await bob.close()
    again = await world.client(relay, "bob", register=False, connect=False)
    assert len(again.transparency.mine) == 4 and codes(alice) == codes(again) == []


async def test_a_log_rebuilt_without_a_key_i_published_is_alerted_by_my_client(world):
    relay = world.relay()
    alice = await world.client(relay, "alice", connect=False)
    await alice.rotate_keys()
    retired, held = alice.retired[0], alice.transparency.head
    await alice.close()
    relay.stop()
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:  # the relay starts its log again, without alice's first keys
        db.execute("DELETE FROM kt_log")
        db.execute("DELETE FROM user_keys WHERE wrap_kid = ?", (retired.wrap_kid,))
    db.close()
    relay.start()
    again = await world.client(relay, "alice", register=False, connect=False)
    # the head alice held (her first key) and the relay's new one (her current key) differ at one size
    assert codes(again) == ["consistency_proof_invalid"] and again.transparency.head == held
    fresh = await world.client(relay, "alice", register=False, login=False, connect=False)
    (fresh.profile / "kt-head.json").unlink()  # a device that never saw the old log
    fresh.transparency = type(fresh.transparency)(fresh)
    await fresh.login(PASSWORD, passphrase("alice"))
    (missing,) = fresh.transparency.alerts
    assert isinstance(missing, LogKeyMismatch) and "1 of the keys you published" in missing.message
    assert retired.wrap_kid[:8] in missing.message


async def test_a_log_that_shrank_is_alerted_the_relay_cannot_prove_the_held_head(world):
    relay = world.relay()
    alice = await world.client(relay, "alice", connect=False)
    await world.client(relay, "bob", connect=False)
    await alice.fetch_keys("bob")
    held = alice.transparency.head
    assert held.size == 2
    relay.stop()
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:  # bob's account and its leaf gone: the log is back to alice's leaf alone
        db.execute("DELETE FROM kt_log WHERE idx = 1")
        db.execute("DELETE FROM user_keys WHERE user_id = (SELECT id FROM users WHERE username = 'bob')")
        db.execute("DELETE FROM users WHERE username = 'bob'")
    db.close()
    relay.start()
    with pytest.raises(ConsistencyProofInvalid) as err:
        await alice.transparency.refresh()
    assert "different key directories: its signed heads of 1 and 2 keys cannot both be true" in err.value.message
    assert alice.transparency.head == held and codes(alice) == ["consistency_proof_invalid"]


async def test_the_forked_user_is_alerted_at_the_next_start_by_the_leaves_the_fork_lacks(world):
    relay = world.hostile("split-view:mallory")
    await world.client(relay, "mallory", connect=False)
    await world.client(relay, "bob", connect=False)
    alice = await world.client(relay, "alice", connect=False)
    await alice.fetch_keys("bob")  # forked: alice now holds a head of 4 keys the real log never had
    assert alice.transparency.head.size == 4 and codes(alice) == []
    await alice.close()
    again = await world.client(relay, "alice", register=False, connect=False)
    (alert,) = again.transparency.alerts  # her monitor reads the leaves: the real log has 3
    assert alert.code == "consistency_proof_invalid" and "signed a log of 4 keys but shows only 3" in alert.message


async def test_a_split_view_is_alerted_within_one_message_exchange_by_the_gossiped_head(world):
    relay = world.hostile("split-view:mallory")
    await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob")
    await world.client(relay, "carol", connect=False)
    alice = await world.client(relay, "alice")
    await alice.fetch_keys("carol")  # alice is shown a forked directory: mallory's keys as carol's
    assert alice.transparency.head.size == 5 and codes(alice) == []
    conv = await bob.create_conversation("pair", ["alice"])  # bob's view is the real one
    await alice.refresh_conversations()
    await alice.send_text(conv, "hello bob")  # its ciphertext carries alice's head (the fork's)
    # the head is checked aside from the message: the alert may come before the message is shown
    await world.rec(bob).until(lambda r: r.of(TransparencyAlert) and r.texts)
    (alert,) = world.rec(bob).of(TransparencyAlert)
    assert alert.code == "split_view" and alert.field == "alice"
    assert "the relay is showing you and alice different key directories" in alert.text
    assert world.rec(bob).texts == ["hello bob"]  # the message itself is shown; the alert is beside it
