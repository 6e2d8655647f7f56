"""``e2ee-bench transparency``: what the key transparency log (PROTOCOL.md §14) costs a client per
key answer, at 10^3, 10^5 and 10^6 log entries (issue 18; target: at most 1 ms per key answer at
10^6 on this machine).

Logs of generated leaves (a real :class:`shared.kt.KeyLeaf` at a random index, the rest SHA-256 of
their index) are built in memory with :class:`shared.merkle.Tree`, the relay's own structure. Timed
per size, in turns (``bench.timing.measure_paired``):

- ``inclusion``: RFC 9162 §2.1.3.2 verification of one leaf's audit path (``merkle.verify_inclusion``);
- ``answer``: all a client does with a key answer's ``kt`` member: parse it, recompute the leaf
  hash, verify the path, verify the head's Ed25519 signature (``Inclusion.from_json`` + ``verify``
  + ``TreeHead.verify``; the consistency check against the head held is separate);
- ``consistency``: §2.1.4.2 verification from half the log to all of it;
- ``prove``: the relay's side, one inclusion proof from the in-memory tree.

Sizes: the proof's hashes (32 bytes each), the JSON bytes the ``kt`` member adds to a key answer, and
the bytes the gossiped head (``"kth": <signed head>``) adds to a message's plaintext before padding.

The gossip's bucket effect (:func:`gossip`, no timing): a text message of about 10, 100, 1,000 and
10,000 bytes encoded as the client does (``shared.content.encode``, Padmé) and sealed
(``shared.envelope.seal``, two members' RSA keys) with and without the ``kth`` head of the largest
log, and over every text length of the decade around each size (from L/√10 to L·√10 bytes) the share
of lengths whose padded plaintext the head moves into a bigger bucket.
"""

from __future__ import annotations

import json
import math
import random
import time

import msgspec
from cryptography.hazmat.primitives.asymmetric import ed25519

from client_tui.core.transparency import KTH_ROOM
from shared import content, digests, envelope, kt, merkle
from shared.keys import Identity

from .primitives import text_of
from .timing import measure_paired

TARGET_MS = 1.0
"""Issue 18: proof verification at 10^6 entries at most 1 ms per key answer."""
GOSSIP_TEXTS = (10, 100, 1000, 10_000)
"""Text lengths (bytes) of the gossip rows."""


def _log(size: int, leaf: kt.KeyLeaf, at: int) -> merkle.Tree:
    tree = merkle.Tree()
    for i in range(size):
        tree.append_hash(leaf.hash() if i == at else digests.sha256(i.to_bytes(8, "big")))
    return tree


def _one(size: int, key: ed25519.Ed25519PrivateKey, leaf: kt.KeyLeaf, n: int) -> tuple[dict, kt.TreeHead]:
    """The row of one log size (see :func:`run`) and the log's signed head."""
    at = random.Random(size).randrange(size)
    t0 = time.perf_counter()
    tree = _log(size, leaf, at)
    build_s = time.perf_counter() - t0
    head = kt.sign_head(key, size, tree.root(), int(time.time() * 1000))
    proof = tree.inclusion_proof(at)
    answer = json.loads(json.dumps(kt.Inclusion(at, leaf, proof, head).to_json()))
    old = size // 2 + 1
    cproof, old_root = tree.consistency_proof(old), tree.root(old)
    public = key.public_key()

    def whole_answer() -> None:
        inc = kt.Inclusion.from_json(answer)
        inc.verify()
        inc.head.verify(public)

    stats = measure_paired(
        {
            "inclusion": lambda: merkle.verify_inclusion(at, size, leaf.hash(), proof, head.root),
            "answer": whole_answer,
            "consistency": lambda: merkle.verify_consistency(old, size, old_root, head.root, cproof),
            "prove": lambda: tree.inclusion_proof(at),
        },
        n,
    )
    row = {
        "entries": size,
        "build_s": build_s,
        "proof_hashes": len(proof),
        "proof_bytes": 32 * len(proof),
        "kt_json_bytes": len(json.dumps({"kt": answer}, separators=(",", ":"))) - 2,
        "gossip_json_bytes": len(json.dumps({"kth": head.to_json()}, separators=(",", ":"))) - 2,
        "consistency_hashes": len(cproof),
        "us": {k: st.median * 1000 for k, st in stats.items()},
    }
    return row, head


def _stamped(doc: content.Text, head: kt.TreeHead) -> content.Text:
    """``doc`` with ``kth`` as the client stamps it (``client_tui.core.transparency.Transparency.stamp``)."""
    return msgspec.structs.replace(doc, kth=content.KtHead.of(head))


def gossip(head: kt.TreeHead, people: tuple[Identity, Identity], texts: tuple[int, ...] = GOSSIP_TEXTS) -> list[dict]:
    """What the gossiped head ``head`` does to a text message's size, per text length in ``texts``
    (bytes of ASCII text; ``people``: the sender and one other member, the envelope's recipients).

    Returns:
        per length: ``{"text_bytes", "document_bytes", "document_kth_bytes", "padded_bytes",
        "padded_kth_bytes", "envelope_bytes", "envelope_kth_bytes", "moved"`` (the head moved this
        message into a bigger bucket), ``"decade": {"from", "to", "lengths", "moved", "moved_pct",
        "mean_added_bytes"}}`` (every length from ⌈L/√10⌉ to ⌊L·√10⌋: how many the head moves, and
        the padded bytes it adds on average). Sizes in bytes; Padmé (``content.DEFAULT_SCHEME``).
    """
    sender, other = people
    ts = int(time.time() * 1000)
    rows = []
    for size in texts:
        doc = content.Text(text_of(size), ts=ts, ctr=1)
        with_head = _stamped(doc, head)
        plain, plain_kth = content.encode(doc), content.encode(with_head)
        sealed = [
            envelope.seal(d, sender, "bench-gossip", [sender.public, other.public], epoch=1, head="A" * 43)
            for d in (doc, with_head)
        ]
        # an ASCII text without quotes or backslashes: the document is a fixed frame around the text
        frame, frame_kth = len(content.canonical(doc)) - size, len(content.canonical(with_head)) - size
        low, high = math.ceil(size / math.sqrt(10)), math.floor(size * math.sqrt(10))
        moved, added = 0, 0
        for n in range(low, high + 1):
            before = content.bucket(frame + n)
            stamps = frame + n + KTH_ROOM <= content.MAX_CONTENT_BYTES  # else the client sends it without
            after = content.bucket(frame_kth + n) if stamps else before
            moved += after > before
            added += after - before
        lengths = high - low + 1
        rows.append(
            {
                "text_bytes": size,
                "document_bytes": len(content.canonical(doc)),
                "document_kth_bytes": len(content.canonical(with_head)),
                "padded_bytes": len(plain),
                "padded_kth_bytes": len(plain_kth),
                "envelope_bytes": len(sealed[0]),
                "envelope_kth_bytes": len(sealed[1]),
                "moved": len(plain_kth) > len(plain),
                "decade": {
                    "from": low,
                    "to": high,
                    "lengths": lengths,
                    "moved": moved,
                    "moved_pct": 100 * moved / lengths,
                    "mean_added_bytes": added / lengths,
                },
            }
        )
    return rows


def run(progress=None, n: int = 2000, sizes: tuple[int, ...] = (1000, 100_000, 1_000_000), bits: int = 3072) -> dict:
    """Medians per size, and the gossip rows with the largest log's head; see the module docstring.

    Args:
        bits: the RSA modulus of the two members' keys the gossip rows' envelopes are sealed to.

    Returns:
        ``{"n", "target_ms", "met", "sizes": [{"entries", "build_s", "proof_hashes", "proof_bytes",
        "kt_json_bytes", "gossip_json_bytes", "consistency_hashes",
        "us": {"inclusion", "answer", "consistency", "prove"}}], "bits", "gossip": [...]}``
        (``gossip``: :func:`gossip`'s rows).
    """
    key = ed25519.Ed25519PrivateKey.generate()
    leaf = kt.KeyLeaf("bob", 3, "w" * 43, "s" * 43, "h" * 43)
    rows = []
    for size in sizes:
        if progress:
            progress(f"transparency: a log of {size:,} entries, {n} rounds")
        row, head = _one(size, key, leaf, n)
        rows.append(row)
    if progress:
        progress(f"transparency: the gossiped head's bucket effect, texts of {', '.join(map(str, GOSSIP_TEXTS))} B")
    people = (Identity.generate("alice", bits), Identity.generate("bob", bits))
    return {
        "n": n,
        "target_ms": TARGET_MS,
        "met": rows[-1]["us"]["answer"] / 1000 <= TARGET_MS,
        "sizes": rows,
        "bits": bits,
        "gossip": gossip(head, people),
    }


def section(result: dict, results: dict) -> str:
    """REPORT.md: per log size, the proof's size and the time to check one key answer."""
    verdict = "met" if result["met"] else "**not met**"
    lines = [
        "### Key transparency log (issue 18)",
        "",
        f"Generated logs, {result['n']} rounds timed in turns per size. Target: checking one key answer's proof "
        f"at the largest size in at most {result['target_ms']:g} ms — {verdict}. *answer* = parse the `kt` "
        "member, recompute the leaf hash, verify the audit path and the head's Ed25519 signature. "
        f"A gossiped head adds {result['sizes'][-1]['gossip_json_bytes']} B of JSON to a message's plaintext "
        "before padding (`kth`, in every message).",
        "",
        "| entries | audit path | `kt` JSON per key answer | verify path | whole answer | consistency (n/2+1 → n) | "
        "prove (relay) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["sizes"]:
        us = r["us"]
        lines.append(
            f"| {r['entries']:,} | {r['proof_hashes']} hashes, {r['proof_bytes']} B | {r['kt_json_bytes']} B | "
            f"{us['inclusion']:.1f} µs | {us['answer']:.1f} µs | {us['consistency']:.1f} µs "
            f"({r['consistency_hashes']} hashes) | {us['prove']:.1f} µs |"
        )
    if result.get("gossip"):
        lines += ["", *gossip_section(result["gossip"], result["bits"], result["sizes"][-1]["entries"])]
    return "\n".join(lines)


def gossip_section(rows: list[dict], bits: int, entries: int) -> list[str]:
    """REPORT.md lines: per text length, the padded plaintext and the envelope with and without the head."""
    lines = [
        f"The gossiped head's bucket effect: a text message sealed as the client seals it (Padmé, two members' "
        f"RSA-{bits} keys), without and with the `kth` head of a {entries:,}-entry log. *Moved* = the share of "
        "the text lengths of the decade around the size (L/√10 to L·√10 B) that the head puts in a bigger bucket, "
        "and the padded bytes it adds there on average.",
        "",
        "| text | document (no head → head) | padded plaintext | envelope | moved (decade) | + padded B (decade) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = r["decade"]
        lines.append(
            f"| {r['text_bytes']:,} B | {r['document_bytes']:,} → {r['document_kth_bytes']:,} B | "
            f"{r['padded_bytes']:,} → {r['padded_kth_bytes']:,} B | {r['envelope_bytes']:,} → "
            f"{r['envelope_kth_bytes']:,} B | {d['moved_pct']:.0f} % of {d['from']:,}–{d['to']:,} B | "
            f"{d['mean_added_bytes']:.0f} |"
        )
    return lines


def print_result(console, result: dict) -> None:
    """One line per log size for the console."""
    for r in result["sizes"]:
        us = r["us"]
        console.print(
            f"transparency at {r['entries']:,} entries: path {r['proof_hashes']} hashes ({r['proof_bytes']} B, "
            f"kt member {r['kt_json_bytes']} B); verify {us['inclusion']:.1f} µs, whole key answer "
            f"{us['answer']:.1f} µs, consistency {us['consistency']:.1f} µs, prove {us['prove']:.1f} µs"
        )
    verdict = "met" if result["met"] else "NOT met"
    console.print(f"target: key answer <= {result['target_ms']:g} ms at the largest size: {verdict}")
    for r in result.get("gossip", []):
        console.print(
            f"gossip, a {r['text_bytes']:,} B text: padded {r['padded_bytes']:,} -> {r['padded_kth_bytes']:,} B, "
            f"envelope {r['envelope_bytes']:,} -> {r['envelope_kth_bytes']:,} B with the head; it moves "
            f"{r['decade']['moved_pct']:.0f} % of {r['decade']['from']:,}-{r['decade']['to']:,} B texts "
            "to a bigger bucket"
        )
