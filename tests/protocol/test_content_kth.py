"""shared.content's ``kth``: a key transparency head gossiped inside the ciphertext (PROTOCOL.md
§13.1, §14.5): on any kind, canonical (members sorted, omitted when absent), strictly checked, and
exactly the signed head the sender held (its Ed25519 signature still verifies after the round trip)."""

from __future__ import annotations

import time

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from shared import content, kt, merkle
from shared.content import Delete, KtHead, React, Text
from shared.errors import ContentInvalid

MID = "A" * 22


@pytest.fixture(scope="module")
def signed() -> tuple[kt.TreeHead, ed25519.Ed25519PublicKey]:
    key = ed25519.Ed25519PrivateKey.generate()
    tree = merkle.Tree(merkle.leaf_hash(bytes([i])) for i in range(5))
    return kt.sign_head(key, 5, tree.root(), int(time.time() * 1000)), key.public_key()


@pytest.mark.parametrize(
    "kind", [Text("hi", ts=1, ctr=1), Delete(MID, ts=1, ctr=2), React(MID, "👍", True, ts=1, ctr=3)]
)
def test_any_document_carries_the_head_it_was_given(signed, kind):
    head, public = signed
    doc = msgspec.structs.replace(kind, kth=KtHead.of(head))
    back = content.decode(content.encode(doc))
    assert back == doc and back.kth is not None
    again = back.kth.head()
    assert again == head
    again.verify(public)  # the relay's signature survives: the receiver can hold the relay to it


def test_canonical_form_sorts_the_head_and_omits_it_when_absent(signed):
    head, _ = signed
    plain = content.canonical(Text("hi", ts=1, ctr=1))
    assert b"kth" not in plain
    with_head = content.canonical(Text("hi", ts=1, ctr=1, kth=KtHead.of(head)))
    j = head.to_json()
    expected = (
        f'"kth":{{"root_hash":"{j["root_hash"]}","signature":"{j["signature"]}",'
        f'"timestamp":{j["timestamp"]},"tree_size":5}}'
    ).encode()
    assert expected in with_head and len(with_head) - len(plain) == len(expected) + 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"root_hash": "short"}, "kth.root_hash"),
        ({"signature": "A" * 43}, "kth.signature"),
        ({"tree_size": -1}, "kth.tree_size"),
        ({"timestamp": 2**53}, "kth.timestamp"),
    ],
)
def test_a_malformed_head_is_content_invalid_naming_its_member(signed, change, field):
    head, _ = signed
    bad = KtHead(**{**head.to_json(), **change})
    with pytest.raises(ContentInvalid) as err:
        content.encode(Text("hi", ts=1, ctr=1, kth=bad))
    assert err.value.field == field


def test_unknown_members_inside_the_head_are_refused(signed):
    head, _ = signed
    data = content.canonical(Text("hi", ts=1, ctr=1, kth=KtHead.of(head))).replace(b'"tree_size"', b'"x":1,"tree_size"')
    with pytest.raises(ContentInvalid) as err:
        content.decode(data)
    assert err.value.field.startswith("kth")
