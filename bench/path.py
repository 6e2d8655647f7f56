"""``path``: the whole message path through a real relay process on 127.0.0.1.

For each level (1-4) and TLS off/on: a fresh relay (SQLite with the relay's default
``synchronous``, and every other default), ``clients`` users in pairs, each pair's sender
sending ``messages`` messages of ``size`` bytes one after another (closed loop: the next leaves
when the previous was read), all pairs at once. End-to-end latency runs from before sealing at
the sender to the decrypted text at the receiver (both in this process, one clock). The time is
split, as means per message, into:

* client crypto — seal at the sender + open at the receiver (L3: ``l3.seal``/``l3.open``;
  L4: ``envelope.seal`` / ``envelope.open`` after parse),
* serialization — the plain envelope (L1-L2), the frame encode, the frame decode and (L4) the
  envelope parse,
* relay handling — checks and fan-out, from the relay's ``GET /v1/metrics`` counters,
* database commit — waiting for the group-commit writer (``commit_s`` of the same counters),
* network and the rest — what remains: websocket framing, TLS, uvicorn, both event loops
  (and at L3 the relay's own decryption, which its counters do not include).

``relays=2`` runs L4 on two relay processes sharing a PostgreSQL database with Redis fan-out
(``--broker``), the sender on one and the receiver on the other, next to both on one relay.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx2

from shared.keys import Identity

from . import primitives
from .primitives import text_of
from .relays import (
    REDIS_URL,
    client_ssl,
    dev_cert,
    drop_pg_database,
    fresh_pg_database,
    https_url,
    reachable,
    relay_help,
    start_relay,
)
from .timing import summarize
from .wsclient import BenchClient, Timing

MAX_SAMPLES_KEPT = 2000


async def _metrics(http: httpx2.AsyncClient) -> dict:
    r = await http.get("/v1/metrics")
    r.raise_for_status()
    return r.json()


def _config_name(level: int, tls: bool, topology: str = "") -> str:
    return f"L{level}{' TLS' if tls else ''}{' ' + topology if topology else ''}"


async def _setup(urls: tuple[str, str], people: list[Identity], level: int, ssl_ctx) -> tuple[list, list]:
    """Register everyone on relay A, create one conversation per pair, connect receivers to relay B."""
    clients = []
    async with httpx2.AsyncClient(base_url=urls[0], timeout=30, verify=ssl_ctx or True) as http:
        for i, ident in enumerate(people):
            c = BenchClient(urls[i % 2], ident, level, ssl=ssl_ctx)
            await c.register(http)
            clients.append(c)
        pairs = []
        for a, b in zip(clients[0::2], clients[1::2], strict=True):
            cid = await a.create_conversation(http, [b.username])
            pairs.append((a, b, cid))
    for c in clients:
        c.trust([p.public for p in people])
        await c.connect()
    return clients, pairs


async def run_config(level: int, tls: bool, people: list[Identity], messages: int, size: int, workdir: Path,
                     cert: tuple[Path, Path] | None, *, topology: str = "", db_url: str = "",
                     broker: str = "", warmup: int = 3) -> dict:
    """One relay configuration: latency samples, throughput, the split, the relay's CPU per message.

    ``topology``: "" (one SQLite relay), "PG 1 relay" or "PG 2 relays" (sender and receiver on
    different relays; needs ``db_url`` and ``broker``). Times in ms, throughput in messages/s.
    """
    name = _config_name(level, tls, topology)
    ssl_ctx = client_ssl(cert[0]) if tls and cert else None
    data = Path(tempfile.mkdtemp(prefix=f"l{level}{'tls' if tls else ''}-", dir=workdir))
    extra: list[str] = []
    env: dict[str, str] = {}
    if db_url:
        extra += ["--database-url", db_url]
        env["E2EE_JWT_SECRET"] = "b" * 64  # both relays must accept each other's tokens
    if broker:
        extra += ["--broker", broker]
    n_relays = 2 if topology == "PG 2 relays" else 1
    procs = []
    try:
        for i in range(n_relays):
            procs.append(await asyncio.to_thread(start_relay, data / f"relay{i}", level,
                                                 tls=cert if tls else None, extra=extra, env=env))
        urls = [https_url(p) if tls else p.url for p in procs]
        url_pair = (urls[0], urls[-1])
        clients, pairs = await _setup(url_pair, people, level, ssl_ctx)
        registry: dict[str, Timing] = {}
        for c in clients:
            c.registry = registry
        text = text_of(size)
        recipients = {cid: [a.identity.public, b.identity.public] for a, b, cid in pairs}

        async def one(a: BenchClient, cid: str) -> Timing:
            mid, fut = await a.send(cid, text, recipients[cid], registry)
            t = registry[mid]
            await asyncio.wait_for(asyncio.gather(t.done.wait(), fut), 30)
            return t

        for _ in range(warmup):
            await asyncio.gather(*(one(a, cid) for a, _b, cid in pairs))
        registry.clear()
        pings = []
        for _ in range(20):
            pings.append(await clients[0].ping())
        https = [httpx2.AsyncClient(base_url=u, timeout=30, verify=ssl_ctx or True) for u in urls]
        before = [await _metrics(h) for h in https]
        t0 = time.perf_counter()

        async def pair_loop(a: BenchClient, cid: str) -> list[Timing]:
            return [await one(a, cid) for _ in range(messages)]

        results = await asyncio.gather(*(pair_loop(a, cid) for a, _b, cid in pairs))
        wall = time.perf_counter() - t0
        after = [await _metrics(h) for h in https]
        for h in https:
            await h.aclose()
        for c in clients:
            await c.close()
    finally:
        for p in procs:
            await asyncio.to_thread(p.stop)
    timings = [t for r in results for t in r]
    total = len(timings)
    e2e = [(t.t_done - t.t_send) * 1000 for t in timings]
    ack = [(t.t_stored - t.t_send) * 1000 for t in timings if t.t_stored]
    stored = sum(a["stored"] - b["stored"] for a, b in zip(after, before, strict=True)) or total

    def per_msg(key: str) -> float:
        return sum(a[key] - b[key] for a, b in zip(after, before, strict=True)) * 1000 / stored

    mean = statistics.fmean
    split = {
        "client_crypto_ms": mean(t.seal_ms + t.open_ms for t in timings),
        "serialization_ms": mean(t.encode_ms + t.decode_ms for t in timings),
        "relay_handling_ms": per_msg("checks_s") + per_msg("fanout_s"),
        "db_commit_ms": per_msg("commit_s"),
    }
    e2e_mean = mean(e2e)
    split["network_rest_ms"] = max(0.0, e2e_mean - sum(split.values()))
    batches = sum(a["writer_batches"] - b["writer_batches"] for a, b in zip(after, before, strict=True))
    ops = sum(a["writer_ops"] - b["writer_ops"] for a, b in zip(after, before, strict=True))
    return {
        "name": name, "level": level, "tls": tls, "topology": topology or "SQLite 1 relay",
        "messages": total, "pairs": len(pairs), "size": size,
        "e2e": summarize(e2e).as_dict(), "e2e_mean_ms": e2e_mean, "ack": summarize(ack).as_dict(),
        "throughput_msgs_per_s": total / wall, "wall_s": wall,
        "split_mean_ms": split,
        "seal": summarize([t.seal_ms for t in timings]).as_dict(),
        "open": summarize([t.open_ms for t in timings]).as_dict(),
        # the relays' own time.process_time() (ns resolution; /proc counts 10 ms ticks)
        "relay_cpu_ms_per_msg": sum(a["process_cpu_s"] - b["process_cpu_s"]
                                    for a, b in zip(after, before, strict=True)) * 1000 / total,
        "group_commit_factor": ops / batches if batches else None,
        "ws_ping": summarize(pings).as_dict(),
        "samples_ms": e2e[:MAX_SAMPLES_KEPT],
    }


async def jwt_probe(people: list[Identity], workdir: Path, messages: int = 20) -> dict:
    """Does the relay verify the JWT per websocket message? An L2 relay: two users connect, then
    ``messages`` are sent and delivered on the open websockets, and the relay's own count of full
    token verifications (``/v1/metrics``) is read before and after. Then the same number of REST
    sends with one token: the first is a full verification, the rest hit the verified-token cache.
    Returns the counts."""
    relay = await asyncio.to_thread(start_relay, workdir / "jwt-probe", 2)
    try:
        a, b = (BenchClient(relay.url, p, 2) for p in people[:2])
        async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
            await a.register(http)
            await b.register(http)
            cid = await a.create_conversation(http, [b.username])
            await a.connect()
            await b.connect()
            registry: dict[str, Timing] = {}
            a.registry = b.registry = registry
            before = (await http.get("/v1/metrics")).json()
            for i in range(messages):
                mid, fut = await a.send(cid, f"websocket message {i}", [], registry)
                await asyncio.wait_for(asyncio.gather(fut, registry[mid].done.wait()), 10)
            after_ws = (await http.get("/v1/metrics")).json()
            from shared import plain

            for i in range(messages):
                r = await http.post(f"/v1/conversations/{cid}/messages", headers={"Authorization": f"Bearer {a.token}"},
                                    content=plain.encode(plain.make(f"REST message {i}", cid, a.username)))
                r.raise_for_status()
            after_rest = (await http.get("/v1/metrics")).json()
            await a.close()
            await b.close()
    finally:
        await asyncio.to_thread(relay.stop)
    ws_verifications = after_ws["jwt_verifications"] - before["jwt_verifications"]
    return {"ws_messages": messages, "ws_verifications": ws_verifications,
            "verifications_per_ws_message": ws_verifications / messages,
            "rest_sends": messages,
            "rest_verifications": after_rest["jwt_verifications"] - after_ws["jwt_verifications"],
            "rest_cache_hits": after_rest["jwt_cache_hits"] - after_ws["jwt_cache_hits"]}


def _default_synchronous() -> str:
    from .relay_load import default_synchronous

    return default_synchronous()


def broker_support() -> tuple[bool, str]:
    """Whether this relay build accepts ``--broker`` and the services answer (reason if not)."""
    if "--broker" not in relay_help():
        return False, "e2ee-relay does not accept --broker yet (multi-relay fan-out has not landed)"
    if not reachable("127.0.0.1", 5432):
        return False, "PostgreSQL is not reachable on 127.0.0.1:5432"
    if not reachable("127.0.0.1", 6379):
        return False, "Redis is not reachable on 127.0.0.1:6379"
    return True, ""


async def run_async(levels: tuple[int, ...] = (1, 2, 3, 4), tls_modes: tuple[bool, ...] = (False, True),
                    clients: int = 4, messages: int = 200, size: int = 1024, bits: int = 3072, relays: int = 1,
                    progress=None) -> dict:
    """Run every configuration; see the module doc. Returns a JSON-ready dict (ms, messages/s)."""
    step = progress or (lambda _label: None)
    clients = max(2, clients - clients % 2)
    params = {"levels": list(levels), "tls": list(tls_modes), "clients": clients, "messages": messages,
              "size": size, "bits": bits, "relays": relays, "synchronous": _default_synchronous()}
    if relays == 2:
        ok, why = broker_support()
        if not ok:
            step(f"skipped --relays 2: {why}")
            return {"params": params, "configs": [], "skipped": [f"--relays 2: {why}"]}
    step(f"generating {clients} RSA-{bits} identities")
    people = await asyncio.to_thread(lambda: [Identity.generate(f"bench{i:03d}", bits) for i in range(clients)])
    step("crypto floor (L4 primitives, same identities)")
    parts = await asyncio.to_thread(primitives.l4_parts, 200, people, size, 2)
    floor = parts["floors"]["seal_floor_ms"] + parts["floors"]["open_floor_ms"]
    out: dict = {"params": params, "crypto_floor_ms": floor, "floors": parts["floors"], "configs": [], "skipped": []}
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-path-") as tmp:
        work = Path(tmp)
        cert = await asyncio.to_thread(dev_cert, work / "cert") if any(tls_modes) else None
        if relays == 1:
            step("JWT probe: token verifications per websocket message")
            out["jwt_probe"] = await jwt_probe(people, work)
            for level in levels:
                for tls in tls_modes:
                    step(f"{_config_name(level, tls)}: {clients} clients x {messages} messages")
                    out["configs"].append(await run_config(level, tls, people, messages, size, work, cert))
        else:
            for topology in ("PG 1 relay", "PG 2 relays"):
                name, url = await fresh_pg_database()
                try:
                    step(f"L4 {topology}: {clients} clients x {messages} messages")
                    out["configs"].append(await run_config(4, False, people, messages, size, work, None,
                                                           topology=topology, db_url=url, broker=REDIS_URL))
                finally:
                    await drop_pg_database(name)
            same, cross = out["configs"][-2], out["configs"][-1]
            out["cross_relay_added_p50_ms"] = cross["e2e"]["median_ms"] - same["e2e"]["median_ms"]
    return out


def run(**kwargs) -> dict:
    """Synchronous wrapper of :func:`run_async` (its own event loop)."""
    return asyncio.run(run_async(**kwargs))
