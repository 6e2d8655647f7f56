"""``report``: REPORT.md shaped like the seed article (its sections 02-08 with this machine's
numbers and its decision table answered from them) plus PNG charts, from one run's results.

Figures from the article appear only in columns headed "article (quoted)"; everything else is
taken from ``results`` (the JSON that ``e2ee-bench report --json`` writes).
"""

from __future__ import annotations

import datetime
import math
import re
from pathlib import Path

from . import article
from .timing import result_at

CHARTS = {
    "levels": "cost_per_level.png",
    "recipients": "recipients.png",
    "latency": "latency.png",
    "split": "path_split.png",
}


# -- formatting ----------------------------------------------------------------------------------------
def ms(x: float | None) -> str:
    """A time in ms with sensible precision ("-" for missing)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as "1.23x" ("-" when either is missing)."""
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.2f}x" if r < 100 else f"{r:,.0f}x"


_m = result_at


_NUMERIC = re.compile(r"^[-~]?[\d.,]+( ?(x|%|ms|\(.*\)))?$|^-$|^[\d.,]+ / [\d.,-]+$")


def _table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; columns whose cells are all numbers are right-aligned."""
    align = []
    for i in range(len(head)):
        cells = [str(r[i]) for r in rows if i < len(r)]
        numeric = i > 0 and cells and all(_NUMERIC.match(c) for c in cells)
        align.append("---:" if numeric else "---")
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _config(path: dict | None, level: int, tls: bool, topology: str = "SQLite 1 relay") -> dict | None:
    for c in (path or {}).get("configs", []):
        if c["level"] == level and c["tls"] == tls and c["topology"] == topology:
            return c
    return None


# -- charts --------------------------------------------------------------------------------------------
def charts(results: dict, out: Path) -> list[Path]:
    """Write the PNG charts that the results allow; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    prim, peers, rec, path = (results.get(k) for k in ("primitives", "peers", "recipients", "path"))
    node = peers if peers and "skipped" not in peers else None
    if prim:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        payloads = list(article.PAYLOADS)
        series = [
            ("L1 JSON", "L1", None),
            ("L2 + JWT decode", "L2", None),
            ("L2 REST (cached verify)", "L2_rest", None),
            ("L3 AES-GCM hop", "L3", None),
            ("L4 seal + open", "L4", None),
        ]
        if node:
            series += [("Node L3 (node:crypto)", None, "L3_node"), ("Node L3 (WebCrypto)", None, "L3_webcrypto")]
        width = 0.8 / len(series)
        for i, (label, ours, nk) in enumerate(series):
            vals = [
                (_m(prim, "per_request", p, ours) if ours else _m(node, "per_request", p, nk)) or 0 for p in payloads
            ]
            ax.bar([j + i * width for j in range(len(payloads))], vals, width, label=label, hatch="//" if nk else None)
        ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(payloads))], payloads)
        ax.set_yscale("log")
        ax.set_ylabel("median ms per message (log)")
        ax.set_title("Cost per level by payload (this machine, one run)")
        ax.legend(fontsize=8, ncol=2)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        written.append(out / CHARTS["levels"])
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    if rec:
        fig, ax = plt.subplots(figsize=(9, 5))
        some = None
        for bits, per in rec["sizes"].items():
            ns = [int(n) for n in per["rows"]]
            ax.plot(
                ns,
                [r["rsa_seal"]["median_ms"] for r in per["rows"].values()],
                marker="o",
                label=f"RSA-OAEP wrap per message, RSA-{bits} (product)",
            )
            ax.plot(
                ns,
                [r["group_rotate"]["median_ms"] for r in per["rows"].values()],
                linestyle=":",
                label=f"conversation key: rotation (N wraps), RSA-{bits}",
            )
            some = per
        if some:
            ns = [int(n) for n in some["rows"]]
            ax.plot(
                ns,
                [r["x25519_seal"]["median_ms"] for r in some["rows"].values()],
                marker="s",
                label="X25519 + HKDF wrap per message",
            )
            ax.plot(
                ns,
                [r["group_seal"]["median_ms"] for r in some["rows"].values()],
                marker="^",
                label="conversation key: per message",
            )
        ax.axhline(1000 / 60, color="grey", linestyle="--", linewidth=0.8)
        ax.text(1, 1000 / 60 * 1.1, "one 60 Hz frame", fontsize=8, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("recipients")
        ax.set_ylabel("sender cost, median ms (log)")
        ax.set_title("Wrap cost against recipients, by strategy")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(out / CHARTS["recipients"])
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    configs = (path or {}).get("configs", [])
    if configs:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        data = [c["samples_ms"] for c in configs]
        ax.boxplot(data, whis=(1, 99), showfliers=False)
        ax.set_xticks(range(1, len(configs) + 1), [c["name"] for c in configs], rotation=20)
        ax.set_ylabel("send -> decrypted text, ms")
        ax.set_title("End-to-end latency per level through a real relay (box: p25-p75, whiskers: p1-p99)")
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        written.append(out / CHARTS["latency"])
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(9, 4.8))
        parts = ["client_crypto_ms", "serialization_ms", "relay_handling_ms", "db_commit_ms", "network_rest_ms"]
        bottom = [0.0] * len(configs)
        for part in parts:
            vals = [c["split_mean_ms"][part] for c in configs]
            ax.bar([c["name"] for c in configs], vals, bottom=bottom, label=part.replace("_ms", "").replace("_", " "))
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_ylabel("mean ms per message")
        ax.set_title("Where a message's time goes (means per message)")
        ax.legend(fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=20)
        fig.tight_layout()
        written.append(out / CHARTS["split"])
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written


# -- sections ------------------------------------------------------------------------------------------
def _machine(results: dict) -> str:
    f = results.get("machine", {})
    libs = ", ".join(f"{k} {v}" for k, v in (f.get("libraries") or {}).items() if v)
    when = datetime.datetime.fromtimestamp(f.get("started_at", 0), datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = f.get("loadavg")
    return _table(
        ["fact", "value"],
        [
            ["run started", when],
            ["mode", "quick (smoke sizes)" if results.get("quick") else "full"],
            ["CPU", f"{f.get('cpu')} ({f.get('cores')} cores)"],
            ["load average at start", ", ".join(f"{x:.2f}" for x in load) if load else "-"],
            ["platform", f.get("platform", "-")],
            ["Python", f"{f.get('python')} ({f.get('python_impl')})"],
            ["OpenSSL (cryptography)", f.get("openssl", "-")],
            ["Node.js", f.get("node") or "not found"],
            ["libraries", libs],
        ],
    )


def _levels(prim, path) -> str:
    rows = []
    desc = {
        1: ("transport only (TLS or loopback ws), plain JSON", "yes"),
        2: ("L1 + a JWT checked once per websocket", "yes"),
        3: (
            "L2 + AES-256-GCM under a per-connection session key (RSA-OAEP handshake)",
            "yes: decrypts, stores, re-encrypts per recipient",
        ),
        4: ("L2 + per-message AES-256-GCM key wrapped with RSA-OAEP per recipient, Ed25519-signed", "never"),
    }
    for level in (1, 2, 3, 4):
        c, ct = _config(path, level, False), _config(path, level, True)
        rows.append(
            [
                f"L{level}",
                desc[level][0],
                desc[level][1],
                ms(_m(prim, "per_request", "1 KB", f"L{level}")),
                ms(_m(c, "e2e")) if c else "-",
                ms(_m(ct, "e2e")) if ct else "-",
            ]
        )
    return _table(
        [
            "level",
            "what protects a message",
            "relay reads it?",
            "crypto+JSON per 1 KB message, ms",
            "end-to-end p50, ms",
            "end-to-end p50 with TLS, ms",
        ],
        rows,
    )


def _per_request(prim, node) -> str:
    rows = []
    quoted = {"L1": "L1", "L2": "L2", "L3": "L3_node"}
    for p in article.PAYLOADS:
        q = article.PER_REQUEST[p]
        for lv, label in (
            ("L1", "L1 JSON only"),
            ("L2", "L2 + JWT verify (plain PyJWT decode)"),
            ("L2_rest", "L2, REST with Tokens.verify (repeat token)"),
            ("L3", "L3 seal + open (one hop)"),
            ("L4", "L4 seal (2 recipients) + open"),
        ):
            ours = _m(prim, "per_request", p, lv)
            nk = {"L1": "L1", "L2": "L2", "L3": "L3_node", "L4": "L4"}.get(lv)
            nv = _m(node, "per_request", p, nk) if nk else None
            web = _m(node, "per_request", p, "L3_webcrypto") if lv == "L3" else None
            qv = q.get(quoted[lv]) if lv in quoted else None
            qweb = q["L3_webcrypto"] if lv == "L3" else None
            rows.append(
                [
                    f"{p}: {label}",
                    ms(ours),
                    ms(nv),
                    ms(web),
                    ms(qv) if qv else "-",
                    ms(qweb) if qweb else "-",
                    ratio(ours, nv),
                    ratio(ours, qv),
                ]
            )
    return _table(
        [
            "payload: row",
            "ours (Python) ms",
            "Node here ms",
            "WebCrypto here ms",
            "article (quoted) Node ms",
            "article (quoted) WebCrypto ms",
            "ours / Node",
            "ours / article",
        ],
        rows,
    )


def _one_time(prim, node) -> str:
    rows = []
    jw = prim["jwt"]["rows"]
    q_sign, q_hs = article.ONE_TIME["jwt_sign"], article.ONE_TIME["rsa_handshake"]
    rows.append(
        [
            "JWT sign, HS256 (login)",
            ms(_m(jw, "jwt_sign_hs256")),
            ms(jw["jwt_sign_hs256"]["p95_ms"]),
            ms(_m(node, "one_time", "jwt_sign_hs256")),
            f"{q_sign[0]} (p95 {q_sign[1]})",
            ratio(_m(jw, "jwt_sign_hs256"), _m(node, "one_time", "jwt_sign_hs256")),
        ]
    )
    rows.append(["JWT sign, EdDSA", ms(_m(jw, "jwt_sign_eddsa")), ms(jw["jwt_sign_eddsa"]["p95_ms"]), "-", "-", "-"])
    for k, s in prim["one_time"].items():
        bits = k.rsplit("_", 1)[1]
        label = (
            f"L3 session handshake, RSA-{bits} relay key (client + relay)"
            if k.startswith("l3_")
            else f"key generation, RSA-{bits} + Ed25519 (once per account)"
        )
        q = f"{q_hs[0]} (p95 {q_hs[1]}; key size not stated)" if k == "l3_handshake_2048" else "-"
        rows.append(
            [
                label,
                ms(s["median_ms"]),
                ms(s["p95_ms"]),
                ms(_m(node, "one_time", k)),
                q,
                ratio(s["median_ms"], _m(node, "one_time", k)),
            ]
        )
    return _table(
        ["operation", "ours median ms", "ours p95 ms", "Node here ms", "article (quoted) ms", "ours / Node"], rows
    )


def _enc_dec(prim, node) -> str:
    e, ne, q = prim["enc_dec_1kb"], (node or {}).get("enc_dec_1kb", {}), article.ENC_DEC_1KB
    rows = [
        [
            "AES-256-GCM encrypt",
            ms(_m(e, "aes_gcm_encrypt")),
            ms(_m(ne, "node_encrypt")),
            ms(_m(ne, "webcrypto_encrypt")),
            f"{q['node_encrypt']} / {q['webcrypto_encrypt']}",
            ratio(_m(e, "aes_gcm_encrypt"), _m(ne, "node_encrypt")),
        ],
        [
            "AES-256-GCM decrypt",
            ms(_m(e, "aes_gcm_decrypt")),
            ms(_m(ne, "node_decrypt")),
            ms(_m(ne, "webcrypto_decrypt")),
            f"{q['node_decrypt']} / -",
            ratio(_m(e, "aes_gcm_decrypt"), _m(ne, "node_decrypt")),
        ],
        [
            "AES-256-GCM encrypt + decrypt",
            ms(_m(e, "aes_gcm_encrypt_decrypt")),
            "-",
            ms(_m(ne, "webcrypto_encrypt_decrypt")),
            f"- / {q['webcrypto_encrypt_decrypt']}",
            "-",
        ],
        ["L3 seal (compact JWE, header as AAD)", ms(_m(e, "l3_seal")), "-", "-", "-", "-"],
        ["L3 open", ms(_m(e, "l3_open")), "-", "-", "-", "-"],
        [
            "L4 seal (2 recipients)",
            ms(_m(e, "l4_seal")),
            ms(_m(node, "l4", "l4_seal")),
            "-",
            "-",
            ratio(_m(e, "l4_seal"), _m(node, "l4", "l4_seal")),
        ],
        [
            "L4 open",
            ms(_m(e, "l4_open")),
            ms(_m(node, "l4", "l4_open")),
            "-",
            "-",
            ratio(_m(e, "l4_open"), _m(node, "l4", "l4_open")),
        ],
    ]
    return _table(
        [
            "operation (1 KB)",
            "ours ms",
            "Node here ms",
            "WebCrypto here ms",
            "article (quoted) Node / WebCrypto ms",
            "ours / Node",
        ],
        rows,
    )


def _context(ctx, prim, path) -> str:
    r = ctx["rows"]
    l4 = _config(path, 4, False)
    measured = [
        [
            "L3 encryption, both sides (seal + open, 1 KB)",
            ms(_m(prim, "per_request", "1 KB", "L3")),
            article.fmt_range(article.CONTEXT["encryption_l3_both_sides"]),
        ],
        [
            "JWT verify (plain PyJWT decode)",
            ms(_m(prim, "jwt", "rows", "pyjwt_decode_hs256")),
            article.fmt_range(article.CONTEXT["jwt_verify"]),
        ],
        ["loopback websocket ping (127.0.0.1)", ms(_m(r, "loopback_ws_ping")), "-"],
        ["loopback websocket echo of 1 KB", ms(_m(r, "loopback_ws_echo_1kb")), "-"],
        [
            "network round trip, same city, fiber",
            "not measured here",
            article.fmt_range(article.CONTEXT["rtt_same_city_fiber"]),
        ],
        ["network round trip, 4G", "not measured here", article.fmt_range(article.CONTEXT["rtt_mobile_4g"])],
        ["network round trip, 3G", "not measured here", article.fmt_range(article.CONTEXT["rtt_mobile_3g"])],
        [
            f"indexed query: a 50-message page, SQLite ({ctx['params']['rows']:,} rows)",
            ms(_m(r, "sqlite_indexed")),
            article.fmt_range(article.CONTEXT["db_query_indexed"]),
        ],
        ["indexed query, PostgreSQL", ms(_m(r, "pg_indexed")), article.fmt_range(article.CONTEXT["db_query_indexed"])],
        [
            "unindexed query: look-up by message id, SQLite",
            ms(_m(r, "sqlite_unindexed")),
            article.fmt_range(article.CONTEXT["db_query_unindexed"]),
        ],
        [
            "unindexed query, PostgreSQL",
            ms(_m(r, "pg_unindexed")),
            article.fmt_range(article.CONTEXT["db_query_unindexed"]),
        ],
        [
            "render 50 items to JSON (stdlib json)",
            ms(_m(r, "render_50_json_stdlib")),
            f"{article.fmt_range(article.CONTEXT['render_50_items'])} (React/Angular render)",
        ],
        ["render 50 items to JSON (msgspec)", ms(_m(r, "render_50_json_msgspec")), "-"],
    ]
    if l4:
        measured.append(
            [
                f"relay's commit per L4 message (SQLite synchronous={path['params'].get('synchronous', '?')}, mean)",
                ms(l4["split_mean_ms"]["db_commit_ms"]),
                "-",
            ]
        )
        measured.append(["L4 message end to end through the relay on loopback, p50", ms(_m(l4, "e2e")), "-"])
    measured.append(
        [
            "first contentful paint, slow network",
            "not measured here",
            article.fmt_range(article.CONTEXT["first_contentful_paint_slow"]),
        ]
    )
    return _table(["step", "measured here, median ms", "article (quoted) ms"], measured)


def _mobile(prim, node) -> str:
    ours = _m(prim, "per_request", "1 KB", "L3")
    web = _m(node, "per_request", "1 KB", "L3_webcrypto")
    rows = []
    for device, (lo, hi) in article.MOBILE.items():

        def span(x, lo=lo, hi=hi):
            return "-" if x is None else (ms(x * lo) if lo == hi else f"{ms(x * lo)}-{ms(x * hi)}")

        rows.append([device, article.fmt_range((lo, hi)), span(ours), span(web)])
    return _table(
        ["device", "article (quoted) multiplier", "x our Python L3 1 KB, ms", "x WebCrypto L3 1 KB here, ms"], rows
    )


def _combined(prim, path) -> tuple[str, str]:
    rows = []
    once = prim["one_time"] if prim else {}
    start = {
        1: "-",
        2: f"{ms(_m(prim, 'jwt', 'rows', 'pyjwt_decode_hs256'))} (one JWT verify per connection)",
        3: f"{ms(_m(once, 'l3_handshake_3072'))} (RSA-3072 handshake per connection)",
        4: f"{ms(_m(once, 'keygen_3072') or _m(once, 'keygen_2048'))} (key generation, once per account)",
    }
    for level in (1, 2, 3, 4):
        c, ct = _config(path, level, False), _config(path, level, True)
        q = article.COMBINED[f"L{level}"]
        rows.append(
            [
                f"L{level}",
                ms(_m(prim, "per_request", "1 KB", f"L{level}")),
                start[level],
                f"{ms(_m(c, 'e2e'))} / {ms(_m(c, 'e2e', 'p95_ms') if c else None)} / "
                f"{ms(c['e2e']['p99_ms']) if c else '-'}",
                ms(_m(ct, "e2e")) if ct else "-",
                f"{c['throughput_msgs_per_s']:.0f}" if c else "-",
                ms(c["relay_cpu_ms_per_msg"]) if c else "-",
                article.fmt_range(q["per_request"]),
                article.fmt_range(q["session"]),
            ]
        )
    table = _table(
        [
            "level",
            "app crypto+JSON per 1 KB message, ms",
            "session start, ms",
            "end-to-end p50 / p95 / p99, ms",
            "p50 with TLS, ms",
            "msg/s (closed loop)",
            "relay CPU ms/msg",
            "article (quoted) per request ms",
            "article (quoted) session start ms",
        ],
        rows,
    )
    split_rows = []
    for c in (path or {}).get("configs", []):
        s = c["split_mean_ms"]
        total = sum(s.values())
        split_rows.append(
            [c["name"], *(f"{ms(v)} ({100 * v / total:.0f} %)" for v in s.values()), ms(c["e2e_mean_ms"])]
        )
    split = (
        _table(
            [
                "config",
                "client crypto",
                "serialization",
                "relay handling",
                "db commit",
                "network + rest",
                "mean end to end",
            ],
            split_rows,
        )
        if split_rows
        else ""
    )
    return table, split


def _recipients(rec) -> str:
    parts = []
    for bits, per in rec["sizes"].items():
        rows = []
        for n, r in per["rows"].items():
            rows.append(
                [
                    n,
                    ms(r["rsa_seal"]["median_ms"]),
                    f"{r['rsa_seal']['median_ms'] / r['rsa_seal_floor_ms']:.2f}",
                    ms(r["rsa_open"]["median_ms"]),
                    ms(r["relay_parse"]["median_ms"]),
                    ms(r["x25519_seal"]["median_ms"]),
                    ms(r["x25519_open"]["median_ms"]),
                    ms(r["group_seal"]["median_ms"]),
                    ms(r["group_open"]["median_ms"]),
                    ms(r["group_rotate"]["median_ms"]),
                    f"{r['rsa_envelope_bytes']:,}",
                ]
            )
        k = per["knees"]
        never = "never (in this sweep)"
        parts.append(
            f"**RSA-{bits}** (one wrap {ms(per['wrap']['median_ms'])} ms, "
            f"one unwrap {ms(per['unwrap']['median_ms'])} ms)\n\n"
            + _table(
                [
                    "N",
                    "RSA seal ms",
                    "seal / floor",
                    "RSA open ms",
                    "relay parse ms",
                    "X25519 seal ms",
                    "X25519 open ms",
                    "conv. key seal ms",
                    "conv. key open ms",
                    "rotation (N wraps) ms",
                    "L4 envelope bytes",
                ],
                rows,
            )
            + f"\n\nPer-recipient RSA wrapping passes 1 ms at N = {k['over_1ms'] or never}, "
            f"one 60 Hz frame (16.7 ms) at N = {k['over_ui_frame'] or never}, and 10x a "
            f"conversation-key message at N = {k['over_10x_group_key'] or never}."
        )
    return "\n\n".join(parts)


def _relay(relay) -> str:
    r, e, p = relay["relay"], relay["echo"], relay["params"]
    rows = []
    for k in ("relay", "relay_fsync"):
        x = relay.get(k)
        if x:
            rows.append([f"relay (L4, SQLite synchronous={x['synchronous']}, ack after commit)",
                         f"{x['throughput_msgs_per_s']:.0f}", ms(x["cpu_ms_per_msg"]), f"{x['wall_s']:.2f}",
                         str(x["messages"]), f"{x['in_database']}/{x['acked']}"])
    rows.append(["bare Starlette websocket echo app (same uvicorn settings)", f"{e['throughput_msgs_per_s']:.0f}",
                 ms(e["cpu_ms_per_msg"]), f"{e['wall_s']:.2f}", str(e["messages"]), "-"])
    table = _table(["server", "messages/s", "server CPU ms per message", "wall s", "messages",
                    "acked messages found in the database"], rows)
    split = r["relay_split_ms_per_msg"]
    return (
        f"{p['clients']} clients in pairs, {p['messages']} messages each, 1 KB text in L4 envelopes "
        f"(RSA-{p['bits']}, sealed before the clock), at most {p['window']} unacknowledged per client.\n\n"
        + table
        + f"\n\nRelay / echo throughput: **{relay['ratio']:.3f}** (target >= 0.5). Acked "
        f"{r['acked']}, found in the relay's database after the run {r['in_database']}; the writer committed "
        f"{r['group_commit_factor']:.1f} messages per transaction. Inside the relay (wall time per message while "
        f"other messages wait too): checks {ms(split['checks_ms'])} ms, waiting for the commit "
        f"{ms(split['commit_ms'])} ms, fan-out {ms(split['fanout_ms'])} ms."
    )


def _decisions(prim, path, ctx, relay, node) -> str:
    l2, l3 = _m(prim, "per_request", "1 KB", "L2"), _m(prim, "per_request", "1 KB", "L3")
    l4 = _m(prim, "per_request", "1 KB", "L4")
    c2, c3, c4 = _config(path, 2, False), _config(path, 3, False), _config(path, 4, False)
    ping = _m(ctx, "rows", "loopback_ws_ping") if ctx else None
    enc = _m(prim, "enc_dec_1kb", "aes_gcm_encrypt")
    rows = []
    if c2 and c3:
        rows.append(
            [
                "Would a user notice L3 next to L2?",
                f"L3's AES hop costs {ms(l3)} ms per 1 KB message here; through the relay the p50 is "
                f"{ms(_m(c3, 'e2e'))} ms at L3 against {ms(_m(c2, 'e2e'))} ms at L2 (run-to-run noise on this "
                f"shared machine is of the same size). A loopback ping alone is {ms(ping)} ms; any real network "
                f"is 10-1000x that.",
            ]
        )
    else:
        rows.append(
            [
                "Would a user notice L3 next to L2?",
                f"L3 adds {ms(l3)} ms per 1 KB message and one RSA handshake per connection; L2's per-request "
                f"JWT decode is {ms(l2)} ms.",
            ]
        )
    cpu = {lv: _config(path, lv, False) for lv in (1, 2, 3, 4)}
    cpu_txt = ", ".join(f"L{lv} {ms(c['relay_cpu_ms_per_msg'])}" for lv, c in cpu.items() if c)
    rows.append(
        [
            "Will the server be slower?",
            f"AES-256-GCM on 1 KB costs {ms(enc)} ms here (~{1000 / enc:,.0f} encryptions/s on one core); the "
            f"relay's CPU per message is {cpu_txt or '-'} ms, so storage and Python framework work, not "
            f"encryption, bound it"
            + (
                f"; under 50 clients it relays {relay['relay']['throughput_msgs_per_s']:.0f} msg/s at "
                f"{ms(relay['relay']['cpu_ms_per_msg'])} ms CPU each."
                if relay
                else "."
            ),
        ]
    )
    rows.append(
        [
            "Should every endpoint get L3?",
            f"Cost says yes ({ms(l3)} ms per message), but L3 still lets the relay read everything: it protects "
            f"the hop, not the user. For messages the answer here is L4.",
        ]
    )
    if c4:
        s = c4["split_mean_ms"]
        big = max(s, key=s.get)
        rows.append(
            [
                "Should we use L4?",
                f"Yes for messaging: seal + open of a 1 KB message to 2 recipients is {ms(l4)} ms here (RSA-"
                f"{prim['params']['bits']}), far below the article's 5-15 ms estimate (quoted); the receiver's "
                f"one RSA unwrap ({ms(_m(prim, 'l4', 'rows', 'rsa_oaep_unwrap'))} ms) is most of it. End to end "
                f"the p50 is {ms(_m(c4, 'e2e'))} ms, of which {big.replace('_ms', '').replace('_', ' ')} is the "
                f"largest part ({ms(s[big])} ms mean).",
            ]
        )
    else:
        rows.append(["Should we use L4?", f"seal + open of a 1 KB message to 2 recipients: {ms(l4)} ms here."])
    risk = (
        "the database commit"
        if c4 and max(c4["split_mean_ms"], key=c4["split_mean_ms"].get) == "db_commit_ms"
        else "the relay's per-message work"
    )
    rows.append(
        [
            "What is the biggest performance risk?",
            f"Not encryption: on this machine it is {risk} (the writer's transaction, "
            f"{ms(c4['split_mean_ms']['db_commit_ms']) if c4 else '-'} ms per message at low load with "
            f"synchronous={(path or {}).get('params', {}).get('synchronous', '?')}) and unindexed queries "
            f"({ms(_m(ctx, 'rows', 'sqlite_unindexed')) if ctx else '-'} ms on SQLite vs "
            f"{ms(_m(ctx, 'rows', 'sqlite_indexed')) if ctx else '-'} ms indexed). With many recipients, "
            f"per-recipient wrapping is the crypto cost that grows (see the recipients section).",
        ]
    )
    return _table(["question", "answer from this run"], rows)


def _targets(targets: list[dict]) -> str:
    rows = []
    for t in targets:
        res = "not measured" if t["met"] is None else ("**met**" if t["met"] else "**not met**")
        rows.append(
            [
                t["text"],
                ms(t["value"]) if t["value"] is not None else "-",
                ms(t["limit"]),
                f"{t['ratio']:.3f}" if t["ratio"] is not None else "-",
                res,
                t["detail"],
            ]
        )
    return _table(["target", "value", "limit", "value / limit", "result", "how"], rows)


def _closing(prim, node, path) -> str:
    rows = []
    q = article.PER_REQUEST
    for p in article.PAYLOADS:
        for lv, qk, nk, label in (
            ("L1", "L1", "L1", "L1"),
            ("L2", "L2", "L2", "L2"),
            ("L3", "L3_node", "L3_node", "L3 Node"),
            ("L3", "L3_webcrypto", "L3_webcrypto", "L3 WebCrypto"),
        ):
            ours, nv, qv = _m(prim, "per_request", p, lv), _m(node, "per_request", p, nk), q[p][qk]
            rows.append([f"§02 {label}, {p}", ms(qv), ms(ours), ms(nv), ratio(ours, qv), ratio(ours, nv)])
    jw = _m(prim, "jwt", "rows", "jwt_sign_hs256")
    rows.append(
        [
            "§03 JWT sign",
            ms(article.ONE_TIME["jwt_sign"][0]),
            ms(jw),
            ms(_m(node, "one_time", "jwt_sign_hs256")),
            ratio(jw, article.ONE_TIME["jwt_sign"][0]),
            ratio(jw, _m(node, "one_time", "jwt_sign_hs256")),
        ]
    )
    hs = _m(prim, "one_time", "l3_handshake_2048")
    rows.append(
        [
            "§03 RSA handshake (RSA-2048 here)",
            ms(article.ONE_TIME["rsa_handshake"][0]),
            ms(hs),
            ms(_m(node, "one_time", "l3_handshake_2048")),
            ratio(hs, article.ONE_TIME["rsa_handshake"][0]),
            ratio(hs, _m(node, "one_time", "l3_handshake_2048")),
        ]
    )
    e = prim["enc_dec_1kb"]
    for label, ours, qk, nk in (
        ("§04 encrypt", "aes_gcm_encrypt", "node_encrypt", "node_encrypt"),
        ("§04 decrypt", "aes_gcm_decrypt", "node_decrypt", "node_decrypt"),
        ("§04 WebCrypto encrypt", "aes_gcm_encrypt", "webcrypto_encrypt", "webcrypto_encrypt"),
        (
            "§04 WebCrypto encrypt + decrypt",
            "aes_gcm_encrypt_decrypt",
            "webcrypto_encrypt_decrypt",
            "webcrypto_encrypt_decrypt",
        ),
    ):
        o, nv, qv = _m(e, ours), _m(node, "enc_dec_1kb", nk), article.ENC_DEC_1KB[qk]
        rows.append([label + " 1 KB", ms(qv), ms(o), ms(nv), ratio(o, qv), ratio(o, nv)])
    l4 = _m(prim, "per_request", "1 KB", "L4")
    rows.append(
        [
            "§07 L4 per message (article: RSA per message)",
            "5-15",
            ms(l4),
            ms(_m(node, "per_request", "1 KB", "L4")),
            ratio(l4, 5.0) + " of the low end",
            ratio(l4, _m(node, "per_request", "1 KB", "L4")),
        ]
    )
    text = _table(
        ["article row", "article (quoted) ms", "ours ms", "Node here ms", "ours / article", "ours / Node"], rows
    )
    c4 = _config(path, 4, False)
    if c4:
        s = c4["split_mean_ms"]
        total = sum(s.values())
        big = max(s, key=s.get)
        text += (
            f"\n\n**Largest cost on the L4 path:** {big.replace('_ms', '').replace('_', ' ')}, "
            f"{ms(s[big])} ms of a {ms(total)} ms mean message ({100 * s[big] / total:.0f} %)."
        )
        if big != "client_crypto_ms":
            text += (f" Client crypto (seal + open, mostly the receiver's RSA unwrap) is "
                     f"{ms(s['client_crypto_ms'])} ms ({100 * s['client_crypto_ms'] / total:.0f} %).")
        else:
            text += " Client crypto is seal + open, mostly the receiver's one RSA-OAEP unwrap."
    return text


def markdown(results: dict, chart_files: list[Path]) -> str:
    """The REPORT.md text for ``results`` (charts referenced by file name)."""
    prim, rec, path, ctx, peers, relay = (
        results.get(k) for k in ("primitives", "recipients", "path", "context", "peers", "relay")
    )
    node = peers if peers and "skipped" not in peers else None
    names = {p.name for p in chart_files}

    def img(key: str, alt: str) -> str:
        return f"\n\n![{alt}]({CHARTS[key]})" if CHARTS[key] in names else ""

    out = [
        "# What encryption costs in e2ee-chat — measured",
        "",
        "Written by `e2ee-bench report` from one run on this machine. Every figure below was measured in that "
        f"run, through the project's own code, except the columns headed **article (quoted)**: those are "
        f"quoted from {article.SOURCE}, for comparison. Medians unless a column says otherwise; the machine is "
        "shared and has 2 cores, so p95/p99 carry other tenants' noise and two runs differ by 10-30 %. "
        "Node.js figures are from `bench/peers.mjs`, run by the same command on the same machine.",
        "",
        "Reproduce: `.venv/bin/e2ee-bench report` (several minutes; `--quick` for a smoke run; `--json FILE` "
        "keeps the raw results; `e2ee-bench report --from FILE` rewrites this page from them).",
        "",
        "## The machine",
        "",
        _machine(results),
        "",
    ]
    if prim:
        out += [
            "## 01 The four levels side by side",
            "",
            _levels(prim, path),
            "",
            "## 02 Per-message cost",
            "",
            f"{prim['params']['n']} iterations per row. L1 = the plain envelope encoded and parsed; L2 adds a "
            'plain PyJWT HS256 decode with the relay\'s claim checks (what a per-request API pays); "L2, REST" '
            "is `server.auth.Tokens.verify` of a token it has seen (the relay's REST path); L3 = `l3.seal` at the "
            "sender + `l3.open` at the relay; L4 = `envelope.seal` to 2 recipients + `envelope.open` at one "
            f"(RSA-{prim['params']['bits']}). Node runs the same work (same payloads, same JOSE encodings).",
            "",
            _per_request(prim, node) + img("levels", "cost per level by payload"),
            "",
            "## 03 One-time costs",
            "",
            _one_time(prim, node),
            "",
            "## 04 Encrypt-only and decrypt-only at 1 KB",
            "",
            _enc_dec(prim, node),
            "",
        ]
        l4 = prim["l4"]
        rows = [[k, ms(v["median_ms"]), ms(v["p95_ms"]), ms(v["p99_ms"])] for k, v in l4["rows"].items()]
        out += [
            f"### L4 next to its primitives (RSA-{l4['params']['bits']}, {l4['params']['size']} B, "
            f"{l4['params']['recipients']} recipients, envelope {l4['params']['envelope_bytes']:,} bytes)",
            "",
            _table(["operation", "median ms", "p95 ms", "p99 ms"], rows),
            "",
            f"seal / (N x wrap + encrypt + sign) = **{l4['ratios']['seal_over_floor']:.3f}**; "
            f"open / (unwrap + decrypt + verify) = **{l4['ratios']['open_over_floor']:.3f}** (each side "
            f"and its floor, the same primitives on the same inputs, timed in turns: rows l4_*_floor). Signing with "
            f"RSA-PSS instead of Ed25519 would cost {ms(_m(l4, 'rows', 'rsa_pss_sign'))} ms at the sender "
            f"(vs {ms(_m(l4, 'rows', 'ed25519_sign'))}) and {ms(_m(l4, 'rows', 'rsa_pss_verify'))} ms at the "
            f"receiver (vs {ms(_m(l4, 'rows', 'ed25519_verify'))}).",
            "",
        ]
    if ctx:
        out += ["## 05 What else costs time", "", _context(ctx, prim or {}, path), ""]
        out += [f"- skipped: {s}" for s in ctx.get("skipped", [])]
    if prim:
        out += [
            "## 06 Slower devices",
            "",
            "The article's device multipliers (quoted) applied to this run's L3 cost — an extrapolation, "
            "labelled as such, not a measurement on those devices.",
            "",
            _mobile(prim, node),
            "",
        ]
    if path:
        table, split = _combined(prim or {}, path)
        p = path["params"]
        out += [
            "## 07 The whole path, per message",
            "",
            f"A real relay process per row (uvicorn, SQLite synchronous={p.get('synchronous', '?')}: the relay's "
            f"defaults), {p['clients']} "
            f"clients in pairs, {p['messages']} messages of {p['size']} B per pair sent one after another, all "
            f"pairs at once; latency from before sealing to the decrypted text (one clock). L4 uses "
            f"RSA-{p['bits']}; its crypto floor (seal floor + open floor) is {ms(path['crypto_floor_ms'])} ms.",
            "",
            table,
            "",
            "Where the time goes (means per message; relay handling and commit from the relay's "
            "`/v1/metrics` counters; at L3 the relay's own decryption is not in its counters and lands in "
            '"network + rest"):',
            "",
            split + img("latency", "latency per level") + img("split", "split"),
            "",
        ]
        out += [f"- skipped: {s}" for s in path.get("skipped", [])]
        cross = results.get("cross") or (path if "cross_relay_added_p50_ms" in path else None)
        if cross and "cross_relay_added_p50_ms" in cross:
            p50 = {c["topology"]: c["e2e"]["median_ms"] for c in cross.get("configs", [])}
            both = ", ".join(f"{name} {ms(v)} ms" for name, v in p50.items())
            out += [
                "",
                f"**Two relays** (PostgreSQL + Redis fan-out, `e2ee-bench path --relays 2`): the cross-relay hop "
                f"adds {ms(cross['cross_relay_added_p50_ms'])} ms at p50 over both users on one relay with the "
                f"same database (L4 end-to-end p50: {both}).",
                "",
            ]
        elif cross:
            out += [f"- two relays skipped: {s}" for s in cross.get("skipped", [])]
    if rec:
        out += [
            "## Beyond the article: cost against the number of recipients",
            "",
            "Sender cost (seal) and receiver cost (open) per strategy: the product's per-message RSA-OAEP wrap, "
            "an X25519 + HKDF wrap, and one conversation key wrapped per member only when membership changes "
            '(its per-message cost is then independent of N; "rotation" is what each membership change costs). '
            "Recipients past the distinct keys of the pool reuse keys under distinct ids (the RSA cost depends "
            "only on the modulus size).",
            "",
            _recipients(rec) + img("recipients", "wrap cost vs recipients"),
            "",
        ]
    if relay:
        out += ["## Beyond the article: the relay under load", "", _relay(relay), ""]
    out += [
        "## 08 The article's decision table, answered from this run",
        "",
        _decisions(prim or {}, path, ctx, relay, node),
        "",
        "## Targets",
        "",
        _targets(results.get("targets", [])),
        "",
    ]
    if prim:
        out += ["## Closing note: every article row", "", _closing(prim, node, path), ""]
    out += [
        "## How it was measured",
        "",
        "- `time.perf_counter_ns` around each call; warm-up calls first; the garbage collector paused during the "
        "timed loop of the micro-benchmarks; nearest-rank percentiles.",
        "- Micro-benchmarks call `shared.plain`, `shared.l3`, `shared.envelope`, `server.auth.Tokens` — the "
        "functions the relay and clients run — and the bare `cryptography` primitives with the same parameters.",
        "- The path and relay suites start real `python -m server` processes on 127.0.0.1 and talk to them over "
        "websockets (per-message deflate off) with `bench/wsclient.py`, which makes the same calls as the "
        "product's clients plus timers. Relay and echo-app CPU is each process's own "
        "`time.process_time()` (all threads, ns resolution), read over HTTP before and after a run.",
        "- Rate limits are lifted and argon2 is made cheap for the bench's many registrations; everything on the "
        "message path runs with the relay's defaults.",
        "",
    ]
    return "\n".join(out)


def write(results: dict, out: Path) -> list[Path]:
    """Write REPORT.md and the charts into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    files = charts(results, out)
    (out / "REPORT.md").write_text(markdown(results, files))
    return [out / "REPORT.md", *files]
