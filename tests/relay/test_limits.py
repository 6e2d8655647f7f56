"""Limits enforced before memory is spent, and limits that cannot be walked around (issue 13):
the body cap, JSON media types, forwarded addresses, the login lockout, the password-hashing cap,
the unauthenticated-websocket caps, rate limits on conversations and member changes, and the
member count of a statement. In-process: ``create_app`` on a real SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from server.app import create_app
from shared import membership
from shared.errors import StatementMalformed
from shared.keys import Identity
from tests.helpers.asgi import account, bearer, http, register, rotate, running
from tests.helpers.config import PASSWORD, TEST_BITS

MiB = 1024 * 1024


class Counted:
    """An async request body of ``total`` bytes in ``chunk``-byte pieces that counts what was read."""

    def __init__(self, total: int, chunk: int = 64 * 1024) -> None:
        self.total, self.chunk, self.sent = total, chunk, 0

    async def __aiter__(self):
        while self.sent < self.total:
            self.sent += self.chunk
            yield b"x" * self.chunk


async def test_a_256_mib_body_is_refused_after_at_most_the_cap_declared_or_chunked(settings_for, identities):
    s = settings_for()
    async with running(s) as app, http(app) as c:
        declared = Counted(256 * MiB)
        r = await c.post(
            "/v1/accounts",
            content=declared,
            headers={"content-type": "application/json", "content-length": str(256 * MiB)},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
        assert r.headers["connection"] == "close"
        assert declared.sent == 0  # refused from the header, before one byte was read
        chunked = Counted(256 * MiB)
        r = await c.post("/v1/accounts", content=chunked, headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
        assert r.headers["connection"] == "close"
        assert chunked.sent <= s.max_json_body_bytes + chunked.chunk  # the cap, plus the chunk that passed it
        # every route has its cap: a REST send may be as large as an envelope, no larger
        alice = await register(c, identities["alice"])
        big = Counted(s.max_envelope_bytes + 1, chunk=4096)
        r = await c.post(
            "/v1/conversations/x/messages", content=big, headers={**bearer(alice), "content-type": "application/json"}
        )
        assert r.status_code == 413 and big.sent <= s.max_envelope_bytes + 4096
        r = await c.get("/healthz", headers={"content-length": "70000"})
        assert r.status_code == 413
        r = await c.post("/v1/token", content=b"{}", headers={"content-length": "-1"})
        assert r.status_code == 400


async def test_json_routes_require_application_json(settings_for, identities):
    async with running(settings_for()) as app, http(app) as c:
        body = account(identities["alice"])

        for ctype in ("text/plain", "application/x-www-form-urlencoded", ""):
            r = await c.post("/v1/accounts", content=json.dumps(body), headers={"content-type": ctype})
            assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
        r = await c.post(
            "/v1/accounts", content=json.dumps(body), headers={"content-type": "application/json; charset=utf-8"}
        )
        assert r.status_code == 201
        login = (await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})).json()
        r = await c.post(
            "/v1/conversations/x/messages", content=b"{}", headers={**bearer(login), "content-type": "text/plain"}
        )
        assert r.json()["error"]["code"] == "unsupported_media_type"
        r = await c.post(
            "/v1/conversations/x/messages",
            content=b"{}",
            headers={**bearer(login), "content-type": "application/jose+json"},
        )
        assert r.json()["error"]["code"] == "envelope_malformed"  # accepted type: the envelope is checked


async def test_forwarded_for_counts_only_from_a_trusted_proxy(settings_for, identities):
    one_per_minute = {"rate_registrations_per_min": 2.0}  # a burst of one
    bob, carol = account(identities["bob"]), account(identities["carol"])
    async with running(settings_for(**one_per_minute)) as app, http(app, "203.0.113.7") as c:
        r = await c.post("/v1/accounts", json=bob, headers={"x-forwarded-for": "198.51.100.1"})
        assert r.status_code == 201
        r = await c.post("/v1/accounts", json=carol, headers={"x-forwarded-for": "198.51.100.2"})
        assert r.status_code == 429  # same peer, whatever it claims: the same key
        assert int(r.headers["retry-after"]) >= 1
    proxied = settings_for(trusted_proxies="10.0.0.0/8", **one_per_minute)
    async with running(proxied) as app, http(app, "10.0.0.5") as c:
        r = await c.post("/v1/accounts", json=bob, headers={"x-forwarded-for": "198.51.100.1, 10.0.0.9"})
        assert r.status_code == 201
        r = await c.post("/v1/accounts", json=carol, headers={"x-forwarded-for": "198.51.100.2"})
        assert r.status_code == 201  # another client behind the proxy: its own key
        r = await c.post(
            "/v1/accounts", json=account(identities["mallory"]), headers={"x-forwarded-for": "198.51.100.1"}
        )
        assert r.status_code == 429  # the first client again


async def test_a_strangers_wrong_passwords_do_not_lock_the_owner_out(settings_for, identities):
    s = settings_for(lockout_failures=5, lockout_user_failures=12, rate_logins_per_min=0)
    async with running(s) as app, http(app, "192.0.2.10") as owner:
        await register(owner, identities["alice"])  # the owner logged in from 192.0.2.10
        wrong = {"username": "alice", "password": "guess"}
        async with http(app, "198.51.100.66") as stranger:
            codes = [(await stranger.post("/v1/token", json=wrong)).status_code for _ in range(8)]
            assert codes == [401] * 5 + [429] * 3
            r = await stranger.post("/v1/token", json={"username": "alice", "password": PASSWORD})
            assert r.status_code == 429  # this pair waits, even with the right password
        right = {"username": "alice", "password": PASSWORD}
        assert (await owner.post("/v1/token", json=right)).status_code == 200
        # a guesser rotating addresses reaches the per-username ceiling ...
        for i in range(3):
            async with http(app, f"198.51.100.{100 + i}") as rotating:
                for _ in range(5):
                    assert (await rotating.post("/v1/token", json=wrong)).status_code in (401, 429)
        async with http(app, "198.51.100.200") as unknown:
            r = await unknown.post("/v1/token", json=right)
            assert r.status_code == 429 and "address that logged in before" in r.json()["error"]["message"]
        # ... and the owner, from an address it logged in from, still gets in
        assert (await owner.post("/v1/token", json=right)).status_code == 200


async def test_password_hashing_is_capped_and_the_rest_is_refused_busy(settings_for, identities):
    s = settings_for(max_password_hashes=1, max_password_queue=1, rate_logins_per_min=0)
    async with running(s) as app, http(app) as c:
        await register(c, identities["alice"])
        passwords = app.state.e2ee.passwords
        release = threading.Event()

        class Held:  # argon2 whose verifications wait until the test releases them
            def __init__(self, real):
                self.real = real

            def verify(self, *args):
                release.wait(10)
                return self.real.verify(*args)

            def __getattr__(self, name):
                return getattr(self.real, name)

        passwords._ph = Held(passwords._ph)
        body = {"username": "alice", "password": PASSWORD}
        tasks = [asyncio.create_task(c.post("/v1/token", json=body)) for _ in range(5)]
        while len([t for t in tasks if t.done()]) < 3:
            await asyncio.wait([t for t in tasks if not t.done()], return_when=asyncio.FIRST_COMPLETED)
        assert passwords.pending == 2  # one hashing, one waiting for the slot
        refused = [t.result() for t in tasks if t.done()]
        assert [r.status_code for r in refused] == [503] * 3
        assert refused[0].json()["error"]["code"] == "busy" and refused[0].headers["retry-after"] == "1"
        release.set()
        assert sorted(r.status_code for r in await asyncio.gather(*tasks)) == [200, 200, 503, 503, 503]
        assert passwords.pending == 0


async def test_conversation_and_member_changes_are_rate_limited(settings_for, identities):
    s = settings_for(rate_conversations_per_min=2, rate_member_changes_per_min=2)
    ids = identities
    m = {n: membership.member_of(ids[n].public) for n in ("alice", "bob", "carol")}
    async with running(s) as app, http(app) as c:
        alice = await register(c, ids["alice"])
        await register(c, ids["bob"])
        await register(c, ids["carol"])
        made = [membership.create(ids["alice"], f"conv-{i}", "t", [m["alice"], m["bob"]]) for i in range(3)]
        codes = [
            (await c.post("/v1/conversations", json={"statement": st.signed}, headers=bearer(alice))).status_code
            for st in made
        ]
        assert codes == [201, 201, 429]
        added = membership.change(made[0], ids["alice"], "add", add=[m["carol"]])
        removed = membership.change(added, ids["alice"], "remove", remove=["carol"])
        again = membership.change(removed, ids["alice"], "add", add=[m["carol"]])
        codes = [
            (
                await c.post("/v1/conversations/conv-0/log", json={"statement": st.signed}, headers=bearer(alice))
            ).status_code
            for st in (added, removed, again)
        ]
        assert codes == [201, 201, 429]


async def test_a_rotation_moves_the_new_keys_into_every_conversation_past_the_member_change_limit(
    settings_for, identities
):
    """A rotation is followed by one update statement per conversation: at the member-change
    limit (2 a minute here, 30 by default) a user in 6 conversations got the new keys into 2 and
    could not send in the other 4 until the bucket refilled. Updates have a budget of their own;
    other changes stay limited, and an update cannot carry any other change."""
    s = settings_for(rate_conversations_per_min=0, rate_member_changes_per_min=2)
    ids = identities
    m = {n: membership.member_of(ids[n].public) for n in ("alice", "bob", "carol")}
    async with running(s) as app, http(app) as c:
        alice = await register(c, ids["alice"])
        await register(c, ids["bob"])
        await register(c, ids["carol"])
        made = [membership.create(ids["alice"], f"conv-{i}", "t", [m["alice"], m["bob"]]) for i in range(6)]
        for st in made:
            assert (
                await c.post("/v1/conversations", json={"statement": st.signed}, headers=bearer(alice))
            ).status_code == 201
        new = Identity.generate("alice", TEST_BITS)
        await rotate(c, alice, ids["alice"], new, 1)
        updated = [membership.change(st, ids["alice"], "update", keys=membership.member_of(new.public)) for st in made]
        codes = [
            (
                await c.post(f"/v1/conversations/{st.cid}/log", json={"statement": st.signed}, headers=bearer(alice))
            ).status_code
            for st in updated
        ]
        assert codes == [201] * 6
        as_new = Identity("alice", new.wrap_private, new.sign_private)
        adds = [membership.change(st, as_new, "add", add=[m["carol"]]) for st in updated[:3]]
        codes = [
            (
                await c.post(f"/v1/conversations/{st.cid}/log", json={"statement": st.signed}, headers=bearer(alice))
            ).status_code
            for st in adds
        ]
        assert codes == [201, 201, 429]


async def test_the_member_count_is_checked_on_the_statement_and_nothing_changes_when_refused(settings_for, identities):
    s = settings_for(max_members=3)
    ids = identities
    m = {n: membership.member_of(ids[n].public) for n in ("alice", "bob", "carol", "mallory")}
    async with running(s) as app, http(app) as c:
        alice = await register(c, ids["alice"])
        for name in ("bob", "carol", "mallory"):
            await register(c, ids[name])
        made = membership.create(ids["alice"], "conv-3", "t", [m["alice"], m["bob"], m["carol"]])
        assert (
            await c.post("/v1/conversations", json={"statement": made.signed}, headers=bearer(alice))
        ).status_code == 201
        fourth = membership.change(made, ids["alice"], "add", add=[m["mallory"]])
        r = await c.post("/v1/conversations/conv-3/log", json={"statement": fourth.signed}, headers=bearer(alice))
        assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["field"]) == (
            400,
            "invalid_request",
            "members",
        )
        assert "at most 3 members" in r.json()["error"]["message"]
        with pytest.raises(StatementMalformed):  # nobody left: no statement can say so
            membership.change(made, ids["alice"], "remove", remove=["alice", "bob", "carol"])
        convs = (await c.get("/v1/conversations", headers=bearer(alice))).json()["conversations"]
        assert (convs[0]["members"], convs[0]["epoch"]) == (["alice", "bob", "carol"], 0)  # nothing changed


def test_unauthenticated_websockets_are_capped_per_address_and_in_total(settings_for):
    s = settings_for(trusted_proxies="10.0.0.1", max_preauth_ws=3, max_preauth_ws_per_ip=2, auth_timeout_s=30)
    app = create_app(s)
    with TestClient(app, client=("10.0.0.1", 5000)) as client, contextlib.ExitStack() as sockets:

        def connect(address: str):
            ws = sockets.enter_context(client.websocket_connect("/v1/ws", headers={"x-forwarded-for": address}))
            assert ws.receive_json()["type"] == "hello"
            return ws

        def refused(address: str) -> int:
            with (
                pytest.raises(WebSocketDenialResponse) as err,
                client.websocket_connect("/v1/ws", headers={"x-forwarded-for": address}),
            ):
                pass
            assert err.value.json()["error"]["code"] == "busy"
            return err.value.status_code

        a1, _a2 = connect("198.51.100.1"), connect("198.51.100.1")
        assert refused("198.51.100.1") == 503  # per address
        connect("198.51.100.2")
        assert refused("198.51.100.3") == 503  # in total
        a1.send_json({"type": "auth", "token": "not a token"})  # refused: its slot is freed
        assert a1.receive_json()["code"] == "auth_failed"
        with pytest.raises(WebSocketDisconnect):
            a1.receive_json()
        connect("198.51.100.3")
        assert app.state.e2ee.relay.preauth.count == 3
        assert app.state.e2ee.relay.preauth._by_key == {"198.51.100.1": 1, "198.51.100.2": 1, "198.51.100.3": 1}


async def test_a_membership_change_that_adds_and_removes_at_once_is_refused(settings_for, identities):
    """The class of the old add+remove hole: one change naming users on both sides. A statement is
    one operation; an 'add' that also drops someone (same count) is refused, and nothing changes."""
    ids = identities
    m = {n: membership.member_of(ids[n].public) for n in ("alice", "bob", "carol", "mallory")}
    async with running(settings_for()) as app, http(app) as c:
        alice = await register(c, ids["alice"])
        for name in ("bob", "carol", "mallory"):
            await register(c, ids[name])
        made = membership.create(ids["alice"], "conv-swap", "t", [m["alice"], m["bob"], m["carol"]])
        assert (
            await c.post("/v1/conversations", json={"statement": made.signed}, headers=bearer(alice))
        ).status_code == 201
        swap = membership._sign(
            ids["alice"],
            cid=made.cid,
            ep=1,
            op="add",
            members=[m["alice"], m["carol"], m["mallory"]],
            title=made.title,
            admins=made.admins,
            prev=made.hash,
            ts=None,
        )
        r = await c.post("/v1/conversations/conv-swap/log", json={"statement": swap.signed}, headers=bearer(alice))
        assert r.status_code == 400 and "an add must only add members" in r.json()["error"]["message"]
        convs = (await c.get("/v1/conversations", headers=bearer(alice))).json()["conversations"]
        assert (convs[0]["members"], convs[0]["epoch"]) == (["alice", "bob", "carol"], 0)
