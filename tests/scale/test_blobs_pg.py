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


async def test_parallel_uploads_through_two_relays_stay_within_the_quota_and_the_cap(tmp_path, pg_url, identities):
    """attacker.md F6 across relays: six uploads held open by one user, three through each relay,
    store at most the quota between them (the cap, counted in the same database, refuses some)."""
    from sqlalchemy import text

    from tests.relay.test_blob_quota_parallel import Held

    quota = 3 * PART_BYTES
    await asyncio.to_thread(upgrade, pg_url)
    settings = [
        Settings(
            data_dir=str(tmp_path / name),
            database_url=pg_url,
            jwt_secret=SECRET,
            retention_interval_s=0,
            blob_quota_bytes=quota,
            max_blob_bytes=quota,
            **FAST,
        )
        for name in ("a", "b")
    ]
    async with running(settings[0]) as app_a, running(settings[1]) as app_b, http(app_a) as a, http(app_b) as b:
        alice = await register(a, identities["alice"])
        await register(b, identities["bob"])
        cid, _ = await new_conversation(a, alice, identities["alice"], [identities["bob"]])
        go = asyncio.Event()
        sents = [asyncio.Event() for _ in range(6)]
        tasks = [
            asyncio.ensure_future(
                (a if i % 2 else b).post(
                    f"/v1/blobs?conversation={cid}",
                    content=Held(quota - PART_BYTES // 2, go, sents[i]),
                    headers={**bearer(alice), **OCTETS},
                )
            )
            for i in range(6)
        ]

        async def either(i: int) -> None:
            waiter = asyncio.ensure_future(sents[i].wait())
            await asyncio.wait({waiter, tasks[i]}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

        await asyncio.wait_for(asyncio.gather(*(either(i) for i in range(6))), 60)
        await asyncio.sleep(0.5)  # let the relays write the parts they have read
        async with app_a.state.e2ee.sessions() as session:
            held = (await session.execute(text("SELECT coalesce(sum(length(data)), 0) FROM blob_parts"))).scalar_one()
        go.set()
        codes = sorted(r.status_code for r in await asyncio.gather(*tasks))
        assert held <= quota, f"{held} bytes stored for one user with a {quota}-byte quota"
        assert codes.count(201) <= 1 and set(codes) <= {201, 413, 429}
