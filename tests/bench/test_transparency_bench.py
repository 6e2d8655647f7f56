"""``e2ee-bench transparency`` (bench/transparency.py): its JSON and REPORT.md section on small
generated logs; the proof sizes it reports are the RFC's (⌈log2 n⌉ hashes), and the gossip rows'
sizes are those of real documents and envelopes with and without the head. No timing assertion."""

from __future__ import annotations

import json

import pytest

from bench import transparency
from shared import content


def test_rows_sizes_and_section():
    result = transparency.run(n=20, sizes=(1000, 4096), bits=2048)
    small, pow2 = result["sizes"]
    assert (small["entries"], small["proof_hashes"], small["proof_bytes"]) == (1000, 10, 320)
    assert pow2["proof_hashes"] == 12 and 12 <= pow2["consistency_hashes"] <= 24
    assert small["kt_json_bytes"] > small["proof_bytes"] * 4 // 3  # b64url of the path, the leaf, the head
    for row in result["sizes"]:
        assert set(row["us"]) == {"inclusion", "answer", "consistency", "prove"}
        assert all(v > 0 for v in row["us"].values())
    text = transparency.section(result, {})
    assert text.startswith("### Key transparency log (issue 18)") and "| 4,096 | 12 hashes, 384 B |" in text
    assert "The gossiped head's bucket effect" in text and "| 10,000 B | 10,049 → " in text


def test_gossip_rows_are_the_sizes_of_real_documents_and_envelopes():
    result = transparency.run(n=5, sizes=(1000,), bits=2048)
    rows = result["gossip"]
    assert [r["text_bytes"] for r in rows] == list(transparency.GOSSIP_TEXTS)
    head_json = result["sizes"][-1]["gossip_json_bytes"]  # "kth":{...} as the head of the log
    for r in rows:
        assert r["document_kth_bytes"] - r["document_bytes"] == head_json + 1  # and a comma
        assert r["padded_bytes"] == content.bucket(r["document_bytes"])
        assert r["padded_kth_bytes"] == content.bucket(r["document_kth_bytes"])
        grown = r["padded_kth_bytes"] - r["padded_bytes"]
        assert r["moved"] == (grown > 0)
        # the envelope carries the padded plaintext's ciphertext base64url'd: 4/3 of the growth
        assert abs((r["envelope_kth_bytes"] - r["envelope_bytes"]) - grown * 4 / 3) <= 2
        d = r["decade"]
        assert d["lengths"] == d["to"] - d["from"] + 1 and 0 <= d["moved"] <= d["lengths"]
    ten, hundred, thousand, big = rows
    # under 256 B without the head, over it with: every short text moves out of the smallest bucket
    assert ten["padded_bytes"] == hundred["padded_bytes"] == content.MIN_BUCKET
    assert ten["decade"]["moved_pct"] == hundred["decade"]["moved_pct"] == 100
    # Padmé's steps near 10 kB (256-1,024 B) are wider than the head: only some lengths move
    assert 0 < big["decade"]["moved_pct"] < 100
    assert json.dumps(rows)  # JSON-ready


@pytest.mark.process  # e2ee-bench runs as a process
@pytest.mark.timeout(600)  # the --quick report may take minutes
def test_transparency_quick_report_has_the_gossip_rows(quick_report):
    results, out, _proc = quick_report
    rows = results["transparency"]["gossip"]
    assert [r["text_bytes"] for r in rows] == list(transparency.GOSSIP_TEXTS)
    assert "The gossiped head's bucket effect" in (out / "REPORT.md").read_text()
