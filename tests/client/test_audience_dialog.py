"""The terminal client asks before a message goes to people who joined after it was written
(client_tui/audience.py): its text and the names are drawn as typed, never as markup, and only
"Send to everyone now" seals it to the newcomers."""

from __future__ import annotations

from client_tui.app import ChatApp
from client_tui.audience import AudienceScreen
from tests.helpers.clients import next_message, wait_until
from tests.helpers.tui import alive, click_button, screen_ready, screen_text

SIZE = (100, 30)


async def test_the_author_is_asked_and_only_then_the_newcomer_gets_it(make_client):
    alice, bob, dave = [await make_client(n) for n in ("alice", "bob", "dave")]
    conv = await alice.create_conversation("pair", ["bob"])
    text = "[b]for bob[/b] \x1b[31m only"
    rec = await alice.queue_text(conv, text)  # written for alice and bob, not sent yet (alice is offline)
    await bob.change_members(conv, add=["dave"])
    await dave.connect()
    app = ChatApp(alice, conv)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: screen_ready(app, AudienceScreen), timeout=30)
        assert "New members since you wrote this" in screen_text(app)
        question = str(app.screen.query_one("#audience-question").render())
        assert question.startswith("“[b]for bob[/b] ␛[31m only” was written for alice, bob. Since then dave joined")
        assert alive(app)
        assert [i.record.lid for i in alice.outgoing.waiting(conv)] == [rec.lid]
        await click_button(pilot, "#send")
        await wait_until(lambda: app.screen is app.chat)
        got = await next_message(dave)
        assert (got.text, got.sender) == (text, "alice")
        assert alice.outgoing.waiting(conv) == []
