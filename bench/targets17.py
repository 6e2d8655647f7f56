"""The targets of issue 17 that the older targets (``bench/targets.py``) do not already check:
the browser column, the measured network rows, the hybrid post-quantum strategy in the sweep,
relay CPU against the echo app, and the cross-relay hop. Same shape as ``targets.check``."""

from __future__ import annotations

from .timing import result_at


def _t(
    tid: str, text: str, value: float | None, limit: float | None, detail: str = "", higher_is_better: bool = False
) -> dict:
    from .targets import _target

    return {**_target(tid, text, value, limit, detail, higher_is_better), "issue": "17"}


def browser(b: dict | None) -> list[dict]:
    """Chromium's page was cross-origin isolated (5 µs timer) and its batch timing agrees with its
    per-call medians on every row the timer resolves."""
    iso = "WebCrypto columns from Chromium: page cross-origin isolated, timer step <= 5 µs (ms)"
    agree = "Chromium: batch mean within 0.8-1.25x of the per-call median, share of resolvable rows"
    if not b or "skipped" in b:
        why = (b or {}).get("skipped", "the browser suite did not run")
        return [_t("browser_isolated", iso, None, None, why), _t("browser_batch", agree, None, None, why)]
    bc = b["batch_check"]
    worst = bc["worst"]
    return [
        _t(
            "browser_isolated",
            iso,
            b["timer_step_ms"] if b["cross_origin_isolated"] else 0.1,
            0.00501,
            f"{b['version']}, user agent {b['user_agent']}; Python opened the page's envelope: "
            f"{'yes' if b['format_check']['opened'] else 'no (' + str(b['format_check']['error']) + ')'}",
        ),
        _t(
            "browser_batch",
            agree,
            bc["agree"] / bc["checked"] if bc["checked"] else None,
            1.0,
            f"{bc['agree']}/{bc['checked']} rows"
            + (f"; furthest {worst['row']} at {worst['ratio']:.2f}" if worst else "")
            + (f"; outside: {', '.join(bc['outside'])}" if bc["outside"] else ""),
            higher_is_better=True,
        ),
    ]


def network(net: dict | None) -> list[dict]:
    """Every level measured at every round trip of 0, 30, 100 and 300 ms."""
    text = "network rows measured: end-to-end p50 per level at round trips 0, 30, 100, 300 ms (share of cells)"
    if not net:
        return [_t("network", text, None, None, "the network suite did not run")]
    want = {(lv, r) for lv in (1, 2, 3, 4) for r in (0, 30, 100, 300)}
    got = {(c["level"], c["rtt_ms"]) for c in net["configs"]}
    l4 = {c["rtt_ms"]: c for c in net["configs"] if c["level"] == 4}
    detail = "; ".join(
        f"L4 at {r:g} ms: p50 {c['e2e']['median_ms']:.2f} ms, encryption {100 * c['crypto_share']:.1f} %"
        for r, c in sorted(l4.items())
    )
    return [_t("network", text, len(want & got) / len(want), 1.0, detail, higher_is_better=True)]


def hybrid(rec: dict | None) -> list[dict]:
    """The hybrid post-quantum wrap in every cell of the sweep, with bytes and the N at the limit."""
    text = "recipients sweep: X25519 + ML-KEM-768 hybrid wrap measured in every cell (share of cells)"
    if not rec:
        return [_t("pq_hybrid", text, None, None, "the recipients suite did not run")]
    cells = [r for per in rec["sizes"].values() for r in per["rows"].values()]
    first = next(iter(rec["sizes"].values()))["at_limit"]["hybrid"]
    return [
        _t(
            "pq_hybrid",
            text,
            sum("hybrid_seal" in r for r in cells) / len(cells),
            1.0,
            f"{first['bytes_per_recipient']:,.0f} bytes per recipient; the envelope passes the relay's "
            f"{rec['limits']['max_envelope_bytes']:,} bytes at N = {first['first_n_over_limit']}",
            higher_is_better=True,
        )
    ]


def _run_length(x: dict) -> str:
    ok = x["wall_s"] >= 5 or x["messages"] >= 100_000
    return f"{x['wall_s']:.1f} s / {x['messages']:,} messages" + ("" if ok else " (short of 5 s and 100,000)")


def profile_summary(prof: dict | None, n: int = 4) -> str:
    """The relay's CPU split from its py-spy profile in a few words (the largest parts, the
    largest functions by self time)."""
    if not prof:
        return "no profile"
    if "shares" not in prof:
        return f"no profile ({prof.get('skipped', '?')})"
    parts = sorted(prof["shares"].items(), key=lambda kv: -kv[1])
    top = ", ".join(f"{f['function'].split(' (')[0]} {100 * f['share']:.0f} %" for f in prof["top"][:n])
    return (
        f"relay CPU split (py-spy, {prof['samples']} samples): "
        + ", ".join(f"{k} {100 * v:.0f} %" for k, v in parts if v >= 0.005)
        + f"; largest functions: {top}"
    )


def relay_cpu(relay: dict | None) -> list[dict]:
    """Relay CPU per message <= 3x the bare echo app's, both over runs of >= 5 s (or 100,000
    frames), every ack after its commit and every acked message found in the database."""
    text = "relay CPU per message <= 3 x the echo app's CPU per message"
    if not relay:
        return [_t("relay_cpu", text, None, None, "the relay suite did not run")]
    r, e = relay["relay"], relay["echo"]
    return [
        _t(
            "relay_cpu",
            text,
            r["cpu_ms_per_msg"] / e["cpu_ms_per_msg"],
            3.0,
            f"relay {r['cpu_ms_per_msg']:.3f} ms vs echo {e['cpu_ms_per_msg']:.4f} ms CPU per message "
            f"(process CPU time); relay {r['throughput_msgs_per_s']:,.0f} msg/s over {_run_length(r)}, "
            f"{r['in_database']:,}/{r['acked']:,} acked messages in the database after synchronous="
            f"{r['synchronous']} commits; echo {e['throughput_msgs_per_s']:,.0f} frames/s over {_run_length(e)}; "
            + profile_summary(r.get("profile")),
        )
    ]


def cross_hop(cross: dict | None) -> list[dict]:
    """The cross-relay hop at p50 over both users on one relay with the same PostgreSQL."""
    text = "cross-relay hop <= 1.5 ms at p50 (two relays vs one, same users, same PostgreSQL, same run), ms"
    added = result_at(cross, "cross_relay_added_p50_ms")
    if added is None:
        why = "; ".join((cross or {}).get("skipped", [])) or "the cross suite did not run"
        return [_t("cross_hop", text, None, None, why)]
    p50 = ", ".join(f"{c['topology']} {c['e2e']['median_ms']:.2f} ms" for c in cross["configs"])
    after = cross.get("after_ack_p50_ms")
    if after is None:  # an older result: the hop was the end-to-end p50 difference
        return [_t("cross_hop", text, added, 1.5, f"L4 end-to-end p50: {p50}")]
    commit = ", ".join(f"{k} {v:.2f} ms" for k, v in cross["commit_mean_ms"].items())
    return [
        _t(
            "cross_hop",
            text,
            added,
            1.5,
            "delivery after the sender's ack (receiver's text - ack, less decode and open), p50: "
            + ", ".join(f"{k} {v:.3f} ms" for k, v in after.items())
            + f"; {cross['rounds']} alternating rounds each, same users, same relays and database; "
            f"end-to-end p50: {p50} (difference {cross['e2e_added_p50_ms']:.2f} ms, which also holds the "
            f"PostgreSQL commit's variance: mean commit {commit})",
        )
    ]


def check(results: dict) -> list[dict]:
    """Issue 17's own targets from one run's ``results``."""
    return [
        *browser(results.get("browser")),
        *network(results.get("network")),
        *hybrid(results.get("recipients")),
        *relay_cpu(results.get("relay")),
        *cross_hop(results.get("cross")),
    ]
