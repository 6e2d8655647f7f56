"""Every string another user or the relay controls is shown as text, in every screen and dialog:
never parsed as markup (a title of ``[/]`` crashed the members dialog, ``[@click=app.quit]``
quit the app of whoever clicked it), never written to the terminal as an escape sequence."""

from __future__ import annotations

import pytest
from textual.widgets import Select

from client_tui.app import ChatApp
from client_tui.core import ConnectionState, ConversationsChanged, KeyChanged
from client_tui.login import LoginScreen
from client_tui.screens import ContactScreen, HelpScreen, MembersScreen, NewConversationScreen
from tests.helpers.clients import wait_until
from tests.helpers.tui import HOSTILE, SHOWN, alive, chat_shown, offline_client, screen_ready, screen_text

SIZES = [(60, 20), (80, 24), (120, 40)]


def assert_clean(app: ChatApp) -> str:
    """The screen holds no raw control character; returns its text."""
    assert alive(app), app._exception
    text = screen_text(app)
    bad = sorted({hex(ord(c)) for c in text if c != "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)})
    assert not bad, bad
    for ch in ("\u202e", "\u200d", "\U0001f3fd", "\ufe0f"):
        assert ch not in text
    return text


@pytest.fixture
async def hostile_world(tmp_path, identities):
    """bob's offline client whose conversations, members, contacts and messages carry every
    hostile string: one conversation per string (title), and a hostile member name."""
    client, relay = await offline_client(tmp_path / "c", identities)
    evil = "[b]eve[/b]\x1b[2J"  # a member name as a hostile relay lists it (never a pinned contact's name)
    for i, s in enumerate(HOSTILE):
        client.titles[f"conv-h{i}"] = s
        client.members[f"conv-h{i}"] = ["alice", "bob", s]
    client.titles["conv-1"] = HOSTILE[0] + " " + HOSTILE[3]
    client.members["conv-1"] = ["alice", "bob", "carol", evil]
    yield client, relay, evil
    await client.close()


async def deliver_hostile_messages(relay) -> None:
    for s in HOSTILE:
        await relay.deliver(relay.seal("alice", s), sender="alice")
    # an envelope that does not open, delivered under a sender name the relay made up
    await relay.deliver(b'{"not": "an envelope"}', sender="[@click=app.quit]mallory\x1b[5m")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_screen_and_dialog_shows_hostile_strings_as_text(hostile_world, size):
    client, relay, evil = hostile_world
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_until(lambda: chat_shown(app))
        await deliver_hostile_messages(relay)
        client.events.put_nowait(ConnectionState("offline", "[/]\x1b]0;owned\x07 reason", retry_in=3.0))
        client.events.put_nowait(ConversationsChanged())
        await wait_until(lambda: len(app.chat.records) == len(HOSTILE) + 1)
        await pilot.pause()
        text = assert_clean(app)
        if size[0] >= 80:  # the header shows the title in full from 80 columns
            assert "[/] [@click=app.quit]quit[/]" in text
        # the message list: markup shown as typed, escapes as visible symbols
        app.chat.log_view.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        text = assert_clean(app)
        for s in ("[b]bold[/b]", "[/]", "␛[31mred␛[0m"):
            assert s in text, s

        # the inspector, on the unreadable message with the made-up sender
        await pilot.press("f2")
        await wait_until(lambda: app.chat.query_one("#inspector").display)
        app.chat.log_view.action_select_edge(-1)
        await pilot.pause()
        assert_clean(app)

        # a key-change toast naming a hostile user
        client.events.put_nowait(KeyChanged("[@click=app.quit]x[/]\x1b[31m", ("a", "b"), ("c", "d"), None))
        await wait_until(lambda: "[@click=app.quit]x[/]" in screen_text(app))
        assert_clean(app)
        await pilot.press("escape")

        # members of a conversation whose title closes a tag that was never opened
        await pilot.press("ctrl+g")
        await wait_until(lambda: screen_ready(app, MembersScreen))
        await pilot.pause()
        text = assert_clean(app)
        assert "[b]eve[/b]" in text
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.chat)

        # keys of the members (a hostile member name is no contact: not offered)
        await pilot.press("ctrl+k")
        await wait_until(lambda: screen_ready(app, ContactScreen))
        await pilot.pause()
        assert evil not in [v for _, v in app.screen.query_one("#who", Select)._options]
        assert_clean(app)
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.chat)

        # every conversation title in the list, one after the other, in the header
        for i in range(len(HOSTILE)):
            app.chat.open_conversation(f"conv-h{i}")
            await pilot.pause()
            assert_clean(app)
        await pilot.press("ctrl+n")
        await wait_until(lambda: screen_ready(app, NewConversationScreen))
        assert_clean(app)
        await pilot.press("escape")
        await pilot.press("f1")
        await wait_until(lambda: screen_ready(app, HelpScreen))
        assert_clean(app)
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.chat)
        assert alive(app)


async def test_the_login_screen_shows_a_hostile_relay_reason_as_text(tmp_path):
    reason = "[/][@click=app.quit]x[/] \x1b[31m" + SHOWN[1]
    app = ChatApp(server="http://127.0.0.1:9", profile_root=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: screen_ready(app, LoginScreen))
        app.screen._error(reason)
        await pilot.pause()
        text = assert_clean(app)
        assert "[/][@click=app.quit]x[/] ␛[31m[b]bold[/b]" in text


async def test_clicking_a_title_with_an_action_link_does_not_quit(hostile_world):
    client, _relay, _ = hostile_world
    client.titles["conv-1"] = "[@click=app.quit]CLICK ME[/]"
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(lambda: chat_shown(app))
        await pilot.press("ctrl+g")
        await wait_until(lambda: screen_ready(app, MembersScreen))
        await pilot.pause()
        title = app.screen.query_one(".dialog-title")
        for x in range(title.region.width):
            await pilot.click(".dialog-title", offset=(x, 0))
        await pilot.pause()
        assert alive(app) and isinstance(app.screen, MembersScreen)
        assert "[@click=app.quit]CLICK ME[/]" in screen_text(app)
