"""Two relay processes sharing PostgreSQL and Redis: cross-relay delivery, a relay killed, and
Redis cut for a while (issue #8)."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import signal

import httpx2
import pytest

from client_tui.core import ChatClient
from tests.conftest import FAST_KDF, PASSWORD, TEST_BITS, start_relay
from tests.e2e_helpers import next_message


def two_relays(tmp_path, pg_url: str, broker_url: str, env: dict[str, str] | None = None):
    """Relays A and B on one database and one broker channel, sharing A's JWT secret."""
    channel = f"e2ee-test-{secrets.token_hex(4)}"
    args = ["--database-url", pg_url, "--broker", broker_url, "--broker-channel", channel]
    a = start_relay(tmp_path / "relay-a", *args, env=env)
    b = start_relay(tmp_path / "relay-b", *args, env={**(env or {}), "E2EE_JWT_SECRET": jwt_secret(a)})
    return a, b


def jwt_secret(relay) -> str:
    return (relay.data_dir / "jwt.secret").read_text().strip()


async def user(url: str, name: str, root, register: bool = True) -> ChatClient:
    c = ChatClient(url, name, root, kdf=FAST_KDF)
    if register:
        await c.register(PASSWORD, f"{name} passphrase", bits=TEST_BITS)
    return c


async def wait_broker(relay, up: bool, timeout: float = 20) -> None:
    async with httpx2.AsyncClient() as http:
        for _ in range(int(timeout / 0.1)):
            m = (await http.get(relay.url + "/v1/metrics", headers=relay.operator_headers)).json()
            if m["broker"]["up"] is up:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"broker never became up={up}")


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
    await asyncio.sleep(0.5)
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
