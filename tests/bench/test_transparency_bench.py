"""``e2ee-bench transparency`` (bench/transparency.py): its JSON and REPORT.md section on small
generated logs; the proof sizes it reports are the RFC's (⌈log2 n⌉ hashes). No timing assertion."""

from __future__ import annotations

from bench import transparency


def test_rows_sizes_and_section():
    result = transparency.run(n=20, sizes=(1000, 4096))
    small, pow2 = result["sizes"]
    assert (small["entries"], small["proof_hashes"], small["proof_bytes"]) == (1000, 10, 320)
    assert pow2["proof_hashes"] == 12 and 12 <= pow2["consistency_hashes"] <= 24
    assert small["kt_json_bytes"] > small["proof_bytes"] * 4 // 3  # b64url of the path, the leaf, the head
    for row in result["sizes"]:
        assert set(row["us"]) == {"inclusion", "answer", "consistency", "prove"}
        assert all(v > 0 for v in row["us"].values())
    text = transparency.section(result, {})
    assert text.startswith("### Key transparency log (issue 18)") and "| 4,096 | 12 hashes, 384 B |" in text
