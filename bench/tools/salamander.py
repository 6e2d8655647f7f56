"""An "invisible salamander" (Dodis, Grubbs, Ristenpart, Woodage 2018): one AES-GCM ciphertext and
tag that authenticate under two different keys: the hostile sender's tool of ``e2ee-demo --attacks``
and of the key-commitment tests. Attack code, used by nothing that seals or opens messages (those
use only ``cryptography``'s AEAD).

GCM's tag is ``GHASH_H(A, C) xor E_K(J0)`` with ``H = E_K(0^128)`` (NIST SP 800-38D). GHASH is
linear in each ciphertext block, so with one block left free the equation tag(K1) = tag(K2) is
linear in that block over GF(2^128) and has one solution.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

_R = 0xE1 << 120
_MASK = (1 << 128) - 1


def _mul(x: int, y: int) -> int:
    """Product in GF(2^128) with GCM's bit order (SP 800-38D, Algorithm 1)."""
    z, v = 0, y
    for i in range(127, -1, -1):
        if (x >> i) & 1:
            z ^= v
        v = (v >> 1) ^ _R if v & 1 else v >> 1
    return z


def _pow(x: int, e: int) -> int:
    out = 1 << 127  # the field's one, in GCM's bit order
    while e:
        if e & 1:
            out = _mul(out, x)
        x = _mul(x, x)
        e >>= 1
    return out


def _inv(x: int) -> int:
    return _pow(x, (1 << 128) - 2)


def _ecb(key: bytes, block: bytes) -> int:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return int.from_bytes(enc.update(block) + enc.finalize(), "big")


def _blocks(data: bytes) -> list[int]:
    data += b"\x00" * (-len(data) % 16)
    return [int.from_bytes(data[i : i + 16], "big") for i in range(0, len(data), 16)]


def _ghash(h: int, aad: bytes, ct: bytes) -> int:
    y = 0
    lengths = ((len(aad) * 8) << 64) | (len(ct) * 8)
    for x in (*_blocks(aad), *_blocks(ct), lengths):
        y = _mul(y ^ x, h)
    return y


def _keystream(key: bytes, iv: bytes, n: int) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.CTR(iv + b"\x00\x00\x00\x02")).encryptor()
    return enc.update(b"\x00" * n) + enc.finalize()


def salamander(key1: bytes, key2: bytes, iv: bytes, aad: bytes, plaintext1: bytes) -> tuple[bytes, bytes]:
    """``(ciphertext, tag)`` valid under both keys for ``iv`` and ``aad``; under ``key1`` it
    decrypts to ``plaintext1`` followed by one 16-byte block of noise (the solved block), under
    ``key2`` to other bytes. ``plaintext1`` is padded with spaces to whole blocks first."""
    assert len(iv) == 12 and key1 != key2
    plaintext1 += b" " * (-len(plaintext1) % 16)
    n = len(plaintext1) + 16
    ks1 = _keystream(key1, iv, n)
    ct = bytearray(a ^ b for a, b in zip(plaintext1 + bytes(16), ks1, strict=True))
    ct[-16:] = bytes(16)  # the free block, solved below
    h1, h2 = _ecb(key1, bytes(16)), _ecb(key2, bytes(16))
    j0 = iv + b"\x00\x00\x00\x01"
    e1, e2 = _ecb(key1, j0), _ecb(key2, j0)
    # the free block is the last ciphertext block: in GHASH it is followed only by the length block,
    # so its coefficient is H^2
    coeff = _pow(h1, 2) ^ _pow(h2, 2)
    rhs = _ghash(h1, aad, bytes(ct)) ^ _ghash(h2, aad, bytes(ct)) ^ e1 ^ e2
    free = _mul(rhs, _inv(coeff)) & _MASK
    ct[-16:] = free.to_bytes(16, "big")
    tag = (_ghash(h1, aad, bytes(ct)) ^ e1).to_bytes(16, "big")
    return bytes(ct), tag
