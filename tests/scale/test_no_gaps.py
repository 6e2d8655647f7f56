"""No gaps across relays (issue 13): with two relays on one PostgreSQL, a message whose transaction
is still open on relay A must not be overtaken by one committed on relay B — a client that syncs
in between, and then syncs on from the cursor it got, misses nothing; and live delivery brings
both, in order."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest

from tests.helpers.clients import next_message
from tests.helpers.scale import two_relays, user, wait_broker
from tests.helpers.ws import open_ws, recv_type


async def sync_once(ws, after: int) -> tuple[list[int], int]:
    """One sync over a raw websocket: the seqs received and the cursor the relay answered."""
    await ws.send(json.dumps({"type": "sync", "after": after}))
    seqs = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame["type"] == "msg":
            seqs.append(frame["seq"])
        elif frame["type"] == "synced":
            return seqs, frame["cursor"]


async def waiting(db: asyncpg.Connection, lock: str) -> bool:
    """Whether a backend of this database waits for a ``lock`` (``transactionid``: a row another
    transaction holds; ``advisory``: the commit-order lock)."""
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND wait_event = $1",
            lock,
        )
    )


@pytest.mark.process  # two relay processes on PostgreSQL and Redis
async def test_a_transaction_held_open_on_one_relay_leaves_no_gap(tmp_path, pg_url, redis_path):
    a, b = two_relays(tmp_path, pg_url, redis_path.url)
    clients = []
    try:
        alice = await user(a.url, "alice", tmp_path / "c")
        bob, carol = await user(b.url, "bob", tmp_path / "c"), await user(b.url, "carol", tmp_path / "c")
        clients = [alice, bob, carol]
        on_a = await alice.create_conversation("x", ["bob"])
        on_b = await carol.create_conversation("y", ["bob"])
        for c in clients:
            await c.connect()
        await bob.wait_synced()
        await wait_broker(a, True)
        await wait_broker(b, True)
        first = await alice.send_text(on_a, "before")
        assert (await next_message(bob)).seq == first.seq

        db = await asyncpg.connect(pg_url.replace("+asyncpg", ""))
        hold = db.transaction()
        await hold.start()
        # alice's next message: relay A draws its seq, then waits on this row lock inside its transaction
        await db.execute("SELECT id FROM conversations WHERE id = $1 FOR UPDATE", on_a)
        held = asyncio.create_task(alice.send_text(on_a, "held open on A"))
        for _ in range(500):
            if await waiting(db, "transactionid"):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("relay A's transaction never reached the insert")
        # carol's message on relay B, meanwhile: it would take the next seq and commit first
        later = asyncio.create_task(carol.send_text(on_b, "sent on B meanwhile"))
        for _ in range(500):  # B committed (the gap this test is about) or waits for A to commit first
            if later.done() or await waiting(db, "advisory"):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("relay B neither committed nor waited")
        # a client of bob's that syncs in between: whatever it gets, syncing on from its cursor later
        # must bring everything else (it gets nothing now: B's message waits for A's to commit)
        ws = await open_ws(b, bob.token)
        await recv_type(ws, "ready")
        between, cursor = await sync_once(ws, first.seq)
        assert (between, cursor) == ([], first.seq)
        await hold.rollback()  # relay A's transaction goes on and commits; then relay B's
        await db.close()
        s_held, s_later = await held, await later
        assert s_held.seq < s_later.seq
        after, _ = await sync_once(ws, cursor)  # the in-between client syncs on from its cursor
        assert list(dict.fromkeys(after)) == [s_held.seq, s_later.seq]  # (live delivery may have sent them too)
        await ws.close()
        live = [await next_message(bob), await next_message(bob)]  # live delivery: both, in order
        assert [(m.seq, m.text) for m in live] == [(s_held.seq, "held open on A"), (s_later.seq, "sent on B meanwhile")]
    finally:
        for c in clients:
            await c.close()
        a.stop()
        b.stop()
