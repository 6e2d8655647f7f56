"""Retention on both engines (issue 13): which envelopes a sweep deletes — acknowledged by every
recipient, or past the maximum age — and which it keeps; deletion batches that run between sends;
and the deletion rate while sends keep coming (figures printed)."""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from sqlalchemy import select, update

from server import queries, store
from server.models import Delivery, Message
from server.retention import DAY_MS, Retention, delete_batch
from server.settings import Settings
from tests.helpers.writing import count, new


async def stored(sessions) -> list[int]:
    async with sessions() as s:
        return list((await s.execute(select(Message.seq).order_by(Message.seq))).scalars())


async def test_a_sweep_deletes_what_every_recipient_acknowledged_and_nothing_else(writer):
    w, sessions = writer
    seqs = [r.seq for r in await asyncio.gather(*(w.run(new(f"m{i}")) for i in range(6)))]
    await w.run(store.ack_up_to(2, seqs[3]))  # bob read four
    await w.run(store.ack_up_to(3, seqs[1]))  # carol read two; alice sent them (her copy counts as read)
    now = store.now_ms()
    assert await w.run(delete_batch(now, None, 100), background=True) == seqs[:2]
    assert await stored(sessions) == seqs[2:]
    assert await count(sessions, Delivery) == 4 * 3  # the deleted ones' delivery rows went with them
    # history kept for a day: acknowledged, but too recent
    await w.run(store.ack_up_to(3, seqs[3]))
    assert await w.run(delete_batch(now - DAY_MS, None, 100), background=True) == []
    # the maximum age takes what was never acknowledged too
    async with sessions() as s:
        await s.execute(update(Message).where(Message.seq == seqs[5]).values(created_at_ms=now - 31 * DAY_MS))
        await s.commit()
    assert await w.run(delete_batch(now - DAY_MS, now - 30 * DAY_MS, 100), background=True) == [seqs[5]]
    assert await w.run(delete_batch(now, now - 30 * DAY_MS, 1), background=True) == [seqs[2]]  # one per batch
    assert await stored(sessions) == [seqs[3], seqs[4]]
    async with sessions() as s:  # a cursor past every stored seq: nothing, no error
        assert await queries.sync_page(s, 2, 2**53 - 1, 10) == []
    assert await w.run(store.ack_up_to(2, 2**53 - 1)) == [(seqs[4], 1)]


def messages_per_s() -> int:
    return 200


async def test_deletion_rate_under_load(writer, tmp_path):
    """Delete a backlog of acknowledged envelopes while a sender stores ``messages_per_s`` messages
    a second: the deletion rate (the sweep's own duration), and the send latency before and
    during the sweep (a send waits for at most the deletion batch in progress)."""
    w, sessions = writer
    backlog = 200_000 if os.environ.get("E2EE_FULL") else 20_000
    for start in range(0, backlog, 2000):
        await asyncio.gather(*(w.run(new(f"old{i}")) for i in range(start, start + 2000)))
    await w.run(store.ack_up_to(2, 2**53 - 1))
    await w.run(store.ack_up_to(3, 2**53 - 1))
    retention = Retention(Settings(retention_batch=500, data_dir=str(tmp_path)), w)

    async def sending(until, tag: str) -> list[float]:
        latencies, i = [], 0
        while not until():
            t0 = time.perf_counter()
            await w.run(new(f"{tag}{i}"))
            latencies.append((time.perf_counter() - t0) * 1000)
            i += 1
            await asyncio.sleep(max(0.0, 1 / messages_per_s() - latencies[-1] / 1000))
        return latencies

    end = time.monotonic() + 1.0
    quiet = await sending(lambda: time.monotonic() > end, "quiet")
    sweep = asyncio.create_task(retention.sweep())
    during = await sending(sweep.done, "load")  # sends for as long as the sweep runs
    deleted = await sweep
    sweep_s = retention.last_sweep_s
    remaining = await count(sessions, Message)
    p = lambda xs, q: statistics.quantiles(xs, n=100)[q - 1]  # noqa: E731
    print(
        f"\n{w.__class__.__name__} on {sessions.kw['bind'].dialect.name}: deleted {deleted} of {backlog} "
        f"in {sweep_s:.2f} s ({deleted / sweep_s:,.0f} envelopes/s, batches of 500) while storing "
        f"{messages_per_s()}/s; send latency p50/p99 {p(quiet, 50):.1f}/{p(quiet, 99):.1f} ms quiet, "
        f"{p(during, 50):.1f}/{p(during, 99):.1f} ms during the sweep"
    )
    assert deleted == backlog
    assert remaining == len(quiet) + len(during)  # every send stored, none deleted (bob and carol never read them)
