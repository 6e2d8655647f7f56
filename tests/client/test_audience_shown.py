""" "Send to everyone now" agrees to the names the dialog showed, not to whoever is a member when the
button is pressed: someone added while the question was on screen is asked about again (the same
class as verifying exactly the key shown, CVE-2022-39250)."""

from __future__ import annotations

from client_tui.app import ChatApp
from client_tui.audience import AudienceScreen
from tests.helpers.clients import barrier, messages_of, wait_until
from tests.helpers.tui import alive, click_button, screen_ready

SIZE = (100, 30)


def question(app) -> str:
    return str(app.screen.query_one("#audience-question").render())


async def test_a_member_added_while_the_question_is_open_is_asked_about_again(make_client):
    alice, bob, dave, eve = [await make_client(n) for n in ("alice", "bob", "dave", "eve")]
    conv = await alice.create_conversation("pair", ["bob"])
    rec = await alice.queue_text(conv, "for bob")  # written for alice and bob (alice is offline)
    await bob.change_members(conv, add=["dave"])
    await dave.connect()
    await eve.connect()
    app = ChatApp(alice, conv)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: screen_ready(app, AudienceScreen), timeout=30)
        asked = app.screen
        assert "Since then dave joined" in question(app)
        await bob.change_members(conv, add=["eve"])  # while alice reads the question
        await wait_until(lambda: "eve" in alice.members.get(conv, []), timeout=30)
        await click_button(pilot, "#send")  # she agreed to dave, the name she was shown
        await wait_until(lambda: screen_ready(app, AudienceScreen) and app.screen is not asked, timeout=30)
        assert "Since then eve joined" in question(app)  # before: sealed to eve at once, never named
        (item,) = alice.outgoing.waiting(conv)
        assert (item.record.lid, item.record.info.audience.members) == (rec.lid, ["alice", "bob", "dave"])
        for client in (alice, eve, dave):  # what alice sent before her barrier reached eve and dave before theirs
            await barrier(client)
        assert await messages_of(eve, conv) == [] and await messages_of(dave, conv) == []
        assert alive(app)
