"""Type-ahead across Tab (newcomer F15): keys that arrive together — a fast typist, tmux
send-keys, a password manager's auto-type — go to the field that Tab moved to. Tab used to move
focus only after the key had travelled through the old field's queue, so the characters behind it
were already queued for the old field (the passphrase ended up masked in the password field)."""

from __future__ import annotations

import pytest
from textual import events
from textual.widgets import Input

from client_tui.app import ChatApp
from client_tui.login import LoginScreen
from client_tui.screens import NewConversationScreen
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF
from tests.helpers.tui import chat_shown, offline_client, screen_ready

SIZES = [(60, 20), (80, 24), (120, 40)]


def type_ahead(app, *parts: str) -> None:
    """Post every key at once, as a terminal delivers a burst: no pause for the app between keys."""
    for part in parts:
        keys = [("tab", "\t")] if part == "\t" else [(("space" if c == " " else c), c) for c in part]
        for key, char in keys:
            app.post_message(events.Key(key, char))


def value(app, field: str) -> str:
    return app.screen.query_one(f"#{field}", Input).value


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_keys_typed_after_tab_on_the_login_screen_go_to_the_next_field(tmp_path, size):
    app = ChatApp(server="http://127.0.0.1:9", profile_root=tmp_path / "p", kdf=FAST_KDF)
    async with app.run_test(size=size) as pilot:
        await wait_until(lambda: screen_ready(app, LoginScreen))
        await pilot.pause()
        assert app.screen.query_one("#username", Input).has_focus
        type_ahead(app, "bob", "\t", "bobpassword1", "\t", "wrong passphrase")
        await wait_until(lambda: value(app, "passphrase") == "wrong passphrase")
        assert (value(app, "username"), value(app, "password")) == ("bob", "bobpassword1")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_keys_typed_after_tab_in_the_new_conversation_dialog_go_to_the_title(tmp_path, identities, size):
    client, _ = await offline_client(tmp_path / "c", identities)
    app = ChatApp(client, "conv-1")
    try:
        async with app.run_test(size=size) as pilot:
            await wait_until(lambda: chat_shown(app))
            await pilot.press("ctrl+n")
            await wait_until(lambda: screen_ready(app, NewConversationScreen))
            await pilot.pause()
            type_ahead(app, "bob, carol", "\t", "[b]Team[/b] x")
            await wait_until(lambda: value(app, "conv-title") == "[b]Team[/b] x")
            assert value(app, "members") == "bob, carol"
    finally:
        await client.close()
