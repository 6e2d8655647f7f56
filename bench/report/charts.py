"""The PNG charts of REPORT.md (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

from .. import article
from .fmt import m as _m

CHARTS = {
    "levels": "cost_per_level.png",
    "recipients": "recipients.png",
    "latency": "latency.png",
    "split": "path_split.png",
    "network": "network.png",
}


def charts(results: dict, out: Path) -> list[Path]:
    """Write the PNG charts that the results allow; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    prim, peers, rec, path = (results.get(k) for k in ("primitives", "peers", "recipients", "path"))
    node = peers if peers and "skipped" not in peers else None
    web = results.get("browser") if "skipped" not in (results.get("browser") or {"skipped": 1}) else None
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
            series += [("Node L3 (node:crypto)", None, "L3_node"), ("Node L3 (crypto.subtle)", None, "L3_webcrypto")]
        if web:
            series += [
                ("Chromium L3 (WebCrypto)", None, "chromium:L3"),
                ("Chromium L4 (WebCrypto)", None, "chromium:L4"),
            ]
        width = 0.8 / len(series)
        for i, (label, ours, nk) in enumerate(series):
            vals = [
                (
                    _m(prim, "per_request", p, ours)
                    if ours
                    else _m(web, "per_request", p, nk.split(":")[1])
                    if nk.startswith("chromium:")
                    else _m(node, "per_request", p, nk)
                )
                or 0
                for p in payloads
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
                [r["hybrid_seal"]["median_ms"] for r in some["rows"].values() if "hybrid_seal" in r],
                marker="D",
                label="X25519 + ML-KEM-768 + HKDF wrap per message (post-quantum hybrid)",
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
    net = results.get("network")
    if net and net.get("configs"):
        written.append(_network(plt, net, out / CHARTS["network"]))
    return written


def _network(plt, net: dict, file: Path) -> Path:
    """Two panels against the round trip: end-to-end p50 per level, and the share of encryption."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4))
    rtts = net["params"]["rtts_ms"]
    for level in net["params"]["levels"]:
        cs = [c for c in net["configs"] if c["level"] == level]
        x = [c["rtt_measured_ms"] for c in cs]
        left.plot(x, [c["e2e"]["median_ms"] for c in cs], marker="o", label=f"L{level}")
        right.plot(
            [c["rtt_ms"] for c in cs], [max(1e-3, 100 * c["crypto_share"]) for c in cs], marker="o", label=f"L{level}"
        )
    left.set_xscale("symlog", linthresh=1)
    left.set_yscale("log")
    left.set_xlabel("round trip, measured (ms)")
    left.set_ylabel("end-to-end p50, ms (log)")
    left.set_title("What the user waits for")
    right.set_xscale("symlog", linthresh=1)
    right.set_xticks(rtts, [f"{r:g}" for r in rtts])
    right.set_xlabel("round trip, set (ms)")
    right.set_yscale("log")
    right.set_ylabel("client encryption / end-to-end, % (log)")
    right.set_title("Share of encryption in that wait")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(file, dpi=110)
    plt.close(fig)
    return file
