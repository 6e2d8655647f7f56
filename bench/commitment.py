"""``e2ee-bench commitment``: what the envelope's key commitment (``kc``, protocol v2) adds to one
seal and one open, as a ratio measured in one run (issue 12; target: at most 2 µs each).

The commitment is HMAC-SHA-256(key = CEK, ``"e2ee-chat/v3/key-commitment"``): computed once per
seal (whatever the number of recipients), checked once per open in constant time, right after
the RSA-OAEP unwrap. It is timed here with the envelope's own function
(``shared.envelope._commitment``), in turns with a whole seal and a whole open of the same
envelope (``bench.timing.measure_paired``), so load on a shared machine lands on all alike and
the ratios hold.
"""

from __future__ import annotations

import os

from client_tui.core.record import now_ms
from shared import envelope
from shared.b64 import b64u_encode
from shared.content import Text
from shared.keys import Identity

from .timing import measure_paired

TARGET_US = 2.0
"""Issue 12: the commitment adds at most 2 µs to a seal and to an open."""


def run(progress=None, n: int = 2000, bits: int = 3072, size: int = 1024) -> dict:
    """Medians (ms) of a seal, an open, the commitment's computation and its check, timed in turns.

    Args:
        n: timed rounds (each round runs all four once).
        bits: RSA size of the one recipient's wrap key.
        size: plaintext bytes.

    Returns:
        ``{"n", "bits", "size", "ms": {name: stats}, "timer_us", "commit_us", "check_us",
        "seal_share", "open_share", "target_us", "met"}``: ``commit_us``/``check_us`` are medians
        net of ``timer_us`` (an empty call timed the same way); shares are commitment / whole operation.
    """
    if progress:
        progress(f"commitment: keys (RSA-{bits})")
    alice, bob = Identity.generate("alice", bits), Identity.generate("bob", bits)
    text = os.urandom(size // 2).hex()[:size]
    head = b64u_encode(bytes(32))
    sealed = envelope.seal(Text(text, ts=now_ms(), ctr=1), alice, "bench", [bob.public], epoch=1, head=head)
    parsed = envelope.parse(sealed)
    sign_key = alice.public.sign_key
    cek = os.urandom(envelope.CEK_BYTES)
    tag = envelope._commitment(cek).finalize()
    if progress:
        progress(f"commitment: {n} rounds of seal, open, commit, check")
    stats = measure_paired(
        {
            "seal": lambda: envelope.seal(
                Text(text, ts=now_ms(), ctr=1), alice, "bench", [bob.public], epoch=1, head=head
            ),
            "open": lambda: envelope.open(parsed, bob, sign_key),
            "commit": lambda: envelope._commitment(cek).finalize(),
            "check": lambda: envelope._commitment(cek).verify(tag),
            "timer": lambda: None,  # the cost of timing a call at all, taken off the two small ones
        },
        n,
    )
    ms = {k: s.as_dict() for k, s in stats.items()}
    timer_us = stats["timer"].median * 1000
    commit_us = stats["commit"].median * 1000 - timer_us
    check_us = stats["check"].median * 1000 - timer_us
    return {
        "n": n,
        "bits": bits,
        "size": size,
        "ms": ms,
        "timer_us": timer_us,
        "commit_us": commit_us,
        "check_us": check_us,
        "seal_share": commit_us / 1000 / stats["seal"].median,
        "open_share": check_us / 1000 / stats["open"].median,
        "target_us": TARGET_US,
        "met": commit_us <= TARGET_US and check_us <= TARGET_US,
    }


def section(result: dict, results: dict) -> str:
    """REPORT.md: the commitment's cost per seal and per open, with the ratio to each."""
    ms = result["ms"]
    verdict = "met" if result["met"] else "**not met**"
    return "\n".join(
        (
            "### Key commitment (protocol v2 `kc`)",
            "",
            f"One run, {result['n']} rounds timed in turns, one recipient (RSA-{result['bits']}), "
            f"{result['size']} B of text. Target: at most {TARGET_US:g} µs per seal and per open — {verdict}. "
            f"Commitment times are medians net of timing an empty call ({result['timer_us']:.2f} µs).",
            "",
            "| | whole operation | commitment | share |",
            "|---|---|---|---|",
            f"| seal | {ms['seal']['median_ms']:.3f} ms | {result['commit_us']:.2f} µs (HMAC-SHA-256) | "
            f"{result['seal_share']:.2%} |",
            f"| open | {ms['open']['median_ms']:.3f} ms | {result['check_us']:.2f} µs (HMAC check, constant time) | "
            f"{result['open_share']:.2%} |",
        )
    )


def print_result(console, result: dict) -> None:
    """One line per operation for the console."""
    console.print(
        f"key commitment: seal +{result['commit_us']:.2f} µs ({result['seal_share']:.2%} of "
        f"{result['ms']['seal']['median_ms']:.3f} ms), open +{result['check_us']:.2f} µs "
        f"({result['open_share']:.2%} of {result['ms']['open']['median_ms']:.3f} ms); "
        f"target <= {TARGET_US:g} µs: {'met' if result['met'] else 'NOT met'}"
    )
