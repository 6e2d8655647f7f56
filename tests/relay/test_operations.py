"""Operations (issue 13): metrics behind the operator token, authenticated Redis notes that deliver
only through the deliveries table, the data-folder lock, the schema check at start, and a
busy SQLite lock that leaves the event loop serving."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import redis.asyncio as aioredis

from bench.tools.relayproc import free_port
from client_tui.core.record import now_ms
from server.broker import Note, note_key, seal_note
from server.migrate import upgrade
from shared.content import Text
from tests.helpers.asgi import account, http, new_conversation, rest_send, running
from tests.helpers.config import FAST_RELAY_ENV, PASSWORD
from tests.helpers.relays import start_relay
from tests.helpers.scale import REDIS, unavailable
from tests.helpers.ws import open_ws, recv_type, relay_secret, send_frame


async def test_metrics_need_the_operator_token(settings_for):
    s = settings_for(operator_token="op-" + "7" * 40)
    async with running(s) as app, http(app) as c:
        assert (await c.get("/v1/metrics")).status_code == 401
        r = await c.get("/v1/metrics", headers={"Authorization": "Bearer " + "op-" + "7" * 39 + "8"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "auth_failed"
        r = await c.get("/v1/metrics", headers={"Authorization": "Bearer op-" + "7" * 40})
        assert r.status_code == 200 and r.json()["stored"] == 0
    generated = settings_for()  # none given: one is generated into the data folder, 0600
    async with running(generated) as app, http(app) as c:
        path = Path(generated.data_dir) / "operator.token"
        assert path.stat().st_mode & 0o777 == 0o600
        assert (await c.get("/v1/metrics")).status_code == 401
        r = await c.get("/v1/metrics", headers={"Authorization": f"Bearer {path.read_text().strip()}"})
        assert r.status_code == 200


def user_id(relay, name: str) -> int:
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return db.execute("SELECT id FROM users WHERE username = ?", (name,)).fetchone()[0]
    finally:
        db.close()


async def test_an_unauthenticated_redis_note_delivers_nothing(tmp_path, identities):
    try:
        async with aioredis.Redis(host=REDIS[0], port=REDIS[1], socket_connect_timeout=2) as probe:
            await probe.ping()
    except (OSError, aioredis.RedisError) as exc:
        unavailable("Redis", exc)
    channel = f"e2ee-test-{secrets.token_hex(4)}"
    relay = start_relay(tmp_path / "r", "--broker", f"redis://{REDIS[0]}:{REDIS[1]}/0", "--broker-channel", channel)
    try:
        async with httpx2.AsyncClient(base_url=relay.url) as c:
            logins = {}
            for name in ("alice", "bob", "mallory"):
                assert (await c.post("/v1/accounts", json=account(identities[name]))).status_code == 201
                logins[name] = (await c.post("/v1/token", json={"username": name, "password": PASSWORD})).json()
            private = await new_conversation(c, logins["alice"], identities["alice"], [identities["bob"]], "a-b")
            secret_seq = await send(c, logins["alice"], identities, private, ["alice", "bob"], "for bob only")
            with_mallory = await new_conversation(
                c, logins["alice"], identities["alice"], [identities["mallory"]], "a-m"
            )
            later_seq = await send(c, logins["alice"], identities, with_mallory, ["alice", "mallory"], "for mallory")
            ws = await open_ws(relay, logins["mallory"]["token"])  # connects after both were stored
            await recv_type(ws, "ready")
            while (await c.get("/v1/metrics", headers=relay.operator_headers)).json()["broker"]["up"] is not True:
                await asyncio.sleep(0.05)
            mallory = user_id(relay, "mallory")
            key = note_key(relay_secret(relay.data_dir))
            forged = json.dumps(
                {"k": "msg", "r": "x", "t": int(time.time() * 1000), "seq": secret_seq, "u": [mallory]}
            ).encode()
            async with aioredis.Redis(host=REDIS[0], port=REDIS[1]) as pub:
                chan = f"{channel}:fanout"
                await pub.publish(chan, forged)  # no tag: dropped
                await pub.publish(chan, bytes(32) + forged)  # a wrong tag: dropped
                stale = Note("msg", "x", t=int(time.time() * 1000) - 600_000, seq=later_seq, u=[mallory])
                await pub.publish(chan, seal_note(key, stale))  # tagged but ten minutes old: dropped
                # a correctly tagged note naming mallory for bob's message: the deliveries table says no
                await pub.publish(
                    chan, seal_note(key, Note("msg", "x", t=int(time.time() * 1000), seq=secret_seq, u=[mallory]))
                )
                await pub.publish(
                    chan, seal_note(key, Note("msg", "x", t=int(time.time() * 1000), seq=later_seq, u=[mallory]))
                )
            first = await recv_type(ws, "msg")  # notes are handled in order: the last one is the first delivery
            assert first["seq"] == later_seq and first["conversation"] == with_mallory[0]
            await ws.close()
            m = (await c.get("/v1/metrics", headers=relay.operator_headers)).json()["broker"]
            assert m["rejected"] == 3 and m["received"] == 2
        assert "dropped a note without a valid tag" in (relay.data_dir / "relay.log").read_text()
    finally:
        relay.stop()


async def send(
    c: httpx2.AsyncClient, login: dict, identities, conversation: tuple[str, str], members: list[str], text: str
) -> int:
    """Seal ``text`` from alice to ``members`` of ``conversation`` (id, head hash at epoch 0) and
    store it with a REST send; its seq."""
    from shared import envelope

    cid, head = conversation
    env = envelope.seal(
        Text(text, ts=now_ms(), ctr=1),
        identities["alice"],
        cid,
        [identities[m].public for m in members],
        epoch=0,
        head=head,
    )
    return await rest_send(c, login, cid, env)


def run_relay(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m server serve`` that is expected to refuse to start (returns when it exits)."""
    return subprocess.run(
        [sys.executable, "-m", "server", "serve", "--data-dir", str(data_dir), "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **FAST_RELAY_ENV},
    )


@pytest.mark.process  # the data folder's lock is held by a process
def test_a_second_relay_on_a_locked_data_folder_exits_with_one_line(tmp_path):
    first = start_relay(tmp_path / "data", process=True)
    try:
        second = run_relay(tmp_path / "data")
        assert second.returncode == 1
        assert second.stdout == ""
        lines = second.stderr.splitlines()
        assert lines == [
            f"e2ee-relay: data folder {tmp_path / 'data'} is in use by another relay "
            f"(pid {first.proc.pid}); stop it, or give this one another --data-dir"
        ]
        migrate = subprocess.run(
            [sys.executable, "-m", "server", "migrate", "--data-dir", str(tmp_path / "data")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert migrate.returncode == 1 and f"(pid {first.proc.pid})" in migrate.stderr
        assert httpx2.get(first.url + "/healthz").status_code == 200  # the first one serves on
    finally:
        first.stop()
    again = start_relay(tmp_path / "data", process=True)  # the lock went with its holder
    again.stop()


@pytest.mark.process  # e2ee-relay's exit code and message
@pytest.mark.parametrize("migrate_on_start", [True, False])
def test_a_relay_on_an_old_or_newer_schema_refuses_to_start_with_one_line(tmp_path, migrate_on_start):
    flag = [] if migrate_on_start else ["--no-migrate-on-start"]
    old, new = tmp_path / "old", tmp_path / "new"
    for d in (old, new):
        d.mkdir()
    upgrade(f"sqlite+aiosqlite:///{old / 'relay.db'}", "0001")
    upgrade(f"sqlite+aiosqlite:///{new / 'relay.db'}")
    db = sqlite3.connect(new / "relay.db")
    db.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    db.commit()
    db.close()
    newer = run_relay(new, *flag)
    assert newer.returncode == 1 and "Traceback" not in newer.stderr
    (line,) = newer.stderr.splitlines()
    assert line.startswith(
        "e2ee-relay: this relay is older than its database (the database is at revision 9999_from_the_future"
    )
    if migrate_on_start:  # (an older schema is upgraded: every other test starts that way)
        migrate = subprocess.run(
            [sys.executable, "-m", "server", "migrate", "--data-dir", str(new)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert migrate.returncode == 1 and len(migrate.stderr.splitlines()) == 1
        assert "this relay is older than its database" in migrate.stderr
        return
    older = run_relay(old, *flag)
    assert older.returncode == 1 and "Traceback" not in older.stderr
    (line,) = older.stderr.splitlines()
    assert line.startswith("e2ee-relay: the database schema is at revision 0001, this relay needs ")
    assert line.endswith(": run e2ee-relay migrate")
    empty = tmp_path / "empty"
    empty.mkdir()
    (line,) = run_relay(empty, *flag).stderr.splitlines()
    assert "revision none (an empty database)" in line


@pytest.mark.process  # the relay's event loop timed alone: in this process the test's loop shares its GIL
async def test_a_2_s_external_sqlite_write_lock_leaves_pings_answered_within_100_ms(relay, identities):
    from shared import envelope

    async with httpx2.AsyncClient(base_url=relay.url) as c:
        alice = (await c.post("/v1/accounts", json=account(identities["alice"]))).status_code
        assert alice == 201 and (await c.post("/v1/accounts", json=account(identities["bob"]))).status_code == 201
        login = (await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})).json()
        cid, head = await new_conversation(c, login, identities["alice"], [identities["bob"]])
    ws = await open_ws(relay, login["token"])
    await recv_type(ws, "ready")
    env = envelope.seal(
        Text("while locked", ts=now_ms(), ctr=1),
        identities["alice"],
        cid,
        [identities["alice"].public, identities["bob"].public],
        epoch=0,
        head=head,
    )
    holder = sqlite3.connect(relay.data_dir / "relay.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction: SQLite's write lock
    try:
        await ws.send(send_frame(cid, env))
        rtts, t_end = [], time.monotonic() + 2.0
        nonce = 0
        while time.monotonic() < t_end:
            nonce += 1
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": "ping", "nonce": nonce}))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
                assert frame["type"] != "stored"  # nothing can commit while the lock is held
                if frame["type"] == "pong" and frame["nonce"] == nonce:
                    break
            rtts.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.02)
        async with httpx2.AsyncClient(base_url=relay.url) as c:
            assert (await c.get("/healthz", timeout=1)).status_code == 200
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    stored = await recv_type(ws, "stored")  # the batch that waited off the loop commits now
    assert stored["seq"] == 1
    await ws.close()
    metrics = httpx2.get(relay.url + "/v1/metrics", headers=relay.operator_headers).json()
    print(
        f"\n{len(rtts)} pings during a 2 s external write lock: max {max(rtts):.1f} ms, "
        f"median {sorted(rtts)[len(rtts) // 2]:.1f} ms; writer batches that waited off the loop: "
        f"{metrics['writer_busy_waits']}"
    )
    assert len(rtts) > 20 and max(rtts) < 100
    assert metrics["writer_busy_waits"] == 1
