"""Levels 1-3 on a real relay: same path, readable by the relay; level 4 clients refuse them."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx2
import pytest

from client_tui.core import DowngradeRefused
from client_tui.levels import LevelClient, LevelMismatch
from shared import plain
from shared.errors import KeyInvalid
from tests.helpers.relays import start_relay


async def accounts(make_client, relay, *names):
    clients = [await make_client(n, url=relay.url) for n in names]
    conv = await clients[0].create_conversation("levels", list(names[1:]))
    return clients, conv


@pytest.mark.parametrize("level", [1, 2, 3])
async def test_level_chat_is_delivered_and_stored_readable(make_client, tmp_path, level):
    relay = start_relay(tmp_path / f"l{level}", "--level", str(level), "--demo-level")
    try:
        (alice, bob, carol), conv = await accounts(make_client, relay, "alice", "bob", "carol")
        la, lb, lc = (LevelClient(relay.url, c.username, level, token=c.token) for c in (alice, bob, carol))
        for c in (la, lb, lc):
            await c.connect()
        sent = await la.send_text(conv, f"level {level} says héllo 👋")
        for reader in (lb, lc):
            got = await asyncio.wait_for(reader.events.get(), 10)
            assert (got.text, got.sender, got.seq, got.mid) == (f"level {level} says héllo 👋", "alice",
                                                                 sent.seq, sent.mid)
        reply = await lb.send_text(conv, "and back")
        assert (await asyncio.wait_for(la.events.get(), 10)).seq == reply.seq
        await lc.close()
        lc2 = LevelClient(relay.url, "carol", level, token=carol.token, relay_key=lc.pinned_relay_key)
        await lc2.connect()
        await lc2.sync(0)
        synced = [await asyncio.wait_for(lc2.events.get(), 10) for _ in range(2)]
        assert [m.text for m in synced] == [f"level {level} says héllo 👋", "and back"]
        for c in (la, lb, lc2):
            await c.close()
        db = sqlite3.connect(relay.data_dir / "relay.db")
        stored = [plain.parse(r[0], max_bytes=10_000) for r in db.execute("SELECT envelope FROM messages")]
        db.close()
        assert [m.text for m in stored] == [f"level {level} says héllo 👋", "and back"]  # the relay reads it
    finally:
        relay.stop()


async def test_level_4_client_refuses_a_lower_level_relay(make_client, tmp_path):
    relay = start_relay(tmp_path / "l3", "--level", "3", "--demo-level")
    try:
        alice = await make_client("alice", url=relay.url)
        with pytest.raises(DowngradeRefused):
            await alice.connect()
        with pytest.raises(LevelMismatch):
            await LevelClient(relay.url, "alice", 2, token=alice.token).connect()
        with pytest.raises(KeyInvalid):  # a pinned relay key that changed is refused
            await LevelClient(relay.url, "alice", 3, token=alice.token, relay_key=b"other key").connect()
        async with httpx2.AsyncClient(base_url=relay.url) as http:
            key = (await http.get("/v1/relay-key")).json()
            assert len(key["kid"]) == 43
            r = await http.post("/v1/conversations/x/messages", content=b"{}",
                                headers={"Authorization": f"Bearer {alice.token}", "Content-Type": "application/json"})
            assert r.json()["error"]["code"] == "invalid_request"
    finally:
        relay.stop()


def test_levels_below_4_need_the_demonstration_flag(tmp_path):
    from server.cli import main

    assert main(["serve", "--level", "2", "--data-dir", str(tmp_path)]) == 2
