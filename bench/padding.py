"""What padding a content document to a size bucket costs (docs/PROTOCOL.md §13.2), per scheme.

For each message size the bench uses (:data:`bench.article.PAYLOADS`: 100 B, 1 KB, 10 KB of text)
and each scheme (``none``: the canonical JSON as is, ``padme``, ``pow2``), one text document is
encoded the way ``shared.envelope.seal`` encodes it and encrypted with AES-256-GCM, then decrypted
and decoded the way ``open`` does, all timed in turns with the unpadded form (``none``), so the
difference of the medians is what the padding adds per message:

* bytes: the padded plaintext minus the canonical JSON (the ciphertext grows by as much; the
  envelope by 4/3 of it, base64url);
* µs: (encode + encrypt) and (decrypt + decode) of the padded form minus the same for ``none``.

Next to it, what each scheme costs and hides over every document length from 257 B to 64 KiB
(arithmetic, no timing): the mean and worst overhead, and how many distinct sizes a relay can see.
"""

from __future__ import annotations

import math
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared import content

from . import article
from .primitives import text_of
from .timing import measure_paired

SCHEMES = ("none", *content.SCHEMES)
_TS = 1_767_225_600_000


def _encode(doc: content.Content, scheme: str) -> bytes:
    return content.canonical(doc) if scheme == "none" else content.encode(doc, scheme)  # type: ignore[arg-type]


def sweep(low: int = 257, high: int = content.MAX_CONTENT_BYTES) -> dict[str, dict[str, float]]:
    """Per scheme, over every length ``low..high``: mean and worst overhead (% of the length) and
    the number of distinct padded sizes (and its log2: the bits of length a relay still learns)."""
    out = {}
    for scheme in content.SCHEMES:
        over = [(content.bucket(n, scheme) - n) / n for n in range(low, high + 1)]
        sizes = len({content.bucket(n, scheme) for n in range(low, high + 1)})
        out[scheme] = {
            "mean_pct": 100 * sum(over) / len(over),
            "max_pct": 100 * max(over),
            "sizes": sizes,
            "bits": math.log2(sizes),
        }
    return out


def run(progress=None, n: int = 3000) -> dict:
    """Padding overhead per payload and scheme (bytes, and µs as medians of ``n`` rounds).

    Returns:
        ``{"n", "rows": {payload: {scheme: {"document_bytes", "padded_bytes", "pad_bytes", "pad_pct",
        "envelope_bytes_added", "seal_ms", "open_ms", "seal_us_added", "open_us_added"}}},
        "sweep": {scheme: {...}}, "default": content.DEFAULT_SCHEME}`` (ms for the stats).
    """
    step = progress or (lambda _label: None)
    key, iv, aad = os.urandom(32), os.urandom(12), os.urandom(300)
    aes = AESGCM(key)
    rows: dict[str, dict[str, dict]] = {}
    for label, size in article.PAYLOADS.items():
        step(f"padding: {label}")
        doc = content.Text(text_of(size), ts=_TS, ctr=1)
        sealed = {s: aes.encrypt(iv, _encode(doc, s), aad) for s in SCHEMES}
        fns = {}
        for s in SCHEMES:
            fns[f"seal_{s}"] = lambda s=s, doc=doc: aes.encrypt(iv, _encode(doc, s), aad)
            fns[f"open_{s}"] = lambda s=s, sealed=sealed: content.decode(aes.decrypt(iv, sealed[s], aad))
        stats = measure_paired(fns, n)
        plain = len(content.canonical(doc))
        rows[label] = {}
        for s in SCHEMES:
            padded = len(sealed[s]) - 16
            rows[label][s] = {
                "document_bytes": plain,
                "padded_bytes": padded,
                "pad_bytes": padded - plain,
                "pad_pct": 100 * (padded - plain) / plain,
                "envelope_bytes_added": math.ceil(padded * 4 / 3) - math.ceil(plain * 4 / 3),
                "seal_ms": stats[f"seal_{s}"].as_dict(),
                "open_ms": stats[f"open_{s}"].as_dict(),
                "seal_us_added": 1000 * (stats[f"seal_{s}"].median - stats["seal_none"].median),
                "open_us_added": 1000 * (stats[f"open_{s}"].median - stats["open_none"].median),
            }
    return {"n": n, "rows": rows, "sweep": sweep(), "default": content.DEFAULT_SCHEME}


def section(result: dict, results: dict) -> str:
    """REPORT.md: the padding table per payload and scheme, and the sweep over all lengths."""
    lines = [
        "### Padding to size buckets (protocol v3 content documents)",
        "",
        f"A text document per payload, encoded and AES-256-GCM encrypted (then decrypted and decoded) as "
        f"seal and open do; medians of {result['n']} rounds timed in turns with the unpadded form. "
        f"Default scheme: `{result['default']}`.",
        "",
        "| payload | scheme | document B | padded B | + bytes | + % | + envelope B | + µs seal | + µs open |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, by_scheme in result["rows"].items():
        for s in content.SCHEMES:
            r = by_scheme[s]
            lines.append(
                f"| {label} | {s} | {r['document_bytes']:,} | {r['padded_bytes']:,} | {r['pad_bytes']:,} | "
                f"{r['pad_pct']:.1f} | {r['envelope_bytes_added']:,} | {r['seal_us_added']:.2f} | "
                f"{r['open_us_added']:.2f} |"
            )
    lines += [
        "",
        "| scheme | mean overhead, 257 B–64 KiB | worst | sizes a relay sees | bits of length |",
        "|---|---|---|---|---|",
    ]
    for s, w in result["sweep"].items():
        lines.append(f"| {s} | {w['mean_pct']:.1f} % | {w['max_pct']:.1f} % | {w['sizes']} | {w['bits']:.1f} |")
    return "\n".join(lines)


def print_result(console, result: dict) -> None:
    """One line per payload and scheme for the console."""
    for label, by_scheme in result["rows"].items():
        for s in content.SCHEMES:
            r = by_scheme[s]
            console.print(
                f"padding {label:>5} {s:>5}: {r['document_bytes']} -> {r['padded_bytes']} B "
                f"(+{r['pad_bytes']} B, {r['pad_pct']:.1f} %), seal +{r['seal_us_added']:.2f} µs, "
                f"open +{r['open_us_added']:.2f} µs"
            )
