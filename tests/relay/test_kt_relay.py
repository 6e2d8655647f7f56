"""The relay's key transparency log (PROTOCOL.md §14): every registration and rotation is one leaf,
every key answer carries an inclusion proof to a head signed by the relay's log key, heads grow
append-only (consistency proofs verify), keys published before the log are appended at start.
In-process apps on real SQLite files; the same log shared by two relays on PostgreSQL is in
tests/scale/test_kt_pg.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cryptography.hazmat.primitives.serialization import load_der_public_key

from shared import kt, merkle
from shared.b64 import b64u_decode
from shared.keys import Identity, spki_der
from tests.helpers.asgi import bearer, http, register, rotate, running
from tests.helpers.config import TEST_BITS


async def signed_head(client) -> tuple[kt.TreeHead, object]:
    r = await client.get("/v1/kt/head")
    assert r.status_code == 200, r.text
    doc = r.json()
    head, key = kt.TreeHead.from_json(doc["head"]), load_der_public_key(b64u_decode(doc["log_key"]))
    head.verify(key)
    return head, key


async def test_registrations_and_a_rotation_are_leaves_with_proofs_to_signed_heads(settings_for, identities):
    alice, bob = identities["alice"], identities["bob"]
    async with running(settings_for()) as app, http(app) as c:
        empty, key = await signed_head(c)
        assert (empty.size, empty.root) == (0, merkle.EMPTY_ROOT)
        login = await register(c, alice)
        await register(c, bob)
        two, _ = await signed_head(c)
        leaves = [
            kt.KeyLeaf("alice", 0, alice.wrap_kid, alice.sign_kid),
            kt.KeyLeaf("bob", 0, bob.wrap_kid, bob.sign_kid),
        ]
        assert (two.size, two.root) == (2, merkle.root_from_leaves([leaf.hash() for leaf in leaves]))

        answer = (await c.get("/v1/users/bob/keys", headers=bearer(login))).json()
        proof = kt.Inclusion.from_json(answer["kt"])
        assert (proof.index, proof.leaf, proof.head.size) == (1, leaves[1], 2)
        proof.head.verify(key)
        proof.verify()

        new = Identity.generate("alice", TEST_BITS)
        await rotate(c, login, alice, new, 1)
        three, _ = await signed_head(c)
        sig_leaf = (await c.get("/v1/kt/entries?start=2", headers=bearer(login))).json()["entries"]
        assert len(sig_leaf) == 1 and sig_leaf[0]["user"] == "alice" and sig_leaf[0]["n"] == 1
        assert sig_leaf[0]["wrap_kid"] == new.wrap_kid and sig_leaf[0]["sig"] is not None
        r = (await c.get("/v1/kt/consistency?from=2&to=3")).json()
        merkle.verify_consistency(2, 3, two.root, three.root, [b64u_decode(p) for p in r["proof"]])

        history = (await c.get("/v1/users/alice/keys/history", headers=bearer(login))).json()["keys"]
        proofs = [kt.Inclusion.from_json(k["kt"]) for k in history]
        assert [(p.index, p.leaf.counter, p.leaf.wrap_kid) for p in proofs] == [
            (0, 0, alice.wrap_kid),
            (2, 1, new.wrap_kid),
        ]
        for p in proofs:
            p.head.verify(key)
            p.verify()
        entries = (await c.get("/v1/kt/entries?start=0&end=3", headers=bearer(login))).json()["entries"]
        assert merkle.root_from_leaves([kt.KeyLeaf.from_json(e).hash() for e in entries]) == three.root


async def test_bad_ranges_are_refused(settings_for, identities):
    async with running(settings_for()) as app, http(app) as c:
        login = await register(c, identities["alice"])
        for query in ("from=2&to=1", "from=0&to=5", "from=-1", "from=x", "to=1"):
            r = await c.get(f"/v1/kt/consistency?{query}")
            assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), query
        r = await c.get("/v1/kt/entries?start=0")  # the leaves name every account: a token is needed
        assert (r.status_code, r.json()["error"]["code"]) == (401, "auth_failed")
        c.headers.update(bearer(login))
        r = await c.get("/v1/kt/entries?start=9")
        assert (r.status_code, r.json()["error"]["field"]) == (400, "start")
        assert (await c.get("/v1/kt/entries?start=1")).json()["entries"] == []


async def test_keys_published_before_the_log_are_appended_at_start_with_the_same_leaves(settings_for, identities):
    settings = settings_for()
    async with running(settings) as app, http(app) as c:
        await register(c, identities["alice"])
        await register(c, identities["bob"])
        before, key = await signed_head(c)
    db = sqlite3.connect(Path(settings.data_dir) / "relay.db")
    with db:
        db.execute("DELETE FROM kt_log")  # as a database migrated from before the log holds it
    db.close()
    async with running(settings) as app, http(app) as c:
        after, key_again = await signed_head(c)
        assert (after.size, after.root) == (before.size, before.root)
        assert spki_der(key) == spki_der(key_again)  # one log key per data folder, kept
