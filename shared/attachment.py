"""Attachments: a file sealed in chunks under a fresh file key (docs/PROTOCOL.md §13).

A file of ``size`` plaintext bytes becomes one opaque *blob* the relay stores::

    blob   = header || sealed chunk 0 || ... || sealed chunk n-1        n = max(1, ceil(size / chunk))
    header = "E2EA" (4) || version 0x01 (1) || chunk (4, uint32 big-endian: plaintext bytes per chunk)
             || nonce prefix (7 random bytes) || key check (32)          = 48 bytes
    sealed chunk i = AES-256-GCM(file key, nonce_i, plaintext_i, aad_i) = ciphertext || tag (16)
    nonce_i = nonce prefix (7) || uint32be(i) (4) || last (1: 0x01 for chunk n-1, else 0x00) = 12 bytes
    aad_i   = header (48) || uint32be(i) (4) || last (1)                                  = 53 bytes
    key check = HMAC-SHA-256(key = file key, "e2ee-chat/v1/attachment-key-check")

Every chunk but the last holds exactly ``chunk`` plaintext bytes; the last holds 1..``chunk``
(0 only for an empty file). The blob is ``48 + size + 16 n`` bytes (:func:`blob_size`).

This is the nonce-based online AE scheme STREAM (Hoang, Reyhanitabar, Rogaway, Vizár, "Online
Authenticated-Encryption and its Nonce-Reuse Misuse-Resistance", CRYPTO 2015): each chunk's
position and whether it is the last are bound into its nonce and its AAD, so a reordered,
swapped, repeated or dropped chunk fails authentication, and a blob cut at a chunk boundary ends
on a chunk not sealed as the last. The file key is made by :class:`AttachmentEncryptor` itself
(32 random bytes, never passed in, used for one file only) and nonces count up from 0 with a
chunk limit of 2^32, so no nonce repeats under a key. The key check commits the blob to its key
(AES-GCM alone is not key-committing), and the reference's SHA-256 over the whole blob commits
the signed message to the exact ciphertext.

:class:`AttachmentEncryptor` and :class:`AttachmentDecryptor` work incrementally, so a 25 MiB
file is never held whole (at most two chunks are buffered) and progress can be reported. Pure:
no I/O.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import digests
from .errors import (
    AttachmentHashMismatch,
    AttachmentInvalid,
    AttachmentKeyMismatch,
    AttachmentMalformed,
    AttachmentSizeMismatch,
    AttachmentTruncated,
    ChunkOutOfOrder,
    ChunkTampered,
)

__all__ = [
    "MAGIC",
    "VERSION",
    "KEY_BYTES",
    "TAG_BYTES",
    "HASH_BYTES",
    "PREFIX_BYTES",
    "KEY_CHECK_BYTES",
    "KEY_CHECK_LABEL",
    "HEADER_BYTES",
    "MAX_CHUNKS",
    "DEFAULT_CHUNK",
    "MIN_CHUNK",
    "MAX_CHUNK",
    "SealedAttachment",
    "AttachmentEncryptor",
    "AttachmentDecryptor",
    "chunk_count",
    "blob_size",
    "max_plaintext",
]

MAGIC = b"E2EA"
VERSION = 1
KEY_BYTES = 32  # AES-256
TAG_BYTES = 16  # GCM tag
HASH_BYTES = 32  # SHA-256
PREFIX_BYTES = 7  # the random part of each nonce (STREAM's nonce N)
KEY_CHECK_BYTES = 32
HEADER_BYTES = len(MAGIC) + 1 + 4 + PREFIX_BYTES + KEY_CHECK_BYTES  # 48
DEFAULT_CHUNK = 64 * 1024  # plaintext bytes per chunk (as age's STREAM)
MIN_CHUNK = 1024
MAX_CHUNK = 4 * 1024 * 1024  # a decryptor buffers at most two sealed chunks
MAX_CHUNKS = 2**32  # the 4-byte counter of the nonce
KEY_CHECK_LABEL = b"e2ee-chat/v1/attachment-key-check"
_HEAD = struct.Struct(">4sBI7s")  # magic, version, chunk, nonce prefix (16 bytes; the key check follows)


def _key_check(key: bytes) -> bytes:
    return digests.hmac_sha256(key, KEY_CHECK_LABEL)


def _check_chunk(chunk: int, field: str = "chunk") -> None:
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not MIN_CHUNK <= chunk <= MAX_CHUNK:
        raise AttachmentMalformed(f"{field}: plaintext bytes per chunk must be {MIN_CHUNK}..{MAX_CHUNK}", field=field)


def chunk_count(size: int, chunk: int = DEFAULT_CHUNK) -> int:
    """How many chunks a file of ``size`` plaintext bytes is sealed in: ``max(1, ceil(size / chunk))``."""
    return max(1, -(-size // chunk))


def blob_size(size: int, chunk: int = DEFAULT_CHUNK) -> int:
    """The blob's length in bytes for ``size`` plaintext bytes: ``48 + size + 16 * chunk_count``."""
    return HEADER_BYTES + size + TAG_BYTES * chunk_count(size, chunk)


def max_plaintext(max_blob: int, chunk: int = DEFAULT_CHUNK) -> int:
    """The largest file (plaintext bytes) whose blob fits in ``max_blob`` bytes (0 if none does)."""
    room = max_blob - HEADER_BYTES
    if room < TAG_BYTES:
        return 0
    full = room // (chunk + TAG_BYTES)  # whole sealed chunks
    rest = room - full * (chunk + TAG_BYTES)
    return full * chunk + max(0, rest - TAG_BYTES)


def _nonce_aad(header: bytes, index: int, last: bool) -> tuple[bytes, bytes]:
    tail = struct.pack(">IB", index, 1 if last else 0)
    return header[len(MAGIC) + 5 : len(MAGIC) + 5 + PREFIX_BYTES] + tail, header + tail


@dataclass(frozen=True)
class SealedAttachment:
    """What the message that carries an attachment needs, after the last chunk was sealed.

    Attributes:
        key: the 32-byte file key (AES-256).
        size: plaintext bytes.
        chunk: plaintext bytes per chunk.
        sha256: SHA-256 over the whole blob (header and every sealed chunk), 32 bytes.
        blob_size: the blob's length in bytes.
    """

    key: bytes
    size: int
    chunk: int
    sha256: bytes
    blob_size: int


class AttachmentEncryptor:
    """Seals one file of ``size`` plaintext bytes, chunk by chunk, under a fresh file key.

    Send :attr:`header` first, then :meth:`seal` each chunk in order (every chunk ``chunk`` bytes,
    the last one the rest), then :meth:`finish`; or iterate :meth:`stream`.

    Args:
        size: the file's length in bytes (>= 0).
        chunk: plaintext bytes per chunk (1 KiB..4 MiB; default 64 KiB).

    Raises:
        AttachmentMalformed: ``size`` negative or needing more than 2^32 chunks; ``chunk`` out of range.
    """

    def __init__(self, size: int, chunk: int = DEFAULT_CHUNK) -> None:
        _check_chunk(chunk)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise AttachmentMalformed("size: a number of bytes >= 0", field="size")
        if chunk_count(size, chunk) > MAX_CHUNKS:
            raise AttachmentMalformed(f"size: more than {MAX_CHUNKS} chunks", field="size")
        self.size, self.chunk = size, chunk
        self.chunks = chunk_count(size, chunk)
        self._key = AESGCM.generate_key(bit_length=256)
        self._aead = AESGCM(self._key)
        self.header = _HEAD.pack(MAGIC, VERSION, chunk, os.urandom(PREFIX_BYTES)) + _key_check(self._key)
        self._hash = digests.Sha256(self.header)
        self._index = 0
        self.sealed_bytes = len(self.header)  # blob bytes produced so far (progress)

    def seal(self, plaintext: bytes) -> bytes:
        """Seal the next chunk: ``chunk`` bytes, or for the last one ``size - chunk * (n-1)``.
        Returns its ciphertext and tag (``len(plaintext) + 16`` bytes).

        Raises:
            ValueError: a chunk of the wrong length, or one after the last.
        """
        i = self._index
        if i >= self.chunks:
            raise ValueError("every chunk of this file is sealed already")
        last = i == self.chunks - 1
        want = self.size - self.chunk * i if last else self.chunk
        if len(plaintext) != want:
            raise ValueError(f"chunk {i} must be {want} bytes, not {len(plaintext)}")
        nonce, aad = _nonce_aad(self.header, i, last)
        sealed = self._aead.encrypt(nonce, plaintext, aad)
        self._hash.update(sealed)
        self._index += 1
        self.sealed_bytes += len(sealed)
        return sealed

    def finish(self) -> SealedAttachment:
        """The key, size, chunk size and blob SHA-256, once every chunk is sealed.

        Raises:
            ValueError: chunks are still missing.
        """
        if self._index != self.chunks:
            raise ValueError(f"{self.chunks - self._index} chunks are not sealed yet")
        return SealedAttachment(self._key, self.size, self.chunk, self._hash.digest(), self.sealed_bytes)

    def stream(self, read: Callable[[int], bytes]) -> Iterator[bytes]:
        """The blob piece by piece: the header, then each sealed chunk of what ``read(n)`` returns
        (a file's ``read``); :meth:`finish` afterwards.

        Raises:
            ValueError: ``read`` returned fewer bytes than ``size`` promised (the file shrank).
        """
        yield self.header
        for i in range(self.chunks):
            want = self.size - self.chunk * i if i == self.chunks - 1 else self.chunk
            data = read(want)
            if len(data) != want:
                raise ValueError(f"the file ended after {self.chunk * i + len(data)} of {self.size} bytes")
            yield self.seal(data)


class AttachmentDecryptor:
    """Opens one blob incrementally and checks it against its reference.

    Feed the blob with :meth:`update` in pieces of any length (each returns the plaintext of the
    chunks it completed), then call :meth:`finish` (the last chunk's plaintext). A chunk is
    decrypted only once the next byte after it arrived or the blob ended, so the last chunk is
    the one the blob ends on (STREAM). Plaintext is authentic chunk by chunk, but the whole file
    only once :meth:`finish` returned: write it to a temporary file and keep it only then.

    Args:
        key: the 32-byte file key.
        size: the file's plaintext bytes, from the reference.
        sha256: SHA-256 over the whole blob, 32 bytes, from the reference.
        chunk: plaintext bytes per chunk, from the reference (the header must say the same).

    Raises:
        AttachmentMalformed: a key, hash or size of the wrong form (``field`` names it).
    """

    def __init__(self, key: bytes, *, size: int, sha256: bytes, chunk: int = DEFAULT_CHUNK) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise AttachmentMalformed(f"key: {KEY_BYTES} bytes", field="key")
        if not isinstance(sha256, bytes) or len(sha256) != HASH_BYTES:
            raise AttachmentMalformed(f"sha256: {HASH_BYTES} bytes", field="sha256")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise AttachmentMalformed("size: a number of bytes >= 0", field="size")
        _check_chunk(chunk)
        self._key, self._sha256, self.size, self.chunk = key, sha256, size, chunk
        self.chunks = chunk_count(size, chunk)
        self.expected = blob_size(size, chunk)  # blob bytes the reference promises
        self._aead = AESGCM(key)
        self._hash = digests.Sha256()
        self._buf = b""
        self.header: bytes | None = None
        self._index = 0
        self.received = 0  # blob bytes fed so far (progress)
        self.plaintext_bytes = 0

    def update(self, data: bytes) -> bytes:
        """Feed the next ``data`` of the blob; returns the plaintext of every chunk it completed
        (possibly ``b""``).

        Raises:
            AttachmentSizeMismatch: more bytes than the reference's size allows.
            AttachmentMalformed: the header is not this version's, or its chunk size is not the
                reference's.
            AttachmentKeyMismatch: the key is not the one the header's key check commits to.
            ChunkOutOfOrder: a chunk sealed for another position.  ChunkTampered: a chunk that
                does not authenticate at any position.
        """
        self.received += len(data)
        self._hash.update(data)
        if self.received > self.expected:
            raise AttachmentSizeMismatch(
                f"blob: more than the {self.expected} bytes a file of {self.size} bytes is sealed in", field="size"
            )
        buf = self._buf + data if self._buf else bytes(data)
        pos = 0
        if self.header is None:
            if len(buf) < HEADER_BYTES:
                self._buf = buf
                return b""
            self._read_header(buf[:HEADER_BYTES])
            pos = HEADER_BYTES
        sealed_len = self.chunk + TAG_BYTES
        out = []
        view = memoryview(buf)
        while len(buf) - pos > sealed_len:  # more follows this chunk: it is not the last
            out.append(self._open(view[pos : pos + sealed_len], last=False))
            pos += sealed_len
        self._buf = buf[pos:]
        return b"".join(out)

    def finish(self) -> bytes:
        """End of the blob: open the chunk it ends on as the last one, then check the whole.
        Returns that chunk's plaintext.

        Raises:
            AttachmentTruncated: the blob ends early (no header, a partial chunk, or a final chunk
                not sealed as the last one).
            AttachmentHashMismatch: every chunk opened, but the blob's SHA-256 is not the reference's.
            AttachmentSizeMismatch: the plaintext is not ``size`` bytes.
            ChunkOutOfOrder, ChunkTampered, AttachmentKeyMismatch: as :meth:`update`.
        """
        if self.header is None or len(self._buf) < TAG_BYTES:
            raise self._truncated("the blob ends before its last chunk")
        plain = self._open(memoryview(self._buf), last=True)
        self._buf = b""
        if not digests.equal(self._hash.digest(), self._sha256):
            raise AttachmentHashMismatch("blob: its SHA-256 is not the reference's", field="sha256")
        if self.plaintext_bytes != self.size:
            raise AttachmentSizeMismatch(
                f"size: the file is {self.plaintext_bytes} bytes, the reference says {self.size}", field="size"
            )
        return plain

    def _read_header(self, header: bytes) -> None:
        magic, version, chunk, _prefix = _HEAD.unpack(header[: _HEAD.size])
        if magic != MAGIC or version != VERSION:
            raise AttachmentMalformed("blob: not an attachment blob of version 1", field="header")
        if chunk != self.chunk:
            raise AttachmentMalformed(f"chunk: the header says {chunk}, the reference {self.chunk}", field="chunk")
        if not digests.equal(header[_HEAD.size :], _key_check(self._key)):
            raise AttachmentKeyMismatch("key: not the key this blob was sealed under", field="key")
        self.header = bytes(header)

    def _try(self, sealed: memoryview, index: int, last: bool) -> bytes | None:
        assert self.header is not None  # chunks are opened after the header
        nonce, aad = _nonce_aad(self.header, index, last)
        try:
            return self._aead.decrypt(nonce, sealed, aad)
        except InvalidTag:
            return None

    def _open(self, sealed: memoryview, last: bool) -> bytes:
        i = self._index
        plain = self._try(sealed, i, last)
        if plain is None:
            raise self._diagnose(sealed, i, last)
        self._index += 1
        self.plaintext_bytes += len(plain)
        return plain

    def _diagnose(self, sealed: memoryview, i: int, last: bool) -> AttachmentInvalid:
        """Why chunk ``i`` did not open: name the attack (runs once, on the failure path)."""
        if self._try(sealed, i, not last) is not None:
            if last:  # the blob ends on a chunk sealed as "more follows": cut at a chunk boundary
                return self._truncated(f"the blob ends after chunk {i}, which is not the last")
            return AttachmentSizeMismatch(f"blob: bytes follow chunk {i}, sealed as the last one", field="size")
        for j in range(self.chunks):
            if j != i and self._try(sealed, j, j == self.chunks - 1) is not None:
                return ChunkOutOfOrder(f"chunk {i}: sealed for position {j}", index=i, sealed_at=j)
        if last and self.received < self.expected:
            return self._truncated(f"the blob ends inside chunk {i}")
        return ChunkTampered(f"chunk {i}: does not authenticate (changed ciphertext, tag or header)", index=i)

    def _truncated(self, why: str) -> AttachmentTruncated:
        return AttachmentTruncated(
            f"blob: {why} ({self.received} of {self.expected} bytes)", expected=self.expected, received=self.received
        )
