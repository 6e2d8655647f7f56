"""How the chat window looks: your own name readable in dark and light themes, message text on
the pane's background, day separators and a gap between senders, a hint in an empty window,
padding in the conversation list, and read state that survives a restart."""

from __future__ import annotations

import time

import pytest

from client_tui.app import ChatApp
from client_tui.core import ChatClient, keystore
from client_tui.messagelog import day_label
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF
from tests.helpers.tui import chat_shown, offline_client, screen_lines, screen_text


def contrast(a, b) -> float:
    """WCAG 2 contrast ratio of two Rich colours (truecolor)."""

    def lum(c) -> float:
        r, g, b_ = (x / 255 for x in c.get_truecolor())
        f = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in (r, g, b_)]
        return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "nord", "solarized-light"])
async def test_names_are_readable_and_text_sits_on_the_pane(tmp_path, identities, theme):
    client, relay = await offline_client(tmp_path / "c", identities)
    try:
        await relay.deliver(relay.seal("alice", "from alice"), sender="alice")
        await relay.deliver(relay.seal("bob", "from me", to=["alice", "bob"]), sender="bob")
        app = ChatApp(client, "conv-1")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: chat_shown(app) and len(app.chat.records) == 2)
            app.theme = theme
            await pilot.pause()
            log = app.chat.log_view
            log.flush()
            await pilot.pause()
            bg = log.rich_style.bgcolor
            for component in ("messagelog--me", "messagelog--sender"):
                fg = log.get_component_rich_style(component).color
                assert contrast(fg, bg) >= 4.5, (theme, component, fg, bg)
            for y in range(log.size.height):  # every cell of every drawn line: the pane's background
                for seg in log.render_line(y):
                    assert seg.style is not None and seg.style.bgcolor == bg, (y, seg)
    finally:
        await client.close()


async def test_day_separators_sender_gaps_and_the_empty_hint(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    client.titles["conv-2"] = "empty one"
    client.members["conv-2"] = ["alice", "bob"]
    try:
        app = ChatApp(client, "conv-2")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: chat_shown(app) and "No messages yet" in screen_text(app))
            app.chat.open_conversation("conv-1")
            for sender, text in (("alice", "one"), ("alice", "two"), ("carol", "three")):
                await relay.deliver(relay.seal(sender, text), sender=sender)
            await wait_until(lambda: len(app.chat.records) == 3)
            app.chat.log_view.flush()
            await pilot.pause()
            lines = [line.split("▎")[-1].strip("▊ ") for line in screen_lines(app)]  # the log's column
            today = next(i for i, line in enumerate(lines) if "Today" in line)
            assert lines[today].startswith("─") and lines[today].endswith("─")
            one = next(i for i, line in enumerate(lines) if line.endswith("one"))
            two = next(i for i, line in enumerate(lines) if line.endswith("two"))
            three = next(i for i, line in enumerate(lines) if line.endswith("three"))
            assert (one - today, two - one, three - two) == (1, 1, 2)  # a blank line when the sender changes
            labels = [line for line in screen_lines(app) if "empty one" in line]
            assert labels and labels[0].startswith(" empty one")  # one cell of padding inside the list (was 0)
    finally:
        await client.close()


def test_day_labels():
    now = time.time()
    assert day_label(int(now * 1000)) == "Today"
    assert day_label(int((now - 86400) * 1000)) == "Yesterday"
    assert day_label(int(time.mktime((2020, 3, 2, 12, 0, 0, 0, 0, -1)) * 1000)) == "Monday 2 March 2020"


async def test_read_state_survives_a_restart(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    client.titles["conv-2"] = "other"
    client.members["conv-2"] = ["alice", "bob"]
    await client.history.save_conversations(
        [("conv-1", "plain title", ["alice", "bob", "carol"]), ("conv-2", "other", ["alice", "bob"])]
    )
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        for i in range(3):
            await relay.deliver(
                relay.seal("alice", f"m{i}", conv="conv-2", to=["alice", "bob"]), sender="alice", conv="conv-2"
            )
        await wait_until(lambda: app.chat._label_shown["conv-2"].plain.endswith("3"))
        app.chat.open_conversation("conv-2")  # read them ...
        await pilot.press("ctrl+q")  # ... and quit at once
    again = ChatClient(client.server_url, "bob", tmp_path / "c", kdf=FAST_KDF)
    try:
        bundle = keystore.load_bundle(again.keystore_path, "bob passphrase")
        await again.open_local(bundle, "bob passphrase")
        assert again.unread.get("conv-2") == 0
    finally:
        await again.close()
