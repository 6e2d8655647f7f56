"""Levels 1-3 on a real relay: same path, readable by the relay; level 4 clients refuse them."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx2
import pytest

from client_tui.commands import EXIT_FAILED
from client_tui.core import ChatClient, DowngradeRefused
from client_tui.levels import LevelClient, LevelMismatch
from shared import plain
from shared.errors import KeyInvalid
from tests.helpers.cli import run as cli_run
from tests.helpers.config import FAST_KDF, PASSWORD, TEST_BITS, passphrase
from tests.helpers.relays import start_relay


async def accounts(make_client, relay, level, *names):
    clients = [await make_client(n, url=relay.url, level=level) for n in names]
    conv = await clients[0].create_conversation("levels", list(names[1:]))
    return clients, conv


@pytest.mark.parametrize("level", [1, 2, 3])
async def test_level_chat_is_delivered_and_stored_readable(make_client, tmp_path, level):
    relay = start_relay(tmp_path / f"l{level}", "--level", str(level), "--demo-level")
    try:
        (alice, bob, carol), conv = await accounts(make_client, relay, level, "alice", "bob", "carol")
        la, lb, lc = (LevelClient(relay.url, c.username, level, token=c.token) for c in (alice, bob, carol))
        for c in (la, lb, lc):
            await c.connect()
        sent = await la.send_text(conv, f"level {level} says héllo 👋")
        for reader in (lb, lc):
            got = await asyncio.wait_for(reader.events.get(), 10)
            assert (got.text, got.sender, got.seq, got.mid) == (
                f"level {level} says héllo 👋",
                "alice",
                sent.seq,
                sent.mid,
            )
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
        alice = await make_client("alice", url=relay.url, level=3)  # an account made for a LevelClient
        with pytest.raises(DowngradeRefused):
            await alice.connect()
        with pytest.raises(LevelMismatch):
            await LevelClient(relay.url, "alice", 2, token=alice.token).connect()
        with pytest.raises(KeyInvalid):  # a pinned relay key that changed is refused
            await LevelClient(relay.url, "alice", 3, token=alice.token, relay_key=b"other key").connect()
        async with httpx2.AsyncClient(base_url=relay.url) as http:
            key = (await http.get("/v1/relay-key")).json()
            assert len(key["kid"]) == 43
            r = await http.post(
                "/v1/conversations/x/messages",
                content=b"{}",
                headers={"Authorization": f"Bearer {alice.token}", "Content-Type": "application/json"},
            )
            assert r.json()["error"]["code"] == "invalid_request"
    finally:
        relay.stop()


async def test_level_4_client_learns_the_level_before_it_registers_or_logs_in(make_client, tmp_path):
    """Nothing reaches a level-3 relay from a level-4 client: no account, no public key, no
    password, no conversation (its title would be readable there): the relay's /healthz level is
    checked first, and refused with the websocket's own error."""
    relay = start_relay(tmp_path / "l3", "--level", "3", "--demo-level")
    try:
        xavier = await make_client("xavier", url=relay.url, register=False)
        with pytest.raises(DowngradeRefused, match="relay runs level 3; this client requires 4"):
            await xavier.register(PASSWORD, passphrase("xavier"), bits=TEST_BITS)
        assert not xavier.keystore_path.exists()
        yves = await make_client("yves", url=relay.url, level=3)
        async with httpx2.AsyncClient(base_url=relay.url) as http:
            asked = await http.get("/v1/users/xavier/keys", headers={"Authorization": f"Bearer {yves.token}"})
            assert asked.status_code == 404
        # an account that exists there (made for a LevelClient) is not logged in to either
        await make_client("wanda", url=relay.url, level=3)
        wanda = await make_client("wanda", url=relay.url, register=False)
        with pytest.raises(DowngradeRefused):
            await wanda.login(PASSWORD, passphrase("wanda"))
        assert wanda.token is None
    finally:
        relay.stop()


def test_level_4_commands_refuse_a_lower_level_relay_in_one_line(tmp_path, monkeypatch, capsys):
    """``e2ee-chat register`` and ``send --to`` against a level-3 relay: status 1, one line, and
    no account nor conversation made there (its title would be readable by the relay)."""
    relay = start_relay(tmp_path / "l3", "--level", "3", "--demo-level")
    root = tmp_path / "clients"

    async def made_for_levels(*names: str) -> None:
        for n in names:
            c = ChatClient(relay.url, n, root, kdf=FAST_KDF, relay_level=3)
            await c.register(PASSWORD, passphrase(n), bits=TEST_BITS)
            await c.close()

    try:
        asyncio.run(made_for_levels("wanda", "yves"))
        where = ("--server", relay.url, "--profile", str(root))
        code, _, err = cli_run(monkeypatch, capsys, "xavier", "register", *where)
        assert (code, err.count("\n")) == (EXIT_FAILED, 1) and "relay runs level 3" in err, err
        code, _, err = cli_run(
            monkeypatch, capsys, "wanda", "send", "--to", "yves", "--text", "hi", "--title", "secret plans", *where
        )
        assert (code, err.count("\n")) == (EXIT_FAILED, 1) and "relay runs level 3" in err, err
        with httpx2.Client(base_url=relay.url) as http:
            token = http.post("/v1/token", json={"username": "yves", "password": PASSWORD}).json()["token"]
            auth = {"Authorization": f"Bearer {token}"}
            assert http.get("/v1/users/xavier/keys", headers=auth).status_code == 404
            assert http.get("/v1/conversations", headers=auth).json()["conversations"] == []
    finally:
        relay.stop()


def test_levels_below_4_need_the_demonstration_flag(tmp_path):
    from server.cli import main

    assert main(["serve", "--level", "2", "--data-dir", str(tmp_path)]) == 2
