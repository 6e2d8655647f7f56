"""Smoke tests of ``e2ee-bench``: the ``--quick`` runs finish and write the expected keys.

No timing assertion anywhere: only shapes, presence and internal consistency.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench import browser, cli, report, targets, timing

# e2ee-bench runs as a process (and starts relays, Node, Chromium); its --quick report may take minutes
pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]

STATS_KEYS = {"n", "median_ms", "p95_ms", "p99_ms"}


def _is_stats(d) -> bool:
    return isinstance(d, dict) and STATS_KEYS <= d.keys()


def test_report_quick_writes_report_charts_and_json(quick_report):
    results, out, _proc = quick_report
    machine = results["machine"]
    for key in ("cpu", "cores", "python", "openssl", "libraries", "node"):
        assert key in machine
    assert machine["libraries"]["cryptography"]
    text = (out / "REPORT.md").read_text()
    for heading in (
        "## 02 Per-message cost",
        "## 03 One-time costs",
        "## 04 Encrypt-only",
        "## 05 What else costs time",
        "## 06 Slower devices",
        "## 07 The whole path",
        "## 08 The article's decision table",
        "## Targets",
        "## Closing note",
    ):
        assert heading in text
    assert "article (quoted)" in text
    for png in report.CHARTS.values():
        assert (out / png).stat().st_size > 1000
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_primitives_json_keys(quick_report):
    prim = quick_report[0]["primitives"]
    for payload in ("100 B", "1 KB", "10 KB"):
        assert set(prim["per_request"][payload]) == {"L1", "L2", "L2_rest", "L3", "L4"}
        assert all(_is_stats(s) for s in prim["per_request"][payload].values())
    assert {"jwt_sign_hs256", "pyjwt_decode_hs256", "tokens_verify_first", "tokens_verify_repeat"} <= set(
        prim["jwt"]["rows"]
    )
    assert {"aes_gcm_encrypt", "aes_gcm_decrypt", "l3_seal", "l3_open", "l4_seal", "l4_open"} <= set(
        prim["enc_dec_1kb"]
    )
    assert {"seal_over_floor", "open_over_floor"} == set(prim["l4"]["ratios"])
    assert any(k.startswith("keygen_") for k in prim["one_time"])
    assert any(k.startswith("l3_handshake_") for k in prim["one_time"])


def test_recipients_json_keys(quick_report):
    rec = quick_report[0]["recipients"]
    for per in rec["sizes"].values():
        assert list(per["rows"]) == [str(n) for n in rec_counts(rec)]
        for n, row in per["rows"].items():
            for key in (
                "rsa_seal",
                "rsa_open",
                "x25519_seal",
                "x25519_open",
                "hybrid_seal",
                "hybrid_open",
                "group_seal",
                "group_open",
                "group_rotate",
                "relay_parse",
                "rsa_seal_floor",
            ):
                assert _is_stats(row[key])
            # each hybrid entry carries a 1,088-byte ML-KEM-768 ciphertext (1,451 base64url characters)
            assert row["hybrid_envelope_bytes"] > row["x25519_envelope_bytes"] + 1451 * int(n)
        assert set(per["knees"]) == {"over_1ms", "over_ui_frame", "over_10x_group_key"}
        limit = rec["limits"]["max_envelope_bytes"]
        for a in per["at_limit"].values():
            if a["first_n_over_limit"] is not None:
                assert a["fixed_bytes"] + a["bytes_per_recipient"] * a["first_n_over_limit"] > limit
                assert a["fixed_bytes"] + a["bytes_per_recipient"] * (a["first_n_over_limit"] - 1) <= limit
        assert per["at_limit"]["group"]["first_n_over_limit"] is None
        assert per["at_limit"]["hybrid"]["bytes_per_recipient"] > 1451
        assert per["seal_profile_n1"]["functions"]


def rec_counts(rec):
    from bench.recipients import recipient_counts

    return recipient_counts(rec["params"]["most"])


def test_path_json_keys(quick_report):
    path = quick_report[0]["path"]
    assert path["configs"], path.get("skipped")
    for c in path["configs"]:
        assert c["messages"] == path["params"]["messages"] * c["pairs"]
        assert _is_stats(c["e2e"]) and _is_stats(c["ack"])
        assert set(c["split_mean_ms"]) == {
            "client_crypto_ms",
            "serialization_ms",
            "relay_handling_ms",
            "db_commit_ms",
            "network_rest_ms",
        }
        assert len(c["samples_ms"]) == c["messages"]
    probe = path["jwt_probe"]
    assert probe["ws_verifications"] == 0  # verified once per connection, never per message
    assert probe["rest_verifications"] <= 1  # the first REST send; the rest hit the verified-token cache
    assert probe["rest_cache_hits"] >= probe["rest_sends"] - 1


def test_network_json_keys_and_report(quick_report):
    results, out, _proc = quick_report
    net = results["network"]
    p = net["params"]
    assert [(c["level"], c["rtt_ms"]) for c in net["configs"]] == [(lv, r) for lv in p["levels"] for r in p["rtts_ms"]]
    for c in net["configs"]:
        assert c["messages"] == p["messages"] * c["pairs"] and not c["errors"]
        assert _is_stats(c["e2e"]) and 0 <= c["crypto_share"] < 1
        # a message crosses two client-relay links: its time holds at least one set round trip
        assert c["e2e"]["median_ms"] >= c["rtt_ms"]
        assert c["rtt_measured_ms"] >= c["rtt_ms"]
    text = (out / "REPORT.md").read_text()
    assert "### What the user waits for, measured" in text and "(network.png)" in text


def test_cross_relay_runs_or_says_why(quick_report):
    cross = quick_report[0]["cross"]
    assert cross["configs"] or cross["skipped"]
    if cross["configs"]:
        assert [c["topology"] for c in cross["configs"]] == ["PG 1 relay", "PG 2 relays"]
        same, two = cross["configs"]
        assert same["messages"] == two["messages"] > 0  # the same pairs, as many messages each way
        assert cross["cross_relay_added_p50_ms"] == two["after_ack"]["median_ms"] - same["after_ack"]["median_ms"]
        assert "cross_relay_added_p50_ms" in cross and "e2e_added_p50_ms" in cross


def test_context_peers_relay_json_keys(quick_report):
    results = quick_report[0]
    ctx = results["context"]["rows"]
    for key in ("sqlite_indexed", "sqlite_unindexed", "render_50_json_stdlib", "loopback_ws_ping"):
        assert _is_stats(ctx[key])
    peers = results["peers"]
    if "skipped" not in peers:
        assert set(peers["per_request"]["1 KB"]) == {"L1", "L2", "L3_node", "L3_webcrypto", "L4"}
        assert {"node_encrypt", "node_decrypt", "webcrypto_encrypt", "webcrypto_encrypt_decrypt"} <= set(
            peers["enc_dec_1kb"]
        )
    relay = results["relay"]
    assert relay["relay"]["acked"] == relay["relay"]["messages"]
    assert relay["relay"]["in_database"] == relay["relay"]["acked"]
    assert relay["relay"]["delivered"] == relay["relay"]["acked"] > 0  # every acked message reached its peer
    assert relay["echo"]["messages"] > 0 and relay["echo"]["wall_s"] >= relay["params"]["seconds"]
    assert relay["ratio"] > 0 and relay["cpu_ratio"] > 0
    prof = relay["relay"]["profile"]
    if "skipped" not in prof:
        assert prof["samples"] > 0 and abs(sum(prof["shares"].values()) - 1) < 1e-9


def test_relay_profile_split_puts_each_stack_in_one_part():
    from bench import relay_profile

    stacks = {
        "run (asyncio/runners.py);accept (server/sendpath.py);parse (shared/envelope.py);"
        "b64u_decode (shared/b64.py)": 3,
        "run (asyncio/runners.py);_commit (server/sendpath.py);run (server/writer.py);do_commit "
        "(sqlalchemy/engine/default.py)": 2,
        "run (asyncio/runners.py);endpoint (server/relay.py);recv (websockets/protocol.py)": 4,
        "run (asyncio/runners.py);accept (server/sendpath.py);_members (server/sendpath.py)": 1,
    }
    out = relay_profile.split(stacks)
    assert out["samples"] == 10
    assert out["shares"]["parse"] == 0.3 and out["shares"]["commit"] == 0.2
    assert out["shares"]["websocket and event loop"] == 0.4 and out["shares"]["checks"] == 0.1
    assert out["top"][0] == {"function": "recv (websockets/protocol.py)", "share": 0.4}


def require_browser() -> None:
    """Skip when Chromium or Playwright is missing, unless CI is set: then fail."""
    why = browser.unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"e2ee-bench browser must run in CI: {why}")
        pytest.skip(why)


def _check_browser(b: dict) -> None:
    assert b["cross_origin_isolated"] is True
    assert b["timer_step_ms"] <= 0.0101  # 5 µs steps when isolated (100 µs without)
    assert "HeadlessChrome" in b["user_agent"] and b["version"]
    assert b["format_check"] == {"opened": True, "error": None}
    for payload in ("100 B", "1 KB", "10 KB"):
        assert set(b["per_request"][payload]) == {"L3", "L4"}
    rows = [*b["enc_dec_1kb"].values(), *b["l4"].values(), *(s for r in b["per_request"].values() for s in r.values())]
    for s in rows:
        assert _is_stats(s) and s["source"] in ("per-call", "batch") and s["batch_ms"] > 0
        assert s["median_ms"] == (s["per_call_median_ms"] if s["resolvable"] else s["batch_ms"])
    assert list(b["recipients"]) == [str(n) for n in b["params"]["counts"]]
    assert b["batch_check"]["checked"] > 0


def test_browser_quick_command(tmp_path):
    """``e2ee-bench browser --quick`` as CI runs it: real Chromium, a cross-origin-isolated page."""
    require_browser()
    out = tmp_path / "browser.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "browser", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_browser(json.loads(out.read_text())["browser"])
    assert "batch vs per-call median" in proc.stdout


def test_report_has_the_chromium_columns(quick_report):
    results, out, _proc = quick_report
    if "skipped" in results["browser"]:
        require_browser()
    _check_browser(results["browser"])
    text = (out / "REPORT.md").read_text()
    assert "Chromium WebCrypto ms" in text and results["browser"]["user_agent"] in text
    assert "## Beyond the article: WebCrypto in a real browser" in text


def test_every_target_is_reported(quick_report):
    results, _out, proc = quick_report
    ids = {t["id"] for t in results["targets"]}
    assert ids == {
        "l4_open",
        "l4_seal",
        "l4_e2e",
        "vs_node",
        "jwt_ws",
        "jwt_rest",
        "relay_vs_echo",
        # issue 17
        "browser_isolated",
        "browser_batch",
        "network",
        "pq_hybrid",
        "relay_cpu",
        "cross_hop",
    }
    for t in results["targets"]:
        assert t["met"] in (True, False, None) and t["issue"]
    measured = {t["id"] for t in results["targets"] if t["met"] is not None}
    assert {"network", "pq_hybrid", "relay_cpu", "l4_seal", "l4_e2e"} <= measured
    if "skipped" not in results["browser"]:
        assert {"browser_isolated", "browser_batch"} <= measured
    assert "met" in proc.stdout


def test_report_from_json_rewrites_without_running(quick_report, tmp_path):
    results, _out, _proc = quick_report
    src = tmp_path / "r.json"
    src.write_text(json.dumps(results))
    assert cli.main(["report", "--from", str(src), "--out", str(tmp_path / "again"), "--compare", str(src)]) == 0
    text = (tmp_path / "again" / "REPORT.md").read_text()
    assert text.startswith("# What encryption costs")
    assert "**Two full runs.**" in text and "r.json" in text
    for t in results["targets"]:
        assert t["text"] in text


def test_primitives_subcommand_quick_json(tmp_path):
    out = tmp_path / "p.json"
    assert cli.main(["primitives", "--quick", "-n", "20", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert "primitives" in data and "machine" in data
    assert {t["id"] for t in data["targets"]} >= {"l4_open", "l4_seal", "jwt_rest"}


def test_summarize_percentiles():
    s = timing.summarize([float(i) for i in range(1, 101)])
    assert (s.n, s.median, s.p95, s.p99) == (100, 50.5, 95.0, 99.0)
    assert timing.Stats.from_dict(s.as_dict()) == s


def test_targets_without_results_are_not_measured():
    got = targets.check({})
    assert got and all(t["met"] is None for t in got)


@pytest.mark.parametrize("value,expected", [(None, "-"), (0.01234, "0.0123"), (1.234, "1.23"), (1234.0, "1,234")])
def test_report_ms_format(value, expected):
    assert report.ms(value) == expected
