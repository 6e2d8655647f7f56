"""Notifications: bell, OSC 9 and desktop, per-conversation mute, and -- by default -- no message
text anywhere a notification goes (terminal, notifier's arguments, toasts, log, files)."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from client_tui.app import ChatApp
from client_tui.notify import osc9
from client_tui.prefs import Prefs, SettingsScreen
from tests.helpers.clients import wait_until
from tests.helpers.tui import chat_shown, offline_client, screen_ready

SECRET = "the vault code is 8641"


@pytest.fixture
def fake_notify_send(tmp_path, monkeypatch):
    """A real ``notify-send`` on PATH that records its arguments, environment and input."""
    folder = tmp_path / "bin"
    folder.mkdir()
    calls = tmp_path / "notify-send.calls"
    tool = folder / "notify-send"
    tool.write_text(f'#!/bin/sh\n{{ printf "%s\\n" "$@"; env; cat; }} >> "{calls}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return calls


async def run_and_receive(tmp_path, identities, prefs: Prefs, texts: list[tuple[str, str]], caplog):
    """bob's app open on conv-1; alice's messages ``(conversation, text)`` arrive. Returns what the
    app wrote to the terminal, its toasts and the app."""
    client, relay = await offline_client(tmp_path / "c", identities)
    client.titles["conv-2"] = "[b]side[/b] chat"
    client.members["conv-2"] = ["alice", "bob"]
    prefs.save(client.profile / "settings.json")
    app = ChatApp(client, "conv-1")
    written: list[str] = []
    caplog.set_level(logging.DEBUG)
    try:
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await wait_until(lambda: chat_shown(app))
            app.notifier.write = written.append  # the headless driver writes nowhere: record it
            for conv, text in texts:
                to = ["alice", "bob", "carol"] if conv == "conv-1" else ["alice", "bob"]
                await relay.deliver(relay.seal("alice", text, conv=conv, to=to), sender="alice", conv=conv)
            await wait_until(lambda: sum(1 for r in app.chat.records) >= sum(1 for c, _ in texts if c == "conv-1"))
            await pilot.pause()
            await wait_until(lambda: not app.notifier.tasks)  # a desktop notifier ran to its end
            toasts = [f"{n.title} {n.message}" for n in app._notifications]
            sent = app.notifier.sent
    finally:
        await client.close()
    return written, toasts, sent, client


@pytest.mark.parametrize("mode", ["bell", "osc9", "desktop"])
async def test_notifying_writes_no_message_text_anywhere(tmp_path, identities, fake_notify_send, caplog, mode):
    written, toasts, sent, client = await run_and_receive(
        tmp_path, identities, Prefs(notify=mode), [("conv-2", SECRET), ("conv-1", "in the open one")], caplog
    )
    assert sent == 1  # the other conversation notified; the one on screen, with the user here, did not
    terminal = "".join(written)
    if mode == "bell":
        assert terminal == "\x07"
    elif mode == "osc9":
        assert terminal.startswith("\x1b]9;alice in [b]side[/b] chat: new message") and terminal.endswith("\x07")
    else:
        assert terminal == ""
        calls = fake_notify_send.read_text()
        assert "e2ee-chat: alice in [b]side[/b] chat" in calls and "new message" in calls
    everything = [terminal, *toasts, *(r.getMessage() for r in caplog.records)]
    if fake_notify_send.exists():
        everything.append(fake_notify_send.read_text())
    for place in everything:
        assert SECRET not in place and "8641" not in place
    for path in client.profile.rglob("*"):  # nor in any file the client wrote
        if path.is_file():
            assert b"8641" not in path.read_bytes(), path


async def test_muted_conversations_and_off_never_notify_and_text_only_when_asked(tmp_path, identities, caplog):
    _, _, sent, _ = await run_and_receive(
        tmp_path / "a", identities, Prefs(notify="bell", muted=["conv-2"]), [("conv-2", SECRET)], caplog
    )
    assert sent == 0
    _, _, sent, _ = await run_and_receive(tmp_path / "b", identities, Prefs(notify="off"), [("conv-2", SECRET)], caplog)
    assert sent == 0
    written, _, sent, _ = await run_and_receive(
        tmp_path / "c",
        identities,
        Prefs(notify="osc9", show_text=True),
        [("conv-2", "hello\x07\x1b]9;fake\x07")],
        caplog,
    )
    assert sent == 1 and written[0].count("\x07") == 1 and written[0].count("\x1b") == 1  # nothing injected
    assert "hello␇␛]9;fake␇" in written[0]


def test_osc9_passes_through_tmux():
    assert osc9("a", tmux=True) == "\x1bPtmux;\x1b\x1b]9;a\x07\x1b\\"


async def test_settings_dialog_sets_theme_and_mute_and_keeps_them(tmp_path, identities):
    client, _ = await offline_client(tmp_path / "c", identities)
    app = ChatApp(client, "conv-1")
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: chat_shown(app))
            await pilot.press("f3")
            await wait_until(lambda: screen_ready(app, SettingsScreen))
            app.screen.query_one("#theme").value = "textual-light"
            app.screen.query_one("#mute").value = True
            await pilot.pause()
            assert app.theme == "textual-light"
            await pilot.press("escape")
            await wait_until(lambda: app.screen is app.chat)
            await wait_until(lambda: "(muted)" in app.chat._label_shown["conv-1"].plain)
    finally:
        await client.close()
    saved = Prefs.load(client.profile / "settings.json")
    assert (saved.theme, saved.muted, saved.show_text) == ("textual-light", ["conv-1"], False)
