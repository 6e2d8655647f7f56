"""The relay's side of the membership log (server/membership.py, PROTOCOL.md §12.5), in-process on a
real SQLite file: every statement is checked before it is stored, the member table is the verified
head's, the log is served to members (and to a former member up to their removal), sends are
checked against the head, and a conversation from before the log is read-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from client_tui.core.record import now_ms
from shared import envelope, membership
from shared.b64 import b64u_encode
from shared.content import Text
from shared.keys import Identity
from shared.membership import member_of
from tests.helpers.asgi import bearer, http, register, running


@pytest.fixture
async def relay(settings_for, identities):
    """A running relay with alice, bob, carol and mallory registered; ``(client, logins, ids, settings)``."""
    s = settings_for()
    async with running(s) as app, http(app) as c:
        logins = {n: await register(c, identities[n]) for n in ("alice", "bob", "carol", "mallory")}
        yield c, logins, identities, s


def m(ids, *names) -> list[membership.Member]:
    return [member_of(ids[n].public) for n in names]


async def post(c, login, st: membership.Statement | str, cid: str | None = None):
    signed = st if isinstance(st, str) else st.signed
    path = "/v1/conversations" if cid is None else f"/v1/conversations/{cid}/log"
    return await c.post(path, json={"statement": signed}, headers=bearer(login))


def code(r) -> tuple[int, str, str | None]:
    err = r.json()["error"]
    return r.status_code, err["code"], err["field"]


async def test_a_creation_is_checked_and_makes_the_member_table(relay):
    c, logins, ids, _ = relay
    st = membership.create(ids["alice"], "conv-a", "team", m(ids, "alice", "bob"))
    assert code(await post(c, logins["bob"], st)) == (403, "forbidden", "actor")  # posted by its actor only
    lonely = membership.create(ids["alice"], "conv-l", "me", m(ids, "alice"))
    assert code(await post(c, logins["alice"], lonely)) == (400, "invalid_request", "members")
    ghost = membership.create(
        ids["alice"],
        "conv-g",
        "t",
        [*m(ids, "alice"), membership.Member("bob", ids["mallory"].wrap_kid, ids["mallory"].sign_kid)],
    )  # bob bound to keys he never published
    assert code(await post(c, logins["alice"], ghost)) == (400, "invalid_request", "members")
    r = await post(c, logins["alice"], st)
    assert r.status_code == 201
    assert r.json() == {"id": "conv-a", "title": "team", "members": ["alice", "bob"], "epoch": 0, "head": st.hash}
    assert code(await post(c, logins["alice"], st)) == (409, "conflict", "cid")  # the id is taken
    listed = (await c.get("/v1/conversations", headers=bearer(logins["bob"]))).json()["conversations"]
    assert listed == [{"id": "conv-a", "title": "team", "members": ["alice", "bob"], "epoch": 0, "head": st.hash}]


async def test_each_refused_statement_stops_with_its_code_and_nothing_changes(relay):
    c, logins, ids, _ = relay
    st0 = membership.create(ids["alice"], "conv-b", "team", m(ids, "alice", "bob"), admins=["alice"])
    assert (await post(c, logins["alice"], st0)).status_code == 201
    other = membership.create(ids["carol"], "conv-c", "other", m(ids, "carol", "mallory"))
    assert (await post(c, logins["carol"], other)).status_code == 201
    as_bob = Identity("bob", ids["mallory"].wrap_private, ids["mallory"].sign_private)
    add_mallory = membership.change(st0, ids["alice"], "add", add=m(ids, "mallory"))
    cases = [
        (
            logins["mallory"],
            membership.change(st0, ids["mallory"], "add", add=m(ids, "mallory")),
            (400, "actor_not_member", "actor"),
        ),
        (
            logins["bob"],
            membership.change(st0, as_bob, "remove", remove=["alice"]),
            (400, "actor_key_mismatch", "akid"),
        ),
        (
            logins["bob"],
            membership.change(st0, ids["bob"], "add", add=m(ids, "carol")),
            (400, "policy_violation", "op"),
        ),  # admins: alice only
        (
            logins["carol"],
            membership.change(other, ids["carol"], "title", title="x"),
            (400, "conversation_mismatch", "cid"),
        ),  # another conversation's statement on this route
        (
            logins["alice"],
            membership.change(add_mallory, ids["alice"], "title", title="skip"),
            (400, "epoch_skipped", "ep"),
        ),
    ]
    for login, st, want in cases:
        assert code(await post(c, login, st, "conv-b")) == want, st.op
    forged = f"{add_mallory.body_b64}.{b64u_encode(ids['mallory'].sign_private.sign(b'x'))}"
    assert code(await post(c, logins["alice"], forged, "conv-b")) == (400, "statement_signature_invalid", "sig")
    assert code(await post(c, logins["alice"], "not.a-statement", "conv-b"))[:2] == (400, "statement_malformed")
    log = (await c.get("/v1/conversations/conv-b/log", headers=bearer(logins["alice"]))).json()
    assert (log["statements"], log["epoch"], log["head"]) == ([st0.signed], 0, st0.hash)


async def test_concurrent_changes_the_second_is_told_the_head_and_a_retry_is_idempotent(relay):
    c, logins, ids, _ = relay
    st0 = membership.create(ids["alice"], "conv-d", "team", m(ids, "alice", "bob"))
    assert (await post(c, logins["alice"], st0)).status_code == 201
    first = membership.change(st0, ids["alice"], "add", add=m(ids, "carol"))
    rival = membership.change(st0, ids["bob"], "title", title="rival")
    assert (await post(c, logins["alice"], first, "conv-d")).status_code == 201
    r = await post(c, logins["bob"], rival, "conv-d")
    assert code(r) == (409, "membership_conflict", "ep")
    assert r.json()["error"]["detail"] == {"epoch": 1, "head": first.hash}
    again = await post(c, logins["alice"], first, "conv-d")  # the answer was lost: the same statement again
    assert (again.status_code, again.json()["epoch"]) == (200, 1)
    assert len((await c.get("/v1/conversations/conv-d/log", headers=bearer(logins["bob"]))).json()["statements"]) == 2


async def test_the_log_is_served_to_members_and_to_a_former_member_up_to_their_removal(relay):
    c, logins, ids, _ = relay
    st0 = membership.create(ids["alice"], "conv-e", "team", m(ids, "alice", "bob", "carol"))
    st1 = membership.change(st0, ids["alice"], "remove", remove=["carol"])
    st2 = membership.change(st1, ids["alice"], "title", title="without carol")
    for st in (st0, st1, st2):
        assert (await post(c, logins["alice"], st, None if st is st0 else "conv-e")).status_code == 201

    async def log(who: str, after: str = ""):
        return await c.get(f"/v1/conversations/conv-e/log{after}", headers=bearer(logins[who]))

    assert (await log("bob")).json()["statements"] == [st0.signed, st1.signed, st2.signed]
    assert (await log("bob", "?after=1")).json() == {
        "id": "conv-e",
        "statements": [st2.signed],
        "epoch": 2,
        "head": st2.hash,
    }
    carol = (await log("carol")).json()  # she sees who removed her, nothing after
    assert (carol["statements"], carol["epoch"]) == ([st0.signed, st1.signed], 1)
    assert code(await log("mallory")) == (403, "forbidden", "conversation")
    assert code(await log("bob", "?after=x")) == (400, "invalid_request", "after")
    assert (await c.get("/v1/conversations", headers=bearer(logins["carol"]))).json()["conversations"] == []


async def test_sends_are_checked_against_the_head_epoch_and_its_member_order(relay):
    c, logins, ids, _ = relay
    st0 = membership.create(ids["alice"], "conv-f", "team", m(ids, "alice", "bob"))
    st1 = membership.change(st0, ids["alice"], "add", add=m(ids, "carol"))
    assert (await post(c, logins["alice"], st0)).status_code == 201
    assert (await post(c, logins["alice"], st1, "conv-f")).status_code == 201
    url, headers = "/v1/conversations/conv-f/messages", {**bearer(logins["alice"]), "Content-Type": "application/json"}

    def sealed(to, ep, head, ctr=1):
        return envelope.seal(
            Text("hi", ts=now_ms(), ctr=ctr), ids["alice"], "conv-f", [ids[n].public for n in to], epoch=ep, head=head
        )

    r = await c.post(url, content=sealed(["alice", "bob"], 0, st0.hash), headers=headers)
    assert code(r) == (400, "epoch_stale", "ep") and r.json()["error"]["detail"] == {"epoch": 1, "head": st1.hash}
    r = await c.post(url, content=sealed(["alice", "carol", "bob"], 1, st1.hash), headers=headers)
    assert code(r) == (400, "recipients_mismatch", "recipients")  # the head's member order, exactly
    r = await c.post(url, content=sealed(["alice", "bob", "carol"], 1, st1.hash), headers=headers)
    assert r.status_code == 201


async def test_a_conversation_from_before_the_log_is_read_only(relay):
    c, logins, ids, s = relay
    db = sqlite3.connect(Path(s.data_dir) / "relay.db")
    with db:  # what the migration leaves of an older conversation: members, no log
        db.execute("INSERT INTO conversations (id, title, created_by, created_at_ms) VALUES ('old', 'old', 1, 0)")
        db.execute(
            "INSERT INTO members (conversation_id, user_id, joined_at_ms) "
            "SELECT 'old', id, 0 FROM users WHERE username IN ('alice', 'bob')"
        )
    db.close()
    listed = (await c.get("/v1/conversations", headers=bearer(logins["alice"]))).json()["conversations"]
    assert listed == [{"id": "old", "title": "old", "members": ["alice", "bob"], "epoch": None, "head": None}]
    assert code(await c.get("/v1/conversations/old/log", headers=bearer(logins["alice"]))) == (
        400,
        "legacy_conversation",
        "conversation",
    )
    refound = membership.create(ids["alice"], "old", "old", m(ids, "alice", "bob"))
    assert code(await post(c, logins["alice"], refound)) == (409, "conflict", "cid")  # not re-founded
    data = envelope.seal(
        Text("hi", ts=now_ms(), ctr=1),
        ids["alice"],
        "old",
        [ids[n].public for n in ("alice", "bob")],
        epoch=0,
        head=refound.hash,
    )
    r = await c.post(
        "/v1/conversations/old/messages",
        content=data,
        headers={**bearer(logins["alice"]), "Content-Type": "application/json"},
    )
    assert code(r) == (400, "legacy_conversation", "conversation")
