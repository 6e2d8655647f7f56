"""A hostile *sender* that equivocates (issue 12): one signed envelope whose recipient entries wrap
different content keys for bob and carol, with an AES-GCM ciphertext that authenticates under both
(an invisible salamander). Against a real relay, the envelope opens for at most one recipient: the
header's key commitment ``kc`` (protocol v2) names one content key, checked right after the unwrap.
Since v3 not even that one: the block of noise the construction needs follows the content document,
which a reader refuses (``content_invalid``)."""

from __future__ import annotations

import json

import httpx2
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bench.tools.key_attacks import equivocating_envelope
from client_tui.widgets import reason_words, unreadable_text
from shared.b64 import b64u_decode
from tests.helpers.clients import barrier

SECRET = "meet at noon at the north gate"


async def test_an_equivocating_envelope_opens_for_at_most_one_recipient(world):
    relay = world.relay()
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob")
    carol = await world.client(relay, "carol")
    conv = await alice.create_conversation("group", ["bob", "carol"])
    for c in (bob, carol):
        await c.refresh_conversations()
    await alice.send_text(conv, "an honest one first")
    await barrier(bob)
    template = (await bob.load_history(conv))[-1].envelope  # a real envelope of alice's: epoch, head, rkids
    data, cek_bob, cek_carol = equivocating_envelope(
        template, alice.identity, world.identities["bob"].public, world.identities["carol"].public, SECRET
    )
    # the attack is real: without the commitment, one ciphertext opens under both keys to two texts
    doc = json.loads(data)
    raw = {k: b64u_decode(doc[k]) for k in ("iv", "ciphertext", "tag")}
    aad = doc["protected"].encode()
    as_bob = AESGCM(cek_bob).decrypt(raw["iv"], raw["ciphertext"] + raw["tag"], aad)
    as_carol = AESGCM(cek_carol).decrypt(raw["iv"], raw["ciphertext"] + raw["tag"], aad)
    assert as_bob.startswith(b'{"body":"' + SECRET.encode()) and as_carol != as_bob
    async with httpx2.AsyncClient(base_url=relay.url, headers={"Authorization": f"Bearer {alice.token}"}) as http:
        r = await http.post(
            f"/v1/conversations/{conv}/messages", content=data, headers={"Content-Type": "application/json"}
        )
    assert r.status_code == 201, r.text  # the relay cannot tell: it sees ciphertext only
    seq = r.json()["seq"]
    await barrier(bob)
    await barrier(carol)
    got = {c.username: await c.history.by_seq(seq) for c in (bob, carol)}
    opened = [name for name, rec in got.items() if rec.text is not None]
    assert opened == []  # at most one recipient could; v3 refuses the noise after bob's document too
    assert (got["bob"].state, got["bob"].reason) == ("unreadable", "content_invalid")
    rec = got["carol"]
    assert (rec.state, rec.reason, rec.text) == ("unreadable", "key_commitment_invalid", None)
    assert unreadable_text(rec.reason) == "could not verify" and reason_words(rec.reason)
    assert SECRET not in (rec.detail or "")
