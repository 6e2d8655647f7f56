"""The relay's blob store (PROTOCOL.md §13.4), in-process on a real SQLite file: uploads streamed
into the database and back bit-exact, who may fetch, the size limit and the per-user quota refused
before memory is spent and leaving nothing stored, and blobs deleted by retention like envelopes."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3

import pytest

from server.blob_store import PART_BYTES
from tests.helpers.asgi import bearer, http, new_conversation, register, running

OCTETS = {"content-type": "application/octet-stream"}


class Counted:
    """An async request body of ``total`` random bytes in ``chunk``-byte pieces that counts what was read."""

    def __init__(self, total: int, chunk: int = 64 * 1024) -> None:
        self.total, self.chunk, self.sent = total, chunk, 0

    async def __aiter__(self):
        while self.sent < self.total:
            n = min(self.chunk, self.total - self.sent)
            self.sent += n
            yield os.urandom(n)


def rows(settings, sql: str) -> list[tuple]:
    db = sqlite3.connect(settings.data_path / "relay.db")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


@pytest.fixture
async def chat(settings_for, identities):
    """A relay with alice and bob in one conversation and carol outside it: ``(settings, app,
    client, logins, cid)``."""

    async def make(**overrides):
        s = settings_for(retention_interval_s=0, **overrides)
        ctx = running(s)
        app = await ctx.__aenter__()
        c = http(app)
        logins = {u: await register(c, identities[u]) for u in ("alice", "bob", "carol")}
        cid, _ = await new_conversation(c, logins["alice"], identities["alice"], [identities["bob"]])
        made.append((ctx, c))
        return s, app, c, logins, cid

    made: list = []
    yield make
    for ctx, c in made:
        await c.aclose()
        await ctx.__aexit__(None, None, None)


async def upload(c, login, cid, body, **headers):
    return await c.post(f"/v1/blobs?conversation={cid}", content=body, headers={**bearer(login), **OCTETS, **headers})


async def test_a_blob_goes_up_in_parts_and_comes_back_bit_exact_to_members_only(chat, caplog):
    s, _app, c, logins, cid = await chat()
    data = os.urandom(3 * PART_BYTES + 12345)
    with caplog.at_level(logging.INFO, logger="e2ee.relay"):
        r = await upload(c, logins["alice"], cid, data)
    assert r.status_code == 201, r.text
    blob_id = r.json()["id"]
    assert r.json()["size"] == len(data) and len(blob_id) == 22
    assert f"blob stored id={blob_id}" in caplog.text
    stored = rows(s, f"SELECT part, length(data) FROM blob_parts WHERE blob_id = '{blob_id}' ORDER BY part")
    assert stored == [(0, PART_BYTES), (1, PART_BYTES), (2, PART_BYTES), (3, 12345)]
    for user in ("bob", "alice"):
        r = await c.get(f"/v1/blobs/{blob_id}", headers=bearer(logins[user]))
        assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
        assert int(r.headers["content-length"]) == len(data)
        assert hashlib.sha256(r.content).digest() == hashlib.sha256(data).digest()
    assert rows(s, "SELECT count(*) FROM blob_fetches WHERE fetched_at_ms IS NOT NULL") == [(2,)]
    r = await c.get(f"/v1/blobs/{blob_id}", headers=bearer(logins["carol"]))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = await c.get("/v1/blobs/AAAAAAAAAAAAAAAAAAAAAA", headers=bearer(logins["bob"]))
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["field"]) == (404, "not_found", "blob")
    r = await c.get(f"/v1/blobs/{blob_id}")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "auth_failed")
    r = await upload(c, logins["carol"], cid, b"x" * 100)  # not a member: may not upload there
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = await c.delete(f"/v1/blobs/{blob_id}", headers=bearer(logins["bob"]))  # only its uploader deletes it
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    with caplog.at_level(logging.INFO, logger="e2ee.relay"):
        r = await c.delete(f"/v1/blobs/{blob_id}", headers=bearer(logins["alice"]))
    assert r.json() == {"deleted": 1} and f"blob deleted id={blob_id} by=alice" in caplog.text
    assert rows(s, "SELECT count(*) FROM blobs") == rows(s, "SELECT count(*) FROM blob_parts") == [(0,)]
    assert (await c.get(f"/v1/blobs/{blob_id}", headers=bearer(logins["bob"]))).status_code == 404


async def test_bad_uploads_get_typed_errors_and_leave_nothing(chat):
    s, _app, c, logins, cid = await chat()
    r = await upload(c, logins["alice"], cid, b"")
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["field"]) == (400, "invalid_request", "body")
    r = await c.post("/v1/blobs", content=b"x", headers={**bearer(logins["alice"]), **OCTETS})
    assert r.json()["error"]["field"] == "conversation"
    r = await upload(c, logins["alice"], cid, b"x", **{"content-type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (415, "unsupported_media_type")
    assert rows(s, "SELECT count(*) FROM blobs") == [(0,)]


async def test_a_blob_over_the_size_limit_is_refused_before_it_is_read_or_while_it_streams(chat, caplog):
    s, _app, c, logins, cid = await chat(max_blob_bytes=1024 * 1024)
    declared = Counted(s.max_blob_bytes + 1)
    r = await upload(c, logins["alice"], cid, declared, **{"content-length": str(s.max_blob_bytes + 1)})
    assert (r.status_code, r.json()["error"]["code"]) == (413, "blob_too_large")
    assert r.headers["connection"] == "close" and declared.sent == 0
    with caplog.at_level(logging.INFO, logger="e2ee.relay"):
        chunked = Counted(64 * 1024 * 1024)
        r = await upload(c, logins["alice"], cid, chunked)
    assert (r.status_code, r.json()["error"]["code"]) == (413, "blob_too_large")
    assert chunked.sent <= s.max_blob_bytes + chunked.chunk  # the limit, plus the piece that passed it
    assert "refused code=blob_too_large" in caplog.text
    assert rows(s, "SELECT count(*) FROM blobs") == rows(s, "SELECT count(*) FROM blob_parts") == [(0,)]
    r = await upload(c, logins["alice"], cid, os.urandom(s.max_blob_bytes))  # exactly the limit: stored
    assert r.status_code == 201
    assert (await c.get("/healthz")).status_code == 200


async def test_the_quota_counts_what_a_user_has_stored_declared_or_streamed(chat, caplog):
    s, _app, c, logins, cid = await chat(blob_quota_bytes=700_000)
    first = await upload(c, logins["alice"], cid, os.urandom(400_000))
    assert first.status_code == 201
    declared = Counted(400_000)
    r = await upload(c, logins["alice"], cid, declared, **{"content-length": "400000"})
    assert (r.status_code, r.json()["error"]["code"]) == (413, "quota_exceeded")
    assert r.json()["error"]["field"] == "blob_quota_bytes" and r.headers["connection"] == "close"
    assert declared.sent == 0
    with caplog.at_level(logging.INFO, logger="e2ee.relay"):
        streamed = Counted(400_000)
        r = await upload(c, logins["alice"], cid, streamed)
    assert (r.status_code, r.json()["error"]["code"]) == (413, "quota_exceeded")
    assert "refused code=quota_exceeded user=alice" in caplog.text
    assert rows(s, "SELECT id, size FROM blobs") == [(first.json()["id"], 400_000)]  # nothing of the refused ones
    assert rows(s, "SELECT count(*) FROM blob_parts") == [(-(-400_000 // PART_BYTES),)]
    assert (await upload(c, logins["bob"], cid, os.urandom(400_000))).status_code == 201  # a quota per user
    r = await c.get("/v1/blob-limits", headers=bearer(logins["alice"]))  # what a client asks before uploading
    assert r.json() == {"max_blob_bytes": s.max_blob_bytes, "quota_bytes": 700_000, "used_bytes": 400_000}


async def test_retention_deletes_blobs_like_envelopes(chat):
    s, app, c, logins, cid = await chat()
    retention = app.state.e2ee.retention
    ids = [(await upload(c, logins["alice"], cid, os.urandom(1000 + i))).json()["id"] for i in range(2)]
    assert await retention.sweep() == 0 and retention.blobs_deleted == 0  # bob fetched neither
    assert (await c.get(f"/v1/blobs/{ids[0]}", headers=bearer(logins["bob"]))).status_code == 200
    await retention.sweep()
    assert retention.blobs_deleted == 1  # every reader fetched it: gone
    assert rows(s, "SELECT id FROM blobs") == [(ids[1],)]
    assert rows(s, f"SELECT count(*) FROM blob_parts WHERE blob_id = '{ids[0]}'") == [(0,)]
    r = await c.get(f"/v1/blobs/{ids[0]}", headers=bearer(logins["bob"]))
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    db = sqlite3.connect(s.data_path / "relay.db")  # the other one grows older than retention_max_days
    db.execute("UPDATE blobs SET created_at_ms = created_at_ms - 31 * 86400000")
    db.execute(
        "INSERT INTO blobs (id, conversation_id, owner_id, size, complete, created_at_ms) "
        "SELECT 'abandoned0000000000000', conversation_id, owner_id, 0, 0, created_at_ms + 29 * 86400000 FROM blobs"
    )  # and an upload that never completed, begun a day ago
    db.commit()
    db.close()
    await retention.sweep()
    assert retention.blobs_deleted == 3 and rows(s, "SELECT count(*) FROM blobs") == [(0,)]
    assert rows(s, "SELECT count(*) FROM blob_fetches") == [(0,)]
    metrics = await c.get("/v1/metrics", headers={"Authorization": f"Bearer {app.state.e2ee.operator_token}"})
    assert metrics.json()["retention"]["blobs_deleted"] == 3
