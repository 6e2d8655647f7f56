"""The membership code against the committed vectors (tests/vectors/membership.json, PROTOCOL.md §12).

Valid logs verify statement by statement and their bytes are reproduced by the builder; every
refused statement stops with its code and field; forks are detected; envelopes are checked against
the log (``ep``, ``mh``, ``snd``, ``rkids``) before they are opened.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from shared import envelope, membership
from shared.b64 import b64u_decode
from shared.errors import E2EEError
from shared.keys import Identity
from shared.membership_chain import Chain, check_audience, check_continuity, detect_fork
from tests.vectors import vectorlib

VEC = vectorlib.load("membership.json")


def by_name(items: list[dict]) -> dict:
    return {"argvalues": items, "ids": [i["name"] for i in items]}


@pytest.fixture(scope="module")
def resolve(ids):
    """``(username, sign_kid) -> key`` over the test users and the extra keys of the vectors."""
    keys = {(i.username, i.sign_kid): i.sign_private.public_key() for i in ids.values()}
    pool = vectorlib.key_pool()
    for e in VEC["extra_keys"]:
        keys[(e["username"], e["sign_kid"])] = pool[e["pool_index"]].sign_private.public_key()

    def resolve(user: str, kid: str):
        return keys[(user, kid)]

    return resolve


def verified(log: list[str], resolve) -> Chain:
    statements = [membership.parse(s) for s in log]
    chain = Chain(statements[0].cid if statements else "conv-m1")
    chain.extend(statements, resolve)
    return chain


@pytest.mark.parametrize("vec", **by_name(VEC["chains"]))
def test_valid_logs_verify_and_are_canonical(vec, resolve):
    chain = Chain(vec["cid"])
    for want in vec["statements"]:
        st = membership.parse(want["signed"])
        assert chain.extend([st], resolve) == [st]
        assert (st.ep, st.op, st.actor, st.hash) == (want["ep"], want["op"], want["actor"], want["hash"])
        assert list(st.usernames) == want["members"] and st.title == want["title"]
        body = b64u_decode(st.body_b64)
        assert body.decode() == want["body_json"]
        assert (
            body == json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        )  # canonical: one byte form per statement
        assert hashlib.sha256(want["signed"].encode()).digest() == b64u_decode(want["hash"])
        assert (
            hashlib.sha256(b"e2ee-chat/v1/membership." + st.body_b64.encode()).hexdigest()
            == want["signing_input_sha256"]
        )
    assert chain.head.ep == len(vec["statements"]) - 1


def test_the_builder_reproduces_every_statement_of_the_log(ids):
    """Ed25519 and canonical JSON are deterministic: the same inputs give the same signed form."""
    pool = vectorlib.key_pool()
    carol2 = Identity("carol", pool[0].wrap_private, pool[0].sign_private)
    who = {"alice": ids["alice"], "bob": ids["bob"], "carol": ids["carol"]}
    log = [membership.parse(s["signed"]) for s in VEC["chains"][0]["statements"]]
    for prev, st in zip(log, log[1:], strict=False):
        actor = carol2 if st.akid == carol2.sign_kid else who[st.actor]
        kw = {
            "add": [m for m in st.members if m.username not in prev.usernames],
            "remove": [u for u in prev.usernames if u not in st.usernames],
            "title": st.title,
            "admins": list(st.admins) if st.admins is not None else None,
            "keys": st.member(st.actor),
            "ts": st.ts,
        }
        assert membership.change(prev, actor, st.op, **kw).signed == st.signed


@pytest.mark.parametrize("vec", **by_name(VEC["negative"]))
def test_refused_statements_stop_with_their_code(vec, resolve):
    chain = verified(vec["log"], resolve) if vec["log"] else Chain("conv-m1")
    before = list(chain.statements)
    with pytest.raises(E2EEError) as err:
        chain.extend([membership.parse(vec["statement"])], resolve)
    assert (err.value.code, err.value.field) == (vec["code"], vec["field"])
    assert chain.statements == before  # never acted on


@pytest.mark.parametrize("vec", **by_name(VEC["forks"]))
def test_forks_are_detected(vec, resolve):
    if "a" in vec:
        base = verified(vec["log"], resolve)
        a, b = membership.parse(vec["a"]), membership.parse(vec["b"])
        for st in (a, b):  # each one alone follows the log
            verified(vec["log"], resolve).extend([st], resolve)
        base.extend([a], resolve)
        with pytest.raises(E2EEError) as err:
            base.extend([b], resolve)
        with pytest.raises(E2EEError):
            detect_fork(a, b)
    else:
        with pytest.raises(E2EEError) as err:
            check_continuity(verified(vec["log"], resolve), vec["verified"]["ep"], vec["verified"]["hash"])
    assert (err.value.code, err.value.field) == (vec["code"], vec["field"])


@pytest.mark.parametrize("vec", **by_name(VEC["audience"]))
def test_envelopes_are_checked_against_the_log(vec, ids, resolve):
    chain = verified([s["signed"] for s in VEC["chains"][0]["statements"]], resolve)
    parsed = envelope.parse(vec["envelope"].encode())
    h = parsed.header
    try:
        check_audience(chain, ep=h.ep, mh=h.mh, sender=h.snd, rkids=h.rkids)
    except E2EEError as exc:
        assert (exc.code, exc.field) == (vec["code"], vec["field"])
        return
    assert vec["code"] is None
    opened = envelope.open(parsed, ids["alice"], ids[vec["sender"]].public.sign_key, conversation=vec["conversation"])
    assert opened.text == vec["body"]
