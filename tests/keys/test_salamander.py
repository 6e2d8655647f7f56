"""The hostile sender's tool works: without a key commitment, one AES-GCM ciphertext opens under two
keys to two different texts (so the commitment tests cannot pass vacuously)."""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bench.tools.salamander import salamander


def test_one_gcm_ciphertext_authenticates_under_two_keys():
    k1, k2, iv = os.urandom(32), os.urandom(32), os.urandom(12)
    aad = b"the protected header, as the envelope binds it"
    ct, tag = salamander(k1, k2, iv, aad, b"meet at noon at the north gate")
    one = AESGCM(k1).decrypt(iv, ct + tag, aad)
    two = AESGCM(k2).decrypt(iv, ct + tag, aad)
    assert one.startswith(b"meet at noon at the north gate") and len(one) == 48
    assert two != one
