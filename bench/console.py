"""Console tables (rich) for each suite's results, as ``e2ee-bench`` prints them after a run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from . import article


def _f(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def _ms(d: dict | None, key: str = "median_ms") -> float | None:
    return d.get(key) if isinstance(d, dict) else None


def _table(title: str, cols: list[str]) -> Table:
    t = Table(title=title, title_justify="left")
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right")
    return t


def print_primitives(console: Console, r: dict, peers: dict | None = None) -> None:
    """§02-§04 and the L4 parts as rich tables."""
    node = peers if peers and "skipped" not in peers else None
    t = _table(
        "§02 per-message cost, median ms (article (quoted) = Node/WebCrypto on its machine)",
        [
            "payload",
            "L1",
            "L2",
            "L2 REST",
            "L3",
            "L4",
            "Node L1",
            "Node L2",
            "Node L3",
            "WebCrypto L3",
            "article (quoted) L1/L2/L3",
        ],
    )
    for p, rows in r["per_request"].items():
        nr = (node or {}).get("per_request", {}).get(p, {})
        q = article.PER_REQUEST[p]
        t.add_row(
            p,
            *(_f(_ms(rows[k])) for k in ("L1", "L2", "L2_rest", "L3", "L4")),
            *(_f(_ms(nr.get(k))) for k in ("L1", "L2", "L3_node", "L3_webcrypto")),
            f"{q['L1']}/{q['L2']}/{q['L3_node']}",
        )
    console.print(t)
    t = _table("§03 one-time costs, ms", ["operation", "median", "p95", "p99", "Node median", "article (quoted)"])
    once = dict(r["one_time"])
    once["jwt_sign_hs256"] = r["jwt"]["rows"]["jwt_sign_hs256"]
    once["jwt_sign_eddsa"] = r["jwt"]["rows"]["jwt_sign_eddsa"]
    quoted = {"jwt_sign_hs256": article.ONE_TIME["jwt_sign"], "l3_handshake_2048": article.ONE_TIME["rsa_handshake"]}
    for k, s in once.items():
        nq = (node or {}).get("one_time", {}).get(k)
        q = quoted.get(k)
        t.add_row(
            k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]), _f(_ms(nq)), f"{q[0]} (p95 {q[1]})" if q else ""
        )
    console.print(t)
    t = _table("§04 encrypt-only / decrypt-only, 1 KB, ms", ["operation", "median", "p95", "p99"])
    for k, s in r["enc_dec_1kb"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    if node:
        for k, s in node["enc_dec_1kb"].items():
            t.add_row(f"Node {k}", _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    for k, v in article.ENC_DEC_1KB.items():
        t.add_row(f"article (quoted) {k}", str(v), "", "")
    console.print(t)
    p = r["l4"]["params"]
    t = _table(
        f"L4 seal/open vs its primitives (RSA-{p['bits']}, {p['size']} B, {p['recipients']} recipients), ms",
        ["operation", "median", "p95", "p99"],
    )
    for k, s in r["l4"]["rows"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    console.print(t)
    t = _table("JWT, ms", ["operation", "median", "p95", "p99"])
    for k, s in r["jwt"]["rows"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    console.print(t)


def print_recipients(console: Console, r: dict) -> None:
    """Seal/open against recipients per strategy and RSA size."""
    for bits, per in r["sizes"].items():
        t = _table(
            f"RSA-{bits}: cost against recipients, median ms (wrap {_f(per['wrap']['median_ms'])}, unwrap "
            f"{_f(per['unwrap']['median_ms'])})",
            [
                "N",
                "RSA seal",
                "floor",
                "seal/floor",
                "RSA open",
                "relay parse",
                "X25519 seal",
                "X25519 open",
                "hybrid PQ seal",
                "hybrid PQ open",
                "group-key seal",
                "group-key open",
                "rotation (N wraps)",
                "envelope bytes",
            ],
        )
        for n, row in per["rows"].items():
            t.add_row(
                n,
                _f(row["rsa_seal"]["median_ms"]),
                _f(row["rsa_seal_floor_ms"]),
                f"{row['rsa_seal']['median_ms'] / row['rsa_seal_floor_ms']:.2f}",
                _f(row["rsa_open"]["median_ms"]),
                _f(row["relay_parse"]["median_ms"]),
                _f(row["x25519_seal"]["median_ms"]),
                _f(row["x25519_open"]["median_ms"]),
                _f(row["hybrid_seal"]["median_ms"]),
                _f(row["hybrid_open"]["median_ms"]),
                _f(row["group_seal"]["median_ms"]),
                _f(row["group_open"]["median_ms"]),
                _f(row["group_rotate"]["median_ms"]),
                f"{row['rsa_envelope_bytes']:,}",
            )
        console.print(t)
        k = per["knees"]

        def at(n: int | None) -> str:
            return f"N = {n}" if n is not None else "no N in this sweep"

        console.print(
            f"  per-recipient RSA wrapping: seal > 1 ms from {at(k['over_1ms'])}, > one 60 Hz frame from "
            f"{at(k['over_ui_frame'])}, > 10x a group-key message from {at(k['over_10x_group_key'])}"
        )


def print_path(console: Console, r: dict) -> None:
    """End-to-end latency, throughput and the split per configuration."""
    t = _table(
        f"path: {r['params']['clients']} clients x {r['params']['messages']} messages of "
        f"{r['params']['size']} B, through a real relay on 127.0.0.1, ms",
        [
            "config",
            "p50",
            "p95",
            "p99",
            "ack p50",
            "msg/s",
            "crypto",
            "serialize",
            "relay",
            "db commit",
            "network+rest",
            "relay CPU/msg",
            "ws ping",
        ],
    )
    for c in r["configs"]:
        s = c["split_mean_ms"]
        t.add_row(
            c["name"],
            _f(c["e2e"]["median_ms"]),
            _f(c["e2e"]["p95_ms"]),
            _f(c["e2e"]["p99_ms"]),
            _f(c["ack"]["median_ms"]),
            f"{c['throughput_msgs_per_s']:.0f}",
            _f(s["client_crypto_ms"]),
            _f(s["serialization_ms"]),
            _f(s["relay_handling_ms"]),
            _f(s["db_commit_ms"]),
            _f(s["network_rest_ms"]),
            _f(c["relay_cpu_ms_per_msg"]),
            _f(c["ws_ping"]["median_ms"]),
        )
    console.print(t)
    if "crypto_floor_ms" in r:
        console.print(
            f"  L4 crypto floor (seal floor + open floor, RSA-{r['params']['bits']}): {r['crypto_floor_ms']:.3f} ms"
        )
    if "cross_relay_added_p50_ms" in r:
        console.print(
            f"  cross-relay hop adds {r['cross_relay_added_p50_ms']:.3f} ms at p50 after the sender's ack "
            f"({r.get('after_ack_p50_ms')}); end-to-end p50 difference {r.get('e2e_added_p50_ms', 0):.3f} ms"
        )
    for s in r.get("skipped", []):
        console.print(f"  [yellow]skipped[/]: {s}")


def print_context(console: Console, r: dict, prim: dict | None = None) -> None:
    """§05: what else costs time, next to the article's quoted ranges."""
    t = _table(
        f"§05 context ({r['params']['rows']:,} messages of {r['params']['envelope_bytes']} B), ms",
        ["step", "median", "p95", "p99"],
    )
    for k, s in r["rows"].items():
        t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    for k, v in article.CONTEXT.items():
        t.add_row(f"article (quoted) {k}", article.fmt_range(v), "", "")
    console.print(t)
    for s in r.get("skipped", []):
        console.print(f"  [yellow]skipped[/]: {s}")


def print_peers(console: Console, r: dict) -> None:
    """Node's own figures on this machine."""
    if "skipped" in r:
        console.print(f"[yellow]peers skipped[/]: {r['skipped']}")
        return
    t = _table(f"Node {r['node']} (OpenSSL {r['openssl']}) on this machine, median ms", ["row", "median", "p95", "p99"])
    for p, rows in r["per_request"].items():
        for k, s in rows.items():
            t.add_row(f"{k} {p}", _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    for part in ("one_time", "enc_dec_1kb", "l4"):
        for k, s in r[part].items():
            t.add_row(k, _f(s["median_ms"]), _f(s["p95_ms"]), _f(s["p99_ms"]))
    console.print(t)


def print_relay(console: Console, r: dict) -> None:
    """Relay vs echo app: throughput, CPU per message, the relay's CPU split from its profile."""
    p = r["params"]
    t = _table(
        f"relay vs bare echo app: {p['clients']} clients for {p['seconds']:g} s each, 1 KB (L4 envelopes, "
        f"RSA-{p['bits']}), window {p['window']}",
        ["server", "msg/s", "CPU ms/msg", "wall s", "messages"],
    )
    for k in ("relay", "relay_fsync", "echo"):
        s = r.get(k)
        if not s:
            continue
        label = f"relay (synchronous={s['synchronous']})" if k != "echo" else "echo app"
        t.add_row(
            label, f"{s['throughput_msgs_per_s']:.0f}", _f(s["cpu_ms_per_msg"]), _f(s["wall_s"], 2), str(s["messages"])
        )
    console.print(t)
    rel = r["relay"]
    console.print(
        f"  relay/echo CPU per message = {r['cpu_ratio']:.2f} (target <= 3); throughput ratio "
        f"{r['ratio']:.3f}; acked {rel['acked']}, in the database {rel['in_database']}; group commit "
        f"{rel['group_commit_factor']:.1f} messages per transaction"
    )
    prof = rel.get("profile") or {}
    if "shares" in prof:
        console.print(
            "  relay CPU split (py-spy): " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in prof["shares"].items())
        )
    elif prof:
        console.print(f"  relay profile skipped: {prof.get('skipped')}")


def print_targets(console: Console, targets: list[dict]) -> None:
    """Each target as met / not met with its ratio."""
    t = _table("targets", ["target", "value", "limit", "ratio", "result", "detail"])
    for x in targets:
        if x["met"] is None:
            res = "[dim]not measured[/]"
        else:
            res = "[green]met[/]" if x["met"] else "[red]not met[/]"
        t.add_row(
            x["text"],
            _f(x["value"]),
            _f(x["limit"]),
            f"{x['ratio']:.3f}" if x["ratio"] is not None else "-",
            res,
            x["detail"],
        )
    console.print(t)


def print_browser(console: Console, r: dict) -> None:
    """The Chromium rows, with the figure each reports (per call or batch) and the batch check."""
    if "skipped" in r:
        console.print(f"[yellow]browser skipped[/]: {r['skipped']}")
        return
    t = _table(
        f"{r['version']} (timer step {r['timer_step_ms'] * 1000:.1f} µs, cross-origin isolated "
        f"{r['cross_origin_isolated']}), median ms",
        ["row", "median", "from", "per-call median", "batch", "p95"],
    )
    rows = [(f"{k} {p}", s) for p, d in r["per_request"].items() for k, s in d.items()]
    rows += [(k, s) for part in ("enc_dec_1kb", "l4") for k, s in r[part].items()]
    rows += [(f"{op} N={n}", x[op]) for n, x in r["recipients"].items() for op in ("seal", "open")]
    for name, s in rows:
        t.add_row(
            name, _f(s["median_ms"]), s["source"], _f(s["per_call_median_ms"]), _f(s["batch_ms"]), _f(s["p95_ms"])
        )
    console.print(t)
    b = r["batch_check"]
    console.print(
        f"  batch vs per-call median: {b['agree']}/{b['checked']} resolvable rows within "
        f"{b['bounds'][0]}-{b['bounds'][1]}; Python opened the page's envelope: {r['format_check']}"
    )


def print_network(console: Console, r: dict) -> None:
    """End-to-end p50 per level and round trip, with the share of client encryption."""
    t = _table(
        "network: end-to-end through a delay proxy, ms",
        ["config", "RTT measured", "p50", "p95", "client crypto", "encryption share"],
    )
    for c in r["configs"]:
        t.add_row(
            c["name"],
            _f(c["rtt_measured_ms"]),
            _f(c["e2e"]["median_ms"]),
            _f(c["e2e"]["p95_ms"]),
            _f(c["split_mean_ms"]["client_crypto_ms"]),
            f"{100 * c['crypto_share']:.2f} %",
        )
    console.print(t)


PRINTERS = {
    "primitives": print_primitives,
    "recipients": print_recipients,
    "path": print_path,
    "cross": print_path,
    "context": print_context,
    "peers": print_peers,
    "relay": print_relay,
    "browser": print_browser,
    "network": print_network,
}


def print_suite(console: Console, suite, result: dict) -> None:
    """Print ``result`` of ``suite`` (a :class:`bench.suites.Suite`): its printer here, else the
    module's own ``print_result(console, result)`` when it has one."""
    printer = PRINTERS.get(suite.name) or suite.hook("print_result")
    if printer is not None:
        printer(console, result)
