"""REPORT.md: the machine, and the article's sections 01-04 (the four levels, per-message,
one-time and encrypt/decrypt costs), with Node's and Chromium's columns beside ours."""

from __future__ import annotations

import datetime

from .. import article
from .fmt import View, config, m, ms, prose, ratio, section, table

LEVELS = {
    1: ("transport only (TLS or loopback ws), plain JSON", "yes"),
    2: ("L1 + a JWT checked once per websocket", "yes"),
    3: (
        "L2 + AES-256-GCM under a per-connection session key (RSA-OAEP handshake)",
        "yes: decrypts, stores, re-encrypts per recipient",
    ),
    4: ("L2 + per-message AES-256-GCM key wrapped with RSA-OAEP per recipient, Ed25519-signed", "never"),
}


def machine(v: View) -> str:
    """The machine facts of the run (and the browser's, when it ran)."""
    f = v.results.get("machine", {})
    libs = ", ".join(f"{k} {x}" for k, x in (f.get("libraries") or {}).items() if x)
    when = datetime.datetime.fromtimestamp(f.get("started_at", 0), datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = f.get("loadavg")
    b = v.browser if v.browser and "skipped" not in v.browser else None
    rows = [
        ["run started", when],
        ["mode", "quick (smoke sizes)" if v.results.get("quick") else "full"],
        ["CPU", f"{f.get('cpu')} ({f.get('cores')} cores)"],
        ["code measured", f"commit {f['commit']}" if f.get("commit") else "-"],
        ["load average at start", ", ".join(f"{x:.2f}" for x in load) if load else "-"],
        ["load average at the end", ", ".join(f"{x:.2f}" for x in f["loadavg_end"]) if f.get("loadavg_end") else "-"],
        ["platform", f.get("platform", "-")],
        ["Python", f"{f.get('python')} ({f.get('python_impl')})"],
        ["OpenSSL (cryptography)", f.get("openssl", "-")],
        ["Node.js", f.get("node") or "not found"],
        [
            "browser",
            f"{b['version']} via {b['driver']}; user agent `{b['user_agent']}`"
            if b
            else (v.browser or {}).get("skipped", "not run"),
        ],
        ["libraries", libs],
    ]
    return section("The machine", table(["fact", "value"], rows))


def levels(v: View) -> str | None:
    """§01: what protects a message at each level, and what it costs here."""
    if not v.primitives:
        return None
    rows = []
    for level, (what, reads) in LEVELS.items():
        c, ct = config(v.path, level, False), config(v.path, level, True)
        rows.append(
            [
                f"L{level}",
                what,
                reads,
                ms(m(v.primitives, "per_request", "1 KB", f"L{level}")),
                ms(m(c, "e2e")) if c else "-",
                ms(m(ct, "e2e")) if ct else "-",
            ]
        )
    return section(
        "01 The four levels side by side",
        table(
            [
                "level",
                "what protects a message",
                "relay reads it?",
                "crypto+JSON per 1 KB message, ms",
                "end-to-end p50, ms",
                "end-to-end p50 with TLS, ms",
            ],
            rows,
        ),
    )


PER_REQUEST_ROWS = (
    ("L1", "L1 JSON only", "L1"),
    ("L2", "L2 + JWT verify (plain PyJWT decode)", "L2"),
    ("L2_rest", "L2, REST with Tokens.verify (repeat token)", None),
    ("L3", "L3 seal + open (one hop)", "L3_node"),
    ("L4", "L4 seal (2 recipients) + open", "L4"),
)


def per_request(v: View) -> str | None:
    """§02: per-message cost by payload: Python, Node (node:crypto and crypto.subtle), Chromium."""
    prim, node, web = v.primitives, v.node, v.chromium
    if not prim:
        return None
    rows = []
    for p in article.PAYLOADS:
        q = article.PER_REQUEST[p]
        for lv, label, nk in PER_REQUEST_ROWS:
            ours = m(prim, "per_request", p, lv)
            nv = m(node, "per_request", p, nk) if nk else None
            subtle = m(node, "per_request", p, "L3_webcrypto") if lv == "L3" else None
            chromium = m(web, "per_request", p, lv) if lv in ("L3", "L4") else None
            qv = q.get({"L1": "L1", "L2": "L2", "L3": "L3_node"}.get(lv, ""))
            qweb = q["L3_webcrypto"] if lv == "L3" else None
            rows.append(
                [
                    f"{p}: {label}",
                    ms(ours),
                    ms(nv),
                    ms(subtle),
                    ms(chromium),
                    ms(qv),
                    ms(qweb),
                    ratio(ours, nv),
                    ratio(chromium, qweb),
                ]
            )
    head = [
        "payload: row",
        "ours (Python) ms",
        "Node node:crypto ms",
        "Node crypto.subtle ms",
        "Chromium WebCrypto ms",
        "article (quoted) Node ms",
        "article (quoted) WebCrypto ms",
        "ours / Node",
        "Chromium / article WebCrypto",
    ]
    return section(
        "02 Per-message cost",
        prose("per_request", n=prim["params"]["n"], bits=prim["params"]["bits"]),
        table(head, rows) + v.img("cost_per_level.png", "cost per level by payload"),
    )


def one_time(v: View) -> str | None:
    """§03: JWT signing, L3 handshakes and key generation."""
    prim, node = v.primitives, v.node
    if not prim:
        return None
    jw = prim["jwt"]["rows"]
    q_sign, q_hs = article.ONE_TIME["jwt_sign"], article.ONE_TIME["rsa_handshake"]
    rows = [
        [
            "JWT sign, HS256 (login)",
            ms(m(jw, "jwt_sign_hs256")),
            ms(jw["jwt_sign_hs256"]["p95_ms"]),
            ms(m(node, "one_time", "jwt_sign_hs256")),
            f"{q_sign[0]} (p95 {q_sign[1]})",
            ratio(m(jw, "jwt_sign_hs256"), m(node, "one_time", "jwt_sign_hs256")),
        ],
        ["JWT sign, EdDSA", ms(m(jw, "jwt_sign_eddsa")), ms(jw["jwt_sign_eddsa"]["p95_ms"]), "-", "-", "-"],
    ]
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
                ms(m(node, "one_time", k)),
                q,
                ratio(s["median_ms"], m(node, "one_time", k)),
            ]
        )
    return section(
        "03 One-time costs",
        table(
            ["operation", "ours median ms", "ours p95 ms", "Node here ms", "article (quoted) ms", "ours / Node"], rows
        ),
    )


def enc_dec(v: View) -> str | None:
    """§04: encrypt-only and decrypt-only at 1 KB, four runtimes side by side."""
    prim, node, web = v.primitives, v.node, v.chromium
    if not prim:
        return None
    e, q = prim["enc_dec_1kb"], article.ENC_DEC_1KB
    ops = (  # label, ours, node:crypto, Node crypto.subtle, Chromium, article Node, article WebCrypto
        (
            "AES-256-GCM encrypt",
            "aes_gcm_encrypt",
            ("enc_dec_1kb", "node_encrypt"),
            "webcrypto_encrypt",
            "aes_gcm_encrypt",
            q["node_encrypt"],
            q["webcrypto_encrypt"],
        ),
        (
            "AES-256-GCM decrypt",
            "aes_gcm_decrypt",
            ("enc_dec_1kb", "node_decrypt"),
            "webcrypto_decrypt",
            "aes_gcm_decrypt",
            q["node_decrypt"],
            None,
        ),
        (
            "AES-256-GCM encrypt + decrypt",
            "aes_gcm_encrypt_decrypt",
            None,
            "webcrypto_encrypt_decrypt",
            "aes_gcm_encrypt_decrypt",
            None,
            q["webcrypto_encrypt_decrypt"],
        ),
        ("L3 seal (compact JWE, header as AAD)", "l3_seal", None, None, "l3_seal", None, None),
        ("L3 open", "l3_open", None, None, "l3_open", None, None),
        ("L4 seal (2 recipients)", "l4_seal", ("l4", "l4_seal"), None, "l4_seal", None, None),
        ("L4 open", "l4_open", ("l4", "l4_open"), None, "l4_open", None, None),
    )
    rows = []
    for label, ours, nk, sk, ck, qn, qw in ops:
        o, nv = m(e, ours), (m(node, *nk) if nk else None)
        rows.append(
            [
                label,
                ms(o),
                ms(nv),
                ms(m(node, "enc_dec_1kb", sk) if sk else None),
                ms(m(web, "enc_dec_1kb", ck)),
                ms(qn),
                ms(qw),
                ratio(o, nv),
            ]
        )
    return section(
        "04 Encrypt-only and decrypt-only at 1 KB",
        table(
            [
                "operation (1 KB)",
                "ours ms",
                "Node node:crypto ms",
                "Node crypto.subtle ms",
                "Chromium WebCrypto ms",
                "article (quoted) Node ms",
                "article (quoted) WebCrypto ms",
                "ours / Node",
            ],
            rows,
        ),
    )


def l4_parts(v: View) -> str | None:
    """L4 seal and open next to their primitives (the seal and open targets' floors)."""
    if not v.primitives:
        return None
    l4 = v.primitives["l4"]
    p = l4["params"]
    rows = [[k, ms(s["median_ms"]), ms(s["p95_ms"]), ms(s["p99_ms"])] for k, s in l4["rows"].items()]
    r = l4["rows"]
    text = prose(
        "l4_parts",
        seal=l4["ratios"]["seal_over_floor"],
        open=l4["ratios"]["open_over_floor"],
        pss_sign=ms(m(r, "rsa_pss_sign")),
        ed_sign=ms(m(r, "ed25519_sign")),
        pss_verify=ms(m(r, "rsa_pss_verify")),
        ed_verify=ms(m(r, "ed25519_verify")),
    )
    return "\n\n".join(
        [
            f"### L4 next to its primitives (RSA-{p['bits']}, {p['size']} B, {p['recipients']} "
            f"recipients, envelope {p['envelope_bytes']:,} bytes)",
            table(["operation", "median ms", "p95 ms", "p99 ms"], rows),
            text,
        ]
    )
