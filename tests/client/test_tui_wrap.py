"""No word of a message is lost at any width: a long sender name, a long mark (↺ signed by a
previous key) or a narrow pane (F2 open) once pushed the first line past the pane's edge, where it
was clipped."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text

from client_tui.app import ChatApp
from client_tui.core.record import Record, RecordState, now_ms
from client_tui.messagelog import lay_out
from tests.helpers.clients import wait_until
from tests.helpers.tui import chat_shown, offline_client, screen_lines

LONG = "averyveryverylongusername_123456"
BODY = "ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE THIRTEEN FOURTEEN"
SYSTEM = "created the conversation “PLANNING TUESDAY MEETING” with ALPHA, BRAVO, CHARLIE and DELTA"


@pytest.fixture
async def bob(tmp_path, identities):
    client, relay = await offline_client(tmp_path / "c", identities)
    yield client, relay
    await client.close()


def words_missing(lines: list[str], text: str) -> list[str]:
    shown = " ".join(lines).split()
    return [w for w in text.split() if w not in shown]


@pytest.mark.parametrize("width", [1, 5, 20, 33, 40, 60, 80, 120])
@pytest.mark.parametrize(
    "name, mark",
    [
        (LONG, "✔"),
        ("alice", "↺ signed by a previous key"),
        (LONG + "_" + LONG, "↺ signed by a previous key"),
        ("al", "·"),
    ],
)
def test_every_line_fits_and_keeps_every_character(width, name, mark):
    console = Console(width=400)
    prefix = Text(f"12:00 {name} {mark} ")
    lines = lay_out(console, prefix, Text(BODY), width)
    assert all(line.cell_len <= width for line in lines), [line.plain for line in lines]
    squeezed = "".join(line.plain for line in lines).replace(" ", "")
    assert squeezed == (prefix.plain + BODY).replace(" ", "")


@pytest.mark.parametrize(
    "size, f2",
    [((80, 24), False), ((60, 20), True), ((120, 40), True), ((80, 24), True)],
    ids=["80x24", "60x20+F2", "120x40+F2", "80x24+F2"],
)
async def test_every_word_of_a_message_is_on_screen(bob, size, f2):
    client, _ = bob
    app = ChatApp(client, "conv-1")
    async with app.run_test(size=size) as pilot:
        await wait_until(lambda: chat_shown(app))
        if f2:
            await pilot.press("f2")
            await wait_until(lambda: app.chat.query_one("#inspector").display)
        log = app.chat.query_one("#log")
        ts = now_ms()
        log.upsert(Record("m1", "conv-1", LONG, BODY, seq=1, pos=1, ts=ts), "verified")
        log.upsert(Record("m2", "conv-1", "alice", BODY.lower(), seq=2, pos=2, ts=ts), "previous")
        log.upsert(Record("m3", "conv-1", LONG, SYSTEM, seq=3, pos=3, ts=ts, state=RecordState.SYSTEM), "verified")
        log.flush()
        await pilot.pause()
        width = log.scrollable_content_region.width
        strips = [strip for row in log.rows for strip in row.lines]
        assert all(strip.cell_length <= width for strip in strips), width
        lines = ["".join(seg.text for seg in strip) for strip in strips]
        assert not words_missing(lines, BODY), "\n".join(lines)
        assert not words_missing(lines, BODY.lower()), "\n".join(lines)
        assert not words_missing(lines, SYSTEM), "\n".join(lines)
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        assert "ONE TWO THREE" in "\n".join(screen_lines(app))  # drawn, not just laid out
