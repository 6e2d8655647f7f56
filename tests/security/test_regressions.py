"""Inputs that crashed shared/ or server/ code when the fuzz and fault tests first ran; each is now
answered with its documented project error."""

from __future__ import annotations

import json
import sqlite3

import httpx2
import pytest

from shared import l3
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import EnvelopeMalformed, SessionMismatch
from tests.helpers.relays import db_count
from tests.vectors import vectorlib

L3V = vectorlib.load("l3.json")
SESSION = l3.Session._from_key(b64u_decode(L3V["session_key"]))


@pytest.mark.parametrize(
    ("kid", "error"),
    [
        ("é" + "A" * 21, SessionMismatch),
        ("\U0001f510", SessionMismatch),
        ("ＡＢ", SessionMismatch),
        ("\ud800", EnvelopeMalformed),
    ],
)
def test_l3_header_kid_with_non_ascii_text_is_session_mismatch(kid, error):
    """hmac.compare_digest raised TypeError ("comparing strings with non-ASCII characters is not
    supported") for a non-ASCII ``kid``: a crash instead of session_mismatch (PROTOCOL.md §6.3)."""
    msg = L3V["messages"][0]
    parts = msg["token"].split(".")
    header = json.loads(b64u_decode(parts[0]))
    header["kid"] = kid
    parts[0] = b64u_encode(json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    with pytest.raises(error) as err:  # a lone surrogate is not UTF-8: the header does not decode
        l3.open(SESSION, ".".join(parts), direction=msg["direction"], after_seq=0)
    assert type(err.value) is error and err.value.field == ("kid" if error is SessionMismatch else "protected")


async def test_a_user_without_a_published_key_is_not_reported_as_no_such_user(world):
    """GET /v1/users/{u}/keys answered 404 "no user 'carol'" (field ``username``) for an existing
    account without a current key, so the client could not tell the sender which member has no key
    (K09: it must be named before sending). Now: field ``wrap_key``, "carol has published no key"."""
    relay = world.relay(name="nokey")
    alice = await world.client(relay, "alice", connect=False)
    await world.client(relay, "carol", connect=False)
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:
        db.execute("UPDATE user_keys SET current = 0 WHERE user_id = (SELECT id FROM users WHERE username='carol')")
    db.close()
    async with httpx2.AsyncClient(base_url=relay.url, headers={"Authorization": f"Bearer {alice.token}"}) as http:
        keyless = await http.get("/v1/users/carol/keys")
        nobody = await http.get("/v1/users/nobody/keys")
    assert (keyless.status_code, keyless.json()["error"]["field"]) == (404, "wrap_key")
    assert keyless.json()["error"]["message"] == "carol has published no key"
    assert (nobody.status_code, nobody.json()["error"]["field"]) == (404, "username")
    assert db_count(relay) == 0
