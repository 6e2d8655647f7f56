"""``recipients``: sender and receiver cost against the number of recipients, per RSA size, for
four strategies side by side: per-message RSA-OAEP wrap (the product), X25519 + HKDF wrap, a hybrid
post-quantum wrap (X25519 + ML-KEM-768 + HKDF), and a conversation key rotated on membership
change; with each strategy's envelope bytes per recipient and the number of recipients at which
its envelope reaches the relay's limit.

Recipients beyond the ``pool`` distinct keys of a size reuse those keys under distinct key ids:
an RSA public-key operation costs the same for any key of one modulus size, and generating 256
RSA-4096 keys would take minutes. The receiver is always the last recipient (the worst case for
finding its entry). The product's seal and its floor (``primitives.seal_primitives``: the same
primitives on the same inputs) are timed in turns, so the ratio holds while the machine's load
drifts.
"""

from __future__ import annotations

import copy
import dataclasses
import os

from cryptography.hazmat.primitives.asymmetric import ed25519

from client_tui.core.record import now_ms
from shared import content, envelope
from shared.b64 import b64u_encode
from shared.content import Text
from shared.envelope import _OAEP  # the padding object the envelope uses
from shared.keys import Identity, PublicIdentity

from .primitives import SEAL_EXTRA, seal_primitives, text_of
from .profiles import breakdown
from .strategies import GroupKey, HybridRecipient, HybridWrap, X25519Recipient, X25519Wrap
from .timing import Stats, measure, measure_paired, sample

UI_FRAME_MS = 1000 / 60
"""One frame at 60 Hz (ms): the point past which work on a UI thread is visible."""
STRATEGIES = {
    "rsa": "RSA-OAEP per message (product)",
    "x25519": "X25519 + HKDF per message",
    "hybrid": "X25519 + ML-KEM-768 + HKDF per message",
    "group": "conversation key (per message)",
    "group_rotate": "conversation key: rotation message (N RSA wraps)",
}


def relay_limits() -> dict[str, int]:
    """The relay's default limits: ``max_envelope_bytes`` and ``max_recipients``."""
    from server.settings import Settings

    d = {f.name: f.default for f in dataclasses.fields(Settings)}
    return {"max_envelope_bytes": d["max_envelope_bytes"], "max_recipients": d["max_recipients"]}


def _alias(pub: PublicIdentity) -> PublicIdentity:
    """The same public keys under a fresh, random (but well-formed) wrap key id."""
    c = copy.copy(pub)
    object.__setattr__(c, "wrap_kid", b64u_encode(os.urandom(32)))
    return c


def _adaptive(fn, budget_ms: float, most: int, least: int = 5) -> Stats:
    """Measure ``fn`` as many times as ``budget_ms`` allows (between ``least`` and ``most``)."""
    est = max(0.001, min(sample(fn, 2, warmup=1)))
    return measure(fn, int(max(least, min(most, budget_ms / est))), warmup=1)


def recipient_counts(most: int) -> list[int]:
    """1, 2, 4 ... up to ``most`` (powers of two)."""
    out, n = [], 1
    while n <= most:
        out.append(n)
        n *= 2
    return out


def _recipients(keys: list[Identity], count: int, pool: int) -> tuple[list[PublicIdentity], Identity]:
    pubs = [keys[i % pool].public if i < pool else _alias(keys[i % pool].public) for i in range(count)]
    reader = keys[(count - 1) % pool]
    if count > pool:  # the reader must hold the last entry's key under its own id
        pubs[-1] = reader.public
        pubs[(count - 1) % pool] = _alias(reader.public)
    return pubs, reader


def _cell(
    doc: Text, sender: Identity, keys: list[Identity], count: int, pool: int, n: int, budget_ms: float, others: dict
) -> dict:
    """Every strategy at ``count`` recipients (times in ms, sizes in bytes); every strategy encrypts
    the padded content document ``seal`` encrypts."""
    text = content.encode(doc)
    pubs, reader = _recipients(keys, count, pool)
    env = envelope.seal(doc, sender, "c1", pubs, **SEAL_EXTRA)
    parsed = envelope.parse(env)
    sig_input = envelope._signing_input(parsed._env)
    aad = parsed._env.protected.encode("ascii")
    cek, iv = os.urandom(32), os.urandom(12)

    def seal() -> None:
        envelope.seal(doc, sender, "c1", pubs, **SEAL_EXTRA)

    # seal and its floor timed in turns (the ratio holds under load drift), in half the budget each
    est = max(0.001, min(sample(seal, 2, warmup=1)))
    paired = measure_paired(
        {"seal": seal, "floor": lambda: seal_primitives(pubs, sender, cek, iv, text, aad, sig_input)},
        int(max(5, min(n, budget_ms / 2 / est))),
        warmup=1,
    )
    signer, verify_key = others["signer"], others["verify_key"]
    xr, hr = others["x25519"][:count], others["hybrid"][:count]
    xenv, henv = X25519Wrap.seal(text, signer, xr), HybridWrap.seal(text, signer, hr)
    group, dist = GroupKey.rotate(signer, [p.wrap_key for p in pubs])
    genv = group.seal(text, signer)
    few = max(20, n // 4)
    return {
        "rsa_seal": paired["seal"].as_dict(),
        "rsa_seal_floor_ms": paired["floor"].median,
        "rsa_seal_floor": paired["floor"].as_dict(),
        "rsa_open": _adaptive(lambda: envelope.open(env, reader, sender.public.sign_key), budget_ms / 2, n).as_dict(),
        "relay_parse": _adaptive(lambda: envelope.parse(env), budget_ms / 4, n).as_dict(),
        "rsa_envelope_bytes": len(env),
        "x25519_seal": _adaptive(lambda: X25519Wrap.seal(text, signer, xr), budget_ms / 2, n).as_dict(),
        "x25519_open": _adaptive(lambda: X25519Wrap.open(xenv, xr[-1], verify_key), budget_ms / 4, n).as_dict(),
        "x25519_envelope_bytes": len(xenv),
        "hybrid_seal": _adaptive(lambda: HybridWrap.seal(text, signer, hr), budget_ms / 2, n).as_dict(),
        "hybrid_open": _adaptive(lambda: HybridWrap.open(henv, hr[-1], verify_key), budget_ms / 4, n).as_dict(),
        "hybrid_envelope_bytes": len(henv),
        "group_seal": measure(lambda: group.seal(text, signer), few).as_dict(),
        "group_open": measure(lambda: group.open(genv, verify_key), few).as_dict(),
        "group_envelope_bytes": len(genv),
        "group_rotate": _adaptive(
            lambda: GroupKey.rotate(signer, [p.wrap_key for p in pubs]), budget_ms / 2, n
        ).as_dict(),
        "group_rotate_bytes": len(dist),
    }


def run(
    n: int = 200,
    sizes: tuple[int, ...] = (2048, 3072, 4096),
    most: int = 256,
    pool: int = 8,
    budget_ms: float = 1500,
    size: int = 1024,
    progress=None,
) -> dict:
    """Sweep recipients 1..``most`` for each RSA size in ``sizes``; ``progress(label)`` per cell.

    Returns ``{"params", "limits", "sizes": {bits: {"wrap", "unwrap", "rows": {N: {...}}, "knees",
    "at_limit"}}}`` with every time in ms and envelope sizes in bytes.
    """
    step = progress or (lambda _label: None)
    doc = Text(text_of(size), ts=now_ms(), ctr=1)
    counts = recipient_counts(most)
    signer = ed25519.Ed25519PrivateKey.generate()
    step(f"X25519 and ML-KEM-768 keys for {most} recipients")
    others = {
        "signer": signer,
        "verify_key": signer.public_key(),
        "x25519": [X25519Recipient() for _ in range(most)],
        "hybrid": [HybridRecipient() for _ in range(most)],
    }
    limits = relay_limits()
    out: dict = {
        "params": {"n": n, "sizes": list(sizes), "most": most, "pool": pool, "size": size, "budget_ms": budget_ms},
        "limits": limits,
        "strategies": STRATEGIES,
        "sizes": {},
    }
    for bits in sizes:
        step(f"RSA-{bits}: generating {pool} keys")
        sender = Identity.generate("alice", bits)
        keys = [sender] + [Identity.generate(f"u{i}", bits) for i in range(pool - 1)]
        wrapped = keys[1].public.wrap_key.encrypt(b"k" * 32, _OAEP)
        wrap = measure(lambda k=keys[1]: k.public.wrap_key.encrypt(b"k" * 32, _OAEP), n)
        unwrap = measure(lambda k=keys[1], w=wrapped: k.wrap_private.decrypt(w, _OAEP), max(20, n // 4))
        rows: dict[str, dict] = {}
        for count in counts:
            step(f"RSA-{bits}: {count} recipients")
            rows[str(count)] = _cell(doc, sender, keys, count, pool, n, budget_ms, others)
        step(f"RSA-{bits}: profile of a seal to 1 recipient (the smallest floor)")
        profile = breakdown(
            lambda s=sender: envelope.seal(doc, s, "c1", [s.public], **SEAL_EXTRA),
            calls=min(2000, 10 * n),
        )
        out["sizes"][str(bits)] = {
            "wrap": wrap.as_dict(),
            "unwrap": unwrap.as_dict(),
            "rows": rows,
            "knees": knees(rows),
            "at_limit": at_limit(rows, limits),
            "seal_profile_n1": profile,
        }
    return out


def at_limit(rows: dict[str, dict], limits: dict[str, int]) -> dict[str, dict]:
    """Per strategy: envelope bytes per recipient (the slope between the smallest and the largest
    N of the sweep), the fixed part, and the first N whose envelope exceeds the relay's
    ``max_envelope_bytes`` (None when it never does: no per-recipient bytes)."""
    ns = sorted(int(k) for k in rows)
    lo, hi = rows[str(ns[0])], rows[str(ns[-1])]
    out = {}
    for name, key in (
        ("rsa", "rsa_envelope_bytes"),
        ("x25519", "x25519_envelope_bytes"),
        ("hybrid", "hybrid_envelope_bytes"),
        ("group", "group_envelope_bytes"),
        ("group_rotate", "group_rotate_bytes"),
    ):
        per = (hi[key] - lo[key]) / (ns[-1] - ns[0]) if ns[-1] > ns[0] else 0.0
        fixed = lo[key] - per * ns[0]
        first = None if per < 1 else int((limits["max_envelope_bytes"] - fixed) // per) + 1
        out[name] = {
            "bytes_per_recipient": per,
            "fixed_bytes": fixed,
            "first_n_over_limit": first,
            "recipient_cap": limits["max_recipients"],
        }
    return out


def knees(rows: dict[str, dict]) -> dict[str, int | None]:
    """Where per-recipient RSA wrapping stops being cheap: the first recipient count whose seal
    median exceeds 1 ms, exceeds one 60 Hz UI frame (16.7 ms), and exceeds 10x a message under a
    conversation key (None when no count in the sweep does)."""

    def first(pred) -> int | None:
        for count, r in sorted(rows.items(), key=lambda kv: int(kv[0])):
            if pred(r):
                return int(count)
        return None

    return {
        "over_1ms": first(lambda r: r["rsa_seal"]["median_ms"] > 1.0),
        "over_ui_frame": first(lambda r: r["rsa_seal"]["median_ms"] > UI_FRAME_MS),
        "over_10x_group_key": first(lambda r: r["rsa_seal"]["median_ms"] > 10 * r["group_seal"]["median_ms"]),
    }
