"""The Textual app against a real relay: alice types, bob's window shows the decrypted text."""

from __future__ import annotations

import asyncio

from client_tui.app import ChatApp, MessageItem, harmless


async def wait_for(predicate, timeout: float = 15, step: float = 0.05) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(step)


async def test_typed_message_appears_decrypted_in_the_other_app(make_client):
    alice, bob = await make_client("alice"), await make_client("bob")
    conv = await alice.create_conversation("tui pair", ["bob"])
    alice_app, bob_app = ChatApp(alice, conv), ChatApp(bob, conv)
    async with alice_app.run_test() as alice_pilot, bob_app.run_test() as bob_pilot:
        await wait_for(lambda: alice_app.connection == "online" and bob_app.connection == "online")
        await alice_pilot.click("#composer")
        await alice_pilot.press(*"hello bob")
        await alice_pilot.press("enter")
        await wait_for(lambda: any(m.text == "hello bob" for m in bob_app.query(MessageItem)))
        item = next(m for m in bob_app.query(MessageItem) if m.text == "hello bob")
        assert item.sender == "alice"
        assert "tui pair" in str(bob_app.query_one("#title").render())
        mine = [m for m in alice_app.query(MessageItem) if m.text == "hello bob"]
        assert len(mine) == 1
        await wait_for(lambda: mine[0].state in ("stored", "delivered"))
        # pasted unicode (emoji, CJK, RTL) arrives exactly
        alice_app.query_one("#composer").insert_text_at_cursor("👋🏽 你好 مرحبا")
        await alice_pilot.press("enter")
        await wait_for(lambda: any(m.text == "👋🏽 你好 مرحبا" for m in bob_app.query(MessageItem)))
        assert [m.text for m in bob_app.query(MessageItem)] == ["hello bob", "👋🏽 你好 مرحبا"]
        await bob_pilot.pause()


def test_control_characters_are_shown_harmlessly():
    assert harmless("red \x1b[31m text\x07") == "red \u241b[31m text\u2407"
    assert harmless("tab\tnew\nline") == "tab\tnew\nline"
    assert harmless("\x9b") == "\\x9b"
