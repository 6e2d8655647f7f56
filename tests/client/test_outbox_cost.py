"""What a line landing in a conversation costs the client does not grow with the outbox: one
record written and one ``RecordChanged`` per message received or stored, however many of my
messages wait unsent. Each landed line rewrote every unsent message (``Outbox.keep_last``, to keep
them last): with the SIGKILL test's 750 messages queued per sender that was ~280,000 history writes
per sender, and 1,500 messages no longer finished in 400 s. Counted, not timed."""

from __future__ import annotations

import pytest

from client_tui.core import RecordChanged
from tests.helpers.clients import drain

RECEIVED = 10
STORED = 5


async def _land_lines(client, relay, unsent: int) -> tuple[int, int, int, list[str]]:
    """Queue ``unsent`` messages, then let 10 of alice's arrive and the relay store 5 of mine
    (interleaved); returns (cache rows written, RecordChanged events, landed lines, texts in order)."""
    await client.history.save_conversations([("conv-1", "hostile", client.members["conv-1"])])
    for i in range(unsent):
        await client.queue_text("conv-1", f"mine {i}")
    drain(client)
    rows_before = await client.history.rows_written()
    landed = 0
    for i in range(RECEIVED):
        await relay.deliver(relay.seal("alice", f"alice {i}"), sender="alice")
        landed += 1
        if i < STORED:
            relay.seq += 1
            await client.outgoing.mark_stored(client.outgoing.items[0], relay.seq)
            landed += 1
    rows = await client.history.rows_written() - rows_before
    changed = [e for e in drain(client) if isinstance(e, RecordChanged)]
    texts = [r.text for r in await client.load_history("conv-1", limit=1000) if r.state != "system"]
    return rows, len(changed), landed, texts


@pytest.mark.parametrize("unsent", [STORED, 60])
async def test_a_landed_line_writes_the_same_rows_whatever_the_outbox_holds(offline_bob, unsent):
    client, relay = offline_bob
    rows, changed, landed, texts = await _land_lines(client, relay, unsent)
    assert landed == RECEIVED + STORED
    assert changed == landed  # one RecordChanged per landed line: no unsent message moved
    # a received message: its row, 4 meta rows (cursor, counters, last_ctr, missing), the unread
    # count; a stored one of mine: its row
    assert rows == RECEIVED * 6 + STORED * 1
    landed_order = [t for i in range(RECEIVED) for t in (f"alice {i}", f"mine {i}")[: 2 if i < STORED else 1]]
    assert texts == landed_order + [f"mine {i}" for i in range(STORED, unsent)]  # unsent last, as written


async def test_unsent_messages_restored_from_an_older_cache_are_placed_last(offline_bob, identities, tmp_path):
    """A cache written before the unsent band kept an unsent message at a fraction after the last
    seq; after a restart it is placed after every other line (and written so)."""
    client, relay = offline_bob
    await relay.deliver(relay.seal("alice", "alice 0"), sender="alice")
    mine = await client.queue_text("conv-1", "mine, from an older client")
    mine.pos = 1.001  # where an older client kept it
    await client.history.put(mine)
    await relay.deliver(relay.seal("alice", "alice 1"), sender="alice", seq=5)
    client.outgoing.items.clear()
    await client.outgoing.restore(await client.history.outbox())
    texts = [r.text for r in await client.load_history("conv-1") if r.state != "system"]
    assert texts == ["alice 0", "alice 1", "mine, from an older client"]
    assert [i.record.lid for i in client.outgoing.items] == [mine.lid]
