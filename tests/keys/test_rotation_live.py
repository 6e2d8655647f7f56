"""Keys that really retire, and rotations that cannot strand an account (issue 12), against real relays:
a replaced signing key counts only for messages stored before its replacement was published (never ✔),
a served retired key is refused as a rollback, a rotation whose keystore save fails leaves a working
account, and an open client picks up a rotation of its own account done elsewhere."""

from __future__ import annotations

import httpx2
import pytest

from client_tui.core import ChatClient, KeyChanged, LocalDataWarning, RotationNotSaved, keystore
from client_tui.core.record import now_ms
from client_tui.widgets import reason_words
from shared import envelope
from shared.content import Text
from tests.helpers.clients import barrier, messages_of
from tests.helpers.config import FAST_KDF, PASSWORD, passphrase
from tests.helpers.fsfault import unwritable
from tests.helpers.relays import attacks, db_count


async def pair(world, relay):
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await bob.refresh_conversations()
    return alice, bob, conv


async def post_as(relay, token: str, conv: str, data: bytes) -> int:
    """What a thief holding bob's old keystore and his password does: send over REST as bob."""
    async with httpx2.AsyncClient(base_url=relay.url, headers={"Authorization": f"Bearer {token}"}) as http:
        r = await http.post(
            f"/v1/conversations/{conv}/messages", content=data, headers={"Content-Type": "application/json"}
        )
    assert r.status_code == 201, r.text
    return r.json()["seq"]


async def records(client, conv):
    return {r.seq: r for r in await messages_of(client, conv)}


async def test_an_old_signing_keys_new_message_is_never_shown_as_verified(world):
    relay = world.relay()
    alice, bob, conv = await pair(world, relay)
    await alice.fetch_keys("bob")
    alice.verify_contact("bob", shown=alice.shown_key("bob").kids)
    before = (await bob.send_text(conv, "signed before the rotation")).seq
    await barrier(alice)
    assert alice.mark((await records(alice, conv))[before]) == "verified"
    old = bob.identity
    await bob.rotate_keys()
    await barrier(alice)  # the key_changed event: alice checked the chain before reading on
    contact = alice.contacts["bob"]  # followed: bob's verified key signed the rotation
    assert (contact.kids, contact.pending, contact.verified) == (
        (bob.identity.wrap_kid, bob.identity.sign_kid),
        None,
        True,
    )
    assert contact.retired_after == {old.sign_kid: before}
    # the old key, stolen: a message sealed to the current members' keys and signed by it, after the rotation
    head = bob.membership.head(conv)  # bob's update statement: the log binds his new keys
    stolen = envelope.seal(
        Text("wire the money", ts=now_ms(), ctr=9),
        old,
        conv,
        [alice.identity.public, bob.identity.public],
        epoch=head.ep,
        head=head.hash,
    )
    after = await post_as(relay, bob.token, conv, stolen)
    await barrier(alice)
    recs = await records(alice, conv)
    assert (recs[after].state, recs[after].reason, recs[after].text) == ("unreadable", "retired_sender_key", None)
    assert "wire the money" not in [
        e.text for e in world.rec(alice).of(type(world.rec(alice).events[0])) if hasattr(e, "text")
    ]
    assert "replaced" in reason_words("retired_sender_key")
    # the earlier message was signed before the verified replacement: as trusted as the key now pinned
    assert alice.mark(recs[before]) == "verified"
    new = (await bob.send_text(conv, "from my new key")).seq
    await barrier(alice)
    recs = await records(alice, conv)
    assert recs[new].text == "from my new key" and alice.mark(recs[new]) == "verified"
    assert sorted(s for s, r in recs.items() if alice.mark(r) == "verified") == [before, new]
    assert alice.mark(recs[after]) == "unreadable"  # the stolen key's message: never ✔


async def test_a_served_retired_key_is_refused_as_a_rollback(world):
    relay = world.hostile("key-retired")
    alice, bob, conv = await pair(world, relay)
    await alice.fetch_keys("bob")
    old = bob.identity
    await bob.rotate_keys()
    await barrier(alice)
    alice.accept_key("bob", shown=alice.shown_key("bob").kids)
    assert alice.contacts["bob"].kids == (bob.identity.wrap_kid, bob.identity.sign_kid)
    await alice.fetch_keys("bob")  # now the relay answers bob's retired keys
    await world.rec(alice).until(lambda r: any(e.rollback for e in r.of(KeyChanged)))
    (rollback,) = [e for e in world.rec(alice).of(KeyChanged) if e.rollback]
    assert rollback.new_kids == (old.wrap_kid, old.sign_kid)
    c = alice.contacts["bob"]
    assert c.kids == (bob.identity.wrap_kid, bob.identity.sign_kid) and c.pending is None  # nothing pinned
    head = bob.membership.head(conv)  # bob's update statement: the log binds his new keys
    stolen = envelope.seal(
        Text("from the old key", ts=now_ms(), ctr=5),
        old,
        conv,
        [alice.identity.public, bob.identity.public],
        epoch=head.ep,
        head=head.hash,
    )
    seq = await post_as(relay, bob.token, conv, stolen)
    await barrier(alice)
    assert (await records(alice, conv))[seq].reason == "retired_sender_key"
    assert world.rec(alice).texts == []
    assert len(attacks(relay, "key-retired")) >= 1


async def test_a_rotation_whose_keystore_save_fails_leaves_a_working_account(world):
    relay = world.relay()
    alice, bob, conv = await pair(world, relay)
    old = alice.identity
    # phase 1 fails for real (the folder refuses new files): nothing is published, nothing changes
    with unwritable(alice.profile), pytest.raises(RotationNotSaved) as err:
        await alice.rotate_keys()
    assert "nothing was published" in err.value.message
    assert (await bob.fetch_keys("alice")).wrap_kid == old.wrap_kid
    await bob.send_text(conv, "still fine")
    await barrier(alice)
    assert world.rec(alice).texts == ["still fine"]
    # phase 3 fails: the keys are published, then the keystore cannot be rewritten
    original = alice._publish

    async def publish_then_fill_the_disk(new):
        await original(new)
        stack.enter_context(unwritable(alice.profile))

    import contextlib

    with contextlib.ExitStack() as stack:
        alice._publish = publish_then_fill_the_disk
        new = await alice.rotate_keys()
        assert alice.identity.wrap_kid == new.wrap_kid != old.wrap_kid  # this session uses the new keys
        await world.rec(alice).until(lambda r: r.of(LocalDataWarning))
        (warning,) = world.rec(alice).of(LocalDataWarning)
        assert "kept in it as pending keys" in warning.text
        on_disk = keystore.load_bundle(alice.keystore_path, passphrase("alice"))
        assert on_disk.identity.wrap_kid == old.wrap_kid and on_disk.pending.wrap_kid == new.wrap_kid
        await bob.fetch_keys("alice")
        bob.accept_key("alice", shown=bob.shown_key("alice").kids)
        await bob.send_text(conv, "sealed to the new key")
        await barrier(alice)
        assert world.rec(alice).texts == ["still fine", "sealed to the new key"]
    # after a restart (disk writable again) the rotation is completed, nothing lost
    await alice.close()
    again = await world.client(relay, "alice", register=False)
    assert again.identity.wrap_kid == new.wrap_kid
    bundle = keystore.load_bundle(again.keystore_path, passphrase("alice"))
    assert bundle.identity.wrap_kid == new.wrap_kid and bundle.pending is None
    assert [r.wrap_kid for r in bundle.retired] == [old.wrap_kid]
    assert [r.text for r in await messages_of(again, conv)] == ["still fine", "sealed to the new key"]
    await bob.send_text(conv, "after the restart")
    await barrier(again)
    assert world.rec(again).texts[-1] == "after the restart"
    assert db_count(relay) == 3


async def test_an_open_client_picks_up_its_own_rotation_done_elsewhere(world):
    relay = world.relay()
    alice, bob, conv = await pair(world, relay)
    elsewhere = ChatClient(relay.url, "alice", world.root / "clients", kdf=FAST_KDF)  # same keystore, other process
    world.clients.append(elsewhere)
    await elsewhere.login(PASSWORD, passphrase("alice"))
    new = await elsewhere.rotate_keys()
    await elsewhere.close()
    await barrier(alice)
    assert alice.identity.wrap_kid == new.wrap_kid  # reloaded from the keystore on the key_changed event
    await bob.fetch_keys("alice")
    bob.accept_key("alice", shown=bob.shown_key("alice").kids)
    await bob.send_text(conv, "for alice's new key")
    await barrier(alice)
    assert world.rec(alice).texts == ["for alice's new key"]


async def test_a_message_that_arrived_before_the_key_is_opened_later(world):
    """Sealed to alice's new key while her open client still had the old one: "cannot read" at first,
    then opened when the client reloads its keystore, and after a restart too."""
    relay = world.relay()
    alice, bob, conv = await pair(world, relay)
    alice._own_keys_changed = _never  # this session misses the event (as a client offline at that moment)
    elsewhere = ChatClient(relay.url, "alice", world.root / "clients", kdf=FAST_KDF)
    world.clients.append(elsewhere)
    await elsewhere.login(PASSWORD, passphrase("alice"))
    await elsewhere.rotate_keys()
    await elsewhere.close()
    await bob.fetch_keys("alice")
    bob.accept_key("alice", shown=bob.shown_key("alice").kids)
    seq = (await bob.send_text(conv, "sealed to the new key")).seq
    await barrier(alice)
    assert (await records(alice, conv))[seq].reason == "not_a_recipient"
    await alice.close()
    again = await world.client(relay, "alice", register=False)
    assert (await records(again, conv))[seq].text == "sealed to the new key"  # opened on the restart


async def _never() -> None:
    return None
