"""Bounded load on loopback: every message reaches every member exactly once, memory bounded.

CI runs a reduced size; the full size of issue #4 (200 connections, 20,000 messages in groups
of 3) runs with ``E2EE_LOAD_FULL=1 .venv/bin/pytest tests/relay/test_load.py -s``.
"""

from __future__ import annotations

import os

import pytest

from client_tui.loadgen import run_load
from tests.conftest import start_relay

FULL = os.environ.get("E2EE_LOAD_FULL") == "1"
USERS, MESSAGES = (200, 20_000) if FULL else (60, 3_000)
RSS_BOUND_MIB = 400  # the relay's resident memory must stay under this during the run

LOAD_ENV = {"E2EE_RATE_SENDS_PER_S": "0", "E2EE_RATE_REGISTRATIONS_PER_MIN": "0",
            "E2EE_RATE_LOGINS_PER_MIN": "0", "E2EE_LOG_LEVEL": "WARNING"}


@pytest.mark.slow
async def test_group_load_delivers_every_message_exactly_once(tmp_path):
    relay = start_relay(tmp_path / "load", env=LOAD_ENV)
    try:
        r = await run_load(relay.url, users=USERS, messages=MESSAGES, group_size=3, relay_pid=relay.proc.pid)
    finally:
        relay.stop()
    print(f"\nload: {USERS} connections, {MESSAGES} messages in groups of 3: {r.seconds:.1f} s, "
          f"{r.throughput:.0f} msg/s, p50 {r.percentile(50):.0f} ms, p99 {r.percentile(99):.0f} ms, "
          f"relay RSS peak {r.relay_rss_peak_kib / 1024:.0f} MiB, opened {r.opened_ok}")
    assert r.errors == {}
    assert r.acked == MESSAGES
    assert r.expected_deliveries == 2 * MESSAGES
    assert r.missing == 0
    assert r.delivered_unique == r.expected_deliveries
    assert r.opened_ok == r.delivered_unique // 50
    assert 0 < r.relay_rss_peak_kib < RSS_BOUND_MIB * 1024
