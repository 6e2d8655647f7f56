"""Delivery guarantees of a real relay: checks before storing, limits, slow readers, crashes."""

from __future__ import annotations

import asyncio
import signal

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed

from client_tui.core import ClientError
from client_tui.core.record import now_ms
from shared import envelope
from shared.content import Text
from tests.helpers.clients import next_message
from tests.helpers.relays import db_count, start_relay
from tests.helpers.ws import open_ws, recv_type, send_frame


async def group(make_client, *names: str):
    clients = [await make_client(n) for n in names]
    conv = await clients[0].create_conversation("group", list(names[1:]))
    return clients, conv


def sealed(client, conv: str, text: str, people, counter: int = 1) -> bytes:
    """An envelope from ``client`` to ``people``, sealed to the newest epoch the client verified."""
    head = client.membership.head(conv)
    return envelope.seal(
        Text(text, ts=now_ms(), ctr=counter), client.identity, conv, people, epoch=head.ep, head=head.hash
    )


async def test_missing_and_extra_wrapped_keys_are_answered_with_lists(make_client, relay):
    (alice, bob, carol), conv = await group(make_client, "alice", "bob", "carol")
    mallory = await make_client("mallory")
    ws = await open_ws(relay, alice.token)
    await recv_type(ws, "ready")
    people = {c.username: c.identity.public for c in (alice, bob, carol, mallory)}
    env = sealed(alice, conv, "hi", [people["alice"], people["bob"], people["mallory"]])
    await ws.send(send_frame(conv, env))
    err = await recv_type(ws, "error")
    assert err["code"] == "recipients_mismatch"
    assert err["detail"] == {"missing": ["carol"], "extra": [mallory.identity.wrap_kid]}
    assert err["ref"] == envelope.parse(env).header.mid
    await ws.close()
    assert db_count(relay) == 0
    # the client core re-seals by itself when its log was stale and the audience only shrank
    await bob.change_members(conv, remove=["carol"])
    assert alice.membership.head(conv).ep == 0  # alice has not seen the removal yet
    await alice.connect()
    sent = await alice.send_text(conv, "after a re-seal")
    assert sent.seq == 1
    stored = envelope.parse(alice.history and (await alice.history.by_seq(1)).envelope).header
    assert (stored.ep, stored.rkids) == (1, [alice.identity.wrap_kid, bob.identity.wrap_kid])


async def test_sender_must_be_the_token_subject(make_client, relay):
    (alice, mallory), conv = await group(make_client, "alice", "mallory")
    ws = await open_ws(relay, mallory.token)
    await recv_type(ws, "ready")
    people = [alice.identity.public, mallory.identity.public]
    forged = sealed(alice, conv, "I am alice", people)  # alice's keys, mallory's socket
    await ws.send(send_frame(conv, forged))
    assert (await recv_type(ws, "error"))["code"] == "sender_mismatch"
    await ws.close()
    assert db_count(relay) == 0


async def test_frame_over_the_limit_closes_1009_and_the_relay_serves_others(make_client, relay):
    (alice, bob), conv = await group(make_client, "alice", "bob")
    ws = await open_ws(relay, alice.token, max_size=None)
    hello_limit = 256 * 1024 + 4096  # announced in hello as max_frame
    await recv_type(ws, "ready")
    await ws.send("x" * (hello_limit + 1))
    with pytest.raises(ConnectionClosed):
        for _ in range(5):
            await asyncio.wait_for(ws.recv(), 10)
    assert ws.close_code == 1009
    for size in (16 * 1024 * 1024,):
        big = await open_ws(relay, alice.token, max_size=None)
        await recv_type(big, "ready")
        with pytest.raises(ConnectionClosed):
            await big.send("y" * size)
            await asyncio.wait_for(big.recv(), 10)
        assert big.close_code == 1009
    await alice.connect()
    await bob.connect()
    sent = await alice.send_text(conv, "still serving")
    assert (await next_message(bob)).seq == sent.seq


async def test_envelope_with_too_many_recipients_is_refused_before_storage(make_client, tmp_path):
    relay = start_relay(tmp_path / "few", "--max-recipients", "2")
    try:
        alice = await make_client("alice", url=relay.url)
        bob = await make_client("bob", url=relay.url)
        carol = await make_client("carol", url=relay.url)
        conv = await alice.create_conversation("group", ["bob", "carol"])
        ws = await open_ws(relay, alice.token)
        hello_ready = await recv_type(ws, "ready")
        assert hello_ready["user"] == "alice"
        people = [c.identity.public for c in (alice, bob, carol)]
        env = sealed(alice, conv, "three", people)
        await ws.send(send_frame(conv, env))
        err = await recv_type(ws, "error")
        assert err["code"] == "too_many_recipients"
        await ws.close()
        assert db_count(relay) == 0
    finally:
        relay.stop()


async def test_slow_reader_is_disconnected_while_others_continue(make_client, tmp_path):
    relay = start_relay(tmp_path / "slow", env={"E2EE_SEND_QUEUE_BYTES": str(512 * 1024), "E2EE_RATE_SENDS_PER_S": "0"})
    try:
        alice = await make_client("alice", url=relay.url)
        bob = await make_client("bob", url=relay.url)
        carol = await make_client("carol", url=relay.url)
        conv = await alice.create_conversation("group", ["bob", "carol"])
        await alice.connect()
        await carol.connect()
        stalled = await open_ws(relay, bob.token, max_queue=1)  # bob reads nothing from here on
        await recv_type(stalled, "ready")
        text = "z" * 60_000
        n = 120  # 120 x ~80 KB envelopes = ~10 MB toward bob, the relay's bound is 512 KiB
        sent = [await alice.send_text(conv, text) for _ in range(n)]
        got = [await next_message(carol) for _ in range(n)]
        assert [m.seq for m in got] == [s.seq for s in sent]  # carol unaffected
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(stalled.recv(), 10)
        assert stalled.close_code == 1013
        assert "send queue full" in stalled.close_reason
        await bob.connect()  # catches up by sync
        synced = [await next_message(bob) for _ in range(n)]
        assert [m.seq for m in synced] == [s.seq for s in sent]
    finally:
        relay.stop()


@pytest.mark.process  # SIGKILL
async def test_acked_messages_survive_sigkill(make_client, relay):  # the default synchronous=NORMAL (WAL)
    alice = await make_client("alice")
    bob = await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.connect()
    sent = [await alice.send_text(conv, f"durable {i}") for i in range(25)]
    relay.stop(signal.SIGKILL)  # right after the 25th ack
    relay.start()
    assert db_count(relay) == 25
    await bob.connect()
    got = [await next_message(bob) for _ in range(25)]
    assert [m.text for m in got] == [f"durable {i}" for i in range(25)]
    assert [m.seq for m in got] == [s.seq for s in sent]


async def test_rest_send_has_the_same_checks_and_is_idempotent(make_client, relay):
    (alice, bob), conv = await group(make_client, "alice", "bob")
    people = [alice.identity.public, bob.identity.public]
    env = sealed(alice, conv, "over REST", people)
    url = f"{relay.url}/v1/conversations/{conv}/messages"
    async with httpx2.AsyncClient(headers={"Content-Type": "application/jose+json"}) as http:
        first = await http.post(url, content=env, headers={"Authorization": f"Bearer {alice.token}"})
        again = await http.post(url, content=env, headers={"Authorization": f"Bearer {alice.token}"})
        spoof = await http.post(url, content=env, headers={"Authorization": f"Bearer {bob.token}"})
        anon = await http.post(url, content=env)
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["seq"] == again.json()["seq"] and again.json()["duplicate"] is True
    assert spoof.status_code == 400 and spoof.json()["error"]["code"] == "sender_mismatch"
    assert anon.status_code == 401
    assert db_count(relay) == 1
    await bob.connect()
    assert (await next_message(bob)).text == "over REST"


async def test_members_and_key_changes_reach_members_as_events(make_client, relay):
    from shared import membership, rotation
    from shared.b64 import b64u_encode
    from shared.keys import Identity, spki_der

    (alice, bob), conv = await group(make_client, "alice", "bob")
    carol = await make_client("carol")
    ws = await open_ws(relay, bob.token)
    await recv_type(ws, "ready")
    async with httpx2.AsyncClient(base_url=relay.url, headers={"Authorization": f"Bearer {alice.token}"}) as http:
        add = membership.change(
            alice.membership.head(conv), alice.identity, "add", add=[membership.member_of(carol.identity.public)]
        )
        r = await http.post(f"/v1/conversations/{conv}/log", json={"statement": add.signed})
        assert r.status_code == 201 and r.json() == {
            "id": conv,
            "title": "group",
            "members": ["alice", "bob", "carol"],
            "epoch": 1,
            "head": add.hash,
        }
        assert await recv_type(ws, "event") == {
            "type": "event",
            "kind": "members_changed",
            "user": None,
            "conversation": conv,
        }
        new = Identity.generate("alice", 2048)
        body = {
            "wrap_key": b64u_encode(spki_der(new.public.wrap_key)),
            "sign_key": b64u_encode(spki_der(new.public.sign_key)),
        }
        old = alice.identity
        stmt = rotation.Rotation("alice", (old.wrap_kid, old.sign_kid), (new.wrap_kid, new.sign_kid), 1)
        bad = await http.post(
            "/v1/keys/rotate",
            json={**body, "counter": 1, "signature": b64u_encode(rotation.sign(new.sign_private, stmt))},
        )
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "signature_invalid"
        v1 = await http.post(
            "/v1/keys/rotate",
            json={  # a legacy v1 statement is no longer accepted
                **body,
                "counter": 1,
                "signature": b64u_encode(old.sign_private.sign(rotation.statement_v1(new.wrap_kid, new.sign_kid))),
            },
        )
        assert v1.status_code == 400 and v1.json()["error"]["code"] == "signature_invalid"
        for counter in (0, 2):  # the statement's place in the chain is checked
            wrong = rotation.Rotation("alice", stmt.old, stmt.new, counter) if counter else stmt
            r = await http.post(
                "/v1/keys/rotate",
                json={**body, "counter": counter, "signature": b64u_encode(rotation.sign(old.sign_private, wrong))},
            )
            assert r.status_code == 409 and r.json()["error"]["field"] == "counter"
        good = await http.post(
            "/v1/keys/rotate",
            json={**body, "counter": 1, "signature": b64u_encode(rotation.sign(old.sign_private, stmt))},
        )
        assert good.status_code == 200 and good.json()["counter"] == 1
        assert (await recv_type(ws, "event"))["kind"] == "key_changed"
        keys = (await http.get("/v1/users/alice/keys")).json()
        assert keys["wrap_kid"] == new.wrap_kid
        history = (await http.get("/v1/users/alice/keys/history")).json()["keys"]
        assert [k["current"] for k in history] == [False, True]
        assert history[0]["rotation_sig"] is None and history[1]["rotation_sig"]
        assert [(k["counter"], k["rotation_v"]) for k in history] == [(0, None), (1, 2)]
        assert history[1]["published_seq"] == good.json()["published_seq"] == 0  # no message stored yet
        dave = await make_client("dave")
        kick = membership.change(add, dave.identity, "remove", remove=["bob"])
        outsider = await http.post(
            f"/v1/conversations/{conv}/log",
            json={"statement": kick.signed},
            headers={"Authorization": f"Bearer {dave.token}"},
        )
        assert (outsider.status_code, outsider.json()["error"]["code"]) == (400, "actor_not_member")
        assert (
            await http.get(f"/v1/conversations/{conv}/log", headers={"Authorization": f"Bearer {dave.token}"})
        ).status_code == 403
    await ws.close()


async def test_send_rate_limit_answers_with_retry_after(make_client, tmp_path):
    relay = start_relay(tmp_path / "rl", env={"E2EE_RATE_SENDS_PER_S": "0.1", "E2EE_RATE_SENDS_BURST": "3"})
    try:
        alice = await make_client("alice", url=relay.url)
        await make_client("bob", url=relay.url)
        conv = await alice.create_conversation("pair", ["bob"])
        await alice.connect()
        for i in range(3):
            await alice.send_text(conv, f"ok {i}")
        with pytest.raises(ClientError) as err:
            await alice.send_text(conv, "one too many")
        assert err.value.code == "rate_limited"
        assert 0 < err.value.detail["retry_after"] <= 10.0
    finally:
        relay.stop()


async def test_retry_after_a_membership_change_gets_the_original_ack(make_client, relay):
    (alice, bob), conv = await group(make_client, "alice", "bob")
    carol = await make_client("carol")
    people = [alice.identity.public, bob.identity.public]
    env = sealed(alice, conv, "sent once", people)
    ws = await open_ws(relay, alice.token)
    await recv_type(ws, "ready")
    await ws.send(send_frame(conv, env))
    first = await recv_type(ws, "stored")
    await alice.change_members(conv, add=["carol"])
    assert (await recv_type(ws, "event"))["kind"] == "members_changed"
    await ws.send(send_frame(conv, env))  # the retry: sealed before carol joined
    again = await recv_type(ws, "stored")
    assert (again["seq"], again["duplicate"]) == (first["seq"], True)
    stale = envelope.seal(
        Text("new one", ts=now_ms(), ctr=2), alice.identity, conv, people, epoch=0, head=envelope.parse(env).header.mh
    )
    await ws.send(send_frame(conv, stale))  # a new message must be sealed to the new epoch
    err = await recv_type(ws, "error")
    assert (err["code"], err["detail"]) == ("epoch_stale", {"epoch": 1, "head": alice.membership.head(conv).hash})
    fresh = sealed(alice, conv, "new one", people, counter=2)
    await ws.send(send_frame(conv, fresh))  # ... and to its members: carol too
    err = await recv_type(ws, "error")
    assert (err["code"], err["detail"]["missing"]) == ("recipients_mismatch", ["carol"])
    await ws.close()
    assert db_count(relay) == 1
    del bob, carol


async def test_members_learn_of_a_new_conversation_by_event(make_client, relay):
    alice, bob = await make_client("alice"), await make_client("bob")
    ws = await open_ws(relay, bob.token)
    await recv_type(ws, "ready")
    conv = await alice.create_conversation("hello", ["bob"])
    assert await recv_type(ws, "event") == {
        "type": "event",
        "kind": "members_changed",
        "user": None,
        "conversation": conv,
    }
    await ws.close()
