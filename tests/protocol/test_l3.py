"""L3: session-key handshake and dir + A256GCM messages, against the vectors and live."""

from __future__ import annotations

import inspect
import json
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared import errors, l3
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import (
    DecryptionFailed,
    DirectionMismatch,
    E2EEError,
    EnvelopeMalformed,
    EnvelopeTooLarge,
    KeySizeRefused,
    Replayed,
    SessionMismatch,
)
from tests.vectors import vectorlib

L3 = vectorlib.load("l3.json")
KEY = b64u_decode(L3["session_key"])
CHALLENGE = b64u_decode(L3["challenge"])


@pytest.fixture(scope="module")
def session() -> l3.Session:
    return l3.Session._from_key(KEY)


@pytest.fixture(scope="module")
def relay():
    return vectorlib.relay_private()


def test_session_id_vector(session):
    assert session.id == L3["session_id"] == l3.session_id(KEY)
    assert len(session.id) == 22
    assert KEY.hex() not in repr(session) and L3["session_key"] not in repr(session)


def test_sessions_cannot_be_made_from_a_chosen_key():
    with pytest.raises(TypeError):
        l3.Session(KEY)  # type: ignore[call-arg]
    s = l3.Session._from_key(KEY)
    with pytest.raises(AttributeError):
        s.id = "other"  # type: ignore[misc]


def test_handshake_vector_is_accepted_by_the_relay(relay, session):
    hs = L3["handshake"]
    accepted = l3.accept_handshake(hs["token"], relay, CHALLENGE)
    assert accepted.id == session.id
    parts = hs["token"].split(".")
    assert b64u_decode(parts[0]).decode() == hs["protected_header_json"]
    assert json.loads(hs["protected_header_json"]) == {
        "alg": "RSA-OAEP-256",
        "enc": "A256GCM",
        "typ": "e2ee-chat/l3-hs",
        "v": 1,
        "kid": vectorlib.load("keys.json")["relay"]["wrap_kid"],
    }
    assert relay.decrypt(b64u_decode(parts[1]), vectorlib.OAEP_256) == KEY
    sealed = AESGCM(KEY).encrypt(b64u_decode(hs["iv"]), CHALLENGE, parts[0].encode())
    assert [b64u_encode(sealed[:-16]), b64u_encode(sealed[-16:])] == parts[3:]


@pytest.mark.parametrize("vec", L3["messages"], ids=[m["name"] for m in L3["messages"]])
def test_message_vectors(session, vec):
    opened = l3.open(session, vec["token"], direction=vec["direction"])
    assert opened.plaintext == b64u_decode(vec["plaintext"])
    assert opened.text == vec["plaintext_utf8"]
    h = opened.header
    assert (h.dir, h.seq, h.mid, h.cid, h.snd, h.ts, h.kid) == (
        vec["direction"],
        vec["seq"],
        vec["mid"],
        vec["cid"],
        vec["snd"],
        vec["ts"],
        session.id,
    )
    again = l3._seal_with(
        session,
        b64u_decode(vec["plaintext"]),
        direction=vec["direction"],
        conversation=vec["cid"],
        sender=vec["snd"],
        seq=vec["seq"],
        message_id=vec["mid"],
        sent_at_ms=vec["ts"],
        iv=b64u_decode(vec["iv"]),
        max_bytes=1 << 18,
    )
    assert again == vec["token"]
    assert vec["token"].split(".")[1] == ""  # alg dir: empty encrypted key (RFC 7518 §4.5)
    assert b64u_decode(vec["token"].split(".")[0]).decode() == vec["protected_header_json"]


@pytest.mark.parametrize("vec", L3["negative"], ids=[m["name"] for m in L3["negative"]])
def test_message_negative_vectors(session, vec):
    with pytest.raises(E2EEError) as info:
        l3.open(session, vec["token"], direction=vec["direction"], after_seq=vec["after_seq"])
    assert type(info.value) is getattr(errors, vec["error"]), vec["tamper"]
    assert (info.value.code, info.value.field) == (vec["code"], vec["field"])


@pytest.mark.parametrize("vec", L3["handshake_negative"], ids=[m["name"] for m in L3["handshake_negative"]])
def test_handshake_negative_vectors(relay, vec):
    with pytest.raises(E2EEError) as info:
        l3.accept_handshake(vec["token"], relay, b64u_decode(vec["challenge"]))
    assert type(info.value) is getattr(errors, vec["error"]), vec["tamper"]
    assert (info.value.code, info.value.field) == (vec["code"], vec["field"])


def test_live_round_trip_both_directions(relay):
    challenge = os.urandom(16)
    client, token = l3.start_handshake(relay.public_key(), challenge)
    server = l3.accept_handshake(token, relay, challenge)
    assert client.id == server.id
    up = l3.seal(client, "to the relay", direction="c2r", conversation="conv-1", sender="alice", seq=1)
    got = l3.open(server, up, direction="c2r", after_seq=0)
    assert got.text == "to the relay"
    down = l3.seal(
        server,
        got.plaintext,
        direction="r2c",
        conversation="conv-1",
        sender="alice",
        seq=1,
        message_id=got.header.mid,
        sent_at_ms=got.header.ts,
    )
    back = l3.open(client, down, direction="r2c")
    assert (back.text, back.header.mid, back.header.ts) == ("to the relay", got.header.mid, got.header.ts)
    with pytest.raises(DirectionMismatch):
        l3.open(client, up, direction="r2c")  # the client's own frame reflected back to it
    with pytest.raises(Replayed):
        l3.open(server, up, direction="c2r", after_seq=1)
    other, _ = l3.start_handshake(relay.public_key(), challenge)
    with pytest.raises(SessionMismatch):
        l3.open(other, down, direction="r2c")


def test_fresh_nonce_and_key_per_session(relay):
    a, ta = l3.start_handshake(relay.public_key(), CHALLENGE)
    b, tb = l3.start_handshake(relay.public_key(), CHALLENGE)
    assert a.id != b.id and ta.split(".")[1] != tb.split(".")[1]
    t1 = l3.seal(a, "same", direction="c2r", conversation="c", sender="alice", seq=1, message_id="A" * 22, sent_at_ms=1)
    t2 = l3.seal(a, "same", direction="c2r", conversation="c", sender="alice", seq=1, message_id="A" * 22, sent_at_ms=1)
    assert t1.split(".")[2] != t2.split(".")[2]


def test_no_caller_chooses_a_key_or_nonce():
    for fn in (l3.seal, l3.start_handshake, l3.open, l3.accept_handshake):
        params = set(inspect.signature(fn).parameters)
        assert not params & {"key", "iv", "nonce", "cek", "session_key"}, fn.__name__


def test_relay_key_is_checked(ids):
    import cryptography.hazmat.primitives.serialization as ser

    weak = next(c for c in vectorlib.load("keys.json")["refused_wrap_keys"] if c["name"] == "rsa_1024")
    with pytest.raises(KeySizeRefused) as info:
        l3.start_handshake(ser.load_pem_public_key(weak["spki_pem"].encode()), CHALLENGE)
    assert info.value.owner == "relay"


@pytest.mark.parametrize("bad", [b"", b"short", os.urandom(17)], ids=["empty", "short", "17 random bytes"])
def test_challenge_must_be_16_bytes(relay, bad):
    with pytest.raises(EnvelopeMalformed):
        l3.start_handshake(relay.public_key(), bad)
    with pytest.raises(EnvelopeMalformed):
        l3.accept_handshake(L3["handshake"]["token"], relay, bad)


def test_limits_and_input_types(session):
    with pytest.raises(EnvelopeTooLarge):
        l3.seal(session, b"x" * 300_000, direction="c2r", conversation="c", sender="alice", seq=1)
    token = L3["messages"][0]["token"]
    with pytest.raises(EnvelopeTooLarge):
        l3.open(session, token, direction="c2r", max_bytes=len(token) - 1)
    assert l3.open(session, token.encode(), direction="c2r").plaintext
    for bad in ("é" + token, 42, None):
        with pytest.raises(EnvelopeMalformed):
            l3.open(session, bad, direction="c2r")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeMalformed):
        l3.seal(session, b"x", direction="sideways", conversation="c", sender="alice", seq=1)
    with pytest.raises(EnvelopeMalformed):
        l3.seal(session, b"x", direction="c2r", conversation="c", sender="alice", seq=0)


def test_tampered_header_is_decryption_failed(session):
    token = L3["messages"][0]["token"]
    parts = token.split(".")
    h = json.loads(b64u_decode(parts[0]))
    h["seq"] = 99
    forged = ".".join([b64u_encode(json.dumps(h).encode())] + parts[1:])
    with pytest.raises(DecryptionFailed):
        l3.open(session, forged, direction="c2r")
