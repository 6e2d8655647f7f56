"""The client and the membership log (client_tui/membership*.py) against a real relay: no message is
re-addressed to people it was not written for without its author; every change is a line naming its
actor, verified; verified heads outlive a restart, so a relay that rolls the log back is noticed and
what is sealed goes to the verified member list only; a conversation from before the log is read-only."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from client_tui import commands
from client_tui.core import AudienceGrew, RecordChanged
from client_tui.core.errors import ClientError
from client_tui.core.record import AgreedAudience
from shared import envelope
from shared.errors import LegacyConversation
from tests.helpers.clients import messages_of, next_message
from tests.helpers.config import PASSWORD


async def record_state(client, lid: str, state: str, timeout: float = 20) -> None:
    """Wait for the client's event saying record ``lid`` reached ``state``."""

    async def get():
        while True:
            ev = await client.events.get()
            if isinstance(ev, RecordChanged) and ev.record.lid == lid and ev.record.state == state:
                return ev.record

    return await asyncio.wait_for(get(), timeout)


async def lines(client, conv: str) -> list[tuple[str, str]]:
    return [(r.sender, r.text) for r in await client.load_history(conv) if r.state == "system"]


async def texts_of(client, conv: str) -> list[str]:
    return [r.text for r in await messages_of(client, conv) if r.state == "received"]


async def test_a_message_written_before_someone_joined_waits_for_its_author(make_client):
    alice, bob, dave = [await make_client(n) for n in ("alice", "bob", "dave")]
    conv = await alice.create_conversation("pair", ["bob"])
    rec = await alice.queue_text(conv, "only for bob's eyes")  # written for alice and bob (not yet sent)
    assert rec.info.audience == AgreedAudience(0, ["alice", "bob"])
    await bob.change_members(conv, add=["dave"])  # meanwhile bob adds dave (alice is offline)
    await dave.connect()
    await alice.connect()  # the relay refuses the envelope (epoch_stale); resealing would reach dave: it waits
    blocked = await record_state(alice, rec.lid, "blocked")
    assert (blocked.reason, blocked.info.audience.members) == ("audience_grew", ["alice", "bob"])
    assert [i.record.lid for i in alice.outgoing.waiting(conv)] == [rec.lid]
    await bob.connect()
    await bob.wait_synced()
    await dave.wait_synced()
    assert await texts_of(dave, conv) == [] and await texts_of(bob, conv) == []  # nothing was sent to anyone
    assert ("bob", "added dave · epoch 1, signature verified") in await lines(alice, conv)
    assert await alice.outgoing.approve(conv) == 1  # the author agrees: sealed to epoch 1, dave included
    stored = await record_state(alice, rec.lid, "stored")
    assert stored.info.recipients == ["alice", "bob", "dave"]
    got = await next_message(dave)
    assert (got.text, got.sender, envelope.parse(got.envelope).header.ep) == ("only for bob's eyes", "alice", 1)


@pytest.mark.parametrize("hold", [True, False], ids=["outbox", "send"])
async def test_declined_or_not_held_a_grown_audience_never_gets_the_message(make_client, hold):
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("pair", ["bob"])
    item = await alice.outgoing.queue(conv, "not for carol", hold)
    await bob.change_members(conv, add=["carol"])
    await carol.connect()
    await alice.connect()
    if hold:
        await record_state(alice, item.record.lid, "blocked")
        assert await alice.outgoing.decline(conv) == 1
        failed = await record_state(alice, item.record.lid, "failed")
        assert failed.reason == "audience_grew"
    else:  # e2ee-chat send: the message fails with its own code, never sealed to carol
        with pytest.raises(AudienceGrew) as err:
            await asyncio.wait_for(asyncio.shield(item.done), 20)
        assert err.value.users == ("carol",)
        assert commands.fail(err.value) == commands.EXIT_AUDIENCE == 4
    await carol.wait_synced()
    assert await texts_of(carol, conv) == []
    assert alice.outgoing.waiting(conv) == []


async def test_every_change_is_a_line_naming_its_actor_verified(make_client):
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("team ✓", ["bob"])
    await bob.change_members(conv, add=["carol"])
    await carol.refresh_conversations()
    await carol.membership.sync(conv)
    from client_tui.core import membership_ops

    await membership_ops.rename(carol.membership, conv, "[b]renamed[/b]")
    await membership_ops.set_admins(alice.membership, conv, ["alice", "bob"])
    await carol.change_members(conv, remove=["carol"])  # not an admin, but anyone may leave
    await alice.refresh_conversations()
    assert await lines(alice, conv) == [
        ("alice", "created the conversation “team ✓” with bob · epoch 0, signature verified"),
        ("bob", "added carol · epoch 1, signature verified"),
        ("carol", "renamed the conversation to “[b]renamed[/b]” · epoch 2, signature verified"),
        ("alice", "made alice, bob the only members who may change the members · epoch 3, signature verified"),
        ("carol", "left the conversation · epoch 4, signature verified"),
    ]
    assert alice.members[conv] == ["alice", "bob"] and alice.titles[conv] == "[b]renamed[/b]"
    with pytest.raises(ClientError) as err:  # carol is no longer a member: the relay refuses her statements
        await membership_ops.rename(carol.membership, conv, "back")
    assert err.value.code in ("actor_not_member", "forbidden")


async def test_a_log_rolled_back_after_a_restart_is_noticed_and_the_older_list_is_not_sealed_to(make_client, relay):
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("team", ["bob", "carol"])
    await alice.change_members(conv, remove=["carol"])
    assert alice.membership.head(conv).ep == 1
    await alice.close()
    # the relay's database is put back to before the removal (a restored backup, or a lying relay)
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:
        head = db.execute("SELECT hash FROM membership_log WHERE conversation_id=? AND epoch=0", (conv,)).fetchone()[0]
        db.execute("DELETE FROM membership_log WHERE conversation_id=? AND epoch=1", (conv,))
        db.execute("UPDATE conversations SET epoch=0, head=? WHERE id=?", (head, conv))
        db.execute(
            "INSERT INTO members (conversation_id, user_id, joined_at_ms, wrap_kid, sign_kid) "
            "SELECT ?, u.id, 0, k.wrap_kid, k.sign_kid FROM users u JOIN user_keys k ON k.user_id = u.id "
            "WHERE u.username = 'carol'",
            (conv,),
        )
    db.close()
    relay.stop()
    relay.start()  # (its member cache starts empty)
    again = await make_client("alice", register=False)
    await again.login(PASSWORD, "alice passphrase")
    await again.refresh_conversations()
    warning = [r for r in await again.load_history(conv) if r.state == "system" and r.info.warning]
    assert [r.info.warning for r in warning] == ["membership_fork"]
    assert "epoch 1 was verified here" in warning[0].info.detail
    audience = await again.recipients_for(conv)  # the verified head, kept here: carol is not in it
    assert (audience.epoch, audience.members) == (1, ("alice", "bob"))
    await again.connect()
    with pytest.raises(ClientError) as err:  # the relay, rolled back, stores nothing sealed to epoch 1
        await again.send_text(conv, "not for carol")
    assert err.value.code == "epoch_stale"
    db = sqlite3.connect(relay.data_dir / "relay.db")
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    db.close()
    assert carol  # she is in the relay's older member list, and got nothing


async def test_a_conversation_from_before_the_log_is_read_only(make_client, relay):
    alice, bob = [await make_client(n) for n in ("alice", "bob")]
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:
        db.execute("INSERT INTO conversations (id, title, created_by, created_at_ms) VALUES ('older', 'older', 1, 0)")
        db.execute(
            "INSERT INTO members (conversation_id, user_id, joined_at_ms) "
            "SELECT 'older', id, 0 FROM users WHERE username IN ('alice', 'bob')"
        )
    db.close()
    await alice.refresh_conversations()
    assert alice.members["older"] == ["alice", "bob"]
    (line,) = [r for r in await alice.load_history("older") if r.state == "system"]
    assert "made before signed membership" in line.text and "read-only" in line.text
    await alice.connect()
    with pytest.raises(LegacyConversation):
        await alice.send_text("older", "hello?")
    del bob


async def test_the_log_kept_on_this_machine_is_used_offline_only_if_it_links_to_the_sealed_head(make_client, relay):
    alice, bob = [await make_client(n) for n in ("alice", "bob")]
    conv = await alice.create_conversation("pair", ["bob"])
    from client_tui.core import membership_ops

    await membership_ops.rename(alice.membership, conv, "renamed")
    await alice.close()
    relay.stop()  # offline from here on
    again = await make_client("alice", register=False)
    await commands.open_local(again, "alice passphrase")  # what `e2ee-chat tail` does offline
    audience = await again.recipients_for(conv)  # from the kept log: epoch 1, checked against the sealed head
    assert (audience.epoch, audience.members) == (1, ("alice", "bob"))
    # the kept log altered on disk (one statement dropped): it no longer links to the sealed head
    key = f"membership:{conv}"
    kept = (await again.history.meta())[key]
    await again.history.set_meta(**{key: kept[:1]})
    again.membership.chains.clear()
    with pytest.raises(ClientError) as err:  # nothing to seal to without the relay
        await again.recipients_for(conv)
    assert err.value.code == "unreachable"
    del bob
