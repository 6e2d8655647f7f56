"""Reply, edit, react and delete from the keyboard (F4, the picker, Up in an empty composer) at
80×24 and 120×40, on bob's offline client: his documents wait in the outbox, each applied here
at once; a message deleted before it left is withdrawn with its edit, and nothing about it is sent."""

from __future__ import annotations

import pytest

from client_tui.app import ChatApp
from client_tui.core.record import RecordState
from client_tui.msgdialogs import ConfirmDelete, MessageActions, ReactionPicker
from tests.client.test_tui_messaging import SIZES, receive
from tests.helpers.clients import wait_until
from tests.helpers.tui import alive, chat_shown, offline_client, screen_ready, screen_text


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    relay.log_of("conv-1", ["alice", "bob", "carol"])
    yield client, relay
    await client.close()


async def press_when(pilot, kind, *keys: str) -> None:
    await wait_until(lambda: screen_ready(pilot.app, kind))
    await pilot.press(*keys)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
async def test_reply_edit_react_and_delete_from_the_keyboard(bob, size):
    client, relay = bob
    await receive(client, relay, "alice", "a question")
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and "a question" in screen_text(app))
        chat = app.chat
        await pilot.press("f4")
        await press_when(pilot, MessageActions, "r")  # reply to the last message: alice's
        await wait_until(lambda: chat.composing is not None and "replying to alice" in screen_text(app))
        await pilot.press(*"an answer", "enter")
        await wait_until(lambda: any(r.content.t == "reply" for r in client.outbox))
        (reply,) = [r for r in client.outbox if r.content.t == "reply"]
        assert (reply.text, reply.content.ref) == ("an answer", chat.log_view.records[0].mid)
        await wait_until(lambda: "↪ alice: a question" in screen_text(app))
        await pilot.press("up")  # an empty composer: edit my last message
        await wait_until(lambda: chat.query_one("#composer").text == "an answer")
        await pilot.press(*" (corrected)", "enter")
        await wait_until(lambda: "an answer (corrected) (edited)" in screen_text(app).replace("\n", ""))
        await pilot.press("ctrl+up", "ctrl+up", "f4")  # alice's message selected
        await press_when(pilot, MessageActions, "plus")
        await press_when(pilot, ReactionPicker, "1")
        await wait_until(lambda: "👍 1" in screen_text(app))
        assert (await client.history.by_mid(chat.log_view.records[0].mid))[0].content.reactions == {"👍": ["bob"]}
        await pilot.press("ctrl+down", "f4")  # my reply
        await press_when(pilot, MessageActions, "d")
        await press_when(pilot, ConfirmDelete, "y")
        await wait_until(lambda: "an answer" not in screen_text(app))
        gone = (await client.history.by_mid(reply.mid))[0]
        assert (gone.state, gone.text, gone.envelope) == (RecordState.DELETED, None, None)
        await client.receipts.flush("conv-1")  # the receipt of the first view, if its delay has not passed
        sent = [r.content.t for r in client.outbox]
        assert [t for t in sent if t != "read"] == ["react"]  # the reply never left: withdrawn with its edit
        assert sent.count("read") == 1  # bob read alice's message when the conversation opened
        assert alive(app)
