"""What the relay checks of an L4 envelope: the form, sizes, header and recipients, never the
ciphertext and wrapped keys that only recipients decode (``envelope.check``). In-process:
``create_app`` on a real SQLite file."""

from __future__ import annotations

import json
import sqlite3

from client_tui.core.record import now_ms
from shared import envelope
from shared.content import Text
from shared.errors import Base64Invalid
from tests.helpers.asgi import bearer, http, new_conversation, register, running
from tests.vectors import vectorlib


async def test_the_relay_stores_without_decoding_what_only_recipients_read(settings_for, identities):
    alice, bob = identities["alice"], identities["bob"]
    async with running(settings_for()) as app, http(app) as c:
        login = await register(c, alice)
        await register(c, bob)
        cid, head = await new_conversation(c, login, alice, [bob])

        def post(doc: dict):
            return c.post(
                f"/v1/conversations/{cid}/messages",
                content=json.dumps(doc, separators=(",", ":")),
                headers={**bearer(login), "Content-Type": "application/jose+json"},
            )

        doc = json.loads(
            envelope.seal(
                Text("hi bob", ts=now_ms(), ctr=1), alice, cid, [alice.public, bob.public], epoch=0, head=head
            )
        )
        doc["ciphertext"] = "+" + doc["ciphertext"][1:]  # not base64url: its recipients refuse it
        r = await post(doc)
        assert r.status_code == 201, r.text  # stored: the relay never decoded the ciphertext
        try:
            envelope.parse(json.dumps(doc, separators=(",", ":")).encode())
        except Base64Invalid as exc:
            assert exc.field == "ciphertext"
        else:
            raise AssertionError("a recipient's parse must refuse the ciphertext")

        doc = json.loads(
            envelope.seal(
                Text("hi again", ts=now_ms(), ctr=2), alice, cid, [alice.public, bob.public], epoch=0, head=head
            )
        )
        doc["recipients"][1]["encrypted_key"] += "A" * (1 - len(doc["recipients"][1]["encrypted_key"]) % 4 + 4)
        assert len(doc["recipients"][1]["encrypted_key"]) % 4 == 1
        r = await post(doc)  # a length no base64url text has: refused by its size alone
        assert r.status_code == 400 and r.json()["error"]["code"] == "base64_invalid"
        assert r.json()["error"]["field"] == "encrypted_key"


async def test_the_relay_keeps_the_expiry_hint_and_refuses_older_versions(settings_for, identities):
    """v3: the relay reads the hour a disappearing message may go (``xp``) and stores it with the
    envelope (``messages.expires_at_ms``; retention and sync act on it); it never sees the exact
    ``exp``. A v2 envelope (readable ``ts``/``ctr``) is refused like a v1 one."""
    alice, bob = identities["alice"], identities["bob"]
    settings = settings_for()
    async with running(settings) as app, http(app) as c:
        login = await register(c, alice)
        await register(c, bob)
        cid, head = await new_conversation(c, login, alice, [bob])

        def post(data: bytes):
            return c.post(
                f"/v1/conversations/{cid}/messages",
                content=data,
                headers={**bearer(login), "Content-Type": "application/jose+json"},
            )

        exp = 1_767_225_600_000 + 90 * 60_000 + 1  # 01:30:00.001 on 2026-01-01: the hint is 02:00
        for ctr, doc_exp in ((1, exp), (2, 0)):
            data = envelope.seal(
                Text("gone soon", ts=now_ms(), ctr=ctr, exp=doc_exp),
                alice,
                cid,
                [alice.public, bob.public],
                epoch=0,
                head=head,
            )
            assert (await post(data)).status_code == 201
        rows = (
            sqlite3.connect(settings.data_path / "relay.db")
            .execute("SELECT expires_at_ms FROM messages ORDER BY seq")
            .fetchall()
        )
        assert rows == [(1_767_225_600_000 + 2 * 3_600_000,), (0,)]
        v2 = vectorlib.load("l4_negative.json")
        whole_v2 = next(v for v in v2["vectors"] if v["name"] == "version_2_header")
        r = await post(whole_v2["envelope"].encode())
        assert r.status_code == 400 and (r.json()["error"]["code"], r.json()["error"]["field"]) == (
            "unsupported_algorithm",
            "v",
        )
