"""shared.attachment: the blob format byte by byte (rebuilt here from raw AES-GCM), round trips
fed in pieces of every awkward length, and each attack on a blob failing with its own error."""

from __future__ import annotations

import hashlib
import hmac
import io
import struct

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.attachment import (
    DEFAULT_CHUNK,
    HEADER_BYTES,
    AttachmentDecryptor,
    AttachmentEncryptor,
    blob_size,
    chunk_count,
    max_plaintext,
)
from shared.errors import (
    AttachmentHashMismatch,
    AttachmentKeyMismatch,
    AttachmentMalformed,
    AttachmentSizeMismatch,
    AttachmentTruncated,
    ChunkOutOfOrder,
    ChunkTampered,
)

CHUNK = 1024  # the smallest chunk: several chunks from a few KB


def plaintext(n: int) -> bytes:
    return bytes((i * 7 + i // 251) % 256 for i in range(n))


def seal(data: bytes, chunk: int = CHUNK):
    enc = AttachmentEncryptor(len(data), chunk)
    blob = b"".join(enc.stream(io.BytesIO(data).read))
    return blob, enc.finish()


def open_blob(blob: bytes, sealed, pieces: int = 997, key: bytes | None = None, sha256: bytes | None = None) -> bytes:
    dec = AttachmentDecryptor(key or sealed.key, size=sealed.size, sha256=sha256 or sealed.sha256, chunk=sealed.chunk)
    out = [dec.update(blob[i : i + pieces]) for i in range(0, len(blob), pieces)]
    out.append(dec.finish())
    return b"".join(out)


def test_the_blob_is_the_documented_format_rebuilt_from_raw_aes_gcm():
    data = plaintext(2 * CHUNK + 300)
    blob, sealed = seal(data)
    header = blob[:HEADER_BYTES]
    assert header[:4] == b"E2EA" and header[4] == 1 and struct.unpack(">I", header[5:9])[0] == CHUNK
    assert header[16:48] == hmac.new(sealed.key, b"e2ee-chat/v1/attachment-key-check", hashlib.sha256).digest()
    assert len(sealed.key) == 32 and sealed.size == len(data) and sealed.chunk == CHUNK
    assert len(blob) == sealed.blob_size == blob_size(len(data), CHUNK) == 48 + len(data) + 3 * 16
    assert sealed.sha256 == hashlib.sha256(blob).digest()
    prefix, aead, pos = header[9:16], AESGCM(sealed.key), HEADER_BYTES
    for i, (start, end) in enumerate([(0, CHUNK), (CHUNK, 2 * CHUNK), (2 * CHUNK, len(data))]):
        tail = struct.pack(">IB", i, 1 if i == 2 else 0)
        expected = aead.encrypt(prefix + tail, data[start:end], header + tail)
        assert blob[pos : pos + len(expected)] == expected
        pos += len(expected)
    assert pos == len(blob)


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 17])
@pytest.mark.parametrize("pieces", [1, 16, 1000, 1040, 1041, 10**9])
def test_round_trip_fed_in_pieces_of_any_length(size, pieces):
    data = plaintext(size)
    blob, sealed = seal(data)
    assert open_blob(blob, sealed, pieces) == data
    assert chunk_count(size, CHUNK) == max(1, -(-size // CHUNK))


def test_the_default_chunk_and_a_fresh_key_and_nonce_prefix_per_file():
    data = plaintext(DEFAULT_CHUNK + 5)
    (b1, s1), (b2, s2) = seal(data, DEFAULT_CHUNK), seal(data, DEFAULT_CHUNK)
    assert s1.key != s2.key and b1[9:16] != b2[9:16] and b1[48:] != b2[48:]
    assert open_blob(b1, s1, 65536) == data == open_blob(b2, s2, 4096)


def test_a_tampered_chunk_is_chunk_tampered_with_its_index():
    blob, sealed = seal(plaintext(3 * CHUNK))
    bad = bytearray(blob)
    bad[HEADER_BYTES + (CHUNK + 16) + 5] ^= 0x01  # a ciphertext byte of chunk 1
    with pytest.raises(ChunkTampered) as e:
        open_blob(bytes(bad), sealed)
    assert (e.value.index, e.value.field, e.value.as_dict()["detail"]) == (1, "chunk", {"index": 1})
    bad = bytearray(blob)
    bad[-1] ^= 0x80  # the last chunk's tag
    with pytest.raises(ChunkTampered) as e:
        open_blob(bytes(bad), sealed)
    assert e.value.index == 2


def test_a_changed_nonce_prefix_in_the_header_fails_the_first_chunk():
    blob, sealed = seal(plaintext(2 * CHUNK))
    bad = bytearray(blob)
    bad[10] ^= 0x01
    with pytest.raises(ChunkTampered) as e:
        open_blob(bytes(bad), sealed)
    assert e.value.index == 0


def test_swapped_chunks_are_chunk_out_of_order_naming_where_each_was_sealed():
    blob, sealed = seal(plaintext(3 * CHUNK + 10))
    n = CHUNK + 16
    c = [blob[HEADER_BYTES + i * n : HEADER_BYTES + (i + 1) * n] for i in range(3)]
    swapped = blob[:HEADER_BYTES] + c[1] + c[0] + c[2] + blob[HEADER_BYTES + 3 * n :]
    with pytest.raises(ChunkOutOfOrder) as e:
        open_blob(swapped, sealed)
    assert (e.value.index, e.value.sealed_at, e.value.code) == (0, 1, "chunk_out_of_order")
    repeated = blob[:HEADER_BYTES] + c[0] + c[1] + c[1] + blob[HEADER_BYTES + 3 * n :]
    with pytest.raises(ChunkOutOfOrder) as e:
        open_blob(repeated, sealed)
    assert (e.value.index, e.value.sealed_at) == (2, 1)


@pytest.mark.parametrize(
    ("cut", "why"),
    [
        (HEADER_BYTES + 2 * (CHUNK + 16), "after chunk 1, which is not the last"),  # at a chunk boundary
        (HEADER_BYTES + 2 * (CHUNK + 16) + 100, "inside chunk 2"),
        (HEADER_BYTES + 5, "before its last chunk"),
        (HEADER_BYTES, "before its last chunk"),
        (20, "before its last chunk"),
        (0, "before its last chunk"),
    ],
)
def test_a_truncated_blob_is_attachment_truncated(cut, why):
    blob, sealed = seal(plaintext(3 * CHUNK))
    with pytest.raises(AttachmentTruncated) as e:
        open_blob(blob[:cut], sealed)
    assert why in e.value.message
    assert e.value.as_dict()["detail"] == {"expected": len(blob), "received": cut}


def test_a_wrong_key_is_attachment_key_mismatch_before_any_chunk():
    blob, sealed = seal(plaintext(2 * CHUNK))
    dec = AttachmentDecryptor(bytes(32), size=sealed.size, sha256=sealed.sha256, chunk=CHUNK)
    assert dec.update(blob[:47]) == b""
    with pytest.raises(AttachmentKeyMismatch) as e:
        dec.update(blob[47:48])
    assert e.value.field == "key"


def test_a_hash_other_than_the_references_is_attachment_hash_mismatch():
    blob, sealed = seal(plaintext(CHUNK + 1))
    with pytest.raises(AttachmentHashMismatch) as e:
        open_blob(blob, sealed, sha256=hashlib.sha256(b"another blob").digest())
    assert e.value.field == "sha256"


def test_bytes_after_the_last_chunk_are_attachment_size_mismatch():
    blob, sealed = seal(plaintext(CHUNK + 1))
    with pytest.raises(AttachmentSizeMismatch):
        open_blob(blob + b"\x00", sealed)
    # a blob sealed for a shorter file, presented under a reference promising a longer one
    short_blob, short = seal(plaintext(CHUNK))
    dec = AttachmentDecryptor(short.key, size=2 * CHUNK, sha256=short.sha256, chunk=CHUNK)
    dec.update(short_blob)
    with pytest.raises(AttachmentSizeMismatch):
        dec.finish()


def test_a_header_of_another_form_is_attachment_malformed():
    blob, sealed = seal(plaintext(10))
    for offset, field in [(0, "header"), (4, "header"), (7, "chunk")]:
        bad = bytearray(blob)
        bad[offset] ^= 0x01
        with pytest.raises(AttachmentMalformed) as e:
            open_blob(bytes(bad), sealed)
        assert e.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"key": bytes(31)}, "key"),
        ({"sha256": bytes(31)}, "sha256"),
        ({"size": -1}, "size"),
        ({"chunk": 1023}, "chunk"),
        ({"chunk": 4 * 1024 * 1024 + 1}, "chunk"),
    ],
)
def test_a_reference_of_the_wrong_form_is_refused_before_any_byte(kwargs, field):
    args = {"key": bytes(32), "size": 1, "sha256": bytes(32), "chunk": CHUNK, **kwargs}
    with pytest.raises(AttachmentMalformed) as e:
        AttachmentDecryptor(args.pop("key"), **args)
    assert e.value.field == field


def test_the_encryptor_refuses_misuse():
    enc = AttachmentEncryptor(CHUNK + 1, CHUNK)
    with pytest.raises(ValueError, match="must be 1024 bytes"):
        enc.seal(b"x")
    enc.seal(bytes(CHUNK))
    with pytest.raises(ValueError, match="not sealed yet"):
        enc.finish()
    enc.seal(b"y")
    with pytest.raises(ValueError, match="sealed already"):
        enc.seal(b"")
    with pytest.raises(ValueError, match="ended after 5 of 2000"):
        list(AttachmentEncryptor(2000, CHUNK).stream(io.BytesIO(b"short").read))
    with pytest.raises(AttachmentMalformed):
        AttachmentEncryptor(-1)


@pytest.mark.parametrize("limit", [0, 47, 64, 65, 1000, 25 * 1024 * 1024, 25 * 1024 * 1024 + 12345])
def test_max_plaintext_is_the_largest_file_whose_blob_fits(limit):
    n = max_plaintext(limit)
    if limit < HEADER_BYTES + 16:
        assert n == 0
        return
    assert blob_size(n) <= limit < blob_size(n + 1)
