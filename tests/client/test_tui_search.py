"""``/`` searches the decrypted history in the app; a result opens its conversation with the
message selected, even one older than the page the conversation opens on."""

from __future__ import annotations

from textual import events

from client_tui.app import ChatApp
from client_tui.search import SearchScreen, matcher, snippet
from tests.helpers.clients import wait_until
from tests.helpers.tui import chat_shown, offline_client, screen_ready, screen_text


async def test_slash_searches_and_a_result_jumps_to_the_message(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    client.titles["conv-2"] = "other"
    client.members["conv-2"] = ["alice", "bob"]
    try:
        await relay.deliver(
            relay.seal("alice", "the Quarterly numbers are in", conv="conv-2", to=["alice", "bob"]),
            sender="alice",
            conv="conv-2",
        )
        for i in range(300):  # the match is older than the 200 messages a conversation opens with
            await relay.deliver(
                relay.seal("alice", f"filler {i}", conv="conv-2", to=["alice", "bob"]), sender="alice", conv="conv-2"
            )
        await relay.deliver(relay.seal("carol", "see you at [b]lunch[/b]"), sender="carol")
        app = ChatApp(client, "conv-1")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: chat_shown(app) and app.chat.records)
            await pilot.press("slash")
            await wait_until(lambda: screen_ready(app, SearchScreen, focus="#search-query"))
            await pilot.press(*"quarterly NUMBERS")
            await wait_until(lambda: [r.text for r in app.screen.results] == ["the Quarterly numbers are in"])
            assert "1 message(s)" in screen_text(app) and "other" in screen_text(app)
            await pilot.press("enter")
            await wait_until(lambda: app.screen is app.chat and app.chat.conversation == "conv-2")
            await wait_until(lambda: (app.chat.log_view.selected_record or None) is not None)
            assert app.chat.log_view.selected_record.text == "the Quarterly numbers are in"
            await wait_until(lambda: "the Quarterly numbers are in" in screen_text(app))  # scrolled to it

            # "/" typed inside a message is a character, not a search, even when typed faster than
            # the app handles keys (tmux send-keys, a fast typist): decided in key order
            composer = app.chat.query_one("#composer")
            for key in "a/b[/i]":
                app.post_message(events.Key("slash" if key == "/" else key, key))
            await wait_until(lambda: composer.text == "a/b[/i]")
            await pilot.pause()
            assert app.screen is app.chat
            app.chat.query_one("#composer").text = ""
            await pilot.press("ctrl+f")
            await wait_until(lambda: screen_ready(app, SearchScreen, focus="#search-query"))
            await pilot.press(*"lunch")
            await wait_until(lambda: len(app.screen.results) == 1)
            assert "[b]lunch[/b]" in screen_text(app)  # a result is shown as text, never as markup
            await pilot.press("escape")
            await wait_until(lambda: app.screen is app.chat)
    finally:
        await client.close()


def test_queries_words_phrases_case_and_compatibility_forms():
    assert matcher("LAUNCH tuesday")("The launch is on Tuesday")
    assert not matcher("launch friday")("The launch is on Tuesday")
    assert matcher('"on tuesday"')("the launch is ON Tuesday") and not matcher('"tuesday on"')("on tuesday")
    assert matcher("first")("take the ﬁrst left") and matcher("STRASSE")("Straße")
    assert not matcher("")("anything") and not matcher("   ")("anything")
    assert matcher("it's \"unbalanced")("it's \"unbalanced quotes")
    shown = snippet("x" * 100 + " the needle \x1b[31m " + "y" * 100, "needle", width=30)
    assert "needle" in shown.plain and "\x1b" not in shown.plain and shown.plain.startswith("…")
