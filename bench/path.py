"""``path``: the whole message path through a real relay process on 127.0.0.1.

For each level (1-4) and TLS off/on: a fresh relay (SQLite with the relay's default
``synchronous``, and every other default), ``clients`` users in pairs, each pair's sender
sending ``messages`` messages of ``size`` bytes one after another (closed loop: the next leaves
when the previous was read), all pairs at once, each pair in a process of its own
(``bench/pairs.py``: one pair's RSA work never queues another pair's frames). End-to-end latency
runs from before sealing at the sender to the decrypted text at the receiver (both in the pair's
process, one clock). The time is split, as means per message, into:

* client crypto — seal at the sender + open at the receiver (L3: ``l3.seal``/``l3.open``;
  L4: ``envelope.seal`` / ``envelope.open`` after parse),
* serialization — the plain envelope (L1-L2), the frame encode, the frame decode and (L4) the
  envelope parse,
* relay handling — checks and fan-out, from the relay's ``GET /v1/metrics`` counters,
* database commit — waiting for the group-commit writer (``commit_s`` of the same counters),
* network and the rest — what remains: websocket framing, TLS, uvicorn, both event loops
  (and at L3 the relay's own decryption, which its counters do not include).

``relays=2`` runs L4 on two relay processes sharing a PostgreSQL database with Redis fan-out
(``--broker``), the sender on one and the receiver on the other, in rounds alternating with both
on one relay (:mod:`bench.cross`).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from pathlib import Path

import httpx2

from shared.keys import Identity

from . import primitives
from .pairs import FIELDS, PairProcess, identity_to_json
from .relays import (
    OPERATOR_HEADERS,
    client_ssl,
    dev_cert,
    https_url,
    reachable,
    relay_help,
    start_relay,
)
from .timing import summarize
from .wsclient import HEADS, BenchClient, Timing

MAX_SAMPLES_KEPT = 2000
ARRANGEMENT = (
    "Each pair's two clients run in a process of their own (bench/pairs.py; its sender and "
    "receiver share one clock), so one pair's RSA unwrap never queues another pair's frames "
    "on a shared event loop."
)


async def _metrics(http: httpx2.AsyncClient) -> dict:
    r = await http.get("/v1/metrics", headers=OPERATOR_HEADERS)
    r.raise_for_status()
    return r.json()


def _config_name(level: int, tls: bool, topology: str = "") -> str:
    return f"L{level}{' TLS' if tls else ''}{' ' + topology if topology else ''}"


async def register_pairs(url_pair: tuple[str, str], people: list[Identity], level: int, ssl_ctx) -> list[tuple]:
    """Register everyone on relay A (HTTP) and create one conversation per pair; returns
    ``[(a, b, cid)]`` of logged-in, unconnected :class:`BenchClient` (a on relay A, b on relay B)."""
    clients = []
    async with httpx2.AsyncClient(base_url=url_pair[0], timeout=30, verify=ssl_ctx or True) as http:
        for i, ident in enumerate(people):
            c = BenchClient(url_pair[i % 2], ident, level, ssl=ssl_ctx)
            await c.register(http)
            clients.append(c)
        return [
            (a, b, await a.create_conversation(http, [b.identity.public]))
            for a, b in zip(clients[0::2], clients[1::2], strict=True)
        ]


async def measure_pairs(
    pairs: list[tuple],
    level: int,
    metrics_urls: list[str],
    messages: int,
    size: int,
    *,
    ws_urls: tuple[str, str] | None = None,
    cafile: Path | None = None,
    warmup: int = 3,
    counter_start: int = 0,
    pings: int = 20,
) -> dict:
    """One measured run over running relays: a child process per pair (``bench/pairs.py``), each
    warmed up and connected before the clock starts, all released at once; the relays' metrics are
    read before and after. ``ws_urls``: where sides a and b open their websockets (a delay proxy),
    default each client's relay. Returns ``{"timings": [FIELDS...], "wall_s", "pings", "before",
    "after", "errors"}`` (perf_counter s and ms as in :class:`Timing`)."""
    children = []
    for a, b, cid in pairs:
        children.append(
            PairProcess(
                {
                    "level": level,
                    "cid": cid,
                    "head": HEADS[cid],
                    "size": size,
                    "messages": messages,
                    "warmup": warmup,
                    "urls": list(ws_urls) if ws_urls else [a.base_url, b.base_url],
                    "cafile": str(cafile) if cafile else None,
                    "a": identity_to_json(a.identity),
                    "b": identity_to_json(b.identity),
                    "token_a": a.token,
                    "token_b": b.token,
                    "counter_start": counter_start,
                    "pings": pings,
                }
            )
        )
    try:
        await asyncio.gather(*(c.start() for c in children))
        verify = client_ssl(cafile) if cafile else True
        https = [httpx2.AsyncClient(base_url=u, timeout=30, verify=verify) for u in metrics_urls]
        before = [await _metrics(h) for h in https]
        for c in children:
            c.go()
        results = await asyncio.gather(*(c.result(timeout=120 + messages * 5) for c in children))
        after = [await _metrics(h) for h in https]
        for h in https:
            await h.aclose()
    finally:
        for c in children:
            await c.kill()
    return {
        "timings": [t for r in results for t in r["timings"]],
        "pings": children[0].pings,
        "wall_s": max(r["end"] for r in results) - min(r["start"] for r in results),
        "before": before,
        "after": after,
        "errors": [e for r in results for e in r["errors"]],
        "pairs": len(pairs),
    }


def summarize_run(run: dict, name: str, **extra) -> dict:
    """A configuration's figures from :func:`measure_pairs`: latency stats, the split, throughput,
    the relays' CPU per message (ms, messages/s)."""
    t = [dict(zip(FIELDS, row, strict=True)) for row in run["timings"]]
    before, after = run["before"], run["after"]
    total = len(t)
    e2e = [(x["t_done"] - x["t_send"]) * 1000 for x in t]
    ack = [(x["t_stored"] - x["t_send"]) * 1000 for x in t if x["t_stored"]]

    def delta(key: str) -> float:
        return sum(a[key] - b[key] for a, b in zip(after, before, strict=True))

    stored = delta("stored") or total
    mean = statistics.fmean
    split = {
        "client_crypto_ms": mean(x["seal_ms"] + x["open_ms"] for x in t),
        "serialization_ms": mean(x["encode_ms"] + x["decode_ms"] for x in t),
        "relay_handling_ms": (delta("checks_s") + delta("fanout_s")) * 1000 / stored,
        "db_commit_ms": delta("commit_s") * 1000 / stored,
    }
    e2e_mean = mean(e2e)
    split["network_rest_ms"] = max(0.0, e2e_mean - sum(split.values()))
    batches = delta("writer_batches")
    return {
        "name": name,
        **extra,
        "messages": total,
        "pairs": run["pairs"],
        "e2e": summarize(e2e).as_dict(),
        "e2e_mean_ms": e2e_mean,
        "ack": summarize(ack).as_dict(),
        "throughput_msgs_per_s": total / run["wall_s"],
        "wall_s": run["wall_s"],
        "split_mean_ms": split,
        "seal": summarize([x["seal_ms"] for x in t]).as_dict(),
        "open": summarize([x["open_ms"] for x in t]).as_dict(),
        # the relays' own time.process_time() (ns resolution; /proc counts 10 ms ticks)
        "relay_cpu_ms_per_msg": delta("process_cpu_s") * 1000 / total,
        "group_commit_factor": delta("writer_ops") / batches if batches else None,
        "ws_ping": summarize(run["pings"]).as_dict(),
        "errors": run["errors"][:5],
        "samples_ms": e2e[:MAX_SAMPLES_KEPT],
    }


async def run_config(
    level: int,
    tls: bool,
    people: list[Identity],
    messages: int,
    size: int,
    workdir: Path,
    cert: tuple[Path, Path] | None,
    *,
    warmup: int = 3,
) -> dict:
    """One relay configuration (one SQLite relay; two relays: :mod:`bench.cross`): latency
    samples, throughput, the split, the relay's CPU per message. Times in ms, throughput in
    messages/s."""
    name = _config_name(level, tls)
    ssl_ctx = client_ssl(cert[0]) if tls and cert else None
    data = Path(tempfile.mkdtemp(prefix=f"l{level}{'tls' if tls else ''}-", dir=workdir))
    proc = await asyncio.to_thread(start_relay, data / "relay0", level, tls=cert if tls else None)
    try:
        url = https_url(proc) if tls else proc.url
        pairs = await register_pairs((url, url), people, level, ssl_ctx)
        run = await measure_pairs(
            pairs, level, [url], messages, size, cafile=cert[0] if tls and cert else None, warmup=warmup
        )
    finally:
        await asyncio.to_thread(proc.stop)
    return summarize_run(run, name, level=level, tls=tls, topology="SQLite 1 relay", size=size)


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
            cid = await a.create_conversation(http, [b.identity.public])
            await a.connect()
            await b.connect()
            registry: dict[str, Timing] = {}
            a.registry = b.registry = registry
            before = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()
            for i in range(messages):
                mid, fut = await a.send(cid, f"websocket message {i}", [], registry)
                await asyncio.wait_for(asyncio.gather(fut, registry[mid].done.wait()), 10)
            after_ws = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()
            from shared import plain

            for i in range(messages):
                r = await http.post(
                    f"/v1/conversations/{cid}/messages",
                    headers={"Authorization": f"Bearer {a.token}", "Content-Type": "application/json"},
                    content=plain.encode(plain.make(f"REST message {i}", cid, a.username)),
                )
                r.raise_for_status()
            after_rest = (await http.get("/v1/metrics", headers=OPERATOR_HEADERS)).json()
            await a.close()
            await b.close()
    finally:
        await asyncio.to_thread(relay.stop)
    ws_verifications = after_ws["jwt_verifications"] - before["jwt_verifications"]
    return {
        "ws_messages": messages,
        "ws_verifications": ws_verifications,
        "verifications_per_ws_message": ws_verifications / messages,
        "rest_sends": messages,
        "rest_verifications": after_rest["jwt_verifications"] - after_ws["jwt_verifications"],
        "rest_cache_hits": after_rest["jwt_cache_hits"] - after_ws["jwt_cache_hits"],
    }


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


async def run_async(
    levels: tuple[int, ...] = (1, 2, 3, 4),
    tls_modes: tuple[bool, ...] = (False, True),
    clients: int = 4,
    messages: int = 200,
    size: int = 1024,
    bits: int = 3072,
    relays: int = 1,
    progress=None,
) -> dict:
    """Run every configuration; see the module doc. Returns a JSON-ready dict (ms, messages/s)."""
    step = progress or (lambda _label: None)
    clients = max(2, clients - clients % 2)
    params = {
        "levels": list(levels),
        "tls": list(tls_modes),
        "clients": clients,
        "messages": messages,
        "size": size,
        "bits": bits,
        "relays": relays,
        "synchronous": _default_synchronous(),
        "arrangement": ARRANGEMENT,
    }
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
            from . import cross

            found = await cross.measure(people, messages, size, work, progress=step)
            out["configs"] += found.pop("configs")
            out.update(found)
    return out


def run(**kwargs) -> dict:
    """Synchronous wrapper of :func:`run_async` (its own event loop)."""
    return asyncio.run(run_async(**kwargs))
