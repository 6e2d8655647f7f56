"""The Textual app against a real relay: alice types, bob's window shows the decrypted text."""

from __future__ import annotations

from textual import events

from client_tui.app import ChatApp, harmless
from tests.helpers.clients import wait_until


async def wait_for(predicate, timeout: float = 15, step: float = 0.05) -> None:
    await wait_until(predicate, timeout, step)


async def test_typed_message_appears_decrypted_in_the_other_app(make_client):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("tui pair", ["bob"])
    alice_app, bob_app = ChatApp(alice, conv), ChatApp(bob, conv)
    async with alice_app.run_test() as alice_pilot, bob_app.run_test() as bob_pilot:
        await wait_for(lambda: alice_app.connection == "online" and bob_app.connection == "online")
        await alice_pilot.click("#composer")
        await alice_pilot.press(*"hello bob")
        await alice_pilot.press("enter")
        await wait_for(lambda: any(m.text == "hello bob" for m in bob_app.chat.records))
        item = next(m for m in bob_app.chat.records if m.text == "hello bob")
        assert item.sender == "alice"
        assert "tui pair" in str(bob_app.chat.query_one("#title").render())
        mine = [m for m in alice_app.chat.records if m.text == "hello bob"]
        assert len(mine) == 1
        await wait_for(lambda: mine[0].state in ("stored", "delivered"))
        # pasted text (emoji, CJK, RTL, several lines) arrives exactly
        pasted = "👋🏽 你好 مرحبا\nsecond line\tand a tab"
        alice_app.post_message(events.Paste(pasted))
        await wait_for(lambda: alice_app.chat.query_one("#composer").text == pasted)
        await alice_pilot.press("enter")
        await wait_for(lambda: any(m.text == pasted for m in bob_app.chat.records))
        assert [m.text for m in bob_app.chat.records if m.state != "system"] == ["hello bob", pasted]
        await bob_pilot.pause()


async def test_a_5mb_paste_gets_a_clear_size_error(make_client):
    alice = await make_client("alice")
    await make_client("bob")
    conv = await alice.create_conversation("pair", ["bob"])
    app = ChatApp(alice, conv)
    async with app.run_test():
        await wait_for(lambda: app.connection == "online")
        app.post_message(events.Paste("x" * 5_000_000))  # the app forwards it to the composer later
        await wait_for(lambda: any("too large" in (n.title or "") for n in app._notifications))
        assert app.chat.query_one("#composer").text == ""
        assert [r for r in app.chat.records if r.state != "system"] == []


def test_control_characters_are_shown_harmlessly():
    assert harmless("red \x1b[31m text\x07") == "red \u241b[31m text\u2407"
    assert harmless("tab\tnew\nline") == "tab\tnew\nline"
    assert harmless("\x9b") == "\\x9b"
    assert harmless("abc\u202edcba") == "abc<U+202E>dcba"  # no right-to-left override tricks
    assert harmless("مرحبا") == "مرحبا"  # right-to-left text itself is kept exactly
