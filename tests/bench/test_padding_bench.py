"""bench.padding: the bytes each padding scheme adds at the bench's payloads (exact, from the
documents the bench seals), the sweep over every length, and its REPORT.md section."""

from __future__ import annotations

from bench import padding, suites


def test_padding_rows_have_the_exact_bucket_sizes_and_timings():
    r = padding.run(n=20)
    sizes = {
        label: {s: (row["document_bytes"], row["padded_bytes"]) for s, row in rows.items()}
        for label, rows in r["rows"].items()
    }
    assert sizes == {
        "100 B": {"none": (149, 149), "padme": (149, 256), "pow2": (149, 256)},
        "1 KB": {"none": (1073, 1073), "padme": (1073, 1088), "pow2": (1073, 2048)},
        "10 KB": {"none": (10289, 10289), "padme": (10289, 10752), "pow2": (10289, 16384)},
    }
    one_kb = r["rows"]["1 KB"]["pow2"]
    assert (one_kb["pad_bytes"], one_kb["envelope_bytes_added"]) == (975, 1300)
    for rows in r["rows"].values():
        assert rows["none"]["seal_us_added"] == rows["none"]["open_us_added"] == 0
        assert all(row["seal_ms"]["n"] == 20 and row["seal_ms"]["median_ms"] > 0 for row in rows.values())
    assert r["sweep"]["padme"]["sizes"] == 128 and r["sweep"]["pow2"]["sizes"] == 8
    assert r["sweep"]["padme"]["max_pct"] < 6.25 < r["sweep"]["pow2"]["mean_pct"]
    text = padding.section(r, {})
    assert "| 1 KB | pow2 | 1,073 | 2,048 | 975 | 90.9 | 1,300 |" in text and "Default scheme: `padme`" in text


def test_padding_is_a_suite_of_the_bench():
    assert "padding" in [s.name for s in suites.SUITES]
