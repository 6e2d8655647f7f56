"""``cross`` (and ``path --relays 2``): what a second relay adds to a message, measured on the
same two users of each pair, in the same run, on the same database.

Two relay processes share one fresh PostgreSQL database and Redis (``--broker``). The users are
registered once; then rounds alternate between the two topologies over the very same relays:

* **PG 1 relay**: both users of each pair on relay A;
* **PG 2 relays**: the sender on relay A, the receiver on relay B (A commits, publishes a note on
  Redis; B reads the message for its user from the database and delivers it).

Alternating rounds (``rounds`` of each, ``messages`` per pair per round) share the machine's load
drift between both topologies, which one topology after the other would not.

The hop is measured from the point both topologies share: the sender's ``stored`` ack, sent by
relay A after its commit. Per message, ``delivery after ack`` = receiver's readable text minus the
sender's ack arrival (one clock: both users of a pair are in one process), minus the receiver's
decode and open. Its p50 with two relays minus its p50 with one is the cross-relay hop
(``cross_relay_added_p50_ms``): the Redis publish, the note, the other relay's indexed read and its
websocket send. The end-to-end p50 difference is reported beside it (``e2e_added_p50_ms``); it
also holds the commit's variance (an fsync on PostgreSQL), the same work in both topologies.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from shared.keys import Identity

from .pairs import FIELDS
from .relays import REDIS_URL, drop_pg_database, fresh_pg_database, start_relay
from .timing import summarize

TOPOLOGIES = ("PG 1 relay", "PG 2 relays")
_COUNTERS = ("stored", "checks_s", "commit_s", "fanout_s", "writer_batches", "writer_ops", "process_cpu_s")


def _after_ack_ms(run: dict) -> list[float]:
    """Per message: receiver's readable text - sender's ack, less the receiver's decode and open (ms)."""
    out = []
    for row in run["timings"]:
        t = dict(zip(FIELDS, row, strict=True))
        if t["t_stored"]:
            out.append((t["t_done"] - t["t_stored"]) * 1000 - t["decode_ms"] - t["open_ms"])
    return out


def _merge(runs: list[dict]) -> dict:
    """Rounds of one topology as one :func:`bench.path.measure_pairs` result (counters summed)."""
    deltas = {
        k: sum(sum(a[k] - b[k] for a, b in zip(r["after"], r["before"], strict=True)) for r in runs) for k in _COUNTERS
    }
    return {
        "timings": [t for r in runs for t in r["timings"]],
        "pings": runs[0]["pings"],
        "wall_s": sum(r["wall_s"] for r in runs),
        "before": [dict.fromkeys(_COUNTERS, 0)],
        "after": [deltas],
        "errors": [e for r in runs for e in r["errors"]],
        "pairs": runs[0]["pairs"],
    }


async def measure(
    people: list[Identity], messages: int, size: int, workdir: Path, rounds: int = 4, warmup: int = 3, progress=None
) -> dict:
    """Both topologies in alternating rounds over two relays on one fresh PostgreSQL database
    (see the module doc). Returns ``{"configs": [PG 1 relay, PG 2 relays] (as
    :func:`bench.path.summarize_run`, plus ``after_ack``), "cross_relay_added_p50_ms",
    "e2e_added_p50_ms", "rounds"}``; times in ms."""
    from .path import measure_pairs, register_pairs, summarize_run

    step = progress or (lambda _label: None)
    name, url = await fresh_pg_database()
    procs = []
    try:
        extra = ["--database-url", url, "--broker", REDIS_URL]
        env = {"E2EE_JWT_SECRET": "b" * 64}  # both relays accept each other's tokens
        for i in range(2):
            procs.append(await asyncio.to_thread(start_relay, workdir / f"relay{i}", 4, extra=extra, env=env))
        a_url, b_url = procs[0].url, procs[1].url
        pairs = await register_pairs((a_url, b_url), people, 4, None)
        runs: dict[str, list[dict]] = {t: [] for t in TOPOLOGIES}
        per_round = max(1, messages // rounds)
        counter = 0
        for r in range(rounds):
            for topology in TOPOLOGIES if r % 2 == 0 else TOPOLOGIES[::-1]:
                step(f"L4 {topology}, round {r + 1}/{rounds}: {len(pairs)} pairs x {per_round} messages")
                ws = (a_url, a_url) if topology == "PG 1 relay" else (a_url, b_url)
                runs[topology].append(
                    await measure_pairs(
                        pairs,
                        4,
                        [a_url] if topology == "PG 1 relay" else [a_url, b_url],
                        per_round,
                        size,
                        ws_urls=ws,
                        warmup=warmup,
                        counter_start=counter,
                    )
                )
                counter += warmup + per_round
    finally:
        for p in procs:
            await asyncio.to_thread(p.stop)
        await drop_pg_database(name)
    configs = []
    for topology in TOPOLOGIES:
        merged = _merge(runs[topology])
        c = summarize_run(merged, f"L4 {topology}", level=4, tls=False, topology=topology, size=size)
        c["after_ack"] = summarize(_after_ack_ms(merged)).as_dict()
        c["rounds"] = rounds
        configs.append(c)
    same, cross = configs
    return {
        "configs": configs,
        "rounds": rounds,
        "cross_relay_added_p50_ms": cross["after_ack"]["median_ms"] - same["after_ack"]["median_ms"],
        "e2e_added_p50_ms": cross["e2e"]["median_ms"] - same["e2e"]["median_ms"],
        "after_ack_p50_ms": {c["topology"]: c["after_ack"]["median_ms"] for c in configs},
        "commit_mean_ms": {c["topology"]: c["split_mean_ms"]["db_commit_ms"] for c in configs},
    }
