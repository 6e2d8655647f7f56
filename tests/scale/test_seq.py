"""Message seqs on both engines: strictly monotonic for the life of the database (never handed out
again after retention deleted the newest messages), 64-bit (a seq above 2**31 is stored, synced
and acknowledged), and migration 0007 keeps every stored message and delivery."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from sqlalchemy import func, select, text

from server import db, queries, store
from server.migrate import upgrade
from server.models import Message
from server.retention import delete_batch
from server.writer import Writer
from tests.helpers.scale import database_url
from tests.helpers.writing import count, new


async def test_a_seq_is_never_handed_out_again_after_retention_deleted_the_newest(writer):
    w, sessions = writer
    first = [(await w.run(new(f"m{i}"))).seq for i in range(3)]
    for reader in (2, 3):
        await w.run(store.ack_up_to(reader, first[-1]))
    assert await w.run(delete_batch(store.now_ms(), None, 100), background=True) == first  # all of them
    assert await count(sessions, Message) == 0
    later = (await w.run(new("after"))).seq
    assert later > first[-1]
    async with sessions() as s:  # bob synced up to first[-1] before: he gets the new one
        assert [m.seq for m in await queries.sync_page(s, 2, first[-1], 10)] == [later]


async def set_next_seq(sessions, after: int) -> None:
    """Make the next message's seq ``after + 1``."""
    async with sessions() as s:
        if s.bind.dialect.name == "postgresql":
            await s.execute(text("SELECT setval(pg_get_serial_sequence('messages', 'seq'), :v)"), {"v": after})
        else:
            await s.execute(text("UPDATE sqlite_sequence SET seq = :v WHERE name = 'messages'"), {"v": after})
        await s.commit()


async def test_a_seq_above_2_31_is_stored_synced_and_acknowledged(writer):
    w, sessions = writer
    below = (await w.run(new("below"))).seq
    await set_next_seq(sessions, 2**31 + 4)
    big = [(await w.run(new(f"big{i}"))).seq for i in range(2)]
    assert big == [2**31 + 5, 2**31 + 6]
    async with sessions() as s:
        assert [m.seq for m in await queries.sync_page(s, 2, below, 10)] == big
        assert [m.seq for m in await queries.sync_page(s, 2, 2**31 + 5, 10)] == big[1:]
        assert await queries.sync_page(s, 2, 2**53 - 1, 10) == []
        assert await queries.last_seq_for(s, 2) == big[1]
        assert [(u, m.seq) for u, m in await queries.deliveries_by_seq(s, [2], big)] == [(2, b) for b in big]
    assert await w.run(store.ack_up_to(2, big[0])) == [(below, 1), (big[0], 1)]
    assert await w.run(store.ack_up_to(2, 2**53 - 1)) == [(big[1], 1)]


# -- migration 0007 on a database with data ------------------------------------------------------------
async def fill_at_0006(url: str) -> tuple[list, list]:
    """At schema 0006: messages 1..5 (bob read 1-2, carol none), alice's keys rotated when 5 was the
    newest (``published_seq`` 5), then retention deleted 3 and 5. Returns the stored
    (seq, mid, envelope) and (user_id, seq, acked_at_ms) rows."""
    await asyncio.to_thread(upgrade, url, "0006_retention")
    engine = db.create_engine(url)
    try:
        async with engine.begin() as c:
            await c.execute(
                text(
                    "INSERT INTO users (id, username, password_hash, created_at_ms) VALUES "
                    "(1, 'alice', 'x', 0), (2, 'bob', 'x', 0), (3, 'carol', 'x', 0)"
                )
            )
            await c.execute(
                text("INSERT INTO conversations (id, title, created_by, created_at_ms) VALUES ('conv1', 't', 1, 0)")
            )
            for i in range(1, 6):
                seq = (
                    await c.execute(
                        text(
                            "INSERT INTO messages (conversation_id, sender_id, mid, envelope, size, created_at_ms) "
                            "VALUES ('conv1', 1, :mid, :env, 3, 0) RETURNING seq"
                        ),
                        {"mid": f"m{i}", "env": b"abc"},
                    )
                ).scalar()
                await c.execute(
                    text(
                        "INSERT INTO deliveries (user_id, seq, acked_at_ms) VALUES "
                        "(1, :s, 0), (2, :s, :bob), (3, :s, NULL)"
                    ),
                    {"s": seq, "bob": 7 if i <= 2 else None},
                )
            await c.execute(
                text(
                    "INSERT INTO user_keys (user_id, wrap_kid, wrap_key, sign_kid, sign_key, current, created_at_ms, "
                    "rotation_sig, rotation_v, published_seq) VALUES (1, 'w', :k, 's', :k, true, 0, :k, 2, 5)"
                ),
                {"k": b"k"},
            )
            await c.execute(text("DELETE FROM deliveries WHERE seq IN (3, 5)"))
            await c.execute(text("DELETE FROM messages WHERE seq IN (3, 5)"))
        return await snapshot(engine)
    finally:
        await engine.dispose()


async def snapshot(engine) -> tuple[list, list]:
    async with engine.connect() as c:
        msgs = (await c.execute(text("SELECT seq, mid, envelope FROM messages ORDER BY seq"))).all()
        dels = (await c.execute(text("SELECT user_id, seq, acked_at_ms FROM deliveries ORDER BY seq, user_id"))).all()
    return [tuple(r) for r in msgs], [tuple(r) for r in dels]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_migration_0007_keeps_every_message_and_delivery_and_seqs_go_on_rising(kind, tmp_path):
    async with database_url(kind, tmp_path) as url:
        before = await fill_at_0006(url)
        assert [m[0] for m in before[0]] == [1, 2, 4] and len(before[1]) == 9
        await asyncio.to_thread(upgrade, url)
        engine = db.create_engine(url)
        try:
            assert await snapshot(engine) == before
        finally:
            await engine.dispose()
        # the schema is the models' own (one schema owner), and seqs only rise from here
        async with writer_on_existing(url) as (w, sessions):
            # above every seq it handed out that it has a trace of (SQLite: published_seq 5)
            assert (await w.run(new("after upgrade"))).seq == 6
            newest = (await w.run(new("newest"))).seq
            # retention deletes the newest (past the maximum age, unread)
            assert await w.run(delete_batch(0, store.now_ms(), 10, after=newest - 1), background=True) == [newest]
            assert (await w.run(new("after the delete"))).seq == newest + 1
            async with sessions() as s:
                assert (await s.execute(select(func.count()).select_from(Message))).scalar_one() == 5


@contextlib.asynccontextmanager
async def writer_on_existing(url: str):
    """The writer on ``url`` (already holding users 1-3 and conv1: only the upgrade runs again)."""
    engine = db.create_engine(url)
    sessions = db.sessionmaker(engine)
    w = Writer(sessions, db.create_writer_engine(url), inline=True)
    w.start()
    try:
        yield w, sessions
    finally:
        await w.stop()
        await engine.dispose()
