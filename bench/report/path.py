"""REPORT.md section 07 and beyond: the whole path, the recipients sweep, the relay under load."""

from __future__ import annotations

from .. import article
from .fmt import View, ms, prose, section
from .fmt import config as _config
from .fmt import m as _m
from .fmt import table as _table


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


RECIPIENT_COLUMNS = (
    ("rsa_seal", "RSA seal ms"),
    ("rsa_open", "RSA open ms"),
    ("relay_parse", "relay parse ms"),
    ("x25519_seal", "X25519 seal ms"),
    ("x25519_open", "X25519 open ms"),
    ("hybrid_seal", "X25519+ML-KEM seal ms"),
    ("hybrid_open", "X25519+ML-KEM open ms"),
    ("group_seal", "conv. key seal ms"),
    ("group_open", "conv. key open ms"),
    ("group_rotate", "rotation (N wraps) ms"),
)


def _recipients(rec) -> str:
    parts = []
    never = "never (in this sweep)"
    for bits, per in rec["sizes"].items():
        rows = [
            [
                n,
                *(ms(_m(r, k)) for k, _ in RECIPIENT_COLUMNS[:1]),
                f"{r['rsa_seal']['median_ms'] / r['rsa_seal_floor_ms']:.2f}",
                *(ms(_m(r, k)) for k, _ in RECIPIENT_COLUMNS[1:]),
                f"{r['rsa_envelope_bytes']:,}",
                f"{r.get('hybrid_envelope_bytes', 0):,}",
            ]
            for n, r in per["rows"].items()
        ]
        head = [
            "N",
            RECIPIENT_COLUMNS[0][1],
            "RSA seal / floor",
            *(h for _, h in RECIPIENT_COLUMNS[1:]),
            "RSA envelope bytes",
            "X25519+ML-KEM envelope bytes",
        ]
        k = per["knees"]
        parts.append(
            f"**RSA-{bits}** (one wrap {ms(per['wrap']['median_ms'])} ms, one unwrap {ms(per['unwrap']['median_ms'])} "
            f"ms)\n\n{_table(head, rows)}\n\nPer-recipient RSA wrapping passes 1 ms at N = {k['over_1ms'] or never}, "
            f"one 60 Hz frame (16.7 ms) at N = {k['over_ui_frame'] or never}, and 10x a conversation-key message at "
            f"N = {k['over_10x_group_key'] or never}."
        )
    parts.append(_limits(rec))
    return "\n\n".join(parts)


def _limits(rec) -> str:
    """Envelope bytes per recipient and the first N over the relay's envelope limit, per strategy."""
    limits = rec.get("limits")
    if not limits:
        return ""
    names = rec.get("strategies", {})
    rows = []
    for bits, per in rec["sizes"].items():
        for key, a in per.get("at_limit", {}).items():
            if key != "rsa" and bits != next(iter(rec["sizes"])):
                continue  # the other strategies do not depend on the RSA size (rotation: shown once)
            label = f"{names.get(key, key)}" + (f", RSA-{bits}" if key in ("rsa", "group_rotate") else "")
            first = a["first_n_over_limit"]
            cap = a["recipient_cap"]
            rows.append(
                [
                    label,
                    f"{a['bytes_per_recipient']:,.0f}",
                    f"{a['fixed_bytes']:,.0f}",
                    "never (no bytes per recipient)"
                    if first is None
                    else f"{first:,}" + (f" (past the relay's {cap}-recipient cap)" if first > cap else ""),
                ]
            )
    return (
        f"Envelope size against the relay's limits (max_envelope_bytes {limits['max_envelope_bytes']:,}, "
        f"max_recipients {limits['max_recipients']}; bytes per recipient from the sweep's smallest and largest "
        f"N):\n\n" + _table(["strategy", "bytes per recipient", "fixed bytes", "first N over the envelope limit"], rows)
    )


def _profile_table(prof: dict | None) -> str:
    if not prof or "shares" not in prof:
        return f"\n\nNo profile of the relay in this run ({(prof or {}).get('skipped', 'not asked for')})."
    parts = _table(
        ["part of the relay's work", "share of its busy CPU"],
        [[k, f"{100 * v:.1f} %"] for k, v in prof["shares"].items()],
    )
    top = _table(
        ["function (self time)", "share"], [[f["function"], f"{100 * f['share']:.1f} %"] for f in prof["top"][:8]]
    )
    return (
        f"\n\nWhere the relay's CPU goes in that run (py-spy attached without pausing it, {prof['samples']} "
        f"samples; each sample counted once, by the innermost library frame, else the project's; "
        f"bench/relay_profile.py says which file is which part):\n\n" + parts + "\n\n" + top
    )


def _relay(relay) -> str:
    r, e, p = relay["relay"], relay["echo"], relay["params"]
    rows = []
    for k in ("relay", "relay_fsync"):
        x = relay.get(k)
        if x:
            rows.append(
                [
                    f"relay (L4, SQLite synchronous={x['synchronous']}, ack after commit)",
                    f"{x['throughput_msgs_per_s']:.0f}",
                    ms(x["cpu_ms_per_msg"]),
                    f"{x['wall_s']:.2f}",
                    f"{x['messages']:,}",
                    f"{x['in_database']:,}/{x['acked']:,}",
                ]
            )
    rows.append(
        [
            "bare Starlette websocket echo app (same uvicorn settings)",
            f"{e['throughput_msgs_per_s']:.0f}",
            ms(e["cpu_ms_per_msg"]),
            f"{e['wall_s']:.2f}",
            f"{e['messages']:,}",
            "-",
        ]
    )
    table = _table(
        [
            "server",
            "messages/s",
            "server CPU ms per message",
            "wall s",
            "messages",
            "acked messages found in the database",
        ],
        rows,
    )
    split = r["relay_split_ms_per_msg"]
    load = p.get("load")
    return (
        f"{p['clients']} clients in pairs, each sending for {p.get('seconds', 0):g} s (from a pool of "
        f"{p.get('pool', 0):,} envelopes sealed before the clock), 1 KB text in L4 envelopes (RSA-{p['bits']}), "
        f"at most {p['window']} "
        f"unacknowledged per client; the echo app gets the same frame from as many clients for as long"
        + (f" (load average at the end: {load[0]:.1f})" if load else "")
        + ".\n\n"
        + table
        + f"\n\nRelay / echo CPU per message: **{r['cpu_ms_per_msg'] / e['cpu_ms_per_msg']:.2f}**"
        f" (target <= 3; a relayed message is three websocket frames at the relay: the send, the `stored` ack "
        f"and the `msg` to the peer; an echoed one is two); throughput ratio {relay['ratio']:.3f} (target >= 0.5, "
        f"limited by the one load client process on this 2-core machine). Acked {r['acked']:,}, found in the "
        f"relay's database after the run "
        f"{r['in_database']:,}; the writer committed {r['group_commit_factor']:.1f} messages per transaction. Inside "
        f"the relay (wall time per message while other messages wait too): checks {ms(split['checks_ms'])} ms, "
        f"waiting for the commit {ms(split['commit_ms'])} ms, fan-out {ms(split['fanout_ms'])} ms."
        + _profile_table(r.get("profile"))
    )


def whole_path(v: View) -> str | None:
    """§07: end-to-end per level through a real relay, the split, and the two-relay hop."""
    path = v.path
    if not path:
        return None
    table, split = _combined(v.primitives or {}, path)
    p = path["params"]
    parts = [
        prose(
            "path",
            synchronous=p.get("synchronous", "?"),
            clients=p["clients"],
            messages=p["messages"],
            size=p["size"],
            arrangement=p.get("arrangement", ""),
            bits=p["bits"],
            floor=ms(path["crypto_floor_ms"]),
        ),
        table,
        prose("path_split"),
        split + v.img("latency.png", "latency per level") + v.img("path_split.png", "split"),
        "\n".join(f"- skipped: {s}" for s in path.get("skipped", [])),
    ]
    cross = v.cross or (path if "cross_relay_added_p50_ms" in path else None)
    if cross and "after_ack_p50_ms" in cross:
        p50 = {c["topology"]: c["e2e"]["median_ms"] for c in cross.get("configs", [])}
        parts.append(
            prose(
                "cross",
                added=ms(cross["cross_relay_added_p50_ms"]),
                after=", ".join(f"{k} {ms(v)} ms" for k, v in cross["after_ack_p50_ms"].items()),
                both=", ".join(f"{name} {ms(x)} ms" for name, x in p50.items()),
                e2e_added=ms(cross["e2e_added_p50_ms"]),
                commit=", ".join(f"{k} {ms(v)} ms" for k, v in cross["commit_mean_ms"].items()),
            )
        )
    elif cross:
        parts.append("\n".join(f"- two relays skipped: {s}" for s in cross.get("skipped", [])))
    return section("07 The whole path, per message", *parts)


def recipients(v: View) -> str | None:
    """Beyond the article: seal/open cost against the number of recipients, per strategy."""
    if not v.recipients:
        return None
    return section(
        "Beyond the article: cost against the number of recipients",
        prose("recipients"),
        _recipients(v.recipients) + v.img("recipients.png", "wrap cost vs recipients"),
    )


def relay(v: View) -> str | None:
    """Beyond the article: the relay under load against a bare echo app."""
    if not v.relay:
        return None
    return section("Beyond the article: the relay under load", _relay(v.relay))
