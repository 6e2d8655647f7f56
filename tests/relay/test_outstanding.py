"""``GET /v1/keys/outstanding`` and ``deliveries.wrap_kid`` (migration 0011; FS-SPEC, relay part):
the relay records, on every level-4 delivery, the wrap key its recipient's copy was sealed to, and
tells a user how many of their envelopes wrapped to a key they have not acknowledged yet, so a
client deletes a retired private key only once nothing sealed to it is left to fetch. Real relays
in this process, on a SQLite file and on this machine's PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import text

from client_tui.core import KeyChanged
from client_tui.core.record import now_ms
from server import db, queries, store
from server.keys_api import MAX_OUTSTANDING_KIDS
from server.migrate import upgrade
from server.writer import Writer
from shared import envelope, frames
from shared.b64 import b64u_encode
from shared.content import Text
from shared.keys import Identity
from tests.helpers.asgi import bearer, http, new_conversation, register, rest_send, running
from tests.helpers.clients import wait_event
from tests.helpers.config import TEST_BITS, passphrase
from tests.helpers.relays import start_relay
from tests.helpers.scale import database_url, fresh_pg_url
from tests.helpers.ws import open_ws, recv_type

ROUTE = "/v1/keys/outstanding"


def kid_params(*kids: str) -> list[tuple[str, str]]:
    return [("wrap_kid", k) for k in kids]


async def counts(c: httpx2.AsyncClient, login: dict, *kids: str) -> dict[str, int]:
    r = await c.get(ROUTE, params=kid_params(*kids), headers=bearer(login))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["username"] == login["username"]
    return body["outstanding"]


@contextlib.asynccontextmanager
async def relay_on(kind: str, tmp_path: Path):
    """A started in-process relay (uvicorn on a port) on a SQLite file or a fresh PostgreSQL
    database, and that database's SQLAlchemy URL."""
    async with contextlib.AsyncExitStack() as stack:
        if kind == "sqlite":
            relay = start_relay(tmp_path / "relay")
            url = f"sqlite+aiosqlite:///{relay.data_dir / 'relay.db'}"
        else:
            url = await stack.enter_async_context(fresh_pg_url())
            relay = await asyncio.to_thread(start_relay, tmp_path / "relay", "--database-url", url)
        try:
            yield relay, url
        finally:
            relay.stop()


async def sql(url: str, statement: str, **params) -> list[tuple]:
    engine = db.create_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        await engine.dispose()


async def send(c: httpx2.AsyncClient, login: dict, sender: Identity, cid: str, head: str, people, n: int) -> int:
    """A level-4 envelope from ``sender`` to ``people`` (epoch 0), sent over REST; its seq."""
    env = envelope.seal(Text(f"message {n}", ts=now_ms(), ctr=n), sender, cid, people, epoch=0, head=head)
    return await rest_send(c, login, cid, env)


async def delivered(ws, seq: int, user: str) -> None:
    """Wait for the sender's ``delivered`` receipt of ``seq`` by ``user`` (sent after the ack's commit)."""
    while True:
        frame = await recv_type(ws, "delivered")
        if (frame["seq"], frame["user"]) == (seq, user):
            return


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_the_count_per_wrap_key_is_the_callers_unacked_envelopes_and_falls_with_acks(kind, tmp_path, identities):
    alice_id, bob_id, carol_id = identities["alice"], identities["bob"], identities["carol"]
    a_kid, b_kid, c_kid = alice_id.wrap_kid, bob_id.wrap_kid, carol_id.wrap_kid
    other_kid = b64u_encode(os.urandom(32))  # a key of bob's nothing was sealed to
    async with relay_on(kind, tmp_path) as (relay, url), httpx2.AsyncClient(base_url=relay.url) as c:
        alice, bob, carol = [await register(c, i) for i in (alice_id, bob_id, carol_id)]
        cid, head = await new_conversation(c, alice, alice_id, [bob_id])
        people = [alice_id.public, bob_id.public]  # the statement's member order
        seqs = [await send(c, alice, alice_id, cid, head, people, n) for n in (1, 2, 3)]
        # every delivery records the key its recipient's copy was wrapped to (the header's rkids)
        rows = await sql(url, "SELECT seq, user_id, wrap_kid FROM deliveries ORDER BY seq, user_id")
        users = dict(await sql(url, "SELECT id, username FROM users"))
        assert [(s, users[u], k) for s, u, k in rows] == [
            (s, name, kid) for s in seqs for name, kid in (("alice", a_kid), ("bob", b_kid))
        ]
        assert await counts(c, bob, b_kid, other_kid) == {b_kid: 3, other_kid: 0}
        # only the caller's own deliveries: alice's copy is hers (acked as she sent it), bob's
        # envelopes are never counted for alice or carol, whatever key id they ask about
        assert await counts(c, alice, a_kid, b_kid) == {a_kid: 0, b_kid: 0}
        assert await counts(c, carol, b_kid, c_kid, a_kid) == {b_kid: 0, c_kid: 0, a_kid: 0}
        assert await counts(c, bob, a_kid) == {a_kid: 0}

        sender = await open_ws(relay, alice["token"])
        reader = await open_ws(relay, bob["token"])
        try:
            await recv_type(sender, "ready")
            await recv_type(reader, "ready")
            await reader.send(frames.encode(frames.Ack(seqs[1])).decode())
            await delivered(sender, seqs[1], "bob")
            assert await counts(c, bob, b_kid, b_kid) == {b_kid: 1}  # a repeated kid: answered once

            # a delivery stored before migration 0011 has no key: counted for every key asked
            fourth = await send(c, alice, alice_id, cid, head, people, 4)
            await sql(url, "UPDATE deliveries SET wrap_kid = NULL WHERE seq = :s", s=fourth)
            assert await counts(c, bob, b_kid, other_kid) == {b_kid: 2, other_kid: 1}
            assert await counts(c, carol, c_kid) == {c_kid: 0}  # not bob's NULL row either

            await reader.send(frames.encode(frames.Ack(fourth)).decode())
            await delivered(sender, fourth, "bob")
            assert await counts(c, bob, b_kid, other_kid) == {b_kid: 0, other_kid: 0}
        finally:
            await reader.close()
            await sender.close()
        # acknowledged rows stay until retention: the count is of what is unacknowledged, not stored
        assert len(await sql(url, "SELECT seq FROM deliveries WHERE acked_at_ms IS NOT NULL")) == 8


async def test_a_rotated_key_is_counted_apart_from_the_new_one(make_client, relay):
    """Bob rotates while two envelopes wait for him: they stay counted under his old key, the one
    sealed after the rotation under his new key; his client's sync and ack clear both."""
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("fs", ["bob"])
    await alice.connect()
    for n in (1, 2):
        await alice.send_text(conv, f"before {n}")
    old = bob.identity.wrap_kid
    await bob.rotate_keys(passphrase("bob"), bits=TEST_BITS)
    new = bob.identity.wrap_kid
    assert new != old
    await wait_event(alice, KeyChanged, lambda e: e.user == "bob")
    alice.accept_key("bob")
    last = await alice.send_text(conv, "after the rotation")  # re-sealed to the epoch with bob's new key
    login = {"token": bob.token, "username": "bob"}
    async with httpx2.AsyncClient(base_url=relay.url) as c:
        assert await counts(c, login, old, new) == {old: 2, new: 1}
        sender = await open_ws(relay, alice.token)
        try:
            await recv_type(sender, "ready")
            await bob.connect()  # syncs, opens and acknowledges all three
            await delivered(sender, last.seq, "bob")
        finally:
            await sender.close()
        assert await counts(c, login, old, new) == {old: 0, new: 0}


async def test_bad_key_id_lists_are_refused_with_invalid_request(settings_for, identities):
    good = [b64u_encode(os.urandom(32)) for _ in range(MAX_OUTSTANDING_KIDS + 1)]
    bad = {
        "short": good[0][:42],
        "long": good[0] + "A",
        "padded": good[0][:42] + "=",
        "not canonical": good[0][:42] + "B",  # the last character's low bits must be zero
        "standard alphabet": "+" + good[0][1:],
        "markup": "[b]" + good[0][3:],
        "empty": "",
    }
    async with running(settings_for()) as app, http(app) as c:
        alice = await register(c, identities["alice"])
        r = await c.get(ROUTE, params=kid_params(*good[:MAX_OUTSTANDING_KIDS]), headers=bearer(alice))
        assert r.status_code == 200 and r.json()["outstanding"] == dict.fromkeys(good[:MAX_OUTSTANDING_KIDS], 0)
        for params in (kid_params(*good), [], [("wrap_kids", good[0])]):  # 17, none, a misspelt name
            r = await c.get(ROUTE, params=params, headers=bearer(alice))
            assert r.status_code == 400, params
            assert (r.json()["error"]["code"], r.json()["error"]["field"]) == ("invalid_request", "wrap_kid")
        for name, kid in bad.items():
            r = await c.get(ROUTE, params=kid_params(good[0], kid), headers=bearer(alice))
            assert r.status_code == 400, name
            error = r.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_request", "wrap_kid"), name
            assert "#2" in error["message"] and (not kid or kid not in error["message"]), name
        # no token, a forged one: 401 before anything is counted
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            r = await c.get(ROUTE, params=kid_params(good[0]), headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "auth_failed"
        r = await c.get("/healthz")
        assert r.status_code == 200  # the relay serves on


@pytest.mark.parametrize("level", [2, 3])
async def test_below_level_4_the_relay_refuses_the_question(settings_for, identities, level):
    """Levels 1-3 read the messages and record no wrap keys: the route answers the level refusal
    the REST send uses at level 3 (invalid_request on ``level``), to every caller."""
    async with running(settings_for(level=level, demo_level=True)) as app, http(app) as c:
        alice = await register(c, identities["alice"])
        for headers in (bearer(alice), {}):
            r = await c.get(ROUTE, params=kid_params(identities["alice"].wrap_kid), headers=headers)
            assert r.status_code == 400
            error = r.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_request", "level")
            assert f"level {level}" in error["message"]
        assert json.loads((await c.get("/healthz")).text)["level"] == level


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_migration_0011_keeps_every_delivery_without_a_key_and_counts_it_for_any_key(kind, tmp_path):
    k1, k2, k3 = (b64u_encode(bytes([i]) * 32) for i in (1, 2, 3))
    async with database_url(kind, tmp_path) as url:
        await asyncio.to_thread(upgrade, url, "0010_message_expiry")
        await sql(
            url,
            "INSERT INTO users (id, username, password_hash, created_at_ms) VALUES "
            "(1, 'alice', 'x', 0), (2, 'bob', 'x', 0), (3, 'carol', 'x', 0)",
        )
        await sql(url, "INSERT INTO conversations (id, title, created_by, created_at_ms) VALUES ('conv1', 't', 1, 0)")
        for i in (1, 2, 3):
            ((seq,),) = await sql(
                url,
                "INSERT INTO messages (conversation_id, sender_id, mid, envelope, size, created_at_ms) "
                "VALUES ('conv1', 1, :mid, :env, 3, 0) RETURNING seq",
                mid=f"m{i}",
                env=b"abc",
            )
            await sql(
                url,
                "INSERT INTO deliveries (user_id, seq, acked_at_ms) VALUES (1, :s, 0), (2, :s, :bob), (3, :s, NULL)",
                s=seq,
                bob=7 if i == 1 else None,
            )
        before = await sql(url, "SELECT user_id, seq, acked_at_ms FROM deliveries ORDER BY seq, user_id")
        await asyncio.to_thread(upgrade, url)
        after = await sql(url, "SELECT user_id, seq, acked_at_ms, wrap_kid FROM deliveries ORDER BY seq, user_id")
        assert after == [(*row, None) for row in before] and len(after) == 9
        engine = db.create_engine(url)
        sessions = db.sessionmaker(engine)
        writer = Writer(sessions, db.create_writer_engine(url), inline=True)
        writer.start()
        try:
            async with sessions() as s:  # no key recorded: counted for each key asked, unacked only
                assert await queries.outstanding(s, 2, [k1, k2]) == {k1: 2, k2: 2}
                assert await queries.outstanding(s, 3, [k3]) == {k3: 3}
                assert await queries.outstanding(s, 1, [k1]) == {k1: 0}
            # stored after the upgrade: each delivery records its key; a mismatched list is refused
            # before it reaches the writer's transaction
            with pytest.raises(ValueError):
                store.NewMessage("conv1", 1, "bad", b"abc", [1, 2, 3], 0, [k1, k2])
            new = store.NewMessage("conv1", 1, "m4", b"abc", [1, 2, 3], 0, [k1, k2, k3])
            (stored,) = await writer.run(lambda s: store.insert_messages(s, [new]))
            assert await sql(
                url,
                "SELECT user_id, acked_at_ms IS NULL, wrap_kid FROM deliveries WHERE seq = :s ORDER BY user_id",
                s=stored.seq,
            ) == [(1, False, k1), (2, True, k2), (3, True, k3)]
            async with sessions() as s:
                assert await queries.outstanding(s, 2, [k1, k2]) == {k1: 2, k2: 3}
            await writer.run(store.ack_up_to(2, stored.seq))
            async with sessions() as s:
                assert await queries.outstanding(s, 2, [k1, k2]) == {k1: 0, k2: 0}
        finally:
            await writer.stop()
            await engine.dispose()
