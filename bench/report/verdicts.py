"""REPORT.md: the article's decision table answered, the targets, the closing note."""

from __future__ import annotations

from .. import article
from .fmt import View, ms, prose, ratio, section
from .fmt import config as _config
from .fmt import m as _m
from .fmt import table as _table


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


def _result(t: dict | None) -> str:
    if t is None:
        return "-"
    return "not measured" if t["met"] is None else ("**met**" if t["met"] else "**not met**")


def _value(t: dict | None) -> str:
    return ms(t["value"]) if t and t["value"] is not None else "-"


def _targets(targets: list[dict]) -> str:
    rows = [
        [
            t.get("issue", "-"),
            t["text"],
            _value(t),
            ms(t["limit"]),
            f"{t['ratio']:.3f}" if t["ratio"] is not None else "-",
            _result(t),
            t["detail"],
        ]
        for t in targets
    ]
    return _table(["issue", "target", "value", "limit", "value / limit", "result", "how"], rows)


def _two_runs(targets: list[dict], previous: dict | None) -> str | None:
    """The targets of this run beside those of another full run (``report --compare``)."""
    if not previous:
        return None
    before = {t["id"]: t for t in previous.get("targets", [])}
    rows = [
        [
            t["text"],
            f"{_value(before.get(t['id']))} ({_result(before.get(t['id']))})",
            f"{_value(t)} ({_result(t)})",
            ms(t["limit"]),
        ]
        for t in targets
    ]
    return (
        f"**Two full runs.** The targets of the run of {previous.get('started', '?')} "
        f"({previous.get('file', '?')}) beside this one's:\n\n"
        + _table(["target", "other run", "this run", "limit"], rows)
    )


def _why(targets: list[dict]) -> str | None:
    unmet = [t for t in targets if t["met"] is False]
    if not unmet:
        return None
    return "**Why, for each target not met in this run** (the measurement that says so):\n\n" + "\n".join(
        f"- {t['text']}: {t['value']:.3f} against {t['limit']:.3f}. {t['detail']}." for t in unmet
    )


def _closing(prim, node, path, web=None) -> str:
    q, e = article.PER_REQUEST, prim["enc_dec_1kb"]
    hs_n = _m(node, "one_time", "l3_handshake_2048")
    rows = []  # (row, article (quoted), ours, Node, Chromium)
    for p in article.PAYLOADS:
        for lv, qk, label in (
            ("L1", "L1", "L1"),
            ("L2", "L2", "L2"),
            ("L3", "L3_node", "L3 Node"),
            ("L3", "L3_webcrypto", "L3 WebCrypto"),
        ):
            rows.append(
                (
                    f"§02 {label}, {p}",
                    q[p][qk],
                    _m(prim, "per_request", p, lv),
                    _m(node, "per_request", p, qk if lv == "L3" else lv),
                    _m(web, "per_request", p, "L3") if qk == "L3_webcrypto" else None,
                )
            )
    rows.append(
        (
            "§03 JWT sign",
            article.ONE_TIME["jwt_sign"][0],
            _m(prim, "jwt", "rows", "jwt_sign_hs256"),
            _m(node, "one_time", "jwt_sign_hs256"),
            None,
        )
    )
    rows.append(
        (
            "§03 RSA handshake (RSA-2048 here)",
            article.ONE_TIME["rsa_handshake"][0],
            _m(prim, "one_time", "l3_handshake_2048"),
            hs_n,
            None,
        )
    )
    enc, both = "aes_gcm_encrypt", "aes_gcm_encrypt_decrypt"
    for label, ours, qk, web_key in (
        ("§04 encrypt", enc, "node_encrypt", None),
        ("§04 decrypt", "aes_gcm_decrypt", "node_decrypt", None),
        ("§04 WebCrypto encrypt", enc, "webcrypto_encrypt", enc),
        ("§04 WebCrypto encrypt + decrypt", both, "webcrypto_encrypt_decrypt", both),
    ):
        rows.append(
            (
                label + " 1 KB",
                article.ENC_DEC_1KB[qk],
                _m(e, ours),
                _m(node, "enc_dec_1kb", qk),
                _m(web, "enc_dec_1kb", web_key) if web_key else None,
            )
        )
    l4 = _m(prim, "per_request", "1 KB", "L4")
    cells = [[r, ms(qv), ms(o), ms(n), ms(c), ratio(o, qv), ratio(c, qv)] for r, qv, o, n, c in rows]
    cells.append(
        [
            "§07 L4 per message (article: RSA per message)",
            "5-15",
            ms(l4),
            ms(_m(node, "per_request", "1 KB", "L4")),
            ms(_m(web, "per_request", "1 KB", "L4")),
            ratio(l4, 5.0) + " of the low end",
            ratio(_m(web, "per_request", "1 KB", "L4"), 5.0),
        ]
    )
    text = _table(
        [
            "article row",
            "article (quoted) ms",
            "ours ms",
            "Node here ms",
            "Chromium here ms",
            "ours / article",
            "Chromium / article",
        ],
        cells,
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
            text += (
                f" Client crypto (seal + open, mostly the receiver's RSA unwrap) is "
                f"{ms(s['client_crypto_ms'])} ms ({100 * s['client_crypto_ms'] / total:.0f} %)."
            )
        else:
            text += " Client crypto is seal + open, mostly the receiver's one RSA-OAEP unwrap."
    return text


def extra_sections(v: View) -> str | None:
    """The sections of suites added through ``bench/suites.py`` (their module's ``section``)."""
    from ..suites import SUITES

    parts = []
    for suite in SUITES:
        render = suite.hook("section") if v.results.get(suite.name) else None
        if render is not None:
            parts.append(render(v.results[suite.name], v.results))
    return "\n\n".join([prose("extra"), *parts]) if parts else None


def decisions(v: View) -> str | None:
    """§08: the article's decision table, answered from this run (it needs the primitives suite)."""
    if not v.primitives:
        return None
    return section(
        "08 The article's decision table, answered from this run",
        _decisions(v.primitives or {}, v.path, v.context, v.relay, v.node),
    )


def targets(v: View) -> str:
    """Every target: value, limit, met or not, and how it was measured."""
    return section("Targets", _targets(v.results.get("targets", [])))


def closing(v: View) -> str | None:
    """Every article row (quoted, ours, Node's, Chromium's), two runs' targets, and why each unmet
    target is not met."""
    targets = v.results.get("targets", [])
    rows = _closing(v.primitives, v.node, v.path, v.chromium) if v.primitives else None
    return section("Closing note", rows, _two_runs(targets, v.results.get("previous")), _why(targets))
