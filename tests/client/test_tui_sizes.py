"""The app at 60×20, 80×24 and 120×40: the inspector and every dialog laid out (nothing crashes,
every button and field on screen and usable), and the message list follows new messages through
resizes."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Input

from client_tui.app import ChatApp
from client_tui.screens import ContactScreen, HelpScreen, MembersScreen, NewConversationScreen
from tests.helpers.clients import wait_until
from tests.helpers.tui import alive, chat_shown, offline_client, screen_ready, screen_text

SIZES = [(60, 20), (80, 24), (120, 40)]


def on_screen(app, widget) -> bool:
    """``widget`` is shown whole, inside the terminal."""
    r = widget.region
    return r.width > 0 and r.height > 0 and app.screen.region.contains_region(r)


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    yield client, relay
    await client.close()


async def fill(relay, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        await relay.deliver(
            relay.seal("alice" if i % 3 else "carol", f"message {i}"), sender="alice" if i % 3 else "carol"
        )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_inspector_and_every_dialog_are_laid_out(bob, size):
    client, relay = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=size) as pilot:
        await wait_until(lambda: chat_shown(app))
        await fill(relay, 12)
        await wait_until(lambda: len(app.chat.records) == 12)

        await pilot.press("f2")  # crashed at 95 columns or fewer (the composer squeezed to 0)
        inspector = app.chat.query_one("#inspector")
        await wait_until(lambda: inspector.display and inspector.region.width > 0)
        await pilot.pause()
        assert alive(app)
        composer, log = app.chat.query_one("#composer"), app.chat.query_one("#log")
        assert composer.region.width >= 24 and log.region.width >= 24  # still usable
        assert on_screen(app, inspector) and on_screen(app, composer)
        assert "What the relay stored" in screen_text(app)
        await pilot.press(*"still typing")
        assert composer.text == "still typing"
        await pilot.press("f2")
        await wait_until(lambda: not inspector.display)

        for key, kind in (
            ("ctrl+n", NewConversationScreen),
            ("ctrl+g", MembersScreen),
            ("ctrl+k", ContactScreen),
            ("f1", HelpScreen),
        ):
            await pilot.press(key)
            await wait_until(lambda kind=kind: screen_ready(app, kind))
            await pilot.pause()
            assert alive(app)
            dialog = app.screen.query_one(".dialog")
            assert on_screen(app, dialog), (key, dialog.region, app.screen.region)
            for button in app.screen.query(Button):
                if button.display:
                    assert on_screen(app, button), (key, button.id, button.region)
            for field in app.screen.query(Input):
                assert field.region.height == 3 and on_screen(app, field), (key, field.id, field.region)
            await pilot.press("escape")
            await wait_until(lambda: app.screen is app.chat)
        assert alive(app)


async def test_the_keys_dialog_has_no_invisible_focus_stop(bob):
    client, _ = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        await pilot.press("ctrl+k")
        await wait_until(lambda: screen_ready(app, ContactScreen))
        await pilot.pause()
        seen = []
        for _ in range(4):  # every Tab stop is a control the user can see and use
            await pilot.press("tab")
            await pilot.pause()
            focused = app.screen.focused
            assert focused is not None and on_screen(app, focused), focused
            seen.append(focused.id)
        assert "verify" in seen and "close" in seen, seen
        while app.screen.focused.id != "verify":
            await pilot.press("tab")
        await pilot.press("enter")  # Tab + Enter marks the contact verified
        await wait_until(lambda: client.contacts["alice"].verified)


async def test_the_new_conversation_title_field_shows_what_is_typed(bob):
    client, _ = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        await pilot.press("ctrl+n")
        await wait_until(lambda: screen_ready(app, NewConversationScreen, focus="#members"))
        await pilot.press(*"alice", "tab", *"Quarterly plans")
        await pilot.pause()
        title = app.screen.query_one("#conv-title", Input)
        assert title.value == "Quarterly plans" and title.region.height == 3
        assert "Quarterly plans" in screen_text(app)


@pytest.mark.parametrize("tiny", [(12, 5), (1, 1), (60, 20)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_message_list_keeps_following_through_resizes_while_messages_arrive(bob, tiny):
    client, relay = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        await fill(relay, 40)
        await wait_until(lambda: len(app.chat.records) == 40)
        log = app.chat.log_view
        await pilot.resize_terminal(*tiny)
        await fill(relay, 10, 40)
        await pilot.pause()
        await pilot.resize_terminal(80, 24)
        await fill(relay, 10, 50)
        await wait_until(lambda: len(app.chat.records) == 60)
        await wait_until(lambda: "message 59" in screen_text(app))
        log.flush()
        assert log.scroll_y == log.max_scroll_y > 0
        await pilot.resize_terminal(120, 40)
        await fill(relay, 1, 60)
        await wait_until(lambda: "message 60" in screen_text(app))
        assert alive(app)


async def test_scrolled_up_the_list_stays_where_the_user_put_it(bob):
    client, relay = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        await fill(relay, 40)
        await wait_until(lambda: len(app.chat.records) == 40)
        log = app.chat.log_view
        log.flush()
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        await fill(relay, 5, 40)
        await wait_until(lambda: len(app.chat.records) == 45)
        log.flush()
        assert log.scroll_y == 0 and "message 0" in screen_text(app)
