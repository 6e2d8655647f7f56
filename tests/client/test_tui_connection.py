"""The app and the connection: a client started while the relay is down logs in when it returns
(it used to stay "refused (HTTP 403)" until restarted), a refused password is asked again in
the app, Ctrl+R retries in every state (and never starts a second session), and the client log
records state changes and refusals."""

from __future__ import annotations

import asyncio
import logging

from textual.widgets import Input

from client_tui.app import ChatApp
from client_tui.connection import PasswordScreen
from client_tui.core import ChatClient
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF, PASSWORD
from tests.helpers.tui import chat_shown, click_button, screen_ready, screen_text

SIZE = (80, 24)


def status(app: ChatApp) -> str:
    return str(app.chat.query_one("#status").render())


def login_startup(password: str, passphrase: str, conv: str):
    async def startup(client: ChatClient) -> str:
        await client.login(password, passphrase)
        return conv

    return startup


async def test_a_client_started_while_the_relay_is_down_logs_in_when_it_returns(make_client, relay, tmp_path, caplog):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.close()
    relay.stop()
    client = ChatClient(relay.url, "alice", tmp_path / "clients", kdf=FAST_KDF, backoff=(0.1, 0.5))
    app = ChatApp(client, startup=login_startup(PASSWORD, "alice passphrase", conv))
    caplog.set_level(logging.INFO, logger="e2ee")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        # offline, in words (no exception class name), retrying
        await wait_until(lambda: chat_shown(app) and "offline (nothing answers at 127.0.0.1" in status(app))
        assert "ConnectError" not in screen_text(app)
        await pilot.press(*"written offline", "enter")
        await wait_until(lambda: len(client.outbox) == 1)
        relay.start()
        await wait_until(lambda: client.online and "online" in status(app), timeout=30)
        await wait_until(lambda: not client.outbox)  # the outbox went out once logged in
        await bob.connect()
        await bob.send_text(conv, "welcome back")
        await wait_until(
            lambda: [r.text for r in app.chat.records if r.state != "system"] == ["written offline", "welcome back"]
        )
    states = [r.getMessage() for r in caplog.records if r.name == "e2ee.tui"]
    assert any(m.startswith("connection offline: nothing answers") for m in states)
    assert any(m.startswith("connection online") for m in states)
    assert not any("written offline" in r.getMessage() or "welcome back" in r.getMessage() for r in caplog.records)


async def test_a_refused_password_is_asked_again_in_the_app(make_client, relay, tmp_path, caplog):
    alice = await make_client("alice")
    await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.close()
    client = ChatClient(relay.url, "alice", tmp_path / "clients", kdf=FAST_KDF, backoff=(0.1, 0.5))
    app = ChatApp(client, startup=login_startup("not the password", "alice passphrase", conv))
    caplog.set_level(logging.INFO, logger="e2ee")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: screen_ready(app, PasswordScreen, focus="#relogin-password"))
        assert "refused" in status(app)
        await pilot.press(*"wrong again", "enter")
        await wait_until(lambda: "refused again" in str(app.screen.query_one("#error").render()))
        assert isinstance(app.screen, PasswordScreen)
        await click_button(pilot, "#cancel")  # stay offline for now ...
        await wait_until(lambda: app.screen is app.chat)
        assert client.state == "refused"
        await pilot.press("ctrl+r")  # ... and Ctrl+R offers it again
        await wait_until(lambda: screen_ready(app, PasswordScreen, focus="#relogin-password"))
        app.screen.query_one("#relogin-password", Input).value = PASSWORD
        await pilot.press("enter")
        await wait_until(lambda: app.screen is app.chat and client.online and "online" in status(app), timeout=30)
    refusals = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "e2ee.tui"]
    assert any(m.startswith("connection refused: login refused") for m in refusals)
    assert all(PASSWORD not in r.getMessage() and "wrong again" not in r.getMessage() for r in caplog.records)


def session_tasks(username: str) -> list[str]:
    """The running tasks that keep ``username``'s session: the supervisor, and each connection's
    reader and timer (the timer sends acks and pings and renews the token in-band)."""
    names = {f"session-{username}", f"ws-reader-{username}", f"ws-timer-{username}"}
    return sorted(t.get_name() for t in asyncio.all_tasks() if not t.done() and t.get_name() in names)


async def test_ctrl_r_after_a_refused_password_starts_one_session_not_two(make_client, relay, tmp_path):
    alice = await make_client("alice")
    await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.close()
    client = ChatClient(relay.url, "alice", tmp_path / "clients", kdf=FAST_KDF, backoff=(0.1, 0.5))
    app = ChatApp(client, startup=login_startup("not the password", "alice passphrase", conv))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: screen_ready(app, PasswordScreen, focus="#relogin-password"))
        assert session_tasks("alice") == []  # refused: nothing keeps a session or renews a token
        await pilot.press("escape")  # stay offline
        await wait_until(lambda: app.screen is app.chat)
        await pilot.press("ctrl+r")
        await wait_until(lambda: screen_ready(app, PasswordScreen, focus="#relogin-password"))
        app.screen.query_one("#relogin-password", Input).value = PASSWORD
        await pilot.press("enter")
        await wait_until(lambda: app.screen is app.chat and client.online and "online" in status(app), timeout=30)
        await pilot.press("ctrl+r", "ctrl+r")  # online: each only skips a backoff wait that is not running
        await pilot.pause()
        assert session_tasks("alice") == ["session-alice", "ws-reader-alice", "ws-timer-alice"]
        assert client.session.refreshes == 0  # the password's login, and no second token loop refreshing


async def test_ctrl_r_reconnects_at_once_after_the_relay_returns(make_client, relay, tmp_path):
    alice = await make_client("alice")
    await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    await alice.close()
    client = ChatClient(relay.url, "alice", tmp_path / "clients", kdf=FAST_KDF, backoff=(60.0, 120.0))
    app = ChatApp(client, startup=login_startup(PASSWORD, "alice passphrase", conv))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: chat_shown(app) and client.online)
        relay.stop()
        await wait_until(lambda: "offline" in status(app) and "retry in" in status(app))
        relay.start()
        await pilot.press("ctrl+r")  # the backoff says a minute: Ctrl+R does not wait for it
        await wait_until(lambda: client.online and "online" in status(app), timeout=15)
