"""Primitive costs next to the L4 seal/open that use them, from one run.

The primitives are called with exactly the parameters ``shared.envelope`` uses (RSA-OAEP with
SHA-256/MGF1-SHA-256, AES-256-GCM with a 96-bit nonce and the protected header as AAD, Ed25519),
so the ratio seal / (N x wrap + encrypt + sign) shows the envelope's own overhead.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared import envelope
from shared.envelope import _OAEP  # same padding object the envelope uses
from shared.keys import Identity

from .timing import Stats, measure


def run(n: int = 1000, size: int = 1024, recipients: int = 2, bits: int = 3072) -> dict:
    """Measure primitives and seal/open for a ``size``-byte message to ``recipients`` (RSA-``bits``).

    Returns ``{"rows": {name: Stats}, "ratios": {...}, "params": {...}}``; times in ms.
    """
    people = [Identity.generate(f"user{i}", bits) for i in range(max(2, recipients))]
    sender, reader = people[0], people[1]
    pubs = [p.public for p in people[:recipients]]
    msg = os.urandom(size)
    cek, iv, aad = os.urandom(32), os.urandom(12), os.urandom(600)
    aes = AESGCM(cek)
    sealed_aes = aes.encrypt(iv, msg, aad)
    wrapped = reader.public.wrap_key.encrypt(cek, _OAEP)
    sig = sender.sign_private.sign(msg + aad)
    env = envelope.seal(msg, sender, "bench", pubs, counter=1)
    sign_pub = sender.public.sign_key

    rows: dict[str, Stats] = {
        f"RSA-OAEP-256 wrap ({bits})": measure(lambda: reader.public.wrap_key.encrypt(cek, _OAEP), n),
        f"RSA-OAEP-256 unwrap ({bits})": measure(lambda: reader.wrap_private.decrypt(wrapped, _OAEP), n),
        f"AES-256-GCM encrypt ({size} B)": measure(lambda: AESGCM(cek).encrypt(iv, msg, aad), n),
        f"AES-256-GCM decrypt ({size} B)": measure(lambda: AESGCM(cek).decrypt(iv, sealed_aes, aad), n),
        "Ed25519 sign": measure(lambda: sender.sign_private.sign(msg + aad), n),
        "Ed25519 verify": measure(lambda: sign_pub.verify(sig, msg + aad), n),
        f"L4 seal ({size} B, {recipients} recipients)": measure(
            lambda: envelope.seal(msg, sender, "bench", pubs, counter=1), n),
        f"L4 open ({size} B)": measure(lambda: envelope.open(env, reader, sign_pub), n),
    }
    r = list(rows.values())
    wrap, unwrap, enc, dec, sign, verify, seal_t, open_t = (s.median for s in r)
    seal_floor = recipients * wrap + enc + sign
    open_floor = unwrap + dec + verify
    return {
        "params": {"n": n, "size": size, "recipients": recipients, "bits": bits},
        "rows": rows,
        "ratios": {
            "seal / (N*wrap + encrypt + sign)": seal_t / seal_floor,
            "open / (unwrap + decrypt + verify)": open_t / open_floor,
        },
    }
