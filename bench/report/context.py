"""REPORT.md sections 05-06: what else costs time, slower devices."""

from __future__ import annotations

from .. import article
from .fmt import View, ms, prose, section
from .fmt import config as _config
from .fmt import m as _m
from .fmt import table as _table


def _context_table(ctx, prim, path, net=None) -> str:
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
        *_network_rows(net),
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


ARTICLE_RTT = {
    30: ("network round trip, same city, fiber", "rtt_same_city_fiber"),
    100: ("network round trip, 4G", "rtt_mobile_4g"),
    300: ("network round trip, 3G", "rtt_mobile_3g"),
}


def _net(net: dict | None, level: int, rtt: float) -> dict | None:
    return next((c for c in (net or {}).get("configs", []) if c["level"] == level and c["rtt_ms"] == rtt), None)


def _network_rows(net: dict | None) -> list[list[str]]:
    rows = []
    for rtt, (label, key) in ARTICLE_RTT.items():
        c = _net(net, 4, rtt) or _net(net, 1, rtt)
        got = (
            f"set to {rtt} ms: ping p50 {ms(c['rtt_measured_ms'])}; a 1 KB L{c['level']} message end to end "
            f"{ms(_m(c, 'e2e'))}"
            if c
            else "not measured in this run"
        )
        rows.append([label, got, article.fmt_range(article.CONTEXT[key])])
    return rows


def _network_table(net: dict) -> str:
    levels = net["params"]["levels"]
    rows = []
    for rtt in net["params"]["rtts_ms"]:
        cells = [c for c in (_net(net, lv, rtt) for lv in levels) if c]
        measured = min((c["rtt_measured_ms"] for c in cells), default=None)
        row = [f"{rtt:g}", ms(measured)]
        for lv in levels:
            c = _net(net, lv, rtt)
            row.append(f"{ms(_m(c, 'e2e'))} ({100 * c['crypto_share']:.1f} %)" if c else "-")
        c4 = _net(net, 4, rtt)
        row.append(ms(c4["split_mean_ms"]["client_crypto_ms"]) if c4 else "-")
        quoted = ARTICLE_RTT.get(rtt)
        row.append(article.fmt_range(article.CONTEXT[quoted[1]]) if quoted else "-")
        rows.append(row)
    head = [
        "round trip set, ms",
        "round trip measured (ping p50), ms",
        *(f"L{lv} end-to-end p50, ms (encryption share)" for lv in levels),
        "L4 encryption per message (seal + open, mean), ms",
        "article (quoted) round trip, ms",
    ]
    return _table(head, rows)


def _mobile_table(prim, web) -> str:
    ours = _m(prim, "per_request", "1 KB", "L3")
    web = _m(web, "per_request", "1 KB", "L3")
    rows = []
    for device, (lo, hi) in article.MOBILE.items():

        def span(x, lo=lo, hi=hi):
            return "-" if x is None else (ms(x * lo) if lo == hi else f"{ms(x * lo)}-{ms(x * hi)}")

        rows.append([device, article.fmt_range((lo, hi)), span(ours), span(web)])
    return _table(
        ["device", "article (quoted) multiplier", "x our Python L3 1 KB, ms", "x Chromium WebCrypto L3 1 KB here, ms"],
        rows,
    )


def context(v: View) -> str | None:
    """§05: what else costs time, next to the article's quoted ranges."""
    if not v.context:
        return None
    skipped = "\n".join(f"- skipped: {s}" for s in v.context.get("skipped", []))
    parts = [_context_table(v.context, v.primitives or {}, v.path, v.network), skipped]
    if v.network:
        parts += [
            "### What the user waits for, measured",
            prose("network", **v.network["params"]),
            _network_table(v.network) + v.img("network.png", "latency and encryption share by round trip"),
        ]
    return section("05 What else costs time", *parts)


def mobile(v: View) -> str | None:
    """§06: the article's device multipliers applied to this run's L3 cost (labelled extrapolation)."""
    if not v.primitives:
        return None
    return section("06 Slower devices", prose("mobile"), _mobile_table(v.primitives, v.chromium))
