"""Every suite of ``e2ee-bench`` in one list: what ``e2ee-bench NAME`` runs, and what
``e2ee-bench report`` runs, in this order.

Adding a suite (e.g. a new bench module of another area):

1. write ``bench/NAME.py`` with ``run(progress=None, **params) -> dict`` (JSON-ready, times in ms,
   sizes in bytes; ``progress(label)`` is called before each part);
2. optionally, in the same module, ``section(result, results) -> str``: the Markdown that
   ``REPORT.md`` shows under "Beyond the article" (``result`` is this suite's JSON, ``results``
   the whole run's), and ``print_result(console, result)`` for the console;
3. add one :class:`Suite` line to :data:`SUITES` below (full and ``--quick`` parameters).

Targets that the suite decides go into ``bench/targets.py``.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass

Params = Callable[[argparse.Namespace], dict]


@dataclass(frozen=True)
class Suite:
    """One suite: its name on the command line, a one-line help, the module with ``run``, and
    the keyword arguments of ``run`` for a full or a ``--quick`` run."""

    name: str
    help: str
    module: str
    params: Params

    def run(self, args: argparse.Namespace, progress: Callable[[str], None]) -> dict:
        """Run the suite with the parameters ``args`` asks for; returns its JSON (plus
        ``elapsed_s``, the suite's wall time in s)."""
        t0 = time.perf_counter()
        out = importlib.import_module(self.module).run(progress=progress, **self.params(args))
        out["elapsed_s"] = time.perf_counter() - t0
        return out

    def hook(self, name: str):
        """The module's optional ``section`` / ``print_result`` function, or None."""
        return getattr(importlib.import_module(self.module), name, None)


def _n(args: argparse.Namespace) -> int:
    return args.n if args.n is not None else (60 if args.quick else 1000)


def _sizes(args: argparse.Namespace) -> tuple[int, ...]:
    return (2048,) if args.quick else (2048, 3072, 4096)


def _path(args: argparse.Namespace) -> dict:
    q = args.quick
    return {
        "levels": (1, 4) if q else (1, 2, 3, 4),
        "tls_modes": (False,) if q else (False, True),
        "clients": args.clients or (2 if q else 4),
        "messages": args.messages or (10 if q else 200),
        "bits": 2048 if q else args.bits,
        "relays": args.relays,
    }


SUITES: list[Suite] = [
    Suite(
        "primitives",
        "the article's per-request, one-time and encrypt/decrypt tables; L4 vs its primitives",
        "bench.primitives",
        lambda a: {"n": _n(a), "bits": a.bits, "keygen_n": 1 if a.quick else 6, "sizes": _sizes(a)},
    ),
    Suite(
        "recipients",
        "seal/open against 1..256 recipients for four key-distribution strategies",
        "bench.recipients",
        lambda a: {
            "n": min(_n(a), 200),
            "sizes": _sizes(a),
            "most": 8 if a.quick else 256,
            "pool": 3 if a.quick else 8,
            "budget_ms": 60 if a.quick else 1500,
        },
    ),
    Suite(
        "path",
        "end-to-end through a real relay at L1-L4, TLS off/on (--relays 2: two relays, PostgreSQL, Redis)",
        "bench.path",
        _path,
    ),
    Suite(
        "cross",
        "path --relays 2 (two relays on PostgreSQL with Redis fan-out) as its own suite",
        "bench.path",
        lambda a: {**_path(a), "levels": (4,), "tls_modes": (False,), "relays": 2},
    ),
    Suite(
        "network",
        "end-to-end per level with 0, 30, 100, 300 ms round trips (a loopback delay proxy)",
        "bench.network",
        lambda a: {
            "levels": (1, 4) if a.quick else (1, 2, 3, 4),
            "rtts_ms": (0, 30) if a.quick else (0, 30, 100, 300),
            "clients": a.clients or (2 if a.quick else 4),
            "messages": a.messages or (5 if a.quick else 30),
            "bits": 2048 if a.quick else a.bits,
        },
    ),
    Suite(
        "context",
        "indexed/unindexed queries, rendering 50 items, loopback round trip",
        "bench.context",
        lambda a: {"n": _n(a), "rows": 2000 if a.quick else 100_000},
    ),
    Suite(
        "peers",
        "the same rows in Node.js on this machine (node:crypto, Node's crypto.subtle)",
        "bench.peers",
        lambda a: {"n": _n(a), "keygen_n": 1 if a.quick else 4, "bits": a.bits, "sizes": _sizes(a)},
    ),
    Suite(
        "browser",
        "the WebCrypto rows and the recipients sweep in headless Chromium (cross-origin isolated page)",
        "bench.browser",
        lambda a: {"n": _n(a), "bits": a.bits, "pool": 3 if a.quick else 4, "most": 8 if a.quick else 128},
    ),
    Suite(
        "padding",
        "what padding a content document to a Padmé or power-of-two bucket adds (bytes, µs) per payload",
        "bench.padding",
        lambda a: {"n": 200 if a.quick else 3000},
    ),
    Suite(
        "commitment",
        "what the envelope's key commitment (kc) adds to one seal and one open, in one run",
        "bench.commitment",
        lambda a: {"n": 300 if a.quick else 5000, "bits": a.bits},
    ),
    Suite(
        "membership",
        "membership log: µs to verify a statement, a 100-epoch log, bytes v2 adds per envelope",
        "bench.membership",
        lambda a: {"n": _n(a)},
    ),
    Suite(
        "transparency",
        "key transparency log: µs to check a key answer's inclusion proof at 10^3, 10^5, 10^6 entries, proof bytes, "
        "the gossiped head's effect on padded message size",
        "bench.transparency",
        lambda a: {
            "n": 300 if a.quick else 2000,
            "sizes": (1000, 10_000) if a.quick else (1000, 100_000, 1_000_000),
            "bits": 2048 if a.quick else a.bits,
        },
    ),
    Suite(
        "rotation",
        "one key rotation through a relay for a user in 1, 10, 50 conversations: keygen, publish + KT append, "
        "membership updates",
        "bench.rotation",
        lambda a: {
            "conversations": (1, 3) if a.quick else (1, 10, 50),
            "rounds": 2 if a.quick else 5,
            "bits": 2048 if a.quick else a.bits,
            "kdf": {"iterations": 1, "memory_kib": 8192, "lanes": 1} if a.quick else None,
            "limited": 33 if a.quick else 50,  # over the relay's default burst of 30 member changes
        },
    ),
    Suite(
        "attachments",
        "attachment MB/s: encrypt+upload and download+decrypt through a relay, next to AES-GCM's limit",
        "bench.attachments",
        lambda a: {"mib": 2 if a.quick else 10, "rounds": 2 if a.quick else 5, "bits": 2048},
    ),
    Suite(
        "client",
        "the client core per message (CPU, wall, cache rows) at 10 vs 2,000 messages in history, bursts of 10 vs 500",
        "bench.client_cost",
        lambda a: {
            "histories": (10, 200) if a.quick else (10, 2000),
            "outboxes": (10, 50) if a.quick else (10, 500),
            "bits": 2048 if a.quick else a.bits,
        },
    ),
    Suite(
        "relay",
        "relay CPU per message and throughput with 50 clients vs a bare echo app (5 s runs each)",
        "bench.relay_load",
        lambda a: {
            "clients": a.clients or (6 if a.quick else 50),
            "seconds": 1.0 if a.quick else 5.0,
            "pool": a.messages or (300 if a.quick else 1000),
            "bits": 2048 if a.quick else a.bits,
            "also_full": not a.quick,
        },
    ),
]

BY_NAME: dict[str, Suite] = {s.name: s for s in SUITES}
