"""Independent implementation 3: a JOSE library (jwcrypto, a test-only dependency) reads our JWEs.

Our L4 envelope is a JWE in General JSON Serialization (RFC 7516 §7.2.1) plus a ``sig`` member
that JOSE libraries ignore; the L3 envelope and handshake are JWE Compact Serialization. jwcrypto
must decrypt all of them, and what it produces in our format must open in our code.
"""

from __future__ import annotations

import json
import os

import pytest
from cryptography.hazmat.primitives import serialization
from jwcrypto import jwe, jwk

from client_tui.core.record import now_ms
from shared import content, envelope, l3
from shared.b64 import b64u_decode, b64u_encode
from shared.content import Text
from shared.errors import E2EEError
from tests.vectors import vectorlib

L4 = vectorlib.load("l4.json")
L3 = vectorlib.load("l3.json")


def private_jwk(key) -> jwk.JWK:
    return jwk.JWK.from_pem(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def public_jwk(key) -> jwk.JWK:
    return jwk.JWK.from_pem(
        key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def jwcrypto_decrypt(serialized: str, key: jwk.JWK, expect: bytes | None = None) -> tuple[bytes, dict]:
    token = jwe.JWE()
    if expect == b"":
        # jwcrypto 1.6 decrypts an empty payload, then reports it as "No recipient matched"
        # (it tests ``if not self.plaintext``); its own log shows the decryption succeeded.
        with pytest.raises(jwe.InvalidJWEData, match=r"\['Success'\]"):
            token.deserialize(serialized, key=key)
        return b"", json.loads(token.objects["protected"])
    token.deserialize(serialized, key=key)
    return token.payload, json.loads(token.objects["protected"])


@pytest.mark.parametrize("vec", L4["vectors"], ids=[v["name"] for v in L4["vectors"]])
def test_jwcrypto_decrypts_the_l4_vectors(ids, vec):
    for name in vec["recipients"]:
        payload, header = jwcrypto_decrypt(
            vec["envelope"], private_jwk(ids[name].wrap_private), b64u_decode(vec["plaintext"])
        )
        assert payload == b64u_decode(vec["plaintext"])
        assert header["alg"] == "RSA-OAEP-256" and header["enc"] == "A256GCM"
        assert header["cid"] == vec["conversation"]


def test_jwcrypto_decrypts_a_fresh_envelope_for_each_recipient(ids):
    people = [ids[n] for n in ("alice", "bob", "carol", "mallory")]
    data = envelope.seal(
        Text("fresh for jwcrypto ✓", ts=now_ms(), ctr=3),
        ids["carol"],
        "conv-9",
        [p.public for p in people],
        epoch=1,
        head="A" * 43,
    )
    for p in people:
        payload, _ = jwcrypto_decrypt(data.decode(), private_jwk(p.wrap_private))
        assert len(payload) == 256 and json.loads(payload)["body"] == "fresh for jwcrypto ✓"  # padded JSON reads as is
        assert content.decode(payload) == Text("fresh for jwcrypto ✓", ts=json.loads(payload)["ts"], ctr=3)


def test_jwcrypto_rejects_a_tampered_envelope(ids):
    doc = json.loads(L4["vectors"][0]["envelope"])
    tag = bytearray(b64u_decode(doc["tag"]))
    tag[0] ^= 1
    doc["tag"] = b64u_encode(bytes(tag))
    with pytest.raises(jwe.InvalidJWEData):
        jwcrypto_decrypt(json.dumps(doc), private_jwk(ids["bob"].wrap_private))


def test_jwcrypto_jwe_plus_our_signature_opens_in_our_code(ids):
    """jwcrypto encrypts (General JSON, RSA-OAEP-256 per recipient); alice adds ``sig``; we open."""
    alice, bob = ids["alice"], ids["bob"]
    cek = os.urandom(32)  # jwcrypto wraps the key it is given: the header's kc must commit to it
    header = vectorlib.header_for(alice, "conv-1", [alice, bob], mid=os.urandom(16), cek=cek)
    plaintext = content.encode(content.Text("encrypted by jwcrypto", ts=1, ctr=9), "pow2")
    token = jwe.JWE(plaintext, protected=json.dumps(header, separators=(",", ":")))
    token.cek = cek
    for who in (alice, bob):
        token.add_recipient(public_jwk(who.public.wrap_key), header=json.dumps({"kid": who.wrap_kid}))
    doc = json.loads(token.serialize())
    doc = {k: doc[k] for k in ("protected", "recipients", "iv", "ciphertext", "tag")}
    vectorlib.resign(doc, alice.sign_private)
    opened = envelope.open(json.dumps(doc).encode(), bob, alice.public.sign_key, conversation="conv-1", sender="alice")
    assert opened.plaintext == plaintext and (opened.text, opened.ctr) == ("encrypted by jwcrypto", 9)


def test_a_jose_library_ignores_sig_and_kc_so_it_gets_confidentiality_only(ids):
    """jwcrypto opens envelopes our ``open`` refuses: a forged signature, a key commitment to
    another key (PROTOCOL.md §5.8). Only a reader that checks ``sig`` and ``kc`` gets authenticity
    and key commitment."""
    neg = {v["name"]: v for v in vectorlib.load("l4_negative.json")["vectors"]}
    key = private_jwk(ids["bob"].wrap_private)
    plaintext = b64u_decode(vectorlib.load("l4_negative.json")["base_plaintext"])
    for name in ("signature_zero", "kc_for_another_key_signed"):
        payload, _ = jwcrypto_decrypt(neg[name]["envelope"], key)
        assert payload == plaintext
        with pytest.raises(E2EEError) as err:
            envelope.open(neg[name]["envelope"].encode(), ids["bob"], ids["alice"].public.sign_key)
        assert err.value.code == neg[name]["code"]


def test_jwcrypto_decrypts_the_l3_vectors():
    key = jwk.JWK(kty="oct", k=L3["session_key"])
    for m in L3["messages"]:
        payload, header = jwcrypto_decrypt(m["token"], key, b64u_decode(m["plaintext"]))
        assert payload == b64u_decode(m["plaintext"])
        assert header["alg"] == "dir" and header["kid"] == L3["session_id"]
    payload, header = jwcrypto_decrypt(L3["handshake"]["token"], private_jwk(vectorlib.relay_private()))
    assert payload == b64u_decode(L3["challenge"]) and header["typ"] == "e2ee-chat/l3-hs"


def test_jwcrypto_handshake_and_message_are_accepted_by_our_relay_code():
    relay = vectorlib.relay_private()
    challenge = os.urandom(16)
    hs = jwe.JWE(
        challenge,
        protected=json.dumps(
            {
                "alg": "RSA-OAEP-256",
                "enc": "A256GCM",
                "typ": "e2ee-chat/l3-hs",
                "v": 1,
                "kid": vectorlib.load("keys.json")["relay"]["wrap_kid"],
            }
        ),
    )
    hs.add_recipient(public_jwk(relay.public_key()))
    session = l3.accept_handshake(hs.serialize(compact=True), relay, challenge)
    # jwcrypto keeps that CEK to itself, so its message below uses the vector's session key.
    vec_session = l3.Session._from_key(b64u_decode(L3["session_key"]))
    msg = jwe.JWE(
        b"from jwcrypto",
        protected=json.dumps(
            {
                "alg": "dir",
                "enc": "A256GCM",
                "typ": "e2ee-chat/l3",
                "v": 1,
                "kid": L3["session_id"],
                "dir": "r2c",
                "seq": 3,
                "mid": b64u_encode(os.urandom(16)),
                "cid": "conv-1",
                "snd": "bob",
                "ts": 5,
            }
        ),
    )
    msg.add_recipient(jwk.JWK(kty="oct", k=L3["session_key"]))
    opened = l3.open(vec_session, msg.serialize(compact=True), direction="r2c", after_seq=2)
    assert opened.text == "from jwcrypto" and opened.header.seq == 3
    assert session.id != vec_session.id
