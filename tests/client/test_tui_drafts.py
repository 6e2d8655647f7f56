"""Unsent text stays with the conversation it was typed in: switching conversations keeps a draft
per conversation (restored on return), and a message that failed to send goes back to its own
conversation, never to the composer of the one open since (Enter would send it to other people)."""

from __future__ import annotations

import asyncio

import pytest

from client_tui.app import ChatApp
from shared import envelope
from tests.helpers.clients import wait_until
from tests.helpers.tui import alive, chat_shown, offline_client


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    client.members["conv-2"] = ["bob", "carol"]
    client.titles["conv-2"] = "second"
    relay.log_of("conv-1", ["alice", "bob", "carol"])  # both membership logs verified: sending works
    relay.log_of("conv-2", ["bob", "carol"])
    yield client, relay
    await client.close()


def outbox_texts(client) -> list[tuple[str, str]]:
    return sorted((r.conversation, r.text) for r in client.outbox)


@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
async def test_a_draft_stays_with_its_conversation(bob, size):
    client, _ = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=size) as pilot:
        await wait_until(lambda: chat_shown(app))
        chat, composer = app.chat, app.chat.query_one("#composer")
        await pilot.press(*"for alice and carol")
        await pilot.press("alt+down")
        await wait_until(lambda: chat.conversation == "conv-2")
        assert composer.text == ""
        await pilot.press("enter")  # nothing to send here
        await pilot.press(*"for carol")
        await pilot.press("alt+up")
        await wait_until(lambda: chat.conversation == "conv-1")
        assert composer.text == "for alice and carol"
        await pilot.press("alt+down")
        await wait_until(lambda: chat.conversation == "conv-2")
        assert composer.text == "for carol"
        await pilot.press("enter")
        await wait_until(lambda: len(client.outbox) == 1)
        await pilot.press("alt+up")
        await wait_until(lambda: chat.conversation == "conv-1")
        await pilot.press("enter")
        await wait_until(lambda: len(client.outbox) == 2)
        assert outbox_texts(client) == [("conv-1", "for alice and carol"), ("conv-2", "for carol")]
        assert composer.text == ""
        assert alive(app)


async def test_a_failed_message_goes_back_to_its_own_conversation(bob):
    client, _ = bob
    app = ChatApp(client, "conv-1")
    switched = asyncio.Event()
    queue_text = client.queue_text

    async def after_the_switch(cid, text, *args, **kwargs):  # the real send fails, once conv-2 is open
        await switched.wait()
        return await queue_text(cid, text, *args, **kwargs)

    client.queue_text = after_the_switch
    too_large = "x" * envelope.DEFAULT_MAX_ENVELOPE_BYTES
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        chat, composer = app.chat, app.chat.query_one("#composer")
        composer.text = too_large
        await pilot.press("enter")
        await wait_until(lambda: composer.text == "")
        await pilot.press("alt+down")
        await wait_until(lambda: chat.conversation == "conv-2")
        await pilot.press(*"hi")
        switched.set()
        await wait_until(lambda: chat.drafts.get("conv-1") == too_large)
        await pilot.pause()
        assert composer.text == "hi"  # conv-2's composer did not get conv-1's message
        await pilot.press("alt+up")
        await wait_until(lambda: chat.conversation == "conv-1")
        assert composer.text == too_large
        assert client.outbox == [] or not any(r.conversation == "conv-2" for r in client.outbox)
        assert alive(app)
