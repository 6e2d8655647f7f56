"""Load, bounded and on loopback only: many real websocket connections, a set of active senders
sealing real L4 envelopes for groups of 3 (``bench.tools.loadgen.run_load``), every delivery
counted: 0 lost, 0 errors, each message once per member after dedup, relay memory under a stated
bound; p50/p99 latency (send to delivery) printed.

CI runs 64 connections, 16 senders, 3,000 messages (fixed test keys). The full sizes (keys
generated, about 2 minutes of key generation on 2 cores for 1,000 users) run with::

    E2EE_FULL=1 .venv/bin/pytest tests/faults/test_load.py -q -s

* ``groups`` (issue #4): 200 connections, every one sending, 20,000 messages; bound 400 MiB;
* ``mostly-idle`` (issue #7): 1,000 connections, 100 active senders, 50,000 messages; bound 512 MiB.
"""

from __future__ import annotations

import os
import resource

import pytest

from bench.tools import loadgen
from shared.keys import Identity
from tests.vectors import vectorlib

FULL = os.environ.get("E2EE_FULL") == "1"
# connections, active senders (None: all), messages, bound on the relay's resident memory (MiB)
PROFILES = {
    "groups": (200, None, 20_000, 400),
    "mostly-idle": (1_000, 100, 50_000, 512),
    "ci": (64, 16, 3_000, 256),
}
LOAD_ENV = {
    "E2EE_RATE_SENDS_PER_S": "0",
    "E2EE_RATE_REGISTRATIONS_PER_MIN": "0",
    "E2EE_RATE_LOGINS_PER_MIN": "0",
    "E2EE_LOG_LEVEL": "WARNING",
}


def enough_file_descriptors(need: int) -> int:
    """Raise this process's soft limit on open files to ``need`` if the hard limit allows (the
    relay, started after, inherits it); returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard) if hard != resource.RLIM_INFINITY else need, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@pytest.mark.process  # the relay process's memory
@pytest.mark.slow
@pytest.mark.timeout(1800)  # at full size (E2EE_FULL) it runs for many minutes
@pytest.mark.parametrize("profile", ["groups", "mostly-idle"] if FULL else ["ci"])
async def test_load_every_message_delivered_once_with_bounded_relay_memory(world, monkeypatch, profile):
    CONNECTIONS, SENDERS, MESSAGES, RSS_BOUND_MIB = PROFILES[profile]
    limit = enough_file_descriptors(2 * CONNECTIONS + 256)
    assert limit >= 2 * CONNECTIONS + 256, f"ulimit -n is {limit}: too few for {CONNECTIONS} connections"
    if not FULL:  # fixed test keys instead of generating 64 RSA keys in CI
        pool = vectorlib.key_pool()
        monkeypatch.setattr(
            loadgen,
            "make_identities",
            lambda names: [Identity(n, p.wrap_private, p.sign_private) for n, p in zip(names, pool, strict=False)],
        )
    relay = world.relay(name=f"load-{profile}", env=LOAD_ENV)
    r = await loadgen.run_load(
        relay.url, users=CONNECTIONS, messages=MESSAGES, senders=SENDERS, group_size=3, relay_pid=relay.proc.pid
    )
    print(
        f"\nload ({profile}): {CONNECTIONS} connections, {SENDERS or CONNECTIONS} senders, "
        f"{MESSAGES} messages in groups of 3: "
        f"{r.seconds:.1f} s, {r.throughput:.0f} msg/s, {r.delivered_unique} deliveries "
        f"({r.duplicates} duplicates dropped), p50 {r.percentile(50):.0f} ms, p99 {r.percentile(99):.0f} ms, "
        f"relay RSS peak {r.relay_rss_peak_kib / 1024:.0f} MiB (bound {RSS_BOUND_MIB} MiB), opened {r.opened_ok}"
    )
    assert r.errors == {}
    assert r.acked == MESSAGES
    assert r.expected_deliveries == 2 * MESSAGES
    assert r.missing == 0
    assert r.delivered_unique == r.expected_deliveries
    assert r.opened_ok == r.delivered_unique // 50
    assert 0 < r.relay_rss_peak_kib < RSS_BOUND_MIB * 1024
