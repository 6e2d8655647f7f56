"""The client core against a real relay process: outbox states, the history cache, reconnects,
refused logins, key rotation and membership changes."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time

import httpx2
import msgspec
import pytest

from client_tui.core import (
    ChatClient,
    ConnectionState,
    ConversationsChanged,
    KeyChanged,
    MessageReceived,
    RecordChanged,
)
from client_tui.core.record import now_ms
from shared import envelope, frames
from shared.content import Text
from tests.helpers.clients import barrier, close_all, messages_of, wait_event, wait_until
from tests.helpers.config import FAST_KDF, PASSWORD


async def received_texts(client: ChatClient, n: int, timeout: float = 20) -> list[str]:
    out = []
    while len(out) < n:
        ev = await wait_event(client, MessageReceived, timeout=timeout)
        out.append(ev.text)
    return out


async def test_my_message_goes_sending_stored_delivered(make_client):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.connect()
    await bob.connect()
    await bob.wait_synced()
    rec = await alice.queue_text(conv, "hello")
    assert rec.state == "sending" and rec.mine and rec.ctr == 1
    await wait_until(lambda: rec.state == "delivered")
    assert rec.seq is not None and rec.info.delivered_to == ["bob"]
    timings = rec.info.timings
    assert len(timings["wrap"]) == 2 and timings["sign"] > 0 and timings["encrypt"] >= 0
    (cached,) = await messages_of(alice, conv)
    assert (cached.text, cached.state, cached.seq) == ("hello", "delivered", rec.seq)
    await close_all(alice, bob)


async def test_history_survives_a_restart_without_unwrapping_and_holds_no_plaintext(make_client, relay, monkeypatch):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.connect()
    await bob.connect()
    texts = ["first secret", "второй секрет", "第三个秘密"]
    for t in texts:
        await alice.send_text(conv, t)
    assert await received_texts(bob, 3) == texts
    await close_all(alice, bob)

    from client_tui.core import measure

    def no_rsa(*a, **k):
        raise AssertionError("a restart must not unwrap again")

    monkeypatch.setattr(measure, "open_", no_rsa)
    bob2 = ChatClient(relay.url, "bob", bob.profile.parent.parent, kdf=FAST_KDF)
    await bob2.login(PASSWORD, "bob passphrase")
    assert [r.text for r in await messages_of(bob2, conv)] == texts
    await bob2.connect()
    await bob2.wait_synced()
    await bob2.close()
    for path in bob2.profile.glob("history.sqlite3*"):
        blob = path.read_bytes()
        for t in texts:
            assert t.encode() not in blob, path
    db = sqlite3.connect(bob2.history_path)
    assert db.execute("SELECT count(*) FROM messages WHERE state != 'system'").fetchone()[0] == 3
    db.close()
    assert oct(bob2.history_path.stat().st_mode & 0o777) == "0o600"


async def online_pair(relay) -> tuple[ChatClient, ChatClient, str]:
    """alice and bob registered, in a two-person conversation, both online and reconnecting on
    their own with a short backoff (0.1-1 s); returns ``(alice, bob, conversation id)``."""
    alice = ChatClient(relay.url, "alice", relay.data_dir.parent / "c", kdf=FAST_KDF, backoff=(0.1, 1.0))
    bob = ChatClient(relay.url, "bob", relay.data_dir.parent / "c", kdf=FAST_KDF, backoff=(0.1, 1.0))
    await alice.register(PASSWORD, "a", bits=2048)
    await bob.register(PASSWORD, "b", bits=2048)
    conv = await alice.create_conversation("pair", ["bob"])
    alice.start()
    bob.start()
    await wait_until(lambda: alice.online and bob.online)
    return alice, bob, conv


@pytest.mark.process  # SIGKILL
async def test_relay_killed_and_restarted_nothing_lost_or_doubled(make_client, relay):
    alice, bob, conv = await online_pair(relay)
    for i in range(3):
        await alice.send_text(conv, f"before {i}")
    relay.stop(signal.SIGKILL)
    await wait_until(lambda: not alice.online and not bob.online)
    during = await alice.queue_text(conv, "while the relay was down")
    assert during.state == "sending"
    relay.start()
    t0 = time.perf_counter()  # from the relay answering: its own start (seconds under load) is not the client's
    await wait_until(lambda: during.state in ("stored", "delivered"))
    reconnect_s = time.perf_counter() - t0
    for i in range(2):
        await alice.send_text(conv, f"after {i}")
    expected = [f"before {i}" for i in range(3)] + ["while the relay was down"] + [f"after {i}" for i in range(2)]
    await wait_until(lambda: bob.progress.cursor >= 6)
    await barrier(bob)  # anything doubled was queued before this
    got = [r.text for r in await messages_of(bob, conv)]
    assert got == expected
    assert [r.text for r in await messages_of(alice, conv)] == expected
    assert reconnect_s < 10
    print(f"reconnect after relay restart: {reconnect_s * 1000:.0f} ms")
    await close_all(alice, bob)


async def test_a_refused_login_is_not_retried_in_a_loop(make_client, relay):
    alice = await make_client("alice")
    alice.session.adopt({"token": "not-a-token", "expires_in": 10**9, "refresh": "not.a-credential", "session": "x"})
    alice.rest.password = "wrong password"
    session = alice.start()
    await asyncio.wait_for(session, 10)
    assert alice.state == "refused"
    states = []
    while not alice.events.empty():
        ev = alice.events.get_nowait()
        if isinstance(ev, ConnectionState):
            states.append(ev.state)
    assert states == ["connecting", "refused"]  # one try; the fresh login was refused: stop
    await alice.close()


async def test_a_refused_token_is_replaced_by_one_refresh_without_a_login(make_client, relay):
    alice = await make_client("alice")
    refresh = alice.session.refresh_credential
    alice.session.adopt(
        {"token": "expired-or-revoked", "expires_in": 10**9, "refresh": refresh, "session": alice.session.sid}
    )
    alice.start()
    await wait_until(lambda: alice.online)
    assert alice.session.refreshes == 1 and alice.session.refresh_credential != refresh
    metrics = httpx2.get(relay.url + "/v1/metrics", headers=relay.operator_headers).json()
    assert metrics["sessions"]["logins"] == 1  # the one at registration
    await alice.close()


async def test_a_signed_rotation_is_followed_verified_and_unblocked_and_old_sealed_messages_still_open(make_client):
    """bob's rotation is signed by the key alice verified: she follows it at once, bob stays
    verified, nothing is blocked, and bob's earlier messages keep their mark (a scheduled rotation
    every week must not ask anyone anything). A change without a signed chain still waits
    (tests/security/test_hostile_relay.py)."""
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.connect()
    await bob.connect()
    await bob.wait_synced()
    await bob.send_text(conv, "from bob's first key")
    first = await wait_event(alice, MessageReceived)
    alice.verify_contact("bob", alice.shown_key("bob").kids)
    await alice.send_text(conv, "to bob's first key")
    assert await received_texts(bob, 1) == ["to bob's first key"]
    # sealed to bob's first key, sent only after the rotation
    old = await alice.recipients_for(conv)
    late = envelope.seal(
        Text("sealed before the rotation", ts=now_ms(), ctr=2),
        alice.identity,
        conv,
        old.recipients,
        epoch=old.epoch,
        head=old.head,
    )
    await bob.rotate_keys()
    change = await wait_event(alice, KeyChanged)
    assert (change.user, change.signed_by_old, change.followed) == ("bob", True, True)
    contact = alice.contacts["bob"]
    assert (contact.kids, contact.pending, contact.verified) == (
        (bob.identity.wrap_kid, bob.identity.sign_kid),
        None,
        True,
    )
    assert contact.changes[-1]["decision"] == "followed"
    (shown,) = [r for r in await alice.history.by_mid(first.mid, conv) if r.sender == "bob"]
    assert alice.mark(shown) == "verified"  # signed by the key the verified chain replaced, before it
    await alice.send_text(conv, "to bob's new key")
    assert await received_texts(bob, 1) == ["to bob's new key"]
    # the relay refuses the stale envelope (not the members' current keys); deliver it to bob by hand
    await bob._on_event(frames.Message(10_000, conv, "alice", msgspec.Raw(late)))
    assert (await wait_event(bob, MessageReceived)).text == "sealed before the rotation"
    await close_all(alice, bob)


async def test_members_added_and_removed_get_events_and_messages(make_client):
    alice, bob, carol = [await make_client(n) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("grow", ["bob"])
    for c in (alice, bob, carol):
        await c.connect()
        await c.wait_synced()
    await alice.change_members(conv, add=["carol"])
    await wait_event(bob, ConversationsChanged)
    await wait_until(lambda: "carol" in bob.members.get(conv, []))
    await bob.send_text(conv, "welcome carol")
    assert await received_texts(carol, 1) == ["welcome carol"]
    await alice.change_members(conv, remove=["bob"])
    await wait_until(lambda: conv in bob.inactive)
    sent = await alice.send_text(conv, "bob is gone")
    assert await received_texts(carol, 1) == ["bob is gone"]
    await barrier(bob)  # the relay fanned "bob is gone" out before alice's ack: bob would have it by now
    assert not [e for e in list(bob.events._queue) if isinstance(e, RecordChanged) and e.record.seq == sent.seq]
    await close_all(alice, bob, carol)


async def test_start_after_connect_keeps_one_connection_and_shows_each_message_once(make_client):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await bob.connect()
    await bob.wait_synced()
    bob.start()  # adopts the open connection
    await alice.connect()
    for i in range(5):
        await alice.send_text(conv, f"m{i}")
    assert await received_texts(bob, 5) == [f"m{i}" for i in range(5)]
    await barrier(bob)  # a second connection's copies would have been queued before this
    assert not [e for e in list(bob.events._queue) if isinstance(e, MessageReceived)]
    assert await bob.history.count(conv) == 5
    await close_all(alice, bob)


async def test_the_outbox_survives_a_client_restart(make_client, relay):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.refresh_conversations()
    rec = await alice.queue_text(conv, "written offline, sent after a restart")  # never connected
    assert rec.state == "sending"
    root = alice.profile.parent.parent
    await alice.close()
    alice2 = ChatClient(relay.url, "alice", root, kdf=FAST_KDF)
    await alice2.login(PASSWORD, "alice passphrase")
    assert [r.text for r in alice2.outbox] == ["written offline, sent after a restart"]
    alice2.start()
    await bob.connect()
    assert await received_texts(bob, 1) == ["written offline, sent after a restart"]
    await wait_until(lambda: not alice2.outbox)
    (cached,) = await messages_of(alice2, conv)
    assert cached.state in ("stored", "delivered") and cached.ctr == 1
    await close_all(alice2, bob)


@pytest.mark.process  # SIGKILL
async def test_relay_killed_with_a_full_outbox_resumes_without_spinning(make_client, relay):
    alice, bob, conv = await online_pair(relay)
    for i in range(60):
        await alice.queue_text(conv, f"m{i}")
    await wait_until(lambda: len(alice.outbox) < 50)
    relay.stop(signal.SIGKILL)  # mid-outbox: the socket dies under the sender
    lag = []

    async def probe() -> None:  # the loop must keep turning (no retry loop on a dead socket)
        for _ in range(20):
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lag.append(time.perf_counter() - t)

    await probe()
    assert max(lag) < 0.5
    await wait_until(lambda: not alice.online)
    relay.start()
    await wait_until(lambda: not alice.outbox, timeout=30)
    await wait_until(lambda: bob.progress.cursor >= 60, timeout=30)
    await barrier(bob)
    assert sorted(r.text for r in await messages_of(bob, conv)) == sorted(f"m{i}" for i in range(60))
    assert [r.ctr for r in await messages_of(alice, conv)] == list(range(1, 61))
    await close_all(alice, bob)


async def test_a_cancelled_session_task_ends_instead_of_reconnecting(make_client):
    """start()'s task, cancelled while connected (as the event loop's shutdown cancels every task
    when a test failed before close()), must end. It suppressed the CancelledError meant for the
    reader and went on reconnecting: a failing test then hung CI in the loop's teardown."""
    alice = await make_client("alice")
    session = alice.start()
    await wait_until(lambda: alice.online)
    session.cancel()
    await asyncio.wait({session}, timeout=10)
    assert session.cancelled()
