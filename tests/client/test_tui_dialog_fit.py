"""Dialogs about a message at 60×20, 80×24 and 120×40: every choice of the F4 dialog and every
reaction of the picker is on screen, whole and inside its dialog (newcomer F1: a row of 16-cell
buttons in a 64-column dialog showed 3 of 6 reactions, and Delete as "D" or not at all)."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Input

from client_tui.app import ChatApp
from client_tui.msgdialogs import REACTIONS, MessageActions, ReactionPicker
from client_tui.prefs import SettingsScreen
from client_tui.screens import NewConversationScreen
from tests.client.test_tui_messaging import receive
from tests.helpers.clients import wait_until
from tests.helpers.tui import alive, chat_shown, offline_client, screen_ready, screen_text

SIZES = [(60, 20), (80, 24), (120, 40)]


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    relay.log_of("conv-1", ["alice", "bob", "carol"])
    yield client, relay
    await client.close()


def shown_whole(app, button: Button) -> bool:
    dialog = app.screen.query_one(".dialog")
    r = button.region
    return r.width >= 5 and r.height == 3 and dialog.region.contains_region(r) and app.screen.region.contains_region(r)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_message_action_and_reaction_is_on_screen(bob, size):
    client, relay = bob
    await receive(client, relay, "alice", "a question")
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and "a question" in screen_text(app))
        await pilot.press(*"mine", "enter")
        await wait_until(lambda: len(app.chat.log_view.records) == 2)
        await pilot.press("f4")  # my own message: four choices
        await wait_until(lambda: screen_ready(app, MessageActions))
        await pilot.pause()
        buttons = list(app.screen.query(Button))
        assert [b.id for b in buttons] == ["reply", "react", "edit", "delete"]
        for button in buttons:
            assert shown_whole(app, button), (button.id, button.region)
        text = screen_text(app)
        for label in ("Reply (r)", "React (+)", "Edit (e)", "Delete (d)"):
            assert label in text, (label, text)
        await pilot.press("plus")
        await wait_until(lambda: screen_ready(app, ReactionPicker))
        await pilot.pause()
        buttons = list(app.screen.query(Button))
        assert len(buttons) == len(REACTIONS) == 6
        for button in buttons:
            assert shown_whole(app, button), (button.id, button.region)
        text = screen_text(app)
        assert all(emoji in text for emoji in REACTIONS), text
        await pilot.press("6")
        await wait_until(lambda: "🙏 1" in screen_text(app))
        assert alive(app)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_settings_scroll_to_mute_and_close_and_the_title_keeps_the_timer(bob, size):
    """Newcomer F10: at 80×24 Settings ended below the screen edge (mute and Close unreachable)
    and the title bar cut "⏱ 5 min" to "⏱ 5"."""
    client, relay = bob
    await client.expiry.set("conv-1", 300, "alice")
    client.titles["conv-1"] = "[b]Team[/b] x"
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app))
        title = app.chat.query_one("#title")
        await wait_until(lambda: "⏱ 5 min" in screen_text(app).splitlines()[title.region.y])
        await pilot.press("f3")
        await wait_until(lambda: screen_ready(app, SettingsScreen))
        dialog = app.screen.query_one("#settings")
        assert app.screen.region.contains_region(dialog.region), (dialog.region, app.screen.region)
        for wanted in ("mute", "close"):
            for _ in range(12):
                if app.screen.focused is not None and app.screen.focused.id == wanted:
                    break
                await pilot.press("tab")
            await pilot.pause()
            widget = app.screen.query_one(f"#{wanted}")
            await wait_until(lambda widget=widget: dialog.region.contains_region(widget.region))
            assert app.screen.focused is widget
        await pilot.press("enter")  # Close
        await wait_until(lambda: app.screen is app.chat)
        assert alive(app)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_new_conversation_names_the_bad_entry_in_a_whole_sentence(bob, size):
    """Newcomer F9: the error was cut at the dialog's edge ("…starting with") and did not say
    which of the names was wrong."""
    client, _ = bob
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app))
        await pilot.press("ctrl+n")
        await wait_until(lambda: screen_ready(app, NewConversationScreen))
        app.screen.query_one("#members", Input).value = "bob, carol[b]Team[/b] \x1b[31mX"
        await pilot.press("enter")
        error = app.screen.query_one("#error")
        want = (
            "'carol[b]Team[/b]' is not a valid username: "
            "3-32 characters from a-z 0-9 _ . - starting with a letter or digit"
        )
        await wait_until(lambda: str(error.render()) == want)
        await pilot.pause()
        dialog = app.screen.query_one(".dialog")
        assert dialog.region.contains_region(error.region) and app.screen.region.contains_region(error.region)
        r = error.region
        lines = screen_text(app).splitlines()[r.y : r.y + r.height]
        assert " ".join(" ".join(line[r.x : r.x + r.width] for line in lines).split()) == want
        assert app.screen.query_one("#members", Input).value.startswith("bob, carol")  # kept for fixing
        assert alive(app)
