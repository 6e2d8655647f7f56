"""``network``: end-to-end latency per level with a set round trip between every client and the
relay — 0, 30, 100 and 300 ms, the article's same-city fiber, 4G and 3G rows — so its section 05
("what actually slows your app") becomes a measured table: the share of encryption in what the
user waits for.

Per level one relay (its defaults, SQLite), the users registered once; per round trip a delay
proxy process (``bench/delayproxy.py``: half the round trip added in each direction) in front of
it, every client's websocket through it, and one measured run of the path suite's kind (a
process per pair, closed loop, see ``bench/pairs.py``). A message crosses two client-relay links
(sender -> relay -> receiver), so its end-to-end time holds one full round trip. The round trip
actually measured (websocket pings through the proxy) is reported next to the one asked for.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from shared.keys import Identity

from .delayproxy import DelayProxy
from .path import measure_pairs, register_pairs, summarize_run
from .relays import start_relay

RTTS_MS = (0, 30, 100, 300)


async def run_async(
    levels: tuple[int, ...] = (1, 2, 3, 4),
    rtts_ms: tuple[float, ...] = RTTS_MS,
    clients: int = 4,
    messages: int = 30,
    size: int = 1024,
    bits: int = 3072,
    warmup: int = 2,
    progress=None,
) -> dict:
    """Every (level, round trip); see the module doc. Returns ``{"params", "configs": [...]}``
    where each config is the path suite's summary plus ``rtt_ms`` (asked), ``rtt_measured_ms``
    (ping p50 through the proxy) and ``crypto_share`` (client crypto / mean end-to-end time)."""
    step = progress or (lambda _label: None)
    clients = max(2, clients - clients % 2)
    params = {
        "levels": list(levels),
        "rtts_ms": list(rtts_ms),
        "clients": clients,
        "messages": messages,
        "size": size,
        "bits": bits,
        "proxy": "asyncio TCP proxy on 127.0.0.1, half the round trip each way",
    }
    step(f"generating {clients} RSA-{bits} identities")
    people = await asyncio.to_thread(lambda: [Identity.generate(f"net{i:03d}", bits) for i in range(clients)])
    out: dict = {"params": params, "configs": []}
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-network-") as tmp:
        for level in levels:
            relay = await asyncio.to_thread(start_relay, Path(tmp) / f"l{level}", level)
            try:
                pairs = await register_pairs((relay.url, relay.url), people, level, None)
                counter = 0
                for rtt in rtts_ms:
                    step(f"L{level}, round trip {rtt:g} ms: {clients} clients x {messages} messages")
                    with DelayProxy(relay.url, rtt / 2) as proxy:
                        run = await measure_pairs(
                            pairs,
                            level,
                            [relay.url],
                            messages,
                            size,
                            warmup=warmup,
                            ws_urls=(proxy.url, proxy.url),
                            counter_start=counter,
                            pings=5 if rtt >= 100 else 20,
                        )
                    counter += warmup + messages
                    cfg = summarize_run(run, f"L{level} RTT {rtt:g} ms", level=level, rtt_ms=rtt, size=size)
                    cfg["rtt_measured_ms"] = cfg["ws_ping"]["median_ms"]
                    cfg["crypto_share"] = cfg["split_mean_ms"]["client_crypto_ms"] / cfg["e2e_mean_ms"]
                    cfg["samples_ms"] = cfg["samples_ms"][:200]
                    out["configs"].append(cfg)
            finally:
                await asyncio.to_thread(relay.stop)
    return out


def run(**kwargs) -> dict:
    """Synchronous wrapper of :func:`run_async`."""
    return asyncio.run(run_async(**kwargs))
