"""What the relay checks of an L4 envelope: the form, sizes, header and recipients, never the
ciphertext and wrapped keys that only recipients decode (``envelope.check``). In-process:
``create_app`` on a real SQLite file."""

from __future__ import annotations

import json

from shared import envelope
from shared.errors import Base64Invalid
from tests.helpers.asgi import bearer, http, new_conversation, register, running


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

        doc = json.loads(envelope.seal("hi bob", alice, cid, [alice.public, bob.public], counter=1, epoch=0, head=head))
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
            envelope.seal("hi again", alice, cid, [alice.public, bob.public], counter=2, epoch=0, head=head)
        )
        doc["recipients"][1]["encrypted_key"] += "A" * (1 - len(doc["recipients"][1]["encrypted_key"]) % 4 + 4)
        assert len(doc["recipients"][1]["encrypted_key"]) % 4 == 1
        r = await post(doc)  # a length no base64url text has: refused by its size alone
        assert r.status_code == 400 and r.json()["error"]["code"] == "base64_invalid"
        assert r.json()["error"]["field"] == "encrypted_key"
