"""``context``: the article's "what actually slows your app" table, measured here.

* an indexed and an unindexed query on a realistic messages table (the relay's columns: seq,
  conversation, sender, message id, a 1 KB envelope, size, time), in SQLite (a file, WAL) and in
  PostgreSQL when 127.0.0.1:5432 answers (a fresh database, dropped after);
* rendering 50 chat items to JSON (stdlib ``json`` and ``msgspec``);
* a loopback round trip: a websocket ping and a 1 KB websocket echo to a uvicorn app on 127.0.0.1.

The article's network and browser figures are shown next to them as quoted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import tempfile
from pathlib import Path

import msgspec

from .relays import drop_pg_database, fresh_pg_database, reachable
from .timing import Stats, measure, measure_async

SCHEMA = """
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, sender_id INTEGER NOT NULL,
    mid TEXT NOT NULL, envelope BLOB NOT NULL, size INTEGER NOT NULL, created_at_ms BIGINT NOT NULL);
CREATE INDEX ix_messages_conversation_seq ON messages (conversation_id, seq);
"""
PAGE = 50
INDEXED = (
    "SELECT seq, sender_id, envelope FROM messages WHERE conversation_id = {p1} AND seq > {p2} ORDER BY seq LIMIT 50"
)
UNINDEXED = "SELECT seq, sender_id, envelope FROM messages WHERE mid = {p1}"


def _rows(n: int, conversations: int, blob: bytes) -> list[tuple]:
    rng = random.Random(7)
    return [
        (
            i + 1,
            f"conv{rng.randrange(conversations):05d}",
            rng.randrange(1000),
            os.urandom(16).hex()[:22],
            blob,
            len(blob),
            1_700_000_000_000 + i,
        )
        for i in range(n)
    ]


def _probes(rows: list[tuple], k: int = 64) -> tuple[list[tuple], list[str]]:
    rng = random.Random(11)
    picks = [rows[rng.randrange(len(rows))] for _ in range(k)]
    return [(r[1], max(0, r[0] - 5000)) for r in picks], [r[3] for r in picks]


def sqlite_queries(rows: list[tuple], n: int, folder: Path) -> dict[str, Stats]:
    """Indexed page and unindexed look-up on a SQLite file (WAL), ms."""
    db = sqlite3.connect(folder / "context.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    db.executemany("INSERT INTO messages VALUES (?,?,?,?,?,?,?)", rows)
    db.commit()
    pages, mids = _probes(rows)
    it = iter(range(10**9))
    q1, q2 = INDEXED.format(p1="?", p2="?"), UNINDEXED.format(p1="?")
    out = {
        "sqlite_indexed": measure(lambda: db.execute(q1, pages[next(it) % len(pages)]).fetchall(), n),
        "sqlite_unindexed": measure(
            lambda: db.execute(q2, (mids[next(it) % len(mids)],)).fetchall(), max(5, n // 20), warmup=2
        ),
    }
    db.close()
    return out


async def pg_queries(rows: list[tuple], n: int) -> dict[str, Stats]:
    """The same two queries in a fresh PostgreSQL database (asyncpg), ms."""
    import asyncpg

    name, _url = await fresh_pg_database("e2ee_bench_ctx")
    try:
        conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}", timeout=5)
        try:
            await conn.execute(SCHEMA.replace("INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY").replace("BLOB", "BYTEA"))
            await conn.copy_records_to_table("messages", records=rows)
            await conn.execute("ANALYZE messages")
            pages, mids = _probes(rows)
            it = iter(range(10**9))
            s1 = await conn.prepare(INDEXED.format(p1="$1", p2="$2"))
            s2 = await conn.prepare(UNINDEXED.format(p1="$1"))
            return {
                "pg_indexed": await measure_async(lambda: s1.fetch(*pages[next(it) % len(pages)]), n),
                "pg_unindexed": await measure_async(lambda: s2.fetch(mids[next(it) % len(mids)]), max(5, n // 20)),
            }
        finally:
            await conn.close()
    finally:
        await drop_pg_database(name)


def render_50(n: int) -> dict[str, Stats]:
    """50 chat items (seq, sender, 200-character text, time, state) to JSON, ms."""
    items = [
        {
            "seq": i,
            "sender": f"user{i % 7}",
            "text": "x" * 200,
            "sent_at_ms": 1_700_000_000_000 + i,
            "state": "received",
            "verified": i % 2 == 0,
        }
        for i in range(50)
    ]
    enc = msgspec.json.Encoder()
    return {
        "render_50_json_stdlib": measure(lambda: json.dumps(items), n),
        "render_50_json_msgspec": measure(lambda: enc.encode(items), n),
    }


async def loopback(n: int, workdir: Path) -> dict[str, Stats]:
    """Websocket ping and a 1 KB websocket echo to a uvicorn app on 127.0.0.1, ms."""
    from websockets.asyncio.client import connect

    from .relay_load import _start_echo, _stop

    proc, port = await asyncio.to_thread(_start_echo, workdir)
    try:
        async with connect(f"ws://127.0.0.1:{port}/ws", compression=None, ping_interval=None) as ws:
            payload = "x" * 1024

            async def ping() -> None:
                await (await ws.ping())

            async def echo() -> None:
                await ws.send(payload)
                await ws.recv()

            return {
                "loopback_ws_ping": await measure_async(ping, n),
                "loopback_ws_echo_1kb": await measure_async(echo, n),
            }
    finally:
        await asyncio.to_thread(_stop, proc)


async def run_async(n: int = 1000, rows: int = 100_000, conversations: int = 500, progress=None) -> dict:
    """The whole context suite; times in ms. PostgreSQL rows are skipped (with the reason) when
    127.0.0.1:5432 does not answer."""
    step = progress or (lambda _label: None)
    data = _rows(rows, conversations, os.urandom(1024))
    out: dict = {
        "params": {"n": n, "rows": rows, "conversations": conversations, "envelope_bytes": 1024},
        "rows": {},
        "skipped": [],
    }
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-context-") as tmp:
        work = Path(tmp)
        step(f"SQLite: {rows} messages")
        out["rows"].update(await asyncio.to_thread(sqlite_queries, data, n, work))
        if reachable("127.0.0.1", 5432):
            step(f"PostgreSQL: {rows} messages")
            try:
                out["rows"].update(await pg_queries(data, n))
            except Exception as exc:  # a missing service is reported, not fatal
                out["skipped"].append(f"PostgreSQL: {type(exc).__name__}: {exc}")
        else:
            out["skipped"].append("PostgreSQL: 127.0.0.1:5432 not reachable")
        step("rendering 50 items to JSON")
        out["rows"].update(render_50(n))
        step("loopback round trip")
        out["rows"].update(await loopback(n, work))
    out["rows"] = {k: v.as_dict() for k, v in out["rows"].items()}
    return out


def run(**kwargs) -> dict:
    """Synchronous wrapper of :func:`run_async`."""
    return asyncio.run(run_async(**kwargs))
