"""``e2ee-bench client`` (bench/client_cost.py): its JSON in the quick report run and its section of
REPORT.md, and what it counts per message (cache rows, record events) bounded whatever the outbox
holds. No timing assertion."""

from __future__ import annotations

import pytest

from bench import client_cost


@pytest.mark.process  # e2ee-bench runs as a process
@pytest.mark.timeout(600)  # the --quick report may take minutes
def test_client_json_keys_and_report_section(quick_report):
    results, out, _proc = quick_report
    rows = results["client"]["rows"]
    assert [r["outbox"] for r in rows] == [10, 50, 10, 50]
    assert rows[2]["history"] >= 200
    for r in rows:
        assert r["client_cpu_ms"] > 0 and r["wall_ms"] > 0
    assert "### The client core per message" in (out / "REPORT.md").read_text()


@pytest.mark.process  # a relay process
def test_rows_and_events_per_message_do_not_grow_with_the_outbox():
    """A burst of 40 costs each message what a burst of 2 does: the sender's cache writes the
    message, its counters and its stored state (and a delivery receipt), the receiver's the message,
    4 meta rows and the unread count; one RecordChanged per step of the sender's record. Before the
    fix a burst of k rewrote up to k unsent messages per landed line."""
    rows = client_cost.run(histories=(3,), outboxes=(2, 40))["rows"]
    assert [r["outbox"] for r in rows] == [2, 40]
    for r in rows:
        assert r["receiver_rows"] == 6
        assert 3 <= r["sender_rows"] <= 5  # queued (message + counters), stored, delivered (if acked in time)
        assert 2 <= r["sender_record_events"] <= 4
