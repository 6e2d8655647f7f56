"""One order for a conversation's lines, the same in the message log and in the history: the
relay's seq for stored messages, my unsent ones after every other line (in the order written)
until the relay stores them. A message written offline stayed where it was written while the
messages stored meanwhile were drawn below it, then jumped below them once stored."""

from __future__ import annotations

import pytest

from client_tui.app import ChatApp
from tests.helpers.clients import wait_until
from tests.helpers.tui import chat_shown, offline_client


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    relay.log_of("conv-1", ["alice", "bob", "carol"])
    yield client, relay
    await client.close()


async def history_texts(client) -> list[str]:
    return [r.text for r in await client.load_history("conv-1") if r.state != "system"]


@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
async def test_unsent_messages_stay_last_and_the_log_keeps_the_history_order(bob, size):
    client, relay = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=size) as pilot:
        await wait_until(lambda: chat_shown(app))
        log = app.chat.query_one("#log")

        def shown() -> list[str]:
            return [r.text for r in log.records if r.state != "system"]

        await client.queue_text("conv-1", "mine, written offline")
        await wait_until(lambda: shown() == ["mine, written offline"])
        await relay.deliver(relay.seal("alice", "alice one"), sender="alice")
        await wait_until(lambda: "alice one" in shown())
        await pilot.pause()
        assert shown() == ["alice one", "mine, written offline"]
        await client.queue_text("conv-1", "mine two")
        await relay.deliver(relay.seal("alice", "alice two"), sender="alice")
        await wait_until(lambda: len(shown()) == 4)
        await pilot.pause()
        expected = ["alice one", "alice two", "mine, written offline", "mine two"]
        assert shown() == expected
        assert await history_texts(client) == expected

        first = client.outgoing.items[0]  # the relay stores it (as its answer to the send would)
        await client.outgoing.mark_stored(first, relay.seq + 1)
        await wait_until(lambda: log.records[-2].state == "stored")
        await pilot.pause()
        assert shown() == expected
        assert [r.pos for r in log.records] == sorted(r.pos for r in log.records)
        assert await history_texts(client) == expected
        app.chat.open_conversation("conv-1")  # drawn again from the history: the same
        await pilot.pause()
        await wait_until(lambda: shown() == expected)


async def test_the_selection_stays_on_a_message_that_moves(bob):
    client, relay = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: chat_shown(app))
        log = app.chat.query_one("#log")
        await relay.deliver(relay.seal("alice", "alice one"), sender="alice")
        await client.queue_text("conv-1", "mine")
        await wait_until(lambda: [r.text for r in log.records][-2:] == ["alice one", "mine"])
        for lid, text in ((log.records[-1].lid, "mine"), (log.records[-2].lid, "alice one")):
            log.select_lid(lid)
            await relay.deliver(relay.seal("alice", f"after {text}"), sender="alice")
            await wait_until(lambda text=text: log.records[-2].text == f"after {text}")
            await pilot.pause()
            assert log.selected_record is not None and log.selected_record.text == text
