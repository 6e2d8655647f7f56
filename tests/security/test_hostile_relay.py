"""A hostile relay against real clients: each mode of ``e2ee-relay --hostile MODE`` (bench/tools/hostile.py)
runs in a real relay process, and real ChatClients must detect every attack and explain it (a reason
code, a counter gap, a key-change warning), never show altered or foreign bytes as valid text.

Each test counts the attacks the relay logged against a client and the detections that client
made, and asserts they are equal.
"""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from client_tui.core import ChatClient, ClientError, KeyChangeBlocked, KeyChanged, MessageReceived
from client_tui.widgets import inspect_record, reason_words, unreadable_text
from shared.keys import fingerprint, safety_number
from tests.helpers.clients import barrier, messages_of
from tests.helpers.relays import attacks, db_count


async def group(world, relay, *names: str, title: str = "group"):
    """Register ``names`` (all connected), the first creates a conversation with the others."""
    clients = [await world.client(relay, n) for n in names]
    conv = await clients[0].create_conversation(title, list(names[1:]))
    for c in clients[1:]:
        await c.refresh_conversations()
    return clients, conv


async def send_all(sender: ChatClient, conv: str, texts: list[str]) -> list[int]:
    return [(await sender.send_text(conv, t)).seq for t in texts]


def on_screen(client: ChatClient, record) -> tuple[str, str]:
    """What the app shows for a record: its line in the message list, and the inspector's text."""
    console = Console(width=160, record=True, file=io.StringIO(), color_system=None)
    console.print(inspect_record(record, kid_names={}, me=client.username))
    line = unreadable_text(record.reason) if record.state == "unreadable" else record.text
    return line, console.export_text()


async def assert_explained(client: ChatClient, conv: str, reason: str, secret: str) -> None:
    """Each message of ``conv`` that did not open for ``reason``: its line in the list is the plain
    "could not verify" (or the not-a-recipient sentence), the inspector names the error code with
    what it means in plain words, and the text sent is nowhere on screen."""
    records = [r for r in await messages_of(client, conv) if r.state == "unreadable" and r.reason == reason]
    assert records
    for record in records:
        line, inspector = on_screen(client, record)
        flat = " ".join(inspector.split())
        assert line == unreadable_text(reason)
        assert f"could not verify: {reason} — {reason_words(reason)}" in flat
        assert secret not in inspector and secret not in line


async def history(client: ChatClient, conv: str) -> list[tuple[str, str | None, str]]:
    """What the client keeps for display, in display order: (state, text, reason)."""
    return [(r.state, r.text, r.reason) for r in await messages_of(client, conv)]


async def test_k08_replayed_envelope_5_is_shown_once_even_after_the_client_restarts(world, caplog):
    caplog.set_level(logging.INFO, logger="e2ee.client")
    relay = world.hostile("replay:5")
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, ["m1", "m2", "m3", "m4", "m5"])
    await barrier(bob)
    assert world.rec(bob).texts == ["m1", "m2", "m3", "m4", "m5"]
    # bob's client restarts: what it has shown is remembered, so a replay after a reconnect is dropped too
    await bob.close()
    bob2 = await world.client(relay, "bob", register=False)
    await send_all(alice, conv, ["m6", "m7"])
    await barrier(bob2)
    assert world.rec(bob2).texts == ["m6", "m7"]
    # after m6 and after m7 the relay sent #5 again, under its own seq (5) and under the new one
    assert len(attacks(relay, "replay", to="bob")) == 2
    dropped = [r.getMessage() for r in caplog.records if "duplicate message" in r.getMessage()]
    assert dropped == [
        "duplicate message seq=5 from alice dropped (mid already shown)",
        "duplicate message seq=6 from alice dropped (mid already shown)",
        "duplicate message seq=5 from alice dropped (mid already shown)",
        "duplicate message seq=7 from alice dropped (mid already shown)",
    ]
    assert world.rec(bob2).unreadable == []
    assert await history(bob2, conv) == [("received", f"m{i}", "") for i in range(1, 8)]
    assert db_count(relay) == 7


async def test_reordered_messages_show_as_a_gap_then_filled(world):
    relay = world.hostile("reorder")
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, ["m1", "m2", "m3", "m4", "m5"])
    await barrier(bob)
    rec = world.rec(bob)
    assert rec.texts == ["m1", "m3", "m2", "m5", "m4"]  # as the relay delivered them
    assert rec.gaps == [("alice", (2,)), ("alice", (4,))]  # each late one was reported missing first
    assert len(attacks(relay, "reorder", to="bob")) == 2
    assert bob.progress.missing == {}  # both gaps filled by the late arrivals
    assert [t for _, t, _ in await history(bob, conv)] == ["m1", "m2", "m3", "m4", "m5"]  # shown in seq order


async def test_dropped_messages_show_as_counter_gaps(world):
    relay = world.hostile("drop:3")
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, [f"m{i}" for i in range(1, 8)])
    await barrier(bob)
    rec = world.rec(bob)
    assert rec.texts == ["m1", "m2", "m4", "m5", "m7"]
    # each gap when it shows, then what is still missing when a sync ends (the barrier's)
    assert rec.gaps == [("alice", (3,)), ("alice", (6,)), ("alice", (3, 6))]
    assert len(attacks(relay, "drop", to="bob")) == 2
    # bob reconnects and syncs from his cursor: the relay keeps withholding, the gaps stay on record
    await bob.close()
    bob2 = await world.client(relay, "bob", register=False)
    await barrier(bob2)
    assert bob2.progress.missing == {f"{conv}\x00alice": [3, 6]}
    assert world.rec(bob2).gaps == [("alice", (3, 6))]
    assert db_count(relay) == 7  # the relay stored all seven: it only withheld two


async def test_duplicates_are_shown_once(world):
    relay = world.hostile("duplicate")
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, ["m1", "m2", "m3"])
    await barrier(bob)
    assert world.rec(bob).texts == ["m1", "m2", "m3"]
    assert len(attacks(relay, "duplicate", to="bob")) == 3
    assert await bob.history.count(conv) == 3


async def test_k05_moved_envelope_is_refused_as_not_matching_its_header(world):
    relay = world.hostile("move")
    (alice, bob, carol), x = await group(world, relay, "alice", "bob", "carol")
    y = await alice.create_conversation("pair", ["bob"])
    await bob.refresh_conversations()
    await send_all(alice, x, ["for the group"])
    await send_all(alice, y, ["for bob only"])
    await barrier(bob)
    await barrier(carol)
    assert world.rec(bob).texts == []
    assert world.rec(bob).unreadable == [("alice", "conversation_mismatch")] * 2
    assert len(attacks(relay, "move", to="bob")) == 2
    assert await history(bob, y) == [("unreadable", None, "conversation_mismatch")]  # x's message, shown in y
    assert await history(bob, x) == [("unreadable", None, "conversation_mismatch")]
    line, inspector = on_screen(bob, (await messages_of(bob, y))[0])
    assert line == "could not verify"  # the one plain words for every other reason (PROTOCOL.md §5.7)
    assert "could not verify: conversation_mismatch" in inspector and "for the group" not in inspector
    await assert_explained(bob, y, "conversation_mismatch", "for the group")
    assert "written for another conversation" in reason_words("conversation_mismatch")
    assert world.rec(carol).texts == ["for the group"]  # carol has no other conversation to move it to


async def test_k05_relabelled_sender_is_refused_and_nothing_shows_as_from_carol(world):
    relay = world.hostile("sender")
    (alice, bob, carol), conv = await group(world, relay, "alice", "bob", "carol")
    await send_all(alice, conv, ["from alice"])
    await barrier(bob)
    await barrier(carol)
    assert world.rec(bob).texts == [] and world.rec(carol).texts == []
    assert world.rec(bob).unreadable == [("carol", "sender_mismatch")]
    assert world.rec(carol).unreadable == [("bob", "sender_mismatch")]
    assert not [e for e in world.rec(bob).of(MessageReceived) if e.sender == "carol"]
    await assert_explained(bob, conv, "sender_mismatch", "from alice")
    assert len(attacks(relay, "sender", to="bob")) == 1


async def test_k07_sender_rewritten_in_the_protected_header_fails_the_signature(world):
    relay = world.hostile("sender-header")
    (alice, bob, carol), conv = await group(world, relay, "alice", "bob", "carol")
    await send_all(alice, conv, ["from alice"])
    await barrier(bob)
    await barrier(carol)
    assert world.rec(bob).texts == [] and world.rec(carol).texts == []
    assert world.rec(bob).unreadable == [("carol", "signature_invalid")]
    assert world.rec(carol).unreadable == [("bob", "signature_invalid")]
    await assert_explained(bob, conv, "signature_invalid", "from alice")
    assert len(attacks(relay, "sender-header")) == 2


async def test_k09_stripped_wrapped_key_is_a_placeholder_for_that_member_only(world):
    relay = world.hostile("strip:carol")
    (alice, bob, carol), conv = await group(world, relay, "alice", "bob", "carol")
    await send_all(alice, conv, ["for all three"])
    await barrier(bob)
    await barrier(carol)
    assert world.rec(bob).texts == ["for all three"]
    assert world.rec(carol).texts == []
    assert world.rec(carol).unreadable == [("alice", "not_a_recipient")]
    assert await history(carol, conv) == [("unreadable", None, "not_a_recipient")]
    line, inspector = on_screen(carol, (await messages_of(carol, conv))[0])
    assert line == "a message you cannot read (it was not encrypted for your key)"
    assert "could not verify: not_a_recipient" in inspector and "for all three" not in inspector
    await assert_explained(carol, conv, "not_a_recipient", "for all three")
    assert len(attacks(relay, "strip")) == 1


async def test_swapped_wrapped_keys_fail_the_signature(world):
    relay = world.hostile("swap")
    (alice, bob, carol), conv = await group(world, relay, "alice", "bob", "carol")
    await send_all(alice, conv, ["swap me"])
    await barrier(bob)
    await barrier(carol)
    for c in (bob, carol):
        assert world.rec(c).texts == []
        assert world.rec(c).unreadable == [("alice", "signature_invalid")]
        await assert_explained(c, conv, "signature_invalid", "swap me")
    assert len(attacks(relay, "swap")) == 2


async def test_altered_protected_header_fails_the_signature(world):
    relay = world.hostile("header")
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, ["dated today", "also today"])
    await barrier(bob)
    assert world.rec(bob).texts == []
    assert world.rec(bob).unreadable == [("alice", "signature_invalid")] * 2
    await assert_explained(bob, conv, "signature_invalid", "today")
    assert len(attacks(relay, "header", to="bob")) == 2


async def test_k04_cut_and_flipped_tags_then_a_valid_message(world):
    relay = world.hostile("tag")
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, ["tag cut to 4", "tag cut to 0", "tag bit flipped", "valid"])
    await barrier(bob)
    rec = world.rec(bob)
    assert rec.unreadable == [("alice", "tag_invalid"), ("alice", "tag_invalid"), ("alice", "signature_invalid")]
    assert rec.texts == ["valid"]
    assert await history(bob, conv) == [
        ("unreadable", None, "tag_invalid"),
        ("unreadable", None, "tag_invalid"),
        ("unreadable", None, "signature_invalid"),
        ("received", "valid", ""),
    ]
    await assert_explained(bob, conv, "tag_invalid", "tag cut")
    await assert_explained(bob, conv, "signature_invalid", "tag bit flipped")
    assert len(attacks(relay, "tag", to="bob")) == 3


async def test_k06_substituted_key_on_first_fetch_is_unverified_and_differs_when_compared(world):
    relay = world.hostile("key-first:mallory")
    mallory = await world.client(relay, "mallory", connect=False)
    bob = await world.client(relay, "bob")
    alice = await world.client(relay, "alice")
    # alice fetches and pins "bob"'s keys, binds them in the creation statement: the relay's own check
    # refuses key ids bob never published, so the conversation is never made
    with pytest.raises(ClientError) as err:
        await alice.create_conversation("pair", ["bob"])
    assert (err.value.code, err.value.field) == ("invalid_request", "members")
    pinned = alice.contacts["bob"]
    assert (pinned.identity.wrap_kid, pinned.identity.sign_kid) == (
        mallory.identity.wrap_kid,
        mallory.identity.sign_kid,
    )
    assert pinned.verified is False  # trust on first use: unverified until the safety numbers are compared
    real = bob.identity.public
    # what each side reads out when they compare: the fingerprints and the safety number differ
    assert fingerprint(pinned.identity.wrap_kid) != fingerprint(real.wrap_kid)
    on_alices_screen = safety_number(alice.identity.public, pinned.identity)
    on_bobs_screen = safety_number(real, (await bob.fetch_keys("alice")))
    assert on_alices_screen != on_bobs_screen
    assert db_count(relay, "SELECT count(*) FROM conversations") == 0
    assert db_count(relay) == 0
    assert len(attacks(relay, "key-first")) >= 2


async def test_k06_substituted_key_mid_conversation_warns_and_blocks_sending(world):
    relay = world.hostile("key-mid:mallory")
    mallory = await world.client(relay, "mallory", connect=False)
    (alice, bob), conv = await group(world, relay, "alice", "bob")
    await send_all(alice, conv, ["before"])
    await barrier(bob)
    assert world.rec(bob).texts == ["before"]
    real = (bob.identity.wrap_kid, bob.identity.sign_kid)
    fake = (mallory.identity.wrap_kid, mallory.identity.sign_kid)
    await alice.fetch_keys("bob")  # the client re-fetches (key_changed event, re-seal): now the relay lies
    await world.rec(alice).until(lambda r: r.of(KeyChanged))
    (change,) = world.rec(alice).of(KeyChanged)
    assert (change.user, change.old_kids, change.new_kids, change.signed_by_old) == ("bob", real, fake, False)
    assert alice.blocked_by(conv) == ["bob"]
    with pytest.raises(KeyChangeBlocked) as err:
        await alice.send_text(conv, "after")
    assert err.value.users == ("bob",)
    (logged,) = alice.contacts["bob"].changes
    assert [fingerprint(k) for k in (logged["old"][0], logged["new"][0])] == [
        fingerprint(real[0]),
        fingerprint(fake[0]),
    ]
    assert logged["decision"] is None
    assert alice.contacts["bob"].identity.wrap_kid == real[0]  # the pinned key is kept until the user decides
    assert db_count(relay) == 1
    assert len(attacks(relay, "key-mid")) == 1


async def test_k08_lost_ack_the_retry_gets_the_original_seq(world):
    relay = world.hostile("lose-ack", env={"E2EE_LOG_LEVEL": "DEBUG"})  # DEBUG: the relay logs duplicates
    bob = await world.client(relay, "bob")
    alice = await world.client(relay, "alice", connect=False)
    conv = await alice.create_conversation("pair", ["bob"])
    alice.start()  # a session that reconnects by itself after the relay cuts it
    await world.rec(alice).until(lambda r: alice.online)
    sent = await alice.send_text(conv, "exactly once")
    await barrier(bob)
    assert world.rec(bob).texts == ["exactly once"]
    assert sent.seq == world.rec(bob).of(MessageReceived)[0].seq
    assert db_count(relay) == 1
    assert len(attacks(relay, "lose-ack", to="alice")) == 1
    # the outbox sent the same envelope again after the reconnect; the relay answered with the first seq
    assert f"duplicate user=alice seq={sent.seq}" in (relay.data_dir / "relay.log").read_text()
    assert [(r.state, r.seq) for r in await messages_of(alice, conv)] in (
        [("stored", sent.seq)],
        [("delivered", sent.seq)],
    )


@pytest.mark.process  # e2ee-relay's exit code and message
def test_hostile_mode_needs_an_explicit_demo_flag(tmp_path):
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "server", "serve", "--data-dir", str(tmp_path), "--hostile", "drop"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "add --demo-level to confirm" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "server", "serve", "--data-dir", str(tmp_path), "--hostile", "nonsense", "--demo-level"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "unknown hostile mode 'nonsense'" in run.stderr


async def test_hostile_relay_says_so_loudly_in_its_log(world):
    relay = world.hostile("duplicate")
    log = (relay.data_dir / "relay.log").read_text()
    assert "HOSTILE RELAY, mode 'duplicate': this relay ATTACKS ITS OWN CLIENTS." in log
