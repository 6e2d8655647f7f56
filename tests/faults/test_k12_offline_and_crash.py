"""Case K12: bob offline while alice sends 5; bob reconnects and drops after reading 2 without
acking; the relay is killed between commit and fan-out (``--hostile crash:6``: it SIGKILLs itself
after storing message 6, before any frame of it leaves). Bob ends with every message exactly once,
in order; no acknowledged message is lost; alice's retry of the unacknowledged one gets its
original seq."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.tools.relayproc import RelayProcess
from client_tui.core import MessageReceived
from tests.helpers.clients import barrier
from tests.helpers.config import FAST_RELAY_ENV
from tests.helpers.relays import db_count, relay_log
from tests.helpers.ws import open_ws, recv_type


@pytest.mark.process  # the hostile relay SIGKILLs itself
async def test_k12_offline_partial_read_and_a_crash_between_commit_and_fan_out(world):
    relay = world.hostile("crash:6")
    alice = await world.client(relay, "alice", connect=False)
    bob = await world.client(relay, "bob", connect=False)
    conv = await alice.create_conversation("pair", ["bob"])
    alice.start()
    await world.rec(alice).until(lambda r: alice.online)
    sent = [await alice.send_text(conv, f"m{i}") for i in range(1, 6)]  # bob is offline
    assert [s.seq for s in sent] == [1, 2, 3, 4, 5]

    ws = await open_ws(relay, bob.token)  # bob comes back, reads 2 and drops without acking
    await recv_type(ws, "ready")
    await ws.send(json.dumps({"type": "sync", "after": 0}))
    assert [(await recv_type(ws, "msg"))["seq"] for _ in range(2)] == [1, 2]
    await ws.close()
    assert (
        db_count(
            relay,
            "SELECT count(*) FROM deliveries d JOIN users u ON u.id = d.user_id "
            "WHERE u.username = 'bob' AND d.acked_at_ms IS NULL",
        )
        == 5
    )

    bob.start()
    await world.rec(bob).until(lambda r: len(r.texts) == 5)
    sixth = asyncio.create_task(alice.send_text(conv, "m6"))
    for _ in range(600):  # the relay stores m6, then kills itself before fanning it out or acking it
        if relay.proc.poll() is not None:
            break
        await asyncio.sleep(0.05)
    assert relay.proc.poll() == -9
    assert "hostile crash: SIGKILL before delivering seq=6" in relay_log(relay)
    assert not sixth.done()  # alice never got the ack
    assert db_count(relay) == 6  # but it was committed

    honest = RelayProcess(relay.data_dir, port=relay.port, env=dict(FAST_RELAY_ENV)).start()
    world.relays.append(honest)
    relay.stop()
    assert (await sixth).seq == 6  # the outbox re-sent it after reconnecting: the original seq
    await barrier(bob)
    assert world.rec(bob).texts == [f"m{i}" for i in range(1, 7)]
    assert [m.seq for m in world.rec(bob).of(MessageReceived)] == [1, 2, 3, 4, 5, 6]
    assert db_count(honest) == 6
