"""Creating an account in the app: both secrets typed twice, minimum lengths, a strength hint, all
of it on screen at 80×24. A typo in the passphrase used to make keys that could never be opened."""

from __future__ import annotations

from textual.widgets import Checkbox, Input

from client_tui import credentials
from client_tui.app import ChatApp
from client_tui.chatscreen import ChatScreen
from client_tui.login import LoginScreen
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF, PASSWORD
from tests.helpers.tui import click_button, screen_ready, screen_text


def error_text(app) -> str:
    return str(app.screen.query_one("#login-error").render())


async def fill(pilot, app, **fields: str) -> None:
    for field, value in fields.items():
        app.screen.query_one(f"#{field}", Input).value = ""
        app.screen.query_one(f"#{field}", Input).focus()
        await pilot.press(*value)


async def test_registration_asks_each_secret_twice_and_refuses_short_or_differing_ones(relay, tmp_path):
    app = ChatApp(server=relay.url, profile_root=tmp_path / "p", kdf=FAST_KDF)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: screen_ready(app, LoginScreen))
        screen = app.screen
        assert not screen.query_one("#row-passphrase2").display  # logging in asks each secret once
        await pilot.click("#register")
        await wait_until(lambda: screen.query_one("#register", Checkbox).value)
        await pilot.pause()
        for sel in ("#server", "#username", "#password", "#password2", "#passphrase", "#passphrase2", "#go"):
            w = screen.query_one(sel)
            assert w.region.height > 0 and app.screen.region.contains_region(w.region), sel

        await fill(
            pilot, app, username="dora", password=PASSWORD, password2=PASSWORD, passphrase="short", passphrase2="short"
        )
        await click_button(pilot, "#go")
        await wait_until(lambda: "at least 8 characters" in error_text(app))
        assert "passphrase" in error_text(app)
        assert "weak" in str(screen.query_one("#strength").render())

        await fill(pilot, app, passphrase="dora's long passphrase", passphrase2="dora's long passphrse")
        await click_button(pilot, "#go")
        await wait_until(lambda: "the two passphrases differ" in error_text(app))
        assert screen.query_one("#passphrase2", Input).has_focus
        assert "strength: strong" in str(screen.query_one("#strength").render())

        await fill(pilot, app, password2=PASSWORD + "x", passphrase2="dora's long passphrase")
        await click_button(pilot, "#go")
        await wait_until(lambda: "the two passwords differ" in error_text(app))
        assert not (tmp_path / "p").exists()  # nothing was made yet

        await fill(pilot, app, password2=PASSWORD)
        screen.query_one("#bits").value = 2048
        await click_button(pilot, "#go")
        await wait_until(lambda: isinstance(app.screen, ChatScreen) and app.client.online, timeout=30)
        assert "dora" in screen_text(app)


def test_the_rules_in_words():
    assert credentials.check_new("passphrase", "1234567", "1234567") == "the passphrase needs at least 8 characters"
    assert credentials.check_new("password", "12345678", "12345679") == "the two passwords differ"
    assert credentials.check_new("passphrase", "a longer one", None) == ""
    weak, strong = credentials.strength("password1"), credentials.strength("violet trombone sideways 1987")
    assert weak.score <= 1 < 3 <= strong.score
    assert credentials.strength("dora-dora-dora", context=("dora",)).score < 3  # the username is known
