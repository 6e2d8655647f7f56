"""REPORT.md: WebCrypto in a real browser (headless Chromium) next to Node's crypto.subtle and
Python, with the page's facts and how its timing was checked."""

from __future__ import annotations

from .fmt import View, m, ms, prose, ratio, section, table


def _facts(b: dict) -> str:
    bc = b["batch_check"]
    worst = bc["worst"]
    fc = b["format_check"]
    rows = [
        ["browser", f"{b['version']} ({b['executable']}), driven by {b['driver']}"],
        ["user agent", f"`{b['user_agent']}`"],
        ["cross-origin isolated (COOP + COEP)", "yes" if b["cross_origin_isolated"] else "**no**"],
        ["timer step (smallest performance.now() increment)", f"{b['timer_step_ms'] * 1000:.1f} µs"],
        [
            "batch mean vs per-call median, rows the timer resolves",
            f"{bc['agree']}/{bc['checked']} within {bc['bounds'][0]}-{bc['bounds'][1]}"
            + (f"; furthest: {worst['row']} {worst['ratio']:.2f}" if worst else "")
            + (f"; outside: {', '.join(bc['outside'])}" if bc["outside"] else ""),
        ],
        ["the page's envelope opened by `shared.envelope.open`", "yes" if fc["opened"] else f"**no**: {fc['error']}"],
    ]
    return table(["fact", "value"], rows)


def _rows(b: dict, node: dict | None, prim: dict | None) -> str:
    e = b["enc_dec_1kb"]
    ne = (node or {}).get("enc_dec_1kb", {})
    rows = []
    for payload, d in b["per_request"].items():
        rows.append(
            [
                f"L3 seal + open, {payload}",
                ms(m(d, "L3")),
                d["L3"]["source"],
                ms(m(node, "per_request", payload, "L3_webcrypto")),
                ms(m(prim, "per_request", payload, "L3")),
                ratio(m(node, "per_request", payload, "L3_webcrypto"), m(d, "L3")),
            ]
        )
    for k, label, nk in (
        ("aes_gcm_encrypt", "AES-256-GCM encrypt 1 KB", "webcrypto_encrypt"),
        ("aes_gcm_decrypt", "AES-256-GCM decrypt 1 KB", "webcrypto_decrypt"),
        ("aes_gcm_encrypt_decrypt", "AES-256-GCM encrypt + decrypt 1 KB", "webcrypto_encrypt_decrypt"),
    ):
        rows.append(
            [
                label,
                ms(m(e, k)),
                e[k]["source"],
                ms(m(ne, nk)),
                ms(m(prim, "enc_dec_1kb", k)),
                ratio(m(ne, nk), m(e, k)),
            ]
        )
    for k, label in (("l4_seal", "L4 seal, 2 recipients, 1 KB"), ("l4_open", "L4 open, 1 KB")):
        rows.append([label, ms(m(e, k)), e[k]["source"], "-", ms(m(prim, "enc_dec_1kb", k)), "-"])
    for k, s in b["l4"].items():
        rows.append([k.replace("_", " "), ms(s["median_ms"]), s["source"], "-", ms(m(prim, "l4", "rows", k)), "-"])
    return table(
        [
            "row",
            "Chromium WebCrypto ms",
            "Chromium figure from",
            "Node crypto.subtle ms",
            "Python ms",
            "Node crypto.subtle / Chromium",
        ],
        rows,
    )


def _sweep(b: dict, rec: dict | None) -> str:
    bits = str(b["params"]["bits"])
    py = ((rec or {}).get("sizes", {}).get(bits) or {}).get("rows", {})
    rows = []
    for n, r in b["recipients"].items():
        p = py.get(n, {})
        rows.append(
            [
                n,
                ms(m(r, "seal")),
                ms(m(p, "rsa_seal")),
                ms(m(r, "open")),
                ms(m(p, "rsa_open")),
                f"{r['envelope_bytes']:,}",
            ]
        )
    return table(
        ["N", "Chromium seal ms", "Python seal ms", "Chromium open ms", "Python open ms", "envelope bytes"], rows
    )


def browser(v: View) -> str | None:
    """Beyond the article: the WebCrypto rows in Chromium (or why they did not run)."""
    b = v.browser
    if not b:
        return None
    if "skipped" in b:
        return section("Beyond the article: WebCrypto in a real browser", f"- skipped: {b['skipped']}")
    return section(
        "Beyond the article: WebCrypto in a real browser",
        prose("browser", n=b["params"]["n"]),
        _facts(b),
        _rows(b, v.node, v.primitives),
        f"Seal and open against the number of recipients in the page (RSA-{b['params']['bits']}, "
        f"1 KB), next to Python's figures for the same key size from the recipients suite:",
        _sweep(b, v.recipients),
    )
