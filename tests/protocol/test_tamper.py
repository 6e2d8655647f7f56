"""Every way of moving, rewriting or corrupting an L4 envelope raises its own named error.

Two sources: the committed negative vectors (``tests/vectors/l4_negative.json``, one per tamper
kind, also run by the Node implementation) and the same tampers applied to envelopes sealed now.
"""

from __future__ import annotations

import json
import os

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from client_tui.core.record import now_ms
from shared import content, envelope, errors
from shared.b64 import b64u_decode, b64u_encode
from shared.content import Text
from shared.errors import (
    Base64Invalid,
    ConversationMismatch,
    DuplicateRecipient,
    E2EEError,
    NonceInvalid,
    NotARecipient,
    RecipientListInvalid,
    SenderMismatch,
    SignatureInvalid,
    TagInvalid,
    TrailingData,
    UnknownSenderKey,
    UnwrapFailed,
    VerificationFailed,
)
from tests.vectors import vectorlib

NEG = vectorlib.load("l4_negative.json")

# The tamper kinds of issue 3, each mapped to the negative vectors that show it.
ISSUE_KINDS = {
    "OAEP with a SHA-1 MGF1": ["oaep_mgf1_sha1", "oaep_sha1"],
    "OAEP with a label": ["oaep_label"],
    "tag cut to 0, 4 or 15 bytes": ["tag_cut_to_0", "tag_cut_to_4", "tag_cut_to_15"],
    "nonce of the wrong length": ["iv_8_bytes", "iv_16_bytes"],
    "moved to another conversation": ["moved_to_other_conversation", "cid_rewritten"],
    "rewritten sender": ["sender_rewritten_in_delivery", "snd_rewritten", "snd_and_skid_rewritten"],
    "swapped recipient key id": [
        "recipient_kids_swapped",
        "recipient_entries_reordered",
        "rkids_and_entries_reordered",
    ],
    "duplicated recipient key id": ["recipient_kid_duplicated", "recipient_entry_duplicated_signed"],
    "no entry for me": ["no_entry_for_me"],
    "bad signature": ["signature_bit_flipped", "signature_zero", "signature_63_bytes"],
    "signature by a key other than the pinned one": ["signed_by_other_key_same_skid", "signed_by_other_key_own_skid"],
    "wrong base64 (padding, alphabet)": [
        "base64_padding",
        "base64_standard_alphabet",
        "base64_non_canonical",
        "base64_whitespace",
    ],
    "trailing garbage": ["trailing_garbage", "trailing_garbage_in_header"],
}


def open_as(ids, data: bytes, me="bob", pinned="alice", **kw):
    return envelope.open(data, ids[me], ids[pinned].public.sign_key, **kw)


@pytest.mark.parametrize("vec", NEG["vectors"], ids=[v["name"] for v in NEG["vectors"]])
def test_negative_vector_raises_its_named_error(ids, vec):
    c = vec["context"]
    with pytest.raises(E2EEError) as info:
        envelope.open(
            vec["envelope"].encode(),
            ids[c["me"]],
            ids[c["pinned"]].public.sign_key,
            conversation=c["conversation"],
            sender=c["sender"],
            max_bytes=c.get("max_bytes", envelope.DEFAULT_MAX_ENVELOPE_BYTES),
        )
    err = info.value
    assert type(err).__name__ == vec["error"], vec["tamper"]
    assert err.code == vec["code"]
    assert err.field == vec["field"]
    assert type(err) is getattr(errors, vec["error"])


def test_the_untampered_base_opens(ids):
    assert open_as(ids, NEG["base"].encode(), conversation="conv-1", sender="alice").plaintext == b64u_decode(
        NEG["base_plaintext"]
    )


def test_every_issue_kind_has_vectors():
    names = {v["name"] for v in NEG["vectors"]}
    for kind, vecs in ISSUE_KINDS.items():
        assert vecs and set(vecs) <= names, kind


def test_negative_vectors_have_distinct_names_and_known_codes():
    names = [v["name"] for v in NEG["vectors"]]
    assert len(names) == len(set(names))
    for v in NEG["vectors"]:
        assert getattr(errors, v["error"]).code == v["code"]


# -- the same tampers on envelopes sealed now --------------------------------------------------------
@pytest.fixture
def sealed(ids) -> bytes:
    return envelope.seal(
        Text("tamper me", ts=now_ms(), ctr=3),
        ids["alice"],
        "conv-1",
        [ids["alice"].public, ids["bob"].public],
        epoch=2,
        head="A" * 43,
    )


def mutate(data: bytes, fn) -> bytes:
    doc = json.loads(data)
    fn(doc)
    return vectorlib.compact_json(doc)


TAMPER_ME = content.encode(content.Text("tamper me", ts=1, ctr=1))


def fresh(ids, **kw) -> dict:
    return vectorlib.build(
        ids["alice"],
        [ids["alice"], ids["bob"]],
        TAMPER_ME,
        cek=os.urandom(32),
        iv=os.urandom(12),
        mid=os.urandom(16),
        **kw,
    )


@pytest.mark.parametrize(
    "oaep",
    [
        padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA256(), label=None),
        padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None),
        padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=b"label"),
        padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA1(), label=None),
    ],
    ids=["mgf1-sha1", "sha1-everything", "label", "sha1-hash-sha256-mgf1"],
)
def test_other_oaep_parameters_are_unwrap_failed(ids, oaep):
    data = vectorlib.compact_json(fresh(ids, oaep={"bob": oaep}))
    with pytest.raises(UnwrapFailed) as info:
        open_as(ids, data)
    assert info.value.field == "encrypted_key"
    assert open_as(ids, data, me="alice").text == "tamper me"  # alice's entry is fine


@pytest.mark.parametrize("n", [0, 4, 15])
def test_tag_cut(ids, sealed, n):
    data = mutate(sealed, lambda d: d.update(tag=b64u_encode(b64u_decode(d["tag"])[:n])))
    with pytest.raises(TagInvalid):
        open_as(ids, data)


@pytest.mark.parametrize("n", [0, 8, 11, 13, 16])
def test_nonce_of_wrong_length(ids, sealed, n):
    data = mutate(sealed, lambda d: d.update(iv=b64u_encode((b64u_decode(d["iv"]) * 2)[:n])))
    with pytest.raises(NonceInvalid):
        open_as(ids, data)


def rewrite_header(data: bytes, **changes) -> bytes:
    def fn(d):
        h = json.loads(b64u_decode(d["protected"]))
        h.update(changes)
        d["protected"] = b64u_encode(vectorlib.compact_json(h))

    return mutate(data, fn)


def test_moved_to_another_conversation(ids, sealed):
    with pytest.raises(ConversationMismatch):
        open_as(ids, sealed, conversation="conv-2")
    with pytest.raises(SignatureInvalid):  # the relay rewrites cid to match: the signature breaks
        open_as(ids, rewrite_header(sealed, cid="conv-2"), conversation="conv-2")


def test_rewritten_sender(ids, sealed):
    with pytest.raises(SenderMismatch):
        open_as(ids, sealed, sender="carol")
    with pytest.raises(UnknownSenderKey):  # snd says carol, but the key id is alice's
        open_as(ids, rewrite_header(sealed, snd="carol"), sender="carol", pinned="carol")
    with pytest.raises(SignatureInvalid):
        open_as(ids, rewrite_header(sealed, snd="carol", skid=ids["carol"].sign_kid), sender="carol", pinned="carol")


def test_swapped_recipient_key_ids(ids, sealed):
    def swap_kids(d):
        a, b = d["recipients"]
        a["header"]["kid"], b["header"]["kid"] = b["header"]["kid"], a["header"]["kid"]

    with pytest.raises(RecipientListInvalid) as info:
        open_as(ids, mutate(sealed, swap_kids))
    assert type(info.value) is RecipientListInvalid
    with pytest.raises(RecipientListInvalid):
        open_as(ids, mutate(sealed, lambda d: d["recipients"].reverse()))


def test_duplicated_recipient_key_id(ids, sealed):
    def dup(d):
        d["recipients"][1]["header"]["kid"] = d["recipients"][0]["header"]["kid"]

    with pytest.raises(DuplicateRecipient):
        open_as(ids, mutate(sealed, dup))
    with pytest.raises(DuplicateRecipient):
        envelope.seal(
            Text("x", ts=now_ms(), ctr=1),
            ids["alice"],
            "conv-1",
            [ids["bob"].public, ids["bob"].public],
            epoch=0,
            head="A" * 43,
        )


def test_no_entry_for_me(ids, sealed):
    with pytest.raises(NotARecipient):
        open_as(ids, sealed, me="carol")


def test_bad_signature(ids, sealed):
    def flip(d):
        sig = bytearray(b64u_decode(d["sig"]))
        sig[10] ^= 0x80
        d["sig"] = b64u_encode(bytes(sig))

    with pytest.raises(SignatureInvalid):
        open_as(ids, mutate(sealed, flip))


def test_signature_by_a_key_other_than_the_pinned_one(ids, sealed):
    with pytest.raises(UnknownSenderKey):  # alice's envelope, but mallory's key is pinned for alice
        open_as(ids, sealed, pinned="mallory")
    forged = mutate(sealed, lambda d: vectorlib.resign(d, ids["mallory"].sign_private))
    with pytest.raises(SignatureInvalid):  # mallory re-signs, keeping alice's key id
        open_as(ids, forged)
    own = rewrite_header(sealed, skid=ids["mallory"].sign_kid)
    own = mutate(own, lambda d: vectorlib.resign(d, ids["mallory"].sign_private))
    with pytest.raises(UnknownSenderKey):  # mallory re-signs under her own key id
        open_as(ids, own)


def test_resolver_is_asked_and_checked(ids, sealed):
    asked = []

    def resolve(user, kid):
        asked.append((user, kid))
        return ids["mallory"].public.sign_key  # a resolver returning the wrong key is caught too

    with pytest.raises(UnknownSenderKey):
        envelope.open(sealed, ids["bob"], resolve)
    assert asked == [("alice", ids["alice"].sign_kid)]

    def unknown(user, kid):
        raise UnknownSenderKey(f"no pinned key for {user}", field="skid")

    with pytest.raises(UnknownSenderKey):
        envelope.open(sealed, ids["bob"], unknown)
    assert envelope.open(sealed, ids["bob"], lambda u, k: ids["alice"].public.sign_key).text == "tamper me"


@pytest.mark.parametrize("member", ["protected", "iv", "ciphertext", "tag", "sig", "encrypted_key", "kid"])
@pytest.mark.parametrize("how", ["padding", "standard_alphabet", "whitespace", "non_ascii", "bad_length"])
def test_wrong_base64(ids, sealed, member, how):
    def spoil(text: str) -> str:
        if how == "padding":
            return text + "=" * (-len(text) % 4 or 4)
        if how == "standard_alphabet":
            return "+/" + text[2:]
        if how == "whitespace":
            return text[:4] + " " + text[4:]
        if how == "non_ascii":
            return "é" + text[1:]
        return text + "A" * ((1 - len(text)) % 4 or 4)  # length % 4 == 1: no byte string encodes so

    def fn(d):
        holder = d["recipients"][1] if member == "encrypted_key" else d
        if member == "kid":
            kid = spoil(d["recipients"][1]["header"]["kid"])
            d["recipients"][1]["header"]["kid"] = kid
            return
        holder[member] = spoil(holder[member])

    with pytest.raises((Base64Invalid, RecipientListInvalid)) as info:
        open_as(ids, mutate(sealed, fn))
    if member != "kid":  # a spoiled kid first differs from the protected rkids
        assert type(info.value) is Base64Invalid
        assert info.value.field == member


@pytest.mark.parametrize("garbage", [b"x", b"{}", b"\x00", b'{"protected":""}', b"]", b"\xff\xfe"])
def test_trailing_garbage(ids, sealed, garbage):
    with pytest.raises(TrailingData if garbage not in (b"\xff\xfe",) else E2EEError) as info:
        open_as(ids, sealed + garbage)
    assert info.value.field == "envelope"


def test_trailing_json_whitespace_is_not_garbage(ids, sealed):
    assert open_as(ids, sealed + b" \r\n\t").text == "tamper me"


def test_all_failures_are_project_errors_and_verification_failures_are_grouped():
    for name in (
        "NotARecipient",
        "UnwrapFailed",
        "DecryptionFailed",
        "SignatureInvalid",
        "UnknownSenderKey",
        "ConversationMismatch",
        "SenderMismatch",
        "SessionMismatch",
        "DirectionMismatch",
        "RelayKeyMismatch",
        "ChallengeMismatch",
        "Replayed",
    ):
        assert issubclass(getattr(errors, name), VerificationFailed)
    for name in (
        "TrailingData",
        "DuplicateMember",
        "DuplicateRecipient",
        "Base64Invalid",
        "NonceInvalid",
        "TagInvalid",
    ):
        assert issubclass(getattr(errors, name), errors.MalformedInput)
    codes = [c.code for c in vars(errors).values() if isinstance(c, type) and issubclass(c, E2EEError)]
    assert len(codes) == len(set(codes)), "error codes must be unique"
