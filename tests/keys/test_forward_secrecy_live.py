"""Epoch forward secrecy against a real relay (issue 18, FS-SPEC 'Client'): a scheduled rotation when the
(injected) wall clock passes the key lifetime and not before; a retired key kept while an envelope sealed
to it is undelivered, erased once it was fetched and acknowledged and the grace passed; an envelope
captured before the erase opens with no key of the keystore read back from disk; the history still shows
what was read; the key transparency monitor raises no alert for the erased key."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from cryptography.hazmat.primitives import serialization

from client_tui.core import ChatClient, TransparencyAlert, keystore
from client_tui.core.account import monitor_own_keys
from client_tui.core.epochs import DAY_MS
from shared import envelope
from shared.b64 import b64u_encode
from shared.errors import NotARecipient
from tests.helpers.clients import Recorder, barrier, messages_of
from tests.helpers.config import FAST_KDF, PASSWORD, passphrase
from tests.helpers.keyschedule import GRACE_MS, Clock, outstanding_is, retired_past_its_grace


def captured(relay, seq: int) -> bytes:
    """The envelope the relay stores at ``seq``, as raw bytes from its database."""
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return bytes(db.execute("SELECT envelope FROM messages WHERE seq = ?", (seq,)).fetchone()[0])
    finally:
        db.close()


def private_forms(identity) -> list[str]:
    """The base64url forms the keystore's secret JSON would hold ``identity``'s private keys in."""
    der = identity.wrap_private.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    seed = identity.sign_private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return [b64u_encode(der), b64u_encode(seed)]


async def test_a_scheduled_rotation_happens_when_the_clock_passes_the_lifetime_and_not_before(world):
    relay = world.relay()
    clock = Clock()
    alice = await world.client(relay, "alice", wall_clock=clock)
    bob = await world.client(relay, "bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await bob.refresh_conversations()
    first, made = alice.identity, clock.now
    clock.now = made + 7 * DAY_MS - 1
    early = await alice.epochs.tick()
    assert (early.rotated, early.erased, early.kept) == (False, [], {})
    assert alice.identity is first
    clock.now = made + 7 * DAY_MS
    done = await alice.epochs.tick()
    assert done.rotated is True and done.erased == []
    new = alice.identity
    assert new.wrap_kid != first.wrap_kid and [r.wrap_kid for r in alice.retired] == [first.wrap_kid]
    on_disk = await asyncio.to_thread(keystore.load_bundle, alice.keystore_path, passphrase("alice"))
    assert on_disk.identity.wrap_kid == new.wrap_kid and on_disk.pending is None
    assert on_disk.created_ms[new.wrap_kid] == clock.now and on_disk.retired_ms[first.wrap_kid] == clock.now
    assert alice.membership.head(conv).member("alice")[1:] == (new.wrap_kid, new.sign_kid)  # update posted
    assert (await alice._fetch_identity("alice")).wrap_kid == new.wrap_kid  # the relay serves the new keys
    await alice.send_text(conv, "sealed after the scheduled rotation")
    await world.rec(bob).until(lambda r: "sealed after the scheduled rotation" in r.texts)
    again = await alice.epochs.tick()  # the new pair is young, the old one in its grace: nothing to do
    assert (again.rotated, again.erased, again.kept) == (False, [], {})
    assert "keys replaced every 7 days (next: " in alice.epochs.words()[0]


async def test_a_retired_key_is_kept_while_undelivered_then_erased_and_gone_from_disk(world, tmp_path):
    relay = world.relay()
    clock = Clock()
    bob = await world.client(relay, "bob", wall_clock=clock)
    alice = await world.client(relay, "alice")
    conv = await alice.create_conversation("pair", ["bob"])
    await bob.refresh_conversations()
    await alice.send_text(conv, "read before the rotation")
    await world.rec(bob).until(lambda r: "read before the rotation" in r.texts)
    await bob.connection.close()  # bob away: what alice sends now waits at the relay, sealed to his first key
    old = bob.identity
    waiting = (await alice.send_text(conv, "sent while bob was away")).seq
    raw = captured(relay, waiting)
    assert old.wrap_kid in envelope.parse(raw).header.rkids
    await bob.rotate_keys()  # over REST: his update statement moves the new keys into the log
    retired_at = clock.now
    assert bob.membership.head(conv).member("bob")[1] == bob.identity.wrap_kid

    clock.now = retired_at + GRACE_MS - 1  # in the grace: the relay is not even asked
    assert (await bob.epochs.tick()).kept == {}
    clock.now = retired_at + GRACE_MS
    kept = await bob.epochs.tick()
    assert kept.erased == [] and kept.kept == {old.wrap_kid: "1 envelope(s) sealed to it not delivered yet"}
    assert [r.wrap_kid for r in bob.retired] == [old.wrap_kid]

    await bob.connect()  # fetched, opened with the retired key, acknowledged
    await bob.wait_synced()
    await world.rec(bob).until(lambda r: "sent while bob was away" in r.texts)
    await outstanding_is(bob, old.wrap_kid, 0)
    erased = await bob.epochs.tick()
    assert erased.erased == [old.wrap_kid] and bob.retired == ()

    on_disk = await asyncio.to_thread(keystore.load_bundle, bob.keystore_path, passphrase("bob"))
    assert old.wrap_kid not in {i.wrap_kid for i in on_disk.private_pairs()}
    assert [(e.public.wrap_kid, e.retired_ms, e.erased_ms) for e in on_disk.erased] == [
        (old.wrap_kid, retired_at, clock.now)
    ]
    secret = str(keystore._open(bob.keystore_path, passphrase("bob"))[1])
    assert not [form for form in private_forms(old) if form in secret]  # no trace of the private halves
    signer = alice.identity.public.sign_key
    assert envelope.open(raw, old, signer, conversation=conv, sender="alice")  # the key it was sealed to opened it
    for pair in on_disk.private_pairs():  # ... and no key the keystore holds now does
        with pytest.raises(NotARecipient):
            envelope.open(raw, pair, signer, conversation=conv, sender="alice")
    texts = [r.text for r in await messages_of(bob, conv)]
    assert texts == ["read before the rotation", "sent while bob was away"]  # the history still shows them

    assert await monitor_own_keys(bob, quiet=False) >= 0  # the relay's log holds the erased key: mine, no alert
    await bob.close()
    again = await world.client(relay, "bob", register=False, wall_clock=clock)  # a new session, from disk
    assert [r.text for r in await messages_of(again, conv)] == texts
    assert again.my_public_keys(old_only=True) == (old.public,)
    await barrier(again)
    assert world.rec(again).of(TransparencyAlert) == [] and world.rec(bob).of(TransparencyAlert) == []

    # the same keystore in a new profile (history empty, no key log read yet) fetches the stored
    # envelope again: it is named as sealed to an erased key, not "could not verify"
    fresh = ChatClient(relay.url, "bob", tmp_path / "fresh", kdf=FAST_KDF, wall_clock=clock)
    world.clients.append(fresh)
    world.recorders[fresh] = Recorder(fresh)
    await asyncio.to_thread(
        keystore.import_from, bob.keystore_path, fresh.keystore_path, passphrase("bob"), "bob", overwrite=True
    )
    await fresh.login(PASSWORD, passphrase("bob"))
    await fresh.connect()
    await fresh.wait_synced()
    recs = {r.seq: r for r in await messages_of(fresh, conv)}
    assert (recs[waiting].state, recs[waiting].reason) == ("unreadable", "key_erased")
    assert "for forward secrecy: it can no longer be opened" in recs[waiting].detail
    # its monitor read the whole key log from the start (no head kept here yet): the erased key's leaf is mine
    assert fresh.transparency.head is not None and world.rec(fresh).of(TransparencyAlert) == []


async def test_a_relay_that_does_not_answer_gets_nothing_erased(world):
    relay = world.relay()
    clock = Clock()
    bob = await world.client(relay, "bob", wall_clock=clock, connect=False)
    old = bob.identity
    await bob.rotate_keys()
    before = bob.keystore_path.read_bytes()
    clock.now += GRACE_MS + DAY_MS
    relay.stop()
    result = await bob.epochs.tick()  # due, but nobody says what is outstanding
    assert result.erased == [] and list(result.kept) == [old.wrap_kid]
    assert result.kept[old.wrap_kid] == "the relay did not answer (unreachable)"
    assert [r.wrap_kid for r in bob.retired] == [old.wrap_kid] and bob.keystore_path.read_bytes() == before


async def test_key_lifetime_zero_never_rotates_and_login_runs_the_schedule(world):
    relay = world.relay()
    clock = Clock()
    alice = await world.client(relay, "alice", wall_clock=clock, key_lifetime_days=0)
    first = alice.identity
    clock.now += 400 * DAY_MS
    assert (await alice.epochs.tick()).rotated is False and alice.identity is first
    await alice.close()
    # the same account, lifetime 7 days, a year later: the login's tick replaces the keys
    again = await world.client(relay, "alice", register=False, wall_clock=clock)
    assert again.identity.wrap_kid != first.wrap_kid
    assert [r.wrap_kid for r in again.retired] == [first.wrap_kid]
    assert again.epochs._handle is not None  # and the hourly timer is armed
    await again.close()
    assert again.epochs._handle is None


async def test_a_key_erased_by_another_session_is_never_written_back(world):
    relay, clock, first, k1 = await retired_past_its_grace(world)
    second = await world.client(relay, "bob", register=False, connect=False, wall_clock=clock)  # same profile
    assert second.retired == () and [e.public.wrap_kid for e in second._bundle.erased] == [k1.wrap_kid]
    assert [r.wrap_kid for r in first.retired] == [k1.wrap_kid]  # the first session has not seen it
    k2 = first.identity
    await first.rotate_keys()  # saves its keystore twice: neither save may hold k1's private half again
    on_disk = await asyncio.to_thread(keystore.load_bundle, first.keystore_path, passphrase("bob"))
    assert [r.wrap_kid for r in on_disk.retired] == [k2.wrap_kid]
    assert [e.public.wrap_kid for e in on_disk.erased] == [k1.wrap_kid] and on_disk.upgrade is False
    secret = str(keystore._open(first.keystore_path, passphrase("bob"))[1])
    assert not [form for form in private_forms(k1) if form in secret]
    assert [r.wrap_kid for r in first.retired] == [k2.wrap_kid]


async def test_a_session_that_missed_a_rotation_elsewhere_saves_nothing_over_it(world):
    relay = world.relay()
    clock = Clock()
    stale = await world.client(relay, "bob", wall_clock=clock, connect=False)  # no key_changed event reaches it
    k1 = stale.identity
    clock.now += 7 * DAY_MS
    other = await world.client(relay, "bob", register=False, connect=False, wall_clock=clock)  # its login rotates
    k2 = other.identity
    assert k2.wrap_kid != k1.wrap_kid
    result = await stale.epochs.tick()  # the same schedule says "rotate" here too
    assert result.rotated is False and stale.identity is k1
    on_disk = await asyncio.to_thread(keystore.load_bundle, stale.keystore_path, passphrase("bob"))
    assert (on_disk.identity.wrap_kid, on_disk.pending) == (k2.wrap_kid, None)  # the newer keys kept
    assert [r.wrap_kid for r in on_disk.retired] == [k1.wrap_kid]
