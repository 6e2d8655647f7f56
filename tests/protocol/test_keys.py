"""Key loading: accepted encodings, the key id's independence from them, and refused keys."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization

from shared import errors, keys
from shared.b64 import b64u_decode
from shared.errors import KeyInvalid, KeyRefused, KeyTypeRefused
from tests.vectors import vectorlib

KEYS = vectorlib.load("keys.json")
REFUSED = KEYS["refused_wrap_keys"]


@pytest.mark.parametrize("case", REFUSED, ids=[c["name"] for c in REFUSED])
def test_refused_wrap_keys_name_the_user(case):
    with pytest.raises(KeyInvalid) as info:
        keys.load_wrap_public_key(case["spki_pem"], case["owner"])
    err = info.value
    assert type(err) is getattr(errors, case["error"])
    assert err.code == case["code"]
    assert repr(case["owner"]) in err.message
    if isinstance(err, KeyRefused):
        assert err.owner == case["owner"]
        assert err.field == "wrap_key"


@pytest.mark.parametrize("case", [c for c in REFUSED if c["name"] != "not_a_key"], ids=lambda c: c["name"])
def test_refused_keys_also_refused_as_der_and_in_a_public_identity(case, ids):
    key = serialization.load_pem_public_key(case["spki_pem"].encode())
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(getattr(errors, case["error"])):
        keys.load_wrap_public_key(der, "dave")
    with pytest.raises(getattr(errors, case["error"])) as info:
        keys.check_wrap_public_key(key, "dave")
    assert "'dave'" in info.value.message


def test_public_identity_from_json_refuses_a_weak_wrap_key(ids):
    weak = next(c for c in REFUSED if c["name"] == "rsa_1024")
    key = serialization.load_pem_public_key(weak["spki_pem"].encode())
    data = ids["alice"].public.to_json() | {
        "username": "eve",
        "wrap_key": vectorlib.b64u(
            key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        ),
    }
    with pytest.raises(errors.KeySizeRefused) as info:
        keys.PublicIdentity.from_json(data)
    assert info.value.owner == "eve"


def test_signing_key_must_be_ed25519():
    rsa_pem = KEYS["users"]["alice"]["wrap_public_spki_pem"]
    with pytest.raises(KeyTypeRefused) as info:
        keys.load_signing_public_key(rsa_pem, "alice")
    assert info.value.owner == "alice" and "'alice'" in info.value.message


@pytest.mark.parametrize("junk", [b"", b"\x30\x00", "not a key", b"-----BEGIN PUBLIC KEY-----\n", 12345, None])
def test_unparseable_keys_are_key_invalid(junk):
    with pytest.raises(KeyInvalid) as info:
        keys.load_wrap_public_key(junk, "frank")
    assert "'frank'" in info.value.message


def test_public_identity_round_trip_recomputes_key_ids(ids):
    data = ids["bob"].public.to_json()
    again = keys.PublicIdentity.from_json(data | {"wrap_kid": "forged", "sign_kid": "forged"})
    assert (again.wrap_kid, again.sign_kid) == (ids["bob"].wrap_kid, ids["bob"].sign_kid)


def test_fingerprint_is_sha256_in_16_groups_of_4_hex():
    e = KEYS["users"]["alice"]
    fp = keys.fingerprint(e["wrap_kid"])
    assert fp.replace(" ", "") == b64u_decode(e["wrap_kid"]).hex()
    assert [len(g) for g in fp.split(" ")] == [4] * 16


def test_generate_wrap_key_refuses_other_sizes():
    with pytest.raises(KeyInvalid):
        keys.generate_wrap_key(1024)
