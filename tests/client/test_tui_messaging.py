"""The chat window's replies, edits, deletes, reactions, read marks and disappearing-message timer,
driven with Pilot at 80×24 and 120×40 on bob's offline client (alice's and carol's documents
arrive as verified records through ``Inbox.act``, the step every received document takes; bob's
own go through ``client.messaging`` into the outbox). What other members wrote - bodies, emoji,
names - is drawn as typed, never as markup."""

from __future__ import annotations

import secrets

import pytest

from client_tui.app import ChatApp
from client_tui.core import ReadUpTo, RecordChanged
from client_tui.core.record import Doc, MessageInfo, Record, RecordState, now_ms
from client_tui.msgdialogs import MessageActions
from tests.helpers.clients import messages_of, wait_until
from tests.helpers.tui import alive, chat_shown, offline_client, rendered_text, screen_ready, screen_text

SIZES = [(80, 24), (120, 40)]
MARKUP = "[b]bold[/b] [@click=app.quit]x[/]"


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    relay.log_of("conv-1", ["alice", "bob", "carol"])  # the membership log verified: bob can seal
    yield client, relay
    await client.close()


async def receive(client, relay, sender: str, text: str) -> Record:
    await relay.deliver(relay.seal(sender, text), sender=sender)
    return next(r for r in await messages_of(client, "conv-1") if r.text == text)


async def document(client, sender: str, doc: Doc, text: str | None = None) -> Record:
    """``sender``'s verified document, as the inbox takes it after opening it."""
    relay_seq = 1000 + secrets.randbelow(1000)
    rec = Record(
        secrets.token_hex(8), "conv-1", sender, text, secrets.token_hex(11)[:22], relay_seq, float(relay_seq),
        now_ms(), 1, RecordState.RECEIVED, envelope=b"{}", info=MessageInfo(), content=doc,
    )  # fmt: skip
    await client.inbox.act(rec)
    await client.history.put(rec)
    await client.events.put(RecordChanged(rec, new=True))
    return rec


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
async def test_edits_reactions_refusals_read_marks_and_the_timer_are_shown(bob, size):
    client, relay = bob
    original = await receive(client, relay, "alice", "original words")
    async with ChatApp(client, "conv-1").run_test(size=size) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and "original words" in screen_text(app))
        await document(client, "alice", Doc(t="edit", ref=original.mid), f"edited {MARKUP}")
        await document(client, "carol", Doc(t="react", ref=original.mid, emoji="👍", on=True))
        await document(client, "alice", Doc(t="react", ref=original.mid, emoji="[@click=app.quit]", on=True))
        await document(client, "carol", Doc(t="edit", ref=original.mid), "carol rewrites it")
        await wait_until(lambda: "was ignored" in screen_text(app))
        text = screen_text(app)
        assert f"edited {MARKUP}" in text and "(edited)" in text and "👍 1" in text
        assert "[@click=app.quit] 1" in text  # a reaction is drawn as typed, never run as markup
        assert "edit from carol was ignored" in text
        assert "carol rewrites it" not in text.replace("\n", "")  # the refused text is not the message's
        await client.expiry.set("conv-1", 3600, "alice")
        await wait_until(lambda: "⏱ 1 h" in screen_text(app))
        mine = await client.messaging.send("conv-1", "bob's note")
        await client.outgoing.mark_stored(client.outgoing.by_mid[mine.mid], 50)
        client.receipts.reads["conv-1"] = {"alice": 50}
        await client.events.put(ReadUpTo("conv-1", "alice", 50))
        await wait_until(lambda: "✓✓ read" in screen_text(app))
        await pilot.press("f2")
        app.chat.log_view.select_lid(mine.lid)
        await wait_until(lambda: app.chat.inspected is not None and "read by" in rendered_text(app.chat.inspected))
        assert "alice" in rendered_text(app.chat.inspected).split("read by", 1)[1]  # bob's note, read by alice
        app.chat.log_view.select_lid(original.lid)
        await wait_until(lambda: "version 1" in rendered_text(app.chat.inspected))
        shown = rendered_text(app.chat.inspected)
        assert "original words" in shown and "👍  carol" in shown and "version 2" in shown
        assert alive(app)


async def test_only_my_messages_offer_edit_and_delete(bob):
    client, relay = bob
    await receive(client, relay, "alice", "not yours")
    async with ChatApp(client, "conv-1").run_test(size=(80, 24)) as pilot:
        app = pilot.app
        await wait_until(lambda: chat_shown(app) and "not yours" in screen_text(app))
        await pilot.press("f4")
        await wait_until(lambda: screen_ready(app, MessageActions))
        assert [b.id for b in app.screen.query("Button")] == ["reply", "react"]
        await pilot.press("e", "d")  # no edit, no delete of someone else's message
        assert isinstance(app.screen, MessageActions)
        await pilot.press("escape")
        await pilot.press("up")  # no message of mine to edit: nothing happens
        assert app.chat.composing is None and alive(app)
