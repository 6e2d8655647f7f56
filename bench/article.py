"""Figures quoted from the seed article "The real cost of encryption" (Node.js crypto and the
browser's WebCrypto on a 2.8 GHz Xeon, medians of 1,000 iterations).

They are printed only in columns labelled "article (quoted)"; every other figure is measured in
the run that prints it. Times in ms.
"""

from __future__ import annotations

SOURCE = 'the seed article "The real cost of encryption" (Node.js / WebCrypto, 2.8 GHz Xeon)'

PAYLOADS = {"100 B": 100, "1 KB": 1024, "10 KB": 10240}

# §02 per-request cost, ms: payload -> (L1 JSON only, L2 + JWT verify, L3 Node, L3 WebCrypto)
PER_REQUEST = {
    "100 B": {"L1": 0.002, "L2": 0.068, "L3_node": 0.027, "L3_webcrypto": 0.085},
    "1 KB": {"L1": 0.010, "L2": 0.069, "L3_node": 0.038, "L3_webcrypto": 0.094},
    "10 KB": {"L1": 0.096, "L2": 0.178, "L3_node": 0.145, "L3_webcrypto": 0.239},
}

# §03 one-time costs, ms: (median, p95)
ONE_TIME = {
    "jwt_sign": (0.063, 0.123),
    "rsa_handshake": (0.876, 1.75),
}

# §04 encrypt-only / decrypt-only at 1 KB, ms
ENC_DEC_1KB = {
    "node_encrypt": 0.0144,
    "node_decrypt": 0.0140,
    "webcrypto_encrypt": 0.0500,
    "webcrypto_encrypt_decrypt": 0.0852,
}

# §05 "what actually slows your app", ms ranges (low, high); encryption rows are the article's own
CONTEXT = {
    "encryption_l3_both_sides": (0.13, 0.13),
    "jwt_verify": (0.07, 0.07),
    "rtt_same_city_fiber": (20, 40),
    "rtt_mobile_4g": (50, 150),
    "rtt_mobile_3g": (300, 800),
    "db_query_indexed": (5, 20),
    "db_query_unindexed": (100, 2000),
    "render_50_items": (5, 15),
    "first_contentful_paint_slow": (1500, 3000),
}

# §06 device multipliers for WebCrypto relative to the desktop run: (low, high)
MOBILE = {
    "Desktop Chrome (the article's run)": (1.0, 1.0),
    "Modern phone (iPhone 14, Pixel 7)": (1.5, 1.5),
    "Mid-range Android": (3.0, 3.0),
    "Budget Android (5+ years old)": (5.0, 8.0),
}

# §07 per-request app overhead by level, ms (low, high); session start (low, high) or None
COMBINED = {
    "L1": {"per_request": (0.01, 0.01), "session": None},
    "L2": {"per_request": (0.07, 0.07), "session": None},
    "L3": {"per_request": (0.16, 0.16), "session": (1.0, 1.0)},
    "L4": {"per_request": (5.0, 15.0), "session": (5.0, 20.0)},
}

# §08 the article's claims that its decision table rests on
CLAIMS = {
    "l3_minus_l2_ms": 0.09,
    "network_min_ms": 30,
    "node_aes_1kb_ops_per_s": 70_000,
    "l4_rsa_per_message_ms": (5.0, 15.0),
}


def fmt_range(r: tuple[float, float] | None) -> str:
    """``"5-15"`` for a range, ``"0.13"`` for a single figure, ``"-"`` for None (ms)."""
    if r is None:
        return "-"
    lo, hi = r
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
