"""``e2ee-bench commitment`` measures the key commitment's share of a seal and an open in one run."""

from __future__ import annotations

from bench import commitment, suites


def test_the_commitment_suite_reports_its_cost_per_seal_and_open():
    result = commitment.run(n=30, bits=2048, size=256)
    assert set(result["ms"]) == {"seal", "open", "commit", "check", "timer"}
    assert 0 < result["commit_us"] < result["ms"]["seal"]["median_ms"] * 1000
    assert 0 < result["check_us"] < result["ms"]["open"]["median_ms"] * 1000
    assert 0 < result["seal_share"] < 1 and 0 < result["open_share"] < 1
    assert result["met"] == (result["commit_us"] <= 2 and result["check_us"] <= 2)
    text = commitment.section(result, {})
    assert "Key commitment" in text and "| seal |" in text and "| open |" in text
    assert suites.BY_NAME["commitment"].module == "bench.commitment"
