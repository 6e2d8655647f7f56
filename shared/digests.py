"""Hashes, HMAC and constant-time comparison, from ``cryptography`` (OpenSSL): the one place the
protocol, the relay and the client take them from.

The project's rule is that cryptographic primitives come only from ``cryptography``; Python's
``hashlib`` and ``hmac`` are not used. The price, measured here: one short SHA-256 costs ~2.6 µs
through ``cryptography``'s ``Hash`` object against ~1.0 µs with ``hashlib`` (a context object per
call), which a key transparency proof (≤ 64 hashes) or a Merkle tree built at relay start pays.

- :func:`sha256` / :func:`sha512`: FIPS 180-4 digests of the concatenated ``parts``.
- :func:`hmac_sha256`: RFC 2104 HMAC with SHA-256, a 32-byte tag.
- :class:`Sha256`: an incremental SHA-256 whose :meth:`~Sha256.digest` may be read more than once.
- :func:`equal`: constant-time comparison of two byte strings (for tags, hashes, tokens).
"""

from __future__ import annotations

from cryptography.hazmat.primitives import constant_time, hashes, hmac

__all__ = ["SHA256_BYTES", "SHA512_BYTES", "sha256", "sha512", "hmac_sha256", "Sha256", "equal"]

SHA256_BYTES = 32
SHA512_BYTES = 64


def _digest(algorithm: hashes.HashAlgorithm, parts: tuple[bytes, ...]) -> bytes:
    h = hashes.Hash(algorithm)
    for part in parts:
        h.update(part)
    return h.finalize()


def sha256(*parts: bytes) -> bytes:
    """SHA-256 (FIPS 180-4) of ``parts`` concatenated: 32 bytes. ``sha256()`` is the empty string's."""
    return _digest(hashes.SHA256(), parts)


def sha512(*parts: bytes) -> bytes:
    """SHA-512 (FIPS 180-4) of ``parts`` concatenated: 64 bytes."""
    return _digest(hashes.SHA512(), parts)


def hmac_sha256(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA-256 (RFC 2104) under ``key`` (any length; 32 bytes in this project) of ``parts``
    concatenated: a 32-byte tag."""
    mac = hmac.HMAC(key, hashes.SHA256())
    for part in parts:
        mac.update(part)
    return mac.finalize()


class Sha256:
    """An incremental SHA-256 (FIPS 180-4) over data given in pieces (an attachment's chunks).

    Unlike ``cryptography``'s ``Hash``, :meth:`digest` can be read any number of times and
    :meth:`update` called after it (each read finalises a copy)."""

    __slots__ = ("_h",)

    def __init__(self, data: bytes = b"") -> None:
        self._h = hashes.Hash(hashes.SHA256())
        if data:
            self._h.update(data)

    def update(self, data: bytes) -> None:
        """Add ``data`` (any length) to what is hashed."""
        self._h.update(data)

    def digest(self) -> bytes:
        """The 32-byte SHA-256 of everything given so far."""
        return self._h.copy().finalize()


def equal(a: bytes, b: bytes) -> bool:
    """``a == b`` in time that depends only on their lengths (tags, hashes, tokens: a comparison
    an attacker may time). Text is compared as its UTF-8 bytes by the caller."""
    return constant_time.bytes_eq(a, b)
