"""Case K10: bob stops reading his socket while messages of 64 KB are sent to him. The relay's
memory stays bounded (per-connection queue limit: 1024 frames / 8 MiB), bob is disconnected with
a reason (1013) and then gets everything by sync, in order; carol, reading, is unaffected.

CI sends 300 messages (about 26 MB toward each recipient); the case's full size (10,000 x 64 KB,
about 870 MB toward each) runs with::

    E2EE_FULL=1 .venv/bin/pytest tests/faults/test_k10_slow_reader.py -q -s
"""

from __future__ import annotations

import asyncio
import json
import os

import msgspec
import pytest
from websockets.exceptions import ConnectionClosed

from bench.tools.loadgen import rss_kib
from client_tui.core.record import now_ms
from shared import envelope, frames
from shared.content import Text
from tests.helpers.ws import open_ws, recv_type, send_frame

FULL = os.environ.get("E2EE_FULL") == "1"
MESSAGES = 10_000 if FULL else 300
TEXT_BYTES = 64 * 1024 - 64  # the text of a 64 KiB content document (the largest: shared.content)
RSS_BOUND_MIB = 256  # the relay's resident memory must stay under this while bob does not read
WINDOW = 16


@pytest.mark.process  # the relay process's memory
@pytest.mark.slow
@pytest.mark.timeout(1800)  # at full size (E2EE_FULL) it runs for many minutes
async def test_k10_a_reader_that_stops_is_cut_off_and_catches_up_by_sync(world):
    relay = world.relay(name="k10", env={"E2EE_RATE_SENDS_PER_S": "0", "E2EE_LOG_LEVEL": "WARNING"})
    alice, bob, carol = [await world.client(relay, n, connect=False) for n in ("alice", "bob", "carol")]
    conv = await alice.create_conversation("group", ["bob", "carol"])
    aud = await alice.recipients_for(conv)
    stalled = await open_ws(relay, bob.token, max_queue=1)  # bob reads nothing from here on
    await recv_type(stalled, "ready")
    reader = await open_ws(relay, carol.token, max_size=2**20)
    await recv_type(reader, "ready")
    sender = await open_ws(relay, alice.token)
    await recv_type(sender, "ready")
    carol_seqs: list[int] = []
    peak = [rss_kib(relay.proc.pid)]

    async def carol_reads() -> None:
        while len(carol_seqs) < MESSAGES:
            frame = json.loads(await reader.recv())
            if frame["type"] == "msg":
                carol_seqs.append(frame["seq"])

    carol_task = asyncio.create_task(carol_reads())
    acked: list[int] = []
    text = "k" * TEXT_BYTES
    for i in range(MESSAGES):
        data = envelope.seal(
            Text(text, ts=now_ms(), ctr=i + 1), alice.identity, conv, aud.recipients, epoch=aud.epoch, head=aud.head
        )
        await sender.send(send_frame(conv, data))
        if i >= WINDOW:  # at most WINDOW sends unanswered
            acked.append((await recv_type(sender, "stored", timeout=60))["seq"])
        if i % 25 == 0:
            peak.append(rss_kib(relay.proc.pid))
    while len(acked) < MESSAGES:
        acked.append((await recv_type(sender, "stored", timeout=60))["seq"])
    await asyncio.wait_for(carol_task, 300)
    peak.append(rss_kib(relay.proc.pid))
    assert carol_seqs == acked == sorted(acked)  # carol got every message live, in order

    with pytest.raises(ConnectionClosed):  # what bob finds when he looks again: the relay cut him off
        while True:
            await asyncio.wait_for(stalled.recv(), 30)
    assert (stalled.close_code, stalled.close_reason) == (1013, "send queue full: reconnect and sync")

    ws = await open_ws(relay, bob.token, max_size=2**24)  # he reconnects and syncs from 0
    await recv_type(ws, "ready")
    got, after, more = [], 0, True
    while more:
        await ws.send(frames.encode(frames.Sync(after=after, limit=500)).decode())
        while True:
            frame = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 60))
            if frame["type"] == "msg":
                got.append(frame["seq"])
            elif frame["type"] == "synced":
                after, more = frame["cursor"], frame["more"]
                break
    await ws.close()
    assert got == acked  # everything, once, in order
    print(
        f"\nK10: {MESSAGES} x 64 KB; bob cut off with 1013 and synced {len(got)}; carol got {len(carol_seqs)} live; "
        f"relay RSS peak {max(peak) // 1024} MiB (bound {RSS_BOUND_MIB} MiB)"
    )
    assert max(peak) < RSS_BOUND_MIB * 1024
