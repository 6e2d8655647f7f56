"""The inspector says what a membership line is - a signed statement of the membership log, its
operation, epoch, actor and hash - instead of "not sealed yet" (it never is: it is no message)."""

from __future__ import annotations

import pytest

from client_tui.app import ChatApp
from client_tui.core import membership_lines as lines
from client_tui.core.membership import _verified_line
from client_tui.core.record import Record, RecordState
from tests.helpers.clients import wait_until
from tests.helpers.tui import chat_shown, offline_client, rendered_text, screen_text


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_inspector_describes_a_membership_line(tmp_path, identities, size):
    client, relay = await offline_client(tmp_path / "c", identities)
    (created,) = relay.log_of("conv-1", ["alice", "bob", "carol"])
    rec = Record(
        lines.line_id(created),
        "conv-1",
        created.actor,
        lines.verified(created, None),
        pos=0.5,
        ts=created.ts,
        state=RecordState.SYSTEM,
        info=_verified_line(created),
    )
    await client.history.put(rec)
    app = ChatApp(client, "conv-1")
    try:
        async with app.run_test(size=size) as pilot:
            await wait_until(lambda: chat_shown(app) and len(app.chat.log_view.records) == 1)
            await pilot.press("f2")
            await wait_until(lambda: app.chat.query_one("#inspector").display)
            app.chat.log_view.select_lid(rec.lid)
            await wait_until(
                lambda: app.chat.inspected is not None and "membership" in rendered_text(app.chat.inspected)
            )
            shown = " ".join(rendered_text(app.chat.inspected).split())
            assert "not sealed yet" not in shown
            assert "A membership statement" in shown
            assert f"actor {created.actor}" in shown and f"epoch {created.ep}" in shown
            assert f"operation {created.op}" in shown and "verified" in shown
            assert created.hash.replace(" ", "") in shown.replace(" ", "")
            await pilot.pause()
            assert "A membership statement" in screen_text(app)
    finally:
        await client.close()
