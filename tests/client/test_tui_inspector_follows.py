"""The inspector (F2) follows its message off the list (newcomer F14): it kept showing a deleted
or expired message's envelope, mid and "disappears at" after the row had gone."""

from __future__ import annotations

import pytest

from client_tui.app import ChatApp
from client_tui.core.record import Doc
from tests.client.test_tui_messaging import document, receive
from tests.helpers.clients import wait_until
from tests.helpers.tui import alive, chat_shown, offline_client, rendered_text, screen_text

SIZES = [(60, 20), (80, 24), (120, 40)]


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    relay.log_of("conv-1", ["alice", "bob", "carol"])
    yield client, relay
    await client.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_inspector_leaves_a_deleted_message(bob, size):
    client, relay = bob
    first = await receive(client, relay, "alice", "first words")
    second = await receive(client, relay, "alice", "second words")
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and "second words" in screen_text(app))
        await pilot.press("f2")
        await wait_until(lambda: app.chat.inspected is not None and second.mid in rendered_text(app.chat.inspected))
        await document(client, "alice", Doc(t="delete", ref=second.mid))
        await wait_until(lambda: "second words" not in screen_text(app))
        await wait_until(lambda: second.mid not in rendered_text(app.chat.inspected))
        shown = rendered_text(app.chat.inspected)
        assert shown.startswith("Select a message"), shown  # the selection went with the row
        assert first.mid not in shown
        assert second.mid not in screen_text(app)
        assert alive(app)
