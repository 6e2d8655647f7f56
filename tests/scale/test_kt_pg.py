"""The key transparency log on PostgreSQL with two relays (PROTOCOL.md §14): registrations through
both at once append to one log under its advisory lock: no fork, no gap, and both relays sign the
same root for the same size (with the log key they share). In-process apps on this machine's
PostgreSQL."""

from __future__ import annotations

import asyncio

from server.migrate import upgrade
from server.settings import Settings
from shared import kt, merkle
from shared.b64 import b64u_decode
from shared.keys import Identity
from tests.helpers.asgi import FAST, SECRET, bearer, http, register, running
from tests.helpers.config import TEST_BITS


async def test_two_relays_append_to_one_log_without_a_fork(tmp_path, pg_url, identities):
    await asyncio.to_thread(upgrade, pg_url)
    shared_key = str(tmp_path / "kt-ed25519.pem")
    settings = [
        Settings(
            data_dir=str(tmp_path / name),
            database_url=pg_url,
            jwt_secret=SECRET,
            kt_key_file=shared_key,
            retention_interval_s=0,
            **FAST,
        )
        for name in ("a", "b")
    ]
    people = [*identities.values(), *(Identity.generate(f"user{i}", TEST_BITS) for i in range(4))]
    async with running(settings[0]) as app_a, running(settings[1]) as app_b, http(app_a) as a, http(app_b) as b:
        logins = await asyncio.gather(*(register(a if i % 2 else b, p) for i, p in enumerate(people)))
        heads = [(await c.get("/v1/kt/head")).json() for c in (a, b)]
        assert heads[0]["log_key"] == heads[1]["log_key"]
        signed = [kt.TreeHead.from_json(h["head"]) for h in heads]
        assert [h.size for h in signed] == [len(people)] * 2 and signed[0].root == signed[1].root
        entries = (await b.get("/v1/kt/entries?start=0", headers=bearer(logins[0]))).json()["entries"]
        leaves = [kt.KeyLeaf.from_json(e) for e in entries]
        assert sorted(leaf.username for leaf in leaves) == sorted(p.username for p in people)
        assert merkle.root_from_leaves([leaf.hash() for leaf in leaves]) == signed[0].root
        proof = (await a.get(f"/v1/kt/consistency?from=3&to={len(people)}")).json()["proof"]
        tree = merkle.Tree(leaf.hash() for leaf in leaves)
        merkle.verify_consistency(3, len(people), tree.root(3), signed[1].root, [b64u_decode(p) for p in proof])
