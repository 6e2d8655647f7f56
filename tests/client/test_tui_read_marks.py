"""My message's read mark in a group says who read it (newcomer F8): a bare "✓✓ read" while only
carol of bob and carol had read it looked like "everyone read it"."""

from __future__ import annotations

import pytest

from client_tui.app import ChatApp
from client_tui.core.events import ReadUpTo
from client_tui.messagebody import read_words
from tests.helpers.clients import wait_until
from tests.helpers.tui import alive, chat_shown, offline_client, screen_text

SIZES = [(60, 20), (80, 24), (120, 40)]


def test_read_words_name_the_readers_or_count_them():
    assert read_words(["alice"], 1) == "✓✓ read"  # a conversation of two: the other one read it
    assert read_words(["carol"], 2) == "✓✓ read by carol"
    assert read_words(["bob", "carol"], 2) == "✓✓ read by bob, carol"
    assert read_words(["bob", "carol", "dave"], 4) == "✓✓ read by 3 of 4"
    assert read_words(["bob", "carol"], 0) == "✓✓ read by bob, carol"  # members not known yet
    assert read_words(["[b]x[/b]\x1b[31m"], 2) == "✓✓ read by [b]x[/b]␛[31m"  # a name is drawn as text


def log_words(app) -> str:
    """The message list's text as one line of words (a mark wrapped at 60 columns joined again)."""
    x = app.chat.log_view.region.x
    return " ".join(" ".join(line[x:] for line in screen_text(app).splitlines()).replace("▎", " ").split())


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    relay.log_of("conv-1", ["alice", "bob", "carol"])
    yield client, relay
    await client.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_group_message_read_by_some_members_names_them(bob, size):
    client, _ = bob
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app))
        assert sorted(client.members["conv-1"]) == ["alice", "bob", "carol"]
        mine = await client.messaging.send("conv-1", "group hello")
        await client.outgoing.mark_stored(client.outgoing.by_mid[mine.mid], 50)
        client.receipts.reads["conv-1"] = {"carol": 50}
        await client.events.put(ReadUpTo("conv-1", "carol", 50))
        await wait_until(lambda: "✓✓ read by carol" in log_words(app))
        client.receipts.reads["conv-1"]["alice"] = 50
        await client.events.put(ReadUpTo("conv-1", "alice", 50))
        await wait_until(lambda: "✓✓ read by alice, carol" in log_words(app))
        assert alive(app)
