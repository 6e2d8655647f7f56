"""``recipients``: sender and receiver cost against the number of recipients, per RSA size, for
three strategies side by side (per-message RSA-OAEP wrap — the product —, X25519+HKDF wrap, and a
conversation key rotated on membership change).

Recipients beyond the ``pool`` distinct keys of a size reuse those keys under distinct key ids:
an RSA public-key operation costs the same for any key of one modulus size, and generating 256
RSA-4096 keys would take minutes. The receiver is always the last recipient (the worst case for
finding its entry).
"""

from __future__ import annotations

import copy
import os

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared import envelope
from shared.b64 import b64u_encode
from shared.envelope import _OAEP
from shared.keys import Identity, PublicIdentity

from .primitives import seal_primitives, text_of
from .strategies import GroupKey, X25519Recipient, X25519Wrap
from .timing import Stats, measure, measure_paired, sample

UI_FRAME_MS = 1000 / 60
"""One frame at 60 Hz (ms): the point past which work on a UI thread is visible."""


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


def run(n: int = 200, sizes: tuple[int, ...] = (2048, 3072, 4096), most: int = 256, pool: int = 8,
        budget_ms: float = 1500, size: int = 1024, progress=None) -> dict:
    """Sweep recipients 1..``most`` for each RSA size in ``sizes``; ``progress(label)`` per cell.

    Returns ``{"params", "sizes": {bits: {"wrap_ms", "unwrap_ms", "rows": {N: {...}}, "knees"}}}``
    with every time in ms and envelope sizes in bytes.
    """
    step = progress or (lambda _label: None)
    text = text_of(size).encode()
    signer = ed25519.Ed25519PrivateKey.generate()
    verify_key = signer.public_key()
    counts = recipient_counts(most)
    cek, iv = os.urandom(32), os.urandom(12)
    x_pool = [X25519Recipient() for _ in range(most)]
    out: dict = {"params": {"n": n, "sizes": list(sizes), "most": most, "pool": pool, "size": size,
                            "budget_ms": budget_ms}, "sizes": {}}
    for bits in sizes:
        step(f"RSA-{bits}: generating {pool} keys")
        sender = Identity.generate("alice", bits)
        keys = [sender] + [Identity.generate(f"u{i}", bits) for i in range(pool - 1)]
        wrap = measure(lambda k=keys[1]: k.public.wrap_key.encrypt(b"k" * 32, _OAEP), n)
        wrapped = keys[1].public.wrap_key.encrypt(b"k" * 32, _OAEP)
        unwrap = measure(lambda k=keys[1], w=wrapped: k.wrap_private.decrypt(w, _OAEP), max(20, n // 4))
        rows: dict[str, dict] = {}
        for count in counts:
            step(f"RSA-{bits}: {count} recipients")
            pubs = [keys[i % pool].public if i < pool else _alias(keys[i % pool].public) for i in range(count)]
            reader = keys[(count - 1) % pool]
            if count > pool:  # the reader must hold the last entry's key under its own id
                pubs[-1] = reader.public
                pubs[(count - 1) % pool] = _alias(reader.public)
            env = envelope.seal(text, sender, "c1", pubs, counter=1)
            parsed = envelope.parse(env)
            sig_input = envelope._signing_input(parsed._env)
            aad = parsed._env.protected.encode("ascii")
            signer_rsa = sender
            sign = measure(lambda sig_input=sig_input, s=signer_rsa: s.sign_private.sign(sig_input), max(20, n // 4))
            enc = measure(lambda aad=aad: AESGCM(cek).encrypt(iv, text, aad), max(20, n // 4))

            def seal_floor(pubs=pubs, s=signer_rsa, sig_input=sig_input, aad=aad) -> None:
                seal_primitives(pubs, s, cek, iv, text, aad, sig_input)

            def seal(pubs=pubs, s=signer_rsa) -> None:
                envelope.seal(text, s, "c1", pubs, counter=1)

            # seal and its floor timed in turns (the ratio holds under load drift), in half the budget each
            est = max(0.001, min(sample(seal, 2, warmup=1)))
            paired = measure_paired({"seal": seal, "floor": seal_floor},
                                    int(max(5, min(n, budget_ms / 2 / est))), warmup=1)
            rsa_seal = paired["seal"]
            rsa_open = _adaptive(
                lambda env=env, reader=reader, s=signer_rsa: envelope.open(env, reader, s.public.sign_key),
                budget_ms / 2, n)
            parse = _adaptive(lambda env=env: envelope.parse(env), budget_ms / 4, n)
            xr = x_pool[:count]
            xenv = X25519Wrap.seal(text, signer, xr)
            x_seal = _adaptive(lambda xr=xr: X25519Wrap.seal(text, signer, xr), budget_ms / 2, n)
            x_open = _adaptive(lambda xenv=xenv, me=xr[-1]: X25519Wrap.open(xenv, me, verify_key), budget_ms / 4, n)
            members = [p.wrap_key for p in pubs]
            group, dist = GroupKey.rotate(signer, members)
            genv = group.seal(text, signer)
            rotate = _adaptive(lambda members=members: GroupKey.rotate(signer, members), budget_ms / 2, n)
            g_seal = measure(lambda group=group: group.seal(text, signer), max(20, n // 4))
            g_open = measure(lambda group=group, genv=genv: group.open(genv, verify_key), max(20, n // 4))
            rows[str(count)] = {
                "rsa_seal": rsa_seal.as_dict(), "rsa_open": rsa_open.as_dict(), "relay_parse": parse.as_dict(),
                "rsa_envelope_bytes": len(env),
                "rsa_seal_floor_ms": paired["floor"].median,
                "rsa_seal_floor_sum_ms": count * wrap.median + enc.median + sign.median,
                "x25519_seal": x_seal.as_dict(), "x25519_open": x_open.as_dict(), "x25519_envelope_bytes": len(xenv),
                "group_seal": g_seal.as_dict(), "group_open": g_open.as_dict(), "group_envelope_bytes": len(genv),
                "group_rotate": rotate.as_dict(), "group_rotate_bytes": len(dist),
            }
        out["sizes"][str(bits)] = {"wrap": wrap.as_dict(), "unwrap": unwrap.as_dict(), "rows": rows,
                                   "knees": knees(rows)}
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
