"""``e2ee-bench membership`` (bench/membership.py): its JSON in the quick report run, its section of
REPORT.md, and the byte counts it reports checked against a real envelope. No timing assertion."""

from __future__ import annotations

import base64
import json

import pytest

from bench import membership as bench_membership
from client_tui.core.record import now_ms
from shared import envelope
from shared.content import Text
from shared.keys import Identity


@pytest.mark.process  # e2ee-bench runs as a process
@pytest.mark.timeout(600)  # the --quick report may take minutes
def test_membership_json_keys_and_report_section(quick_report):
    results, out, _proc = quick_report
    m = results["membership"]
    assert m["params"]["epochs"] == 100
    for key in ("verify_statement_us", "parse_statement_us", "chain_ms", "chain_per_statement_us"):
        assert m[key] > 0, key
    assert [e["epoch"] for e in m["envelope"]] == [1, 100, 2**53 - 1]
    assert set(m["statement_bytes"]) == {"3", "100", "256"}
    assert m["statement_bytes"]["256"] <= 64 * 1024  # fits the signed-form limit (PROTOCOL.md §12.2)
    text = (out / "REPORT.md").read_text()
    assert "### Membership log (issue 11)" in text and "verify a 100-epoch log from its creation" in text


def test_the_bytes_v2_adds_are_ep_mh_kc_in_the_base64url_header(identities):
    """What the bench reports as "added" is exactly ``,"ep":N,"mh":"<43>","kc":"<43>"`` base64url'd
    into the protected header (the signature context is not transmitted)."""
    alice: Identity = identities["alice"]
    got = bench_membership.extra_bytes(alice, [alice, identities["bob"]], 100)
    data = envelope.seal(
        Text("x" * 1024, ts=now_ms(), ctr=1),
        alice,
        "bench-log",
        [alice.public, identities["bob"].public],
        epoch=100,
        head="A" * 43,
    )
    protected = json.loads(data)["protected"]
    header = base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4))
    plain_added = len(b',"ep":100,"mh":"' + b"A" * 43 + b'","kc":"') + 43 + 1
    assert json.loads(header)["ep"] == 100
    assert abs(got["added_bytes"] - plain_added * 4 / 3) <= 2  # base64url rounding at both ends
    assert got["envelope_bytes"] == len(data)


def test_a_small_run_renders_its_report_section():
    result = bench_membership.run(n=5)
    text = bench_membership.section(result, {"membership": result})
    assert text.startswith("### Membership log (issue 11)")
    assert f"| verify a 100-epoch log from its creation (parse + verify each) | {result['chain_ms']:.1f} ms" in text
    assert "| bytes v2 adds to an envelope (`ep`, `mh`, `kc`), epoch 9,007,199,254,740,991 |" in text
