"""Blobs on PostgreSQL with two relays (PROTOCOL.md §13.4): the bytes live in the shared database,
so a blob uploaded through relay A comes back bit-exact through relay B, the quota counts on both,
and a sweep on either deletes it. In-process apps on this machine's PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import os

from server.blob_store import PART_BYTES
from server.migrate import upgrade
from server.settings import Settings
from tests.helpers.asgi import FAST, SECRET, bearer, http, new_conversation, register, running

OCTETS = {"content-type": "application/octet-stream"}


async def test_a_blob_stored_through_one_relay_is_served_by_the_other(tmp_path, pg_url, identities):
    await asyncio.to_thread(upgrade, pg_url)
    settings = [
        Settings(
            data_dir=str(tmp_path / name),
            database_url=pg_url,
            jwt_secret=SECRET,
            retention_interval_s=0,
            blob_quota_bytes=2 * PART_BYTES,
            **FAST,
        )
        for name in ("a", "b")
    ]
    async with running(settings[0]) as app_a, running(settings[1]) as app_b, http(app_a) as a, http(app_b) as b:
        alice = await register(a, identities["alice"])
        bob = await register(b, identities["bob"])
        cid, _ = await new_conversation(a, alice, identities["alice"], [identities["bob"]])
        data = os.urandom(PART_BYTES + 777)
        r = await a.post(f"/v1/blobs?conversation={cid}", content=data, headers={**bearer(alice), **OCTETS})
        assert r.status_code == 201, r.text
        blob_id = r.json()["id"]
        got = await b.get(f"/v1/blobs/{blob_id}", headers=bearer(bob))
        assert got.status_code == 200 and hashlib.sha256(got.content).digest() == hashlib.sha256(data).digest()
        r = await b.post(f"/v1/blobs?conversation={cid}", content=data, headers={**bearer(alice), **OCTETS})
        assert (r.status_code, r.json()["error"]["code"]) == (413, "quota_exceeded")  # what A stored counts on B
        assert await app_b.state.e2ee.retention.sweep() == 0
        assert app_b.state.e2ee.retention.blobs_deleted == 1  # alice and bob have it: deleted by B's sweep
        r = await a.get(f"/v1/blobs/{blob_id}", headers=bearer(alice))
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
