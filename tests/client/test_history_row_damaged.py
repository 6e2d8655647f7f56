"""One damaged row of the history cache (its unencrypted info/state columns), a damaged meta value
or a damaged member list never stops listing a conversation or logging in: that row is shown as
unreadable (``history_damaged``) with a log line, the others are listed (attacker F2)."""

from __future__ import annotations

import logging
import os
import sqlite3

import pytest

from client_tui.core.history import History
from client_tui.core.record import Doc, Record, RecordState


def rec(lid: str, seq: int, text: str) -> Record:
    return Record(
        lid, "conv-1", "alice", text, f"mid-{lid}", seq, float(seq), 1000 + seq, seq, RecordState.RECEIVED,
        envelope=b"ct", content=Doc(),
    )  # fmt: skip


async def damaged_cache(tmp_path, damage: str, meta=None) -> tuple:
    key = os.urandom(32)
    path = tmp_path / "history.sqlite3"
    h = await History.open(path, key)
    await h.put(rec("a", 1, "one"), meta)
    await h.put(rec("b", 2, "two"))
    await h.save_conversations([("conv-1", "t", ["alice", "bob"])])
    await h.close()
    db = sqlite3.connect(path)
    db.execute(damage)
    db.commit()
    db.close()
    return path, key


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE messages SET info='{' WHERE lid='a'",
        "UPDATE messages SET info=x'ff7b' WHERE lid='a'",
        "UPDATE messages SET state='bogus' WHERE lid='a'",
    ],
)
async def test_one_damaged_row_does_not_stop_the_listing(tmp_path, caplog, damage):
    path, key = await damaged_cache(tmp_path, damage)
    h = await History.open(path, key)
    try:
        with caplog.at_level(logging.WARNING, "e2ee.client"):
            rows = await h.recent("conv-1")
        assert [r.lid for r in rows] == ["a", "b"]
        assert rows[0].state == RecordState.UNREADABLE and rows[0].reason == "history_damaged"
        assert rows[1].text == "two" and rows[1].state == RecordState.RECEIVED
        assert "lid=a" in caplog.text and "damaged" in caplog.text
        assert [r.lid for r in await h.search(lambda text: "two" in text, "conv-1", limit=10)] == ["b"]
    finally:
        await h.close()


async def test_damaged_meta_value_is_dropped(tmp_path, caplog):
    path, key = await damaged_cache(tmp_path, "UPDATE meta SET value='{' WHERE key='cursor'", {"cursor": 1, "n": 2})
    h = await History.open(path, key)
    try:
        with caplog.at_level(logging.WARNING, "e2ee.client"):
            assert await h.meta() == {"n": 2}
        assert "'cursor' damaged" in caplog.text
    finally:
        await h.close()


@pytest.mark.parametrize("members", ["'{'", "'[1]'", "'\"x\"'"])
async def test_damaged_member_list_is_shown_empty(tmp_path, caplog, members):
    path, key = await damaged_cache(tmp_path, f"UPDATE conversations SET members={members} WHERE id='conv-1'")
    h = await History.open(path, key)
    try:
        with caplog.at_level(logging.WARNING, "e2ee.client"):
            (conv,) = await h.conversations()
        assert conv["id"] == "conv-1" and conv["members"] == []
        assert "member list damaged" in caplog.text
    finally:
        await h.close()
