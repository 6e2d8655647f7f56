"""A message written while the relay does not answer goes to the outbox even when a key it needs
was never fetched here (a member who joined through someone else): it waits unsealed for the
audience verified here, and is sealed and sent once the relay is back - after the keys are
fetched and the log verified again; anyone who joined meanwhile makes it wait for its author."""

from __future__ import annotations

import pytest

from client_tui.core import ClientError, MessageReceived
from tests.helpers.clients import wait_event, wait_until
from tests.helpers.config import PASSWORD, passphrase
from tests.helpers.relays import db_count

TEXT = "written while the relay is down"


async def _offline_in_a_team_bob_made(make_client, relay):
    """alice verified the log of bob's team (alice, bob, carol) and never fetched carol's keys;
    then the relay stops."""
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await bob.create_conversation("team", ["alice", "carol"])
    await alice.refresh_conversations()
    assert sorted(alice.membership.head(conv).usernames) == ["alice", "bob", "carol"]
    assert "carol" not in alice.contacts
    relay.stop()
    return alice, bob, carol, conv


async def test_queued_while_the_relay_is_down_then_sealed_and_sent_when_it_is_back(make_client, relay):
    alice, bob, carol, conv = await _offline_in_a_team_bob_made(make_client, relay)
    rec = await alice.queue_text(conv, TEXT)  # was: ClientError "unreachable", nothing queued
    assert (rec.state, rec.envelope, sorted(rec.info.audience.members)) == ("sending", None, ["alice", "bob", "carol"])
    assert [r.text for r in alice.outbox] == [TEXT]
    assert [(r.text, r.state) for r in await alice.load_history(conv) if r.mine] == [(TEXT, "sending")]
    relay.start()
    alice.start()
    await carol.connect()
    got = await wait_event(carol, MessageReceived, timeout=20)
    assert (got.sender, got.text, got.conversation) == ("alice", TEXT, conv)
    await wait_until(lambda: rec.state in ("stored", "delivered"))
    assert rec.ctr == 1 and rec.envelope is not None and not alice.outbox
    assert "carol" in alice.contacts  # her keys, fetched on sending
    await bob.connect()
    got = await wait_event(bob, MessageReceived, timeout=20)
    assert got.text == TEXT


async def test_someone_who_joined_meanwhile_gets_it_only_if_its_author_agrees(make_client, relay):
    alice, bob, carol, conv = await _offline_in_a_team_bob_made(make_client, relay)
    rec = await alice.queue_text(conv, TEXT)
    relay.start()
    await make_client("mallory")
    await bob.change_members(conv, add=["mallory"])  # before alice is back
    alice.start()
    await wait_until(lambda: rec.state == "blocked")
    assert rec.reason == "audience_grew" and "mallory" in rec.detail
    assert db_count(relay) == 0  # nothing sealed to mallory, nor to the others meanwhile
    assert await alice.outgoing.approve(conv, ["mallory"]) == 1
    await wait_until(lambda: rec.state in ("stored", "delivered"))
    mallory = await make_client("mallory", register=False)
    await mallory.login(PASSWORD, passphrase("mallory"))
    await mallory.connect()
    got = await wait_event(mallory, MessageReceived, timeout=20)
    assert got.text == TEXT
    del carol


async def test_a_conversation_never_verified_here_is_not_written_to_offline(make_client, relay):
    alice, bob = [await make_client(n) for n in ("alice", "bob")]
    conv = await bob.create_conversation("pair", ["alice"])  # alice never saw its log
    relay.stop()
    with pytest.raises(ClientError) as err:
        await alice.queue_text(conv, TEXT)
    assert err.value.code == "unreachable" and alice.outbox == []
    assert alice.progress.counters.get(conv, 0) == 0
