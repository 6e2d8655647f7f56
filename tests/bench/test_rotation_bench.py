"""``e2ee-bench rotation`` (bench/rotation.py): its JSON in the quick report run and its section of
REPORT.md. What is checked is what a rotation did (one key retired and one update statement per
conversation per round) and that the phases add up to the total; no timing assertion."""

from __future__ import annotations

import pytest

from bench import rotation


@pytest.mark.process  # e2ee-bench runs as a process (and starts a relay)
@pytest.mark.timeout(600)  # the --quick report may take minutes
def test_rotation_json_keys_and_report_section(quick_report):
    results, out, _proc = quick_report
    r = results["rotation"]
    p = r["params"]
    assert [row["conversations"] for row in r["rows"]] == p["conversations"] == [1, 3]
    for row in r["rows"]:
        assert row["rounds"] == p["rounds"] == len(row["runs"]) == row["retired_keys"]
        # every conversation moved by one update statement per rotation, all to the same epoch
        assert len(row["epochs_before"]) == len(row["epochs_after"]) == 1
        assert row["epochs_after"][0] == row["epochs_before"][0] + p["rounds"]
        for run in row["runs"]:
            assert all(run[phase] > 0 for phase in rotation.PHASES)
            parts = sum(run[phase] for phase in rotation.PHASES if phase != "total_ms")
            assert parts - 1e-6 <= run["total_ms"] < parts + 50  # nothing but the steps' seams left out
    assert r["keygen_ms"]["min"] <= r["keygen_ms"]["median"] <= r["keygen_ms"]["max"]
    cap = r["limited"]  # a relay at its default limits: updates have a budget apart from member changes
    assert (cap["conversations"], cap["moved"]) == (33, 33) and cap["limit_per_min"] < 33 <= cap["updates_per_min"]
    text = (out / "REPORT.md").read_text()
    assert "### One key rotation (issue 18)" in text and "| 3 | " in text
    assert f"one rotation in 33 conversations moved the new keys into {cap['moved']} of their logs" in text
