"""``relay``: the relay's server CPU per relayed 1 KB L4 message and its throughput with 50
clients, next to a bare Starlette websocket echo app served by uvicorn the same way.

Load: ``clients`` websockets in pairs (one conversation per pair); every client sends L4 envelopes
(1 KB text, sealed before the clock starts, in two processes, so client crypto is not in the
figure) to its peer, at most ``window`` unacknowledged at a time, for ``seconds`` (or until its
pool of ``pool`` sealed envelopes is spent); then the last acks and deliveries are awaited. A
relayed message counts when its ``stored`` ack reached the sender (sent only after the commit);
the peers' deliveries are awaited and counted too. The echo app gets the same 1 KB ``send`` frame
from the same number of clients with the same window for the same time; an echoed frame is done
when it is back. The relay runs with its defaults (SQLite in WAL mode with the relay's default
``synchronous`` — NORMAL since the relay chose it: an acked message survives a relay crash or
kill), and, in full runs, once more with ``synchronous=FULL`` (an fsync per group commit: it also
survives a power cut). After each run the messages in the relay's database are counted against
the acks received.

CPU per message: the server process's CPU time (its own ``time.process_time()``, read over HTTP
before and after the run: all threads, user + system, ns resolution) divided by the messages
acked (or echoed). Where the relay's CPU goes: a py-spy profile of the same run
(``bench/relay_profile.py``; it never pauses the relay).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
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
from client_tui.core.record import now_ms
from shared import envelope, frames, membership
from shared.b64 import b64u_encode
from shared.content import Text
from shared.keys import Identity

from . import relay_profile
from .pairs import identity_from_json, identity_to_json
from .primitives import text_of
from .relays import OPERATOR_HEADERS, start_relay
from .wsclient import BenchClient


def _start_echo(workdir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(workdir / "echo.stdout", "ab")  # owned by the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.echo_app", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
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


async def _timed(send_one, items: list, window: int, deadline: float) -> int:
    """Send ``items`` with at most ``window`` awaiting completion until ``deadline``
    (perf_counter s) passes or the items are spent; wait for all sent. Returns how many were sent."""
    sem = asyncio.Semaphore(window)
    pending = []
    for item in items:
        await sem.acquire()
        if time.perf_counter() >= deadline:
            break
        fut = await send_one(item)
        fut.add_done_callback(lambda _f: sem.release())
        pending.append(fut)
    await asyncio.gather(*pending)
    return len(pending)


def default_synchronous() -> str:
    """The relay's default SQLite ``synchronous`` setting (read from ``server.settings``)."""
    import dataclasses

    from server.settings import Settings

    return next(f.default for f in dataclasses.fields(Settings) if f.name == "sqlite_synchronous")


def _seal_pool(job: tuple) -> list[tuple[str, str, bytes]]:
    """In a worker process: ``count`` envelopes from one sender to one conversation, as
    ``(mid, conversation, envelope)``."""
    sender_json, recipients_json, cid, epoch, head, count = job
    sender = identity_from_json(sender_json)
    recipients = sorted((identity_from_json(r).public for r in recipients_json), key=lambda p: p.username.encode())
    text = text_of(1024)
    out = []
    for i in range(count):
        env = envelope.seal(Text(text, ts=now_ms(), ctr=i + 1), sender, cid, recipients, epoch=epoch, head=head)
        out.append((envelope.parse(env).header.mid, cid, env))
    return out


def prepare(
    people: list[Identity], pool: int
) -> tuple[list[tuple[int, int, str, str]], list[list[tuple[str, str, bytes]]]]:
    """One conversation per pair (its creation statement, reused on every fresh relay) and
    ``pool`` sealed envelopes per client, sealed in two worker processes.

    Returns ``([(a index, b index, cid, signed creation statement)], [(mid, cid, envelope) of client i])``."""
    from concurrent.futures import ProcessPoolExecutor

    pairs, jobs = [], []
    for ia in range(0, len(people) - 1, 2):
        a, b = people[ia], people[ia + 1]
        cid = b64u_encode(os.urandom(16))
        created = membership.create(a, cid, "bench", [membership.member_of(a.public), membership.member_of(b.public)])
        pairs.append((ia, ia + 1, cid, created.signed))
        both = [identity_to_json(a), identity_to_json(b)]
        jobs += [
            (both[0], both, cid, created.ep, created.hash, pool),
            (both[1], both, cid, created.ep, created.hash, pool),
        ]
    with ProcessPoolExecutor(2) as ex:
        plan = list(ex.map(_seal_pool, jobs))
    return pairs, plan


async def _relay_run(
    people: list[Identity],
    pairs: list,
    plan: list[list[tuple[str, str, bytes]]],
    seconds: float,
    window: int,
    workdir: Path,
    progress,
    synchronous: str | None = None,
    profile: bool = False,
) -> dict:
    env = {"E2EE_SQLITE_SYNCHRONOUS": synchronous} if synchronous else {}
    relay = await asyncio.to_thread(start_relay, workdir, 4, env=env)
    sampler = None
    try:
        clients = [BenchClient(relay.url, ident, 4) for ident in people]
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            for c in clients:
                await c.register(http)
            for ia, _ib, _cid, signed in pairs:
                r = await http.post(
                    "/v1/conversations",
                    json={"statement": signed},
                    headers={"Authorization": f"Bearer {clients[ia].token}"},
                )
                if r.status_code != 201:
                    raise RuntimeError(f"conversation: {r.status_code} {r.text[:200]}")
        for c in clients:
            c.open_messages = False
            c.expect = 1 << 62  # set to what the peer sent once sending stops
            await c.connect()
        peer = {ia: ib for ia, ib, _, _ in pairs} | {ib: ia for ia, ib, _, _ in pairs}
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            cpu0 = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()["process_cpu_s"]
        if profile:
            sampler = relay_profile.Sampler(relay.proc.pid)
            sampler.start()
        progress(f"relay: {len(clients)} clients for {seconds:g} s, window {window}")
        acked = [0] * len(clients)

        async def sender(i: int) -> None:
            c = clients[i]

            async def send_one(item: tuple[str, str, bytes]) -> asyncio.Future:
                mid, cid, sealed = item
                fut = await c.send_sealed(cid, sealed, mid)
                fut.add_done_callback(lambda f: acked.__setitem__(i, acked[i] + (not f.exception())))
                return fut

            sent = await _timed(send_one, plan[i], window, deadline)
            dst = clients[peer[i]]
            dst.expect = sent
            if dst.received >= sent:
                dst.all_received.set()
            await asyncio.wait_for(dst.all_received.wait(), 300)

        t0 = time.perf_counter()
        deadline = t0 + seconds
        await asyncio.gather(*(sender(i) for i in range(len(clients))))
        wall = time.perf_counter() - t0
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            metrics = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()
        split = sampler.stop() if sampler else None
        cpu = metrics["process_cpu_s"] - cpu0  # the relay's time.process_time(): ns resolution
        for c in clients:
            await c.close()
        errors = [e for c in clients for e in c.errors]
        delivered = sum(c.received for c in clients)
    finally:
        if sampler is not None and sampler.proc is not None and sampler.proc.poll() is None:
            sampler.proc.kill()
        await asyncio.to_thread(relay.stop)
    total = sum(acked)
    db = sqlite3.connect(workdir / "relay.db")
    try:
        in_db = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        db.close()
    return {
        "synchronous": synchronous or default_synchronous(),
        "messages": total,
        "wall_s": wall,
        "throughput_msgs_per_s": total / wall,
        "cpu_s": cpu,
        "cpu_ms_per_msg": cpu * 1000 / max(1, total),
        "acked": total,
        "delivered": delivered,
        "in_database": in_db,
        "pool_spent": any(len(p) <= a for p, a in zip(plan, acked, strict=True)),
        "errors": errors[:5],
        "group_commit_factor": metrics["writer_ops"] / max(1, metrics["writer_batches"]),
        "relay_split_ms_per_msg": {
            k.replace("_s", "_ms"): metrics[k] * 1000 / max(1, metrics["stored"])
            for k in ("checks_s", "commit_s", "fanout_s")
        },
        "profile": split if split is not None else ({"skipped": sampler.error} if sampler is not None else None),
    }


async def _echo_run(clients: int, frame: str, seconds: float, window: int, workdir: Path) -> dict:
    proc, port = await asyncio.to_thread(_start_echo, workdir)
    try:
        conns = [
            await connect(f"ws://127.0.0.1:{port}/ws", compression=None, max_size=2 * 1024 * 1024, ping_interval=None)
            for _ in range(clients)
        ]
        counts = [0] * clients

        async def client(i: int, ws) -> None:
            sem = asyncio.Semaphore(window)
            sent = 0
            stop = asyncio.Event()

            async def reader() -> None:
                async for _ in ws:
                    counts[i] += 1
                    sem.release()
                    if stop.is_set() and counts[i] == sent:
                        return

            task = asyncio.create_task(reader())
            while True:
                await sem.acquire()
                if time.perf_counter() >= deadline:
                    break
                await ws.send(frame)
                sent += 1
            stop.set()
            if counts[i] < sent:
                await asyncio.wait_for(task, 300)
            else:
                task.cancel()

        cpu0 = await _echo_cpu(port)
        t0 = time.perf_counter()
        deadline = t0 + seconds
        await asyncio.gather(*(client(i, ws) for i, ws in enumerate(conns)))
        wall = time.perf_counter() - t0
        cpu = await _echo_cpu(port) - cpu0
        for ws in conns:
            await ws.close()
    finally:
        await asyncio.to_thread(_stop, proc)
    total = sum(counts)
    return {
        "messages": total,
        "wall_s": wall,
        "throughput_msgs_per_s": total / wall,
        "cpu_s": cpu,
        "cpu_ms_per_msg": cpu * 1000 / max(1, total),
    }


async def run_async(
    clients: int = 50,
    seconds: float = 5.0,
    pool: int = 1000,
    window: int = 8,
    bits: int = 3072,
    also_full: bool = True,
    profile: bool = True,
    progress=None,
) -> dict:
    """Relay vs echo app under the same load for ``seconds`` each; see the module doc. Times in
    ms and s, throughput in messages/s; ``ratio`` = relay throughput / echo throughput (target
    >= 0.5), ``cpu_ratio`` = relay CPU per message / echo CPU per message (target <= 3)."""
    step = progress or (lambda _label: None)
    clients = max(2, clients - clients % 2)
    step(f"relay: generating {clients} RSA-{bits} identities")
    people = await asyncio.to_thread(lambda: [Identity.generate(f"load{i:03d}", bits) for i in range(clients)])
    step(f"relay: sealing {pool * clients} envelopes before the clock starts")
    pairs, plan = await asyncio.to_thread(prepare, people, pool)
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-relay-") as tmp:
        work = Path(tmp)
        relay = await _relay_run(people, pairs, plan, seconds, window, work / "relay", step, profile=profile)
        fsync = None
        if also_full and default_synchronous() != "FULL":
            step("relay again with synchronous=FULL (fsync per group commit)")
            fsync = await _relay_run(people, pairs, plan, seconds, window, work / "relay-full", step, "FULL")
        step(f"echo app: {clients} clients for {seconds:g} s, window {window}")
        _mid, cid, sealed = plan[0][0]
        echo = await _echo_run(
            clients, frames.encode(frames.Send(cid, msgspec.Raw(sealed))).decode(), seconds, window, work
        )
    return {
        "params": {
            "clients": clients,
            "seconds": seconds,
            "pool": pool,
            "window": window,
            "bits": bits,
            "size": 1024,
            "load": os.getloadavg(),
        },
        "relay": relay,
        "relay_fsync": fsync,
        "echo": echo,
        "ratio": relay["throughput_msgs_per_s"] / echo["throughput_msgs_per_s"],
        "target_ratio": 0.5,
        "cpu_ratio": relay["cpu_ms_per_msg"] / echo["cpu_ms_per_msg"],
        "durable_before_ack": relay["in_database"] >= relay["acked"],
    }


def run(**kwargs) -> dict:
    """Synchronous wrapper of :func:`run_async`."""
    return asyncio.run(run_async(**kwargs))
