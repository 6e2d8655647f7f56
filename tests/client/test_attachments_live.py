"""Attachments end to end against a real relay (uvicorn on a free port, SQLite file): a 10 MiB file
arrives bit-exact and the relay's database holds no plaintext chunk; a blob altered in the relay's
database (a tampered chunk, two chunks swapped, cut short) and a wrong reference each fail with
their own error and leave no file; the size limit and the quota are typed refusals; the relay
keeps serving."""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import stat

import httpx2
import msgspec
import pytest

from client_tui.core import ClientError, KeyChangeBlocked, KeyChanged
from client_tui.core.attachments import download, upload
from shared.attachment import DEFAULT_CHUNK, HEADER_BYTES, TAG_BYTES, max_plaintext
from shared.b64 import b64u_encode
from shared.errors import (
    AttachmentHashMismatch,
    AttachmentKeyMismatch,
    AttachmentTruncated,
    BlobTooLarge,
    ChunkOutOfOrder,
    ChunkTampered,
    QuotaExceeded,
)
from tests.helpers.clients import wait_event
from tests.helpers.relays import drop_rotation_signatures
from tests.helpers.wiretap import files, search

MiB = 1024 * 1024
DB_FILES = ("relay.db", "relay.db-wal")


def canary_file(path, size: int) -> tuple[bytes, str]:
    """``size`` bytes: random data with a canary line every 64 KiB (so each chunk has one)."""
    canary = f"canary-attachment-{secrets.token_hex(12)}"
    data = bytearray(os.urandom(size))
    for at in range(1000, size - 100, DEFAULT_CHUNK):
        data[at : at + len(canary)] = canary.encode()
    path.write_bytes(bytes(data))
    return bytes(data), canary


def db(relay, sql: str, *args) -> list[tuple]:
    conn = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        rows = conn.execute(sql, args).fetchall()
        conn.commit()
        return rows
    finally:
        conn.close()


@pytest.fixture
async def pair(make_client):
    alice, bob = await make_client("alice"), await make_client("bob")
    cid = await alice.create_conversation("files", ["bob"])
    return alice, bob, cid


async def test_a_10_mib_file_arrives_bit_exact_and_the_relay_stores_no_plaintext_chunk(relay, pair, tmp_path):
    alice, bob, cid = pair
    data, canary = canary_file(tmp_path / "report.pdf", 10 * MiB)
    sent: list[tuple[int, int]] = []
    ref = await upload(alice.rest, cid, tmp_path / "report.pdf", progress=lambda d, t: sent.append((d, t)))
    assert (ref.name, ref.type, ref.size, ref.chunk) == ("report.pdf", "application/pdf", 10 * MiB, DEFAULT_CHUNK)
    total = HEADER_BYTES + 10 * MiB + 160 * TAG_BYTES
    assert sent[-1] == (total, total) and [d for d, _ in sent] == sorted(d for d, _ in sent)
    got: list[int] = []
    out = await download(bob.rest, ref, tmp_path / "bob" / "report.pdf", progress=lambda d, t: got.append(d))
    assert hashlib.sha256(out.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and got[-1] == total
    assert [p.name for p in out.parent.iterdir()] == ["report.pdf"]  # no temporary file left
    # the relay's database: the blob is there (ciphertext), no chunk of the plaintext is
    stored = files(relay.data_dir, *DB_FILES)
    assert db(relay, "SELECT size FROM blobs") == [(total,)]
    windows = [data[at : at + 32] for at in range(0, len(data), DEFAULT_CHUNK // 2)]
    assert not [w for w in windows if any(w in blob for blob in stored.values())]
    assert search(stored, [canary]) == []  # the blindness search, every form at every alignment
    assert search({"bob's file": out.read_bytes()}, [canary])  # ... which finds it where it is


@pytest.fixture
async def stored(relay, pair, tmp_path):
    """A 300 KiB file uploaded by alice: ``(bob, ref, rows of blob_parts)``."""
    alice, bob, cid = pair
    data, _ = canary_file(tmp_path / "photo.jpg", 300 * 1024)
    ref = await upload(alice.rest, cid, tmp_path / "photo.jpg")
    return bob, ref, data


def rewrite_blob(relay, blob_id: str, change) -> None:
    """Replace the stored blob by ``change(blob)`` (a relay that alters what it serves)."""
    parts = db(relay, "SELECT data FROM blob_parts WHERE blob_id = ? ORDER BY part", blob_id)
    new = change(b"".join(p for (p,) in parts))
    db(relay, "DELETE FROM blob_parts WHERE blob_id = ?", blob_id)
    db(relay, "INSERT INTO blob_parts (blob_id, part, data) VALUES (?, 0, ?)", blob_id, new)
    db(relay, "UPDATE blobs SET size = ? WHERE id = ?", len(new), blob_id)


SEALED = DEFAULT_CHUNK + TAG_BYTES


def chunk_at(i: int) -> slice:
    return slice(HEADER_BYTES + i * SEALED, HEADER_BYTES + (i + 1) * SEALED)


def tamper(blob: bytes) -> bytes:
    b = bytearray(blob)
    b[chunk_at(2).start + 100] ^= 0x01
    return bytes(b)


def swap(blob: bytes) -> bytes:
    return blob[:HEADER_BYTES] + blob[chunk_at(1)] + blob[chunk_at(0)] + blob[chunk_at(1).stop :]


def truncate(blob: bytes) -> bytes:
    return blob[: chunk_at(3).start]  # three chunks of five: ends on a chunk not sealed as the last


@pytest.mark.parametrize(
    ("change", "error", "detail"),
    [
        (tamper, ChunkTampered, {"index": 2}),
        (swap, ChunkOutOfOrder, {"index": 0, "sealed_at": 1}),
        (
            truncate,
            AttachmentTruncated,
            {"expected": HEADER_BYTES + 300 * 1024 + 5 * TAG_BYTES, "received": HEADER_BYTES + 3 * SEALED},
        ),
    ],
)
async def test_a_blob_altered_by_the_relay_fails_with_its_error_and_leaves_no_file(
    relay, stored, tmp_path, change, error, detail
):
    bob, ref, data = stored
    rewrite_blob(relay, ref.id, change)
    out = tmp_path / "bob" / "photo.jpg"
    with pytest.raises(error) as e:
        await download(bob.rest, ref, out)
    assert e.value.as_dict()["detail"] == detail
    assert not out.exists() and list(out.parent.iterdir()) == []  # nothing kept, no temporary file
    assert httpx2.get(relay.url + "/healthz").status_code == 200  # the relay keeps serving


async def test_a_reference_with_another_key_or_hash_is_refused(stored, tmp_path):
    bob, ref, data = stored
    out = tmp_path / "bob" / "photo.jpg"
    with pytest.raises(AttachmentKeyMismatch):
        await download(bob.rest, msgspec.structs.replace(ref, key=b64u_encode(os.urandom(32))), out)
    with pytest.raises(AttachmentHashMismatch):
        await download(bob.rest, msgspec.structs.replace(ref, sha256=b64u_encode(os.urandom(32))), out)
    assert not out.exists()
    assert (await download(bob.rest, ref, out)).read_bytes() == data  # the true reference still opens


async def test_only_members_fetch_and_limits_are_typed_refusals(tmp_path, make_client):
    from tests.helpers.relays import start_relay

    relay = start_relay(
        tmp_path / "small", env={"E2EE_MAX_BLOB_BYTES": str(MiB), "E2EE_BLOB_QUOTA_BYTES": str(2 * MiB)}
    )
    try:
        alice, bob = await make_client("alice", url=relay.url), await make_client("bob", url=relay.url)
        carol = await make_client("carol", url=relay.url)
        cid = await alice.create_conversation("files", ["bob"])
        canary_file(tmp_path / "big.bin", 2 * MiB)
        with pytest.raises(BlobTooLarge) as e:  # refused here, from GET /v1/blob-limits: nothing sent
            await upload(alice.rest, cid, tmp_path / "big.bin")
        assert (e.value.code, e.value.field) == ("blob_too_large", "file")
        most = max_plaintext(MiB)
        assert f"big.bin is {2 * MiB} bytes (2.00 MiB); the relay takes files up to {most} bytes" in e.value.message
        assert f"its limit of {MiB} bytes is on the sealed file, {MiB - most} of them header" in e.value.message
        canary_file(tmp_path / "part.bin", 900 * 1024)
        refs = [await upload(alice.rest, cid, tmp_path / "part.bin") for _ in range(2)]
        with pytest.raises(QuotaExceeded) as e:
            await upload(alice.rest, cid, tmp_path / "part.bin")
        assert (e.value.code, e.value.field) == ("quota_exceeded", "blob_quota_bytes")
        with pytest.raises(ClientError) as e:
            await download(carol.rest, refs[0], tmp_path / "carol.bin")
        assert (e.value.code, e.value.status) == ("forbidden", 403)
        with pytest.raises(ClientError) as e:
            await upload(carol.rest, cid, tmp_path / "part.bin")
        assert e.value.code == "forbidden"
        out = await download(bob.rest, refs[1], tmp_path / "bob.bin")  # the relay keeps serving
        assert out.read_bytes() == (tmp_path / "part.bin").read_bytes()
        assert db(relay, "SELECT count(*) FROM blobs") == [(2,)]  # nothing of the refused uploads
    finally:
        relay.stop()


async def test_a_file_whose_message_cannot_be_sealed_is_deleted_from_the_relay(relay, pair, tmp_path):
    alice, bob, cid = pair
    await alice.connect()  # online, she is told of bob's key change (KeyChanged) ...
    drop_rotation_signatures(relay)  # (without a signed chain: a signed rotation is followed at once)
    await bob.rotate_keys()
    await wait_event(alice, KeyChanged)  # ... and must review his new key before she seals anything to him
    canary_file(tmp_path / "plan.txt", 200 * 1024)
    with pytest.raises(KeyChangeBlocked):
        await alice.attachments.send(cid, tmp_path / "plan.txt")
    assert db(relay, "SELECT count(*) FROM blobs") == db(relay, "SELECT count(*) FROM blob_parts") == [(0,)]
    limits = await alice.rest.request("GET", "/v1/blob-limits")
    assert limits["used_bytes"] == 0  # the quota is back at once
