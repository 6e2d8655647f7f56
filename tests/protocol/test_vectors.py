"""The code against the committed known-answer vectors (tests/vectors/*.json).

The files are read, never regenerated here. RSA-OAEP is randomized, so a vector's
``encrypted_key`` is checked by unwrapping it to the recorded CEK; everything else (protected
header, nonce, ciphertext, tag, Ed25519 signature, key ids, fingerprints, safety numbers) is
compared byte for byte.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared import content, envelope, keys
from shared.b64 import b64u_decode
from tests.vectors import vectorlib

L4 = vectorlib.load("l4.json")
KEYS = vectorlib.load("keys.json")
SAFETY = vectorlib.load("safety.json")


def by_name(items: list[dict]) -> dict:
    return {"argvalues": items, "ids": [i["name"] for i in items]}


@pytest.mark.parametrize("vec", **by_name(L4["vectors"]))
def test_every_recipient_opens_the_vector(ids, vec):
    data = vec["envelope"].encode()
    for name in vec["recipients"]:
        opened = envelope.open(
            data, ids[name], ids[vec["sender"]].public.sign_key, conversation=vec["conversation"], sender=vec["sender"]
        )
        assert opened.plaintext == b64u_decode(vec["plaintext"])
        assert (
            len(opened.plaintext)
            == vec["plaintext_bytes"]
            == content.bucket(len(vec["content_json"].encode()), vec["scheme"])
        )
        assert opened.plaintext == vec["content_json"].encode().ljust(vec["plaintext_bytes"], b" ")
        assert json.loads(content.canonical(opened.content)) == vec["content"]
        assert (opened.content.kind, opened.ts, opened.ctr) == (
            vec["content"]["t"],
            vec["content"]["ts"],
            vec["content"]["ctr"],
        )
        h = opened.header
        assert (h.cid, h.snd, h.mid, h.xp) == (vec["conversation"], vec["sender"], vec["mid"], vec["xp"])
        assert h.xp == envelope.expiry_hint(vec["content"].get("exp", 0))
        assert h.skid == ids[vec["sender"]].sign_kid
        assert h.rkids == [ids[r].wrap_kid for r in vec["recipients"]]
        assert (h.ep, h.mh, h.kc) == (vec["epoch"], vec["mh"], vec["kc"])


@pytest.mark.parametrize("vec", **by_name(L4["vectors"]))
def test_deterministic_parts_are_reproduced_by_seal(ids, vec):
    """``_seal_with`` (the test-only seam) with the vector's inputs gives the same bytes."""
    data = envelope._seal_with(
        content.decode(b64u_decode(vec["plaintext"])),
        ids[vec["sender"]],
        vec["conversation"],
        [ids[r].public for r in vec["recipients"]],
        epoch=vec["epoch"],
        head=vec["mh"],
        cek=b64u_decode(vec["cek"]),
        iv=b64u_decode(vec["iv"]),
        message_id=b64u_decode(vec["mid"]),
        scheme=vec["scheme"],
        max_bytes=envelope.DEFAULT_MAX_ENVELOPE_BYTES,
        max_recipients=envelope.DEFAULT_MAX_RECIPIENTS,
    )
    ours, theirs = json.loads(data), json.loads(vec["envelope"])
    for member in ("protected", "iv", "ciphertext", "tag"):
        assert ours[member] == theirs[member] == (vec[member] if member != "iv" else vec["iv"])
    assert b64u_decode(vec["protected"]).decode() == vec["protected_header_json"]
    assert [r["header"] for r in ours["recipients"]] == [r["header"] for r in theirs["recipients"]]


@pytest.mark.parametrize("vec", **by_name(L4["vectors"]))
def test_content_encryption_by_the_document(vec):
    """AES-256-GCM under the CEK, nonce iv, AAD = ASCII of ``protected`` (RFC 7516 §5.1)."""
    sealed = AESGCM(b64u_decode(vec["cek"])).encrypt(
        b64u_decode(vec["iv"]), b64u_decode(vec["plaintext"]), vec["protected"].encode("ascii")
    )
    assert sealed[:-16] == b64u_decode(vec["ciphertext"])
    assert sealed[-16:] == b64u_decode(vec["tag"])


@pytest.mark.parametrize("vec", **by_name(L4["vectors"]))
def test_key_commitment_is_hmac_sha256_of_the_cek(vec):
    """kc = HMAC-SHA-256(key = CEK, "e2ee-chat/v3/key-commitment"), in the protected header."""
    assert L4["key_commitment_context"] == "e2ee-chat/v3/key-commitment"
    kc = hmac.new(b64u_decode(vec["cek"]), L4["key_commitment_context"].encode(), hashlib.sha256).digest()
    assert vectorlib.b64u(kc) == vec["kc"] == json.loads(vec["protected_header_json"])["kc"]


@pytest.mark.parametrize("vec", **by_name(L4["vectors"]))
def test_wrapped_keys_unwrap_to_the_cek(ids, vec):
    doc = json.loads(vec["envelope"])
    for name, entry in zip(vec["recipients"], doc["recipients"], strict=True):
        assert entry["header"]["kid"] == ids[name].wrap_kid
        wrapped = b64u_decode(entry["encrypted_key"])
        assert len(wrapped) == ids[name].wrap_private.key_size // 8
        assert ids[name].wrap_private.decrypt(wrapped, vectorlib.OAEP_256) == b64u_decode(vec["cek"])


@pytest.mark.parametrize("vec", **by_name(L4["vectors"]))
def test_signature_is_ed25519_over_the_documented_input(ids, vec):
    doc = json.loads(vec["envelope"])
    signing_input = vectorlib.signing_input(doc)
    assert hashlib.sha256(signing_input).hexdigest() == vec["signing_input_sha256"]
    assert L4["signing_context"] == "e2ee-chat/v3/sig"
    assert signing_input.startswith(b"e2ee-chat/v3/sig." + doc["protected"].encode() + b".")
    sender = ids[vec["sender"]]
    sender.public.sign_key.verify(b64u_decode(doc["sig"]), signing_input)
    # Ed25519 is deterministic (RFC 8032): the same key over the same input gives the same bytes.
    assert vectorlib.b64u(sender.sign_private.sign(signing_input)) == doc["sig"]


def test_vector_envelopes_are_the_compact_form_our_encoder_writes():
    for vec in L4["vectors"]:
        doc = json.loads(vec["envelope"])
        assert list(doc) == ["protected", "recipients", "iv", "ciphertext", "tag", "sig"]
        assert vectorlib.compact_json(doc).decode() == vec["envelope"]
        header = json.loads(vec["protected_header_json"])
        assert list(header) == [
            "alg",
            "enc",
            "typ",
            "cty",
            "v",
            "mid",
            "cid",
            "snd",
            "skid",
            "xp",
            "ep",
            "mh",
            "kc",
            "rkids",
        ]


# -- key ids, fingerprints, safety numbers ---------------------------------------------------------
@pytest.mark.parametrize("name", sorted(KEYS["users"]) + ["relay"])
def test_key_ids_do_not_depend_on_the_encoding(name):
    e = KEYS["relay"] if name == "relay" else KEYS["users"][name]
    forms = [
        e["wrap_public_spki_pem"],
        e["wrap_public_spki_pem"].encode(),
        b64u_decode(e["wrap_public_spki_der"]),
        e["wrap_public_pkcs1_pem"],
        b64u_decode(e["wrap_public_pkcs1_der"]),
        "\n  " + e["wrap_public_spki_pem"] + "\n\n",
    ]
    kids = {keys.key_id(keys.load_wrap_public_key(f, name)) for f in forms}
    assert kids == {e["wrap_kid"]}
    assert e["wrap_kid"] == vectorlib.b64u(hashlib.sha256(b64u_decode(e["wrap_public_spki_der"])).digest())
    assert keys.fingerprint(e["wrap_kid"]) == e["wrap_fingerprint"]
    if name != "relay":
        for f in (e["sign_public_spki_pem"], b64u_decode(e["sign_public_spki_der"])):
            assert keys.key_id(keys.load_signing_public_key(f, name)) == e["sign_kid"]
        assert keys.fingerprint(e["sign_kid"]) == e["sign_fingerprint"]


def test_identities_match_their_published_key_ids(ids):
    for name, e in KEYS["users"].items():
        assert ids[name].wrap_kid == e["wrap_kid"]
        assert ids[name].sign_kid == e["sign_kid"]
        assert ids[name].wrap_private.key_size == e["wrap_bits"]


@pytest.mark.parametrize("vec", SAFETY["vectors"], ids=lambda v: f"{v['a']}-{v['b']}")
def test_safety_numbers(ids, vec):
    a, b = ids[vec["a"]].public, ids[vec["b"]].public
    number = keys.safety_number(a, b)
    assert number == vec["safety_number"] == keys.safety_number(b, a)
    groups = number.split(" ")
    assert len(groups) == 12 and all(len(g) == 5 and g.isdigit() for g in groups)
    for user, half in vec["per_user"].items():
        data = bytes.fromhex(half["hash_input_hex"])
        assert hashlib.sha512(data).hexdigest() == half["sha512_hex"]
        assert data.startswith(b"e2ee-chat/v1/safety\x00" + user.encode() + b"\x00")
