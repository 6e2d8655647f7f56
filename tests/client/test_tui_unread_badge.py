"""The unread count of a conversation is always shown whole in the list: a long title is cut short
with "…" to leave it room (at 80 columns ``[b]x[/b] [link=x]y[/link] [red]r`` hid the count)."""

from __future__ import annotations

import pytest

from client_tui.app import ChatApp
from tests.helpers.clients import wait_until
from tests.helpers.tui import chat_shown, offline_client, screen_lines

LONG_TITLE = "[b]x[/b] [link=x]y[/link] [red]r"


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("title", [LONG_TITLE, LONG_TITLE * 3, "short"])
async def test_the_unread_count_shows_beside_a_long_title(tmp_path, identities, size, title):
    client, relay = await offline_client(tmp_path / "c", identities)
    client.titles["conv-2"] = title
    client.members["conv-2"] = ["alice", "bob"]
    app = ChatApp(client, "conv-1")
    try:
        async with app.run_test(size=size) as pilot:
            await wait_until(lambda: chat_shown(app))
            for i in range(12):
                await relay.deliver(
                    relay.seal("alice", f"m{i}", conv="conv-2", to=["alice", "bob"]), sender="alice", conv="conv-2"
                )
            await wait_until(lambda: app.chat._label_shown["conv-2"].plain.endswith("12"))
            await pilot.pause()
            label = app.chat._labels["conv-2"]
            row = label.region
            line = screen_lines(app)[row.y][row.x : row.right]
            assert line.rstrip().endswith(" 12"), (line, row)
            assert line.startswith(title[:4]), line
            if len(title) > row.width:
                assert "…" in line, line
    finally:
        await client.close()
