"""The single write path on both engines: group commit, idempotent message ids (across and
within one batch), one delivery row per recipient, and a bad write failing alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select

from server.models import Delivery, Message
from shared.errors import E2EEError
from tests.helpers.writing import count, new, writer_on


async def test_one_batch_stores_in_order_and_repeats_get_the_first_seq(writer):
    w, sessions = writer
    batches = w.batches
    first = await asyncio.gather(*(w.run(op) for op in [new("m1"), new("m2"), new("m1"), new("m1", sender=2)]))
    assert w.batches == batches + 1  # queued together, committed together
    assert [r.duplicate for r in first] == [False, False, True, False]
    assert first[2].seq == first[0].seq
    assert first[0].seq < first[1].seq < first[3].seq  # in queue order

    again = await asyncio.gather(w.run(new("m2")), w.run(new("m3")))
    assert (again[0].seq, again[0].duplicate) == (first[1].seq, True)
    assert again[1].seq > first[3].seq and not again[1].duplicate

    assert await count(sessions, Message) == 4
    assert await count(sessions, Delivery) == 4 * 3
    async with sessions() as s:
        rows = (await s.execute(select(Message.seq, Message.size).order_by(Message.seq))).all()
    assert [seq for seq, _ in rows] == [first[0].seq, first[1].seq, first[3].seq, again[1].seq]
    assert {size for _, size in rows} == {2900}


async def test_a_bad_write_fails_alone_and_the_rest_of_its_batch_commits(writer):
    w, sessions = writer
    results = await asyncio.gather(
        w.run(new("ok1")),
        w.run(new("bad", conversation="no-such-conversation")),
        w.run(new("ok2")),
        return_exceptions=True,
    )
    assert not isinstance(results[0], BaseException) and not isinstance(results[2], BaseException)
    assert isinstance(results[1], Exception) and not isinstance(results[1], E2EEError)  # an integrity error
    assert results[0].seq < results[2].seq
    assert await count(sessions, Message) == 2
    assert await count(sessions, Delivery) == 2 * 3


async def test_sqlite_wal_is_checkpointed_by_the_writer_when_commits_run_inline(tmp_path: Path):
    """With synchronous=NORMAL the writer's connection has automatic checkpoints off (past
    SQLite's 1,000-page threshold the database file stays as it was) and the writer's own
    checkpoint, from its thread, copies the WAL into the database file."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'relay.db'}"
    db_file = tmp_path / "relay.db"
    async for w, sessions in writer_on(url, "NORMAL"):
        assert w._inline
        w.CHECKPOINT_INTERVAL_S = 3600
        if w._checkpoint is not None:  # the one after the fixture's first batch
            await w._checkpoint
        size, done = db_file.stat().st_size, w.checkpoints
        for i in range(10):  # 1,600 x 2.9 KB: over 1,000 WAL pages of 4 KiB
            await asyncio.gather(*(w.run(new(f"b{i}m{j}")) for j in range(160)))
        assert (tmp_path / "relay.db-wal").stat().st_size > 1000 * 4096
        assert db_file.stat().st_size == size and w.checkpoints == done
        w.CHECKPOINT_INTERVAL_S = 0
        await w.run(new("last"))
        await w._checkpoint
        assert w.checkpoints == done + 1
        assert db_file.stat().st_size > 1600 * 2900
        assert await count(sessions, Message) == 1601
