"""Two relay processes sharing PostgreSQL and Redis: cross-relay delivery, a relay killed, and
Redis cut for a while (issue #8)."""

from __future__ import annotations

import asyncio
import shutil
import signal

import httpx2
import pytest

from tests.helpers.clients import barrier, next_message
from tests.helpers.config import PASSWORD
from tests.helpers.scale import two_relays, user, wait_broker

pytestmark = pytest.mark.process  # two relay processes on PostgreSQL and Redis, one of them killed


@pytest.fixture
async def across(tmp_path, pg_url, redis_path):
    """Relays A and B on one database and broker; alice online on A, bob on B, one conversation."""
    a, b = two_relays(tmp_path, pg_url, redis_path.url)
    try:
        alice = await user(a.url, "alice", tmp_path / "c")
        bob = await user(b.url, "bob", tmp_path / "c")
        conv = await alice.create_conversation("across", ["bob"])
        await alice.connect()
        await bob.connect()
        await wait_broker(a, True)
        await wait_broker(b, True)
        yield a, b, alice, bob, conv
        await alice.close()
        await bob.close()
    finally:
        a.stop()
        b.stop()


async def test_alice_on_a_and_bob_on_b_chat_both_ways(across):
    a, b, alice, bob, conv = across
    async with httpx2.AsyncClient() as http:  # relays share the JWT key: a token from A works on B
        r = await http.get(b.url + "/v1/conversations", headers={"Authorization": f"Bearer {alice.token}"})
        assert [c["id"] for c in r.json()["conversations"]] == [conv]
    for i in range(5):
        sent = await alice.send_text(conv, f"a->b {i}")
        got = await next_message(bob)
        assert (got.text, got.seq) == (f"a->b {i}", sent.seq)
        sent = await bob.send_text(conv, f"b->a {i} ✓")
        got = await next_message(alice)
        assert (got.text, got.seq) == (f"b->a {i} ✓", sent.seq)


async def test_relay_a_killed_alice_moves_to_b_and_loses_nothing(across, tmp_path):
    a, b, alice, bob, conv = across
    first = [await bob.send_text(conv, f"before {i}") for i in range(3)]
    assert [(await next_message(alice)).seq for _ in first] == [s.seq for s in first]
    a.stop(signal.SIGKILL)
    later = [await bob.send_text(conv, f"while a is down {i}") for i in range(3)]
    await alice.close()
    moved = await user(b.url, "alice", tmp_path / "c", register=False)
    shutil.copytree(alice.profile, moved.profile)  # the same device, now pointed at relay B
    await moved.login(PASSWORD, "alice passphrase")
    await moved.connect()
    got = [await next_message(moved) for _ in later]
    assert [m.text for m in got] == [f"while a is down {i}" for i in range(3)]
    assert [m.seq for m in got] == [s.seq for s in later]
    await barrier(moved)  # a doubled delivery was queued to alice before this
    extra = []
    while not moved.events.empty():
        extra.append(moved.events.get_nowait())
    assert not [e for e in extra if getattr(e, "text", None)]  # nothing doubled
    await moved.close()


async def test_redis_unreachable_for_a_while_relays_keep_storing_and_clients_catch_up(across, redis_path):
    a, b, alice, bob, conv = across
    await redis_path.cut()
    await wait_broker(a, False)
    await wait_broker(b, False)
    during = [await alice.send_text(conv, f"during the outage {i}") for i in range(4)]  # stored and acked
    await asyncio.sleep(0.5)
    assert bob.events.empty() or not any(hasattr(e, "text") for e in list(bob.events._queue))
    await redis_path.restore()
    got = [await next_message(bob, timeout=30) for _ in during]
    assert sorted(m.seq for m in got) == [s.seq for s in during]
    after = await alice.send_text(conv, "after the outage")
    assert (await next_message(bob)).seq == after.seq  # live fan-out works again
