"""``relay``: the relay's server CPU per relayed 1 KB L4 message and its throughput with 50
clients, next to a bare Starlette websocket echo app served by uvicorn the same way.

Load: ``clients`` websockets in pairs (one conversation per pair); every client sends
``messages`` L4 envelopes (1 KB text, sealed before the clock starts, so client crypto is not in
the figure) to its peer, at most ``window`` unacknowledged at a time. A relayed message is done
when its ``stored`` ack reached the sender (sent only after the commit) and its ``msg`` reached
the peer. The echo app gets the very same frames from the same number of clients with the same
window; an echoed frame is done when it is back. The relay runs with its defaults (SQLite in WAL
mode with the relay's default ``synchronous`` — NORMAL since the relay chose it: an acked message
survives a relay crash or kill), and, in full runs, once more with ``synchronous=FULL`` (an fsync
per group commit: it also survives a power cut). After each run the messages in the relay's
database are counted against the acks received.

CPU per message: the server process's CPU time (its own ``time.process_time()``, read over HTTP
before and after the run: all threads, user + system, ns resolution) divided by the messages
relayed (or echoed).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import msgspec
from websockets.asyncio.client import connect

from bench.tools.relayproc import free_port
from shared import envelope, frames
from shared.keys import Identity

from .primitives import text_of
from .relays import OPERATOR_HEADERS, start_relay
from .wsclient import BenchClient, seal_to_head


def _start_echo(workdir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(workdir / "echo.stdout", "ab")  # owned by the child
    proc = subprocess.Popen([sys.executable, "-m", "bench.echo_app", "--port", str(port)], stdout=log,
                            stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"echo app exited with {proc.returncode}")
        with contextlib.suppress(httpx2.HTTPError):
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc, port
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("echo app did not start")


async def _echo_cpu(port: int) -> float:
    """The echo app's CPU time so far (s), as the relay's ``/v1/metrics`` gives its own."""
    async with httpx2.AsyncClient(timeout=30) as http:
        return float((await http.get(f"http://127.0.0.1:{port}/cpu")).text)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _windowed(send_one, items: list, window: int) -> None:
    """Send ``items`` with at most ``window`` awaiting completion; wait for all."""
    sem = asyncio.Semaphore(window)
    pending = []
    for item in items:
        await sem.acquire()
        fut = await send_one(item)
        fut.add_done_callback(lambda _f: sem.release())
        pending.append(fut)
    await asyncio.gather(*pending)


def default_synchronous() -> str:
    """The relay's default SQLite ``synchronous`` setting (read from ``server.settings``)."""
    import dataclasses

    from server.settings import Settings

    return next(f.default for f in dataclasses.fields(Settings) if f.name == "sqlite_synchronous")


async def _relay_run(people: list[Identity], messages: int, window: int, workdir: Path, progress,
                     synchronous: str | None = None) -> dict:
    env = {"E2EE_SQLITE_SYNCHRONOUS": synchronous} if synchronous else {}
    relay = await asyncio.to_thread(start_relay, workdir, 4, env=env)
    try:
        clients = []
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            for ident in people:
                c = BenchClient(relay.url, ident, 4)
                await c.register(http)
                clients.append(c)
            pairs = []
            for a, b in zip(clients[0::2], clients[1::2], strict=True):
                pairs.append((a, b, await a.create_conversation(http, [b.identity.public])))
        progress(f"relay: sealing {messages * len(clients)} envelopes before the clock starts")
        text = text_of(1024)
        plan: dict[BenchClient, list[tuple[str, str]]] = {}
        for a, b, cid in pairs:
            for src, dst in ((a, b), (b, a)):
                items = []
                for i in range(messages):
                    env = seal_to_head(text, src.identity, cid, [a.identity.public, b.identity.public], counter=i + 1)
                    mid = envelope.parse(env).header.mid
                    items.append((mid, frames.encode(frames.Send(cid, msgspec.Raw(env))).decode()))
                plan[src] = items
                dst.expect = messages
        for c in clients:
            c.open_messages = False
            await c.connect()
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            cpu0 = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()["process_cpu_s"]
        progress(f"relay: {len(clients)} clients x {messages} messages, window {window}")
        t0 = time.perf_counter()
        await asyncio.gather(*(_windowed(lambda it, c=c: c.send_raw(it[1], it[0]), plan[c], window) for c in clients),
                             *(asyncio.wait_for(c.all_received.wait(), 300) for c in clients))
        wall = time.perf_counter() - t0
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            metrics = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()
        cpu = metrics["process_cpu_s"] - cpu0  # the relay's time.process_time(): ns resolution
        for c in clients:
            await c.close()
        errors = [e for c in clients for e in c.errors]
    finally:
        await asyncio.to_thread(relay.stop)
    total = messages * len(people)
    db = sqlite3.connect(workdir / "relay.db")
    try:
        in_db = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        db.close()
    return {"synchronous": synchronous or default_synchronous(), "messages": total, "wall_s": wall,
            "throughput_msgs_per_s": total / wall, "cpu_s": cpu, "cpu_ms_per_msg": cpu * 1000 / total,
            "acked": total, "in_database": in_db,
            "errors": errors[:5], "group_commit_factor": metrics["writer_ops"] / max(1, metrics["writer_batches"]),
            "relay_split_ms_per_msg": {k.replace("_s", "_ms"): metrics[k] * 1000 / max(1, metrics["stored"])
                                       for k in ("checks_s", "commit_s", "fanout_s")}}


async def _echo_run(frames_per_client: list[list[str]], window: int, workdir: Path) -> dict:
    proc, port = await asyncio.to_thread(_start_echo, workdir)
    try:
        conns = [await connect(f"ws://127.0.0.1:{port}/ws", compression=None, max_size=2 * 1024 * 1024,
                               ping_interval=None) for _ in frames_per_client]

        async def client(ws, items: list[str]) -> None:
            sem = asyncio.Semaphore(window)
            done = asyncio.Event()
            got = 0

            async def reader() -> None:
                nonlocal got
                async for _ in ws:
                    got += 1
                    sem.release()
                    if got == len(items):
                        done.set()
                        return

            task = asyncio.create_task(reader())
            for frame in items:
                await sem.acquire()
                await ws.send(frame)
            await asyncio.wait_for(done.wait(), 300)
            await task

        cpu0 = await _echo_cpu(port)
        t0 = time.perf_counter()
        await asyncio.gather(*(client(ws, items) for ws, items in zip(conns, frames_per_client, strict=True)))
        wall = time.perf_counter() - t0
        cpu = await _echo_cpu(port) - cpu0
        for ws in conns:
            await ws.close()
    finally:
        await asyncio.to_thread(_stop, proc)
    total = sum(len(i) for i in frames_per_client)
    return {"messages": total, "wall_s": wall, "throughput_msgs_per_s": total / wall, "cpu_s": cpu,
            "cpu_ms_per_msg": cpu * 1000 / total}


async def run_async(clients: int = 50, messages: int = 100, window: int = 8, bits: int = 3072,
                    also_full: bool = True, progress=None) -> dict:
    """Relay vs echo app under the same load; see the module doc. Times in ms and s,
    throughput in messages/s; ``ratio`` = relay throughput / echo throughput (target >= 0.5)."""
    step = progress or (lambda _label: None)
    clients = max(2, clients - clients % 2)
    step(f"relay: generating {clients} RSA-{bits} identities")
    people = await asyncio.to_thread(lambda: [Identity.generate(f"load{i:03d}", bits) for i in range(clients)])
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-relay-") as tmp:
        work = Path(tmp)
        relay = await _relay_run(people, messages, window, work / "relay", step)
        fsync = None
        if also_full and default_synchronous() != "FULL":
            step("relay again with synchronous=FULL (fsync per group commit)")
            fsync = await _relay_run(people, messages, window, work / "relay-full", step, "FULL")
        step(f"echo app: {clients} clients x {messages} frames, window {window}")
        sample = frames.encode(frames.Send("c" * 32, msgspec.Raw(
            envelope.seal(text_of(1024), people[0], "c1", [people[0].public, people[1].public], counter=1,
                          epoch=1, head="A" * 43)))).decode()
        echo = await _echo_run([[sample] * messages for _ in range(clients)], window, work)
    ratio = relay["throughput_msgs_per_s"] / echo["throughput_msgs_per_s"]
    return {"params": {"clients": clients, "messages": messages, "window": window, "bits": bits, "size": 1024},
            "relay": relay, "relay_fsync": fsync, "echo": echo, "ratio": ratio, "target_ratio": 0.5,
            "durable_before_ack": relay["in_database"] >= relay["acked"]}


def run(**kwargs) -> dict:
    """Synchronous wrapper of :func:`run_async`."""
    return asyncio.run(run_async(**kwargs))
