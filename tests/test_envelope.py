"""The L4 envelope: round trip, and a flipped byte in each part raises its typed error."""

from __future__ import annotations

import json

import pytest

from client_tui.core.record import now_ms
from shared import content, envelope
from shared.b64 import b64u_decode, b64u_encode
from shared.content import Delete, Edit, React, Read, Text
from shared.errors import (
    ContentTooLarge,
    ConversationMismatch,
    DecryptionFailed,
    E2EEError,
    EnvelopeTooLarge,
    NotARecipient,
    SenderMismatch,
    SignatureInvalid,
    UnknownSenderKey,
    UnwrapFailed,
)


def seal(ids, text="hello, bob ✉️", to=("alice", "bob"), conv="conv-1", exp=0, **kw):
    return envelope.seal(
        Text(text, ts=now_ms(), ctr=1, exp=exp),
        ids["alice"],
        conv,
        [ids[n].public for n in to],
        epoch=0,
        head="A" * 43,
        **kw,
    )


def flip(env: bytes, member: str, index: int = 0, byte: int = -5) -> bytes:
    """Flip one bit of one decoded byte of a base64url member (``encrypted_key`` of entry ``index``)."""
    doc = json.loads(env)
    holder = doc["recipients"][index] if member == "encrypted_key" else doc
    raw = bytearray(b64u_decode(holder[member]))
    raw[byte] ^= 0x01
    holder[member] = b64u_encode(bytes(raw))
    return json.dumps(doc).encode()


def test_round_trip_for_every_recipient(identities):
    env = seal(identities)
    for name in ("alice", "bob"):
        opened = envelope.open(
            env, identities[name], identities["alice"].public.sign_key, conversation="conv-1", sender="alice"
        )
        assert opened.text == "hello, bob ✉️"
        assert opened.header.snd == "alice"
        assert opened.header.cid == "conv-1"
        assert (opened.ctr, opened.content.kind) == (1, "text")
        assert opened.header.rkids == [identities["alice"].wrap_kid, identities["bob"].wrap_kid]


def test_envelope_does_not_contain_plaintext(identities):
    env = seal(identities, text="the canary sings at dawn")
    assert b"canary" not in env
    assert b64u_encode(b"the canary sings at dawn").encode() not in env


def test_fresh_key_and_nonce_per_message(identities):
    a, b = json.loads(seal(identities)), json.loads(seal(identities))
    assert a["iv"] != b["iv"]
    assert a["recipients"][1]["encrypted_key"] != b["recipients"][1]["encrypted_key"]
    assert a["ciphertext"] != b["ciphertext"]


def resign(env: bytes, signer) -> bytes:
    """Sign ``env`` again as ``signer`` (what the sender, holding the CEK, could do)."""
    parsed = envelope.parse(env, max_bytes=1 << 20)
    doc = json.loads(env)
    doc["sig"] = b64u_encode(signer.sign_private.sign(envelope._signing_input(parsed._env)))
    return json.dumps(doc).encode()


PARTS = ["ciphertext", "tag", "iv", "encrypted_key", "protected"]


def tamper(env: bytes, member: str) -> bytes:
    if member == "protected":
        doc = json.loads(env)
        header = json.loads(b64u_decode(doc["protected"]))
        header["ep"] += 1  # still a valid header, one value changed
        doc["protected"] = b64u_encode(json.dumps(header, separators=(",", ":")).encode())
        return json.dumps(doc).encode()
    return flip(env, member, index=1, byte=0 if member == "iv" else -5)  # bob's entry


@pytest.mark.parametrize("member", [*PARTS, "sig"])
def test_flipped_byte_anywhere_fails_the_signature_before_any_rsa_work(identities, member):
    env = tamper(seal(identities), member) if member != "sig" else flip(seal(identities), "sig")
    with pytest.raises(SignatureInvalid):
        envelope.open(env, identities["bob"], identities["alice"].public.sign_key)


@pytest.mark.parametrize(
    ("member", "error"),
    [
        ("ciphertext", DecryptionFailed),
        ("tag", DecryptionFailed),
        ("iv", DecryptionFailed),
        ("protected", DecryptionFailed),
        ("encrypted_key", UnwrapFailed),
    ],
)
def test_each_layer_catches_its_part_even_under_a_valid_signature(identities, member, error):
    # The sender (who knows the CEK) re-signs a tampered envelope: GCM and OAEP still refuse it.
    env = resign(tamper(seal(identities), member), identities["alice"])
    with pytest.raises(error):
        envelope.open(env, identities["bob"], identities["alice"].public.sign_key)


def test_other_recipients_wrapped_key_is_covered_by_the_signature(identities):
    env = flip(seal(identities), "encrypted_key", index=0)  # alice's entry; bob opens
    with pytest.raises(SignatureInvalid):
        envelope.open(env, identities["bob"], identities["alice"].public.sign_key)


def test_context_checks(identities):
    env = seal(identities)
    key = identities["alice"].public.sign_key
    with pytest.raises(ConversationMismatch):
        envelope.open(env, identities["bob"], key, conversation="conv-2")
    with pytest.raises(SenderMismatch):
        envelope.open(env, identities["bob"], key, sender="carol")
    with pytest.raises(NotARecipient):
        envelope.open(env, identities["carol"], key)
    with pytest.raises(UnknownSenderKey):
        envelope.open(env, identities["bob"], identities["mallory"].public.sign_key)


def test_size_limit_checked_before_crypto(identities):
    with pytest.raises(EnvelopeTooLarge):
        seal(identities, text="x" * 60_000, max_bytes=32 * 1024)
    with pytest.raises(ContentTooLarge):  # the document's own limit (64 KiB padded), before the envelope's
        seal(identities, text="x" * 300_000, max_bytes=1 << 20)
    big = seal(identities, text="x" * 60_000, max_bytes=1 << 20)
    with pytest.raises(EnvelopeTooLarge):
        envelope.open(big, identities["bob"], identities["alice"].public.sign_key, max_bytes=len(big) - 1)


def test_every_error_is_a_project_error():
    for cls in (DecryptionFailed, UnwrapFailed, SignatureInvalid, NotARecipient, EnvelopeTooLarge):
        assert issubclass(cls, E2EEError)


def _outcome(fn, data: bytes, **kw):
    try:
        return fn(data, **kw)
    except E2EEError as exc:
        return (type(exc), exc.field)


def test_relay_check_is_parse_without_decoding_what_only_recipients_read(identities):
    """``envelope.check`` (the relay's) gives the header ``parse`` gives, and raises what ``parse``
    raises for every committed negative vector, except a ciphertext or wrapped key that is not
    canonical base64url: only its recipients decode those."""
    from tests.vectors import vectorlib

    env = seal(identities, to=("alice", "bob", "carol"))
    assert envelope.check(env) == envelope.parse(env).header
    payload_b64 = []
    for vec in vectorlib.load("l4_negative.json")["vectors"]:
        data = vec["envelope"].encode()
        limit = vec["context"].get("max_bytes", envelope.DEFAULT_MAX_ENVELOPE_BYTES)
        parsed, checked = (
            _outcome(envelope.parse, data, max_bytes=limit),
            _outcome(envelope.check, data, max_bytes=limit),
        )
        if isinstance(parsed, envelope.ParsedEnvelope):
            assert checked == parsed.header, vec["name"]
        elif parsed[1] in ("ciphertext", "encrypted_key") and parsed[0].__name__ == "Base64Invalid":
            payload_b64.append(vec["name"])
            assert isinstance(checked, envelope.Header) or checked == parsed, vec["name"]  # length only
        else:
            assert checked == parsed, vec["name"]
    doc = json.loads(env)
    doc["ciphertext"] = "+" + doc["ciphertext"][1:]  # the standard alphabet: not base64url
    doc["recipients"][1]["encrypted_key"] = doc["recipients"][1]["encrypted_key"][:-1] + "="
    bad = json.dumps(doc).encode()
    assert payload_b64  # the committed vectors hold such payloads
    assert envelope.check(bad) == envelope.parse(env).header  # the relay does not decode them
    assert _outcome(envelope.parse, bad)[1] == "ciphertext"  # the recipients' parse does
    doc["ciphertext"] = doc["ciphertext"][: len(doc["ciphertext"]) // 4 * 4] + "A"  # no base64url text is 4k+1 long
    assert _outcome(envelope.check, json.dumps(doc).encode())[1] == "ciphertext"


@pytest.mark.parametrize("to", [("alice",), ("alice", "bob", "carol"), ("carol", "mallory")])
@pytest.mark.parametrize("text", [".", "hello, bob ✉️", "x" * 5000])
def test_seal_writes_the_compact_form_the_encoder_writes(identities, to, text):
    """seal places the base64url members in the JSON text itself: the bytes are exactly the
    encoder's form of the same envelope, and its signature covers them as §5.5 says."""
    env = seal(identities, text=text, to=to)
    parsed = envelope.parse(env)
    assert env == envelope._encoder.encode(parsed._env)
    assert envelope.open(env, identities[to[-1]], identities["alice"].public.sign_key).text == text


MID = "AAECAwQFBgcICQoLDA0ODw"


def relay_view(env: bytes) -> tuple[list[str], int]:
    """What the relay reads of an envelope: its header's member names, and the ciphertext's length."""
    doc = json.loads(env)
    return list(json.loads(b64u_decode(doc["protected"]))), len(b64u_decode(doc["ciphertext"]))


@pytest.mark.parametrize("scheme", content.SCHEMES)
def test_the_relay_cannot_tell_a_reaction_an_edit_or_a_receipt_from_a_text(identities, scheme):
    to = [identities["alice"].public, identities["bob"].public]
    docs = [
        Text("see you at eight, by the fountain", ts=now_ms(), ctr=1),
        React(MID, "👍", True, ts=now_ms(), ctr=2),
        Edit("see you at nine, by the fountain", MID, ts=now_ms(), ctr=3),
        Delete(MID, ts=now_ms(), ctr=4),
        Read(MID, 123_456, ts=now_ms(), ctr=5),
    ]
    views = [
        relay_view(envelope.seal(d, identities["alice"], "conv-1", to, epoch=0, head="A" * 43, scheme=scheme))
        for d in docs
    ]
    assert len({(tuple(names), size) for names, size in views}) == 1
    (names, size) = next(iter(views))
    assert size == 256 and "ts" not in names and "ctr" not in names and names[-1] == "rkids"
    opened = envelope.open(
        envelope.seal(docs[1], identities["alice"], "conv-1", to, epoch=0, head="A" * 43),
        identities["bob"],
        identities["alice"].public.sign_key,
    )
    assert opened.content == docs[1] and opened.text == "" and opened.header.xp == 0


def test_the_expiry_reaches_the_relay_only_as_the_hour(identities):
    exp = 1_767_225_600_000 + 90 * 60_000 + 1  # 01:30:00.001 on 2026-01-01
    env = seal(identities, text="gone soon", exp=exp)
    header = envelope.check(env)
    assert header.xp == 1_767_225_600_000 + 2 * 3_600_000 == envelope.expiry_hint(exp)
    assert (envelope.expiry_hint(0), envelope.expiry_hint(3_600_000), envelope.expiry_hint(1)) == (
        0,
        3_600_000,
        3_600_000,
    )
    opened = envelope.open(env, identities["bob"], identities["alice"].public.sign_key)
    assert opened.content.exp == exp
