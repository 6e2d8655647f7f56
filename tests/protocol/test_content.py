"""shared.content: bucket sizes of both padding schemes, canonical padded encoding, round trips of
every kind, and every malformed form refused with its typed error naming the member."""

from __future__ import annotations

import json

import pytest

from shared import content
from shared.content import (
    Attachment,
    AttachmentRef,
    Delete,
    Edit,
    Expire,
    React,
    Read,
    Reply,
    Text,
    Title,
    bucket,
    decode,
    encode,
)
from shared.errors import ContentInvalid, ContentTooLarge, MalformedInput

MID = "AAECAwQFBgcICQoLDA0ODw"  # bytes 0..15
KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"  # bytes 0..31
TS = 1_764_628_800_000
ATT = AttachmentRef(
    id="b7Qz-blob_01", key=KEY, name="holiday photo.jpg", type="image/jpeg", size=10_485_760, sha256=KEY, chunk=65_536
)
DOCS = [
    Text("hello, world", ts=TS, ctr=1),
    Text('ünïcødé ✓ <b>&amp;</b> \n\t"q" \\', ts=TS, ctr=2, exp=TS + 3_600_000),
    Reply("yes", MID, ts=TS, ctr=3),
    Edit("hello, world!", MID, ts=TS, ctr=4),
    Delete(MID, ts=TS, ctr=5),
    React(MID, "👍", True, ts=TS, ctr=6),
    React(MID, "👨‍👩‍👧‍👦", False, ts=TS, ctr=7),
    Read(MID, 4711, ts=TS, ctr=8),
    Attachment(ATT, "", ts=TS, ctr=9),
    Attachment(ATT, "the beach", ts=TS, ctr=10, exp=TS + 1),
    Expire(3600, ts=TS, ctr=11),
    Expire(0, ts=0, ctr=2**53 - 1),
    Title("Trip to Lisbon 🇵🇹", ts=TS, ctr=12),
]


# -- buckets -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("length", "padme", "pow2"),
    [
        (0, 256, 256),
        (1, 256, 256),
        (255, 256, 256),
        (256, 256, 256),
        (257, 272, 512),
        (300, 304, 512),
        (511, 512, 512),
        (513, 544, 1024),
        (1000, 1024, 1024),
        (1025, 1088, 2048),
        (4000, 4096, 4096),
        (4097, 4352, 8192),
        (9000, 9216, 16384),
        (40_000, 40_960, 65_536),
        (65_536, 65_536, 65_536),
    ],
)
def test_bucket_sizes(length, padme, pow2):
    assert (bucket(length, "padme"), bucket(length, "pow2")) == (padme, pow2)


def test_padme_overhead_stays_under_6_25_percent_and_buckets_are_monotone():
    previous = {"padme": 256, "pow2": 256}
    for n in range(1, content.MAX_CONTENT_BYTES + 1):
        for scheme in content.SCHEMES:
            b = bucket(n, scheme)
            assert n <= b <= content.MAX_CONTENT_BYTES and b >= previous[scheme]
            previous[scheme] = b
        if n > 256:
            assert bucket(n, "padme") - n < n / 16  # 2**-S with S ≥ 4 above 256 B
    # Padmé's distinct sizes between 256 B and 64 KiB: few enough to hide lengths, many fewer than 2**16.
    assert len({bucket(n, "padme") for n in range(1, 65_537)}) == 129
    assert len({bucket(n, "pow2") for n in range(1, 65_537)}) == 9


def test_bucket_refuses_nonsense():
    with pytest.raises(ValueError, match="length"):
        bucket(-1)
    with pytest.raises(ValueError, match="unknown padding scheme"):
        bucket(10, "pkcs7")  # type: ignore[arg-type]


# -- encoding ----------------------------------------------------------------------------------
def test_canonical_form_is_sorted_compact_json_and_padding_is_spaces():
    data = encode(Text("hi", ts=TS, ctr=7), "padme")
    assert data == b'{"body":"hi","ctr":7,"t":"text","ts":1764628800000}' + b" " * 205
    assert len(data) == 256
    # exp is written only when set.
    assert content.canonical(Delete(MID, ts=1, ctr=1, exp=99)) == (
        b'{"ctr":1,"exp":99,"ref":"AAECAwQFBgcICQoLDA0ODw","t":"delete","ts":1}'
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d.kind}-{d.ctr}")
@pytest.mark.parametrize("scheme", content.SCHEMES)
def test_every_kind_round_trips_padded_to_its_bucket(doc, scheme):
    data = encode(doc, scheme)
    body = content.canonical(doc)
    assert len(data) == bucket(len(body), scheme)
    assert data[: len(body)] == body and set(data[len(body) :]) <= {0x20}
    assert decode(data) == doc and type(decode(data)) is type(doc)
    # An independent parser reads the padded text as it is: same members, same values.
    assert json.loads(data) == json.loads(body)
    assert body == json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_kind_names_the_tag():
    assert [d.kind for d in DOCS[:9:2]] == ["text", "reply", "delete", "react", "attachment"]


def test_a_big_body_is_padded_within_the_limit_and_one_byte_more_is_refused():
    overhead = len(b'{"body":"","ctr":1,"t":"text","ts":%d}' % TS)
    fits = Text("x" * (content.MAX_CONTENT_BYTES - overhead), ts=TS, ctr=1)
    assert len(encode(fits, "padme")) == len(encode(fits, "pow2")) == 65_536
    with pytest.raises(ContentTooLarge) as exc:
        encode(Text("x" * (content.MAX_CONTENT_BYTES - overhead + 1), ts=TS, ctr=1))
    assert exc.value.field == "body" and exc.value.code == "content_too_large"
    with pytest.raises(ContentTooLarge) as exc:
        decode(b"{" + b" " * 65_536)
    assert exc.value.field == "content"


def test_documents_built_in_code_are_checked_before_encoding():
    with pytest.raises(ContentInvalid) as exc:
        encode(React(MID, "", True, ts=TS, ctr=1))
    assert exc.value.field == "emoji"
    with pytest.raises(ContentInvalid) as exc:
        content.check(Text("x", ts=TS, ctr=0))
    assert exc.value.field == "ctr"


# -- malformed input ---------------------------------------------------------------------------
def doc(**members: object) -> bytes:
    base: dict[str, object] = {"t": "text", "ts": TS, "ctr": 1, "body": "x"}
    base.update(members)
    return json.dumps({k: v for k, v in base.items() if v is not DROP}, ensure_ascii=False).encode()


def att_doc(**members: object) -> bytes:
    att = {**{f: getattr(ATT, f) for f in ATT.__struct_fields__}, **members}
    return doc(t="attachment", att={k: v for k, v in att.items() if v is not DROP}, body="")


DROP = object()

MALFORMED = [
    # (name, bytes, field)
    ("not json", b"hello", "content"),
    ("empty", b"", "content"),
    ("only padding", b" " * 256, "content"),
    ("an array", b'[{"t":"text"}]', "content"),
    ("junk after the object", doc() + b" x  ", "content"),
    ("a newline before the padding", doc() + b"\n   ", "content"),
    ("leading space", b" " + doc(), "content"),
    ("NUL padding", doc() + b"\x00" * 8, "content"),
    ("truncated", doc()[:-1], "content"),
    ("not UTF-8", doc(body="ZZ").replace(b"ZZ", b"\xff"), "content"),
    ("a lone surrogate", doc(body="ZZ").replace(b"ZZ", b"\\ud800"), "content"),
    ("unknown kind", doc(t="poll"), "t"),
    ("kind not a string", doc(t=1), "t"),
    ("no kind", doc(t=DROP), "t"),
    ("no body", doc(body=DROP), "body"),
    ("no ts", doc(ts=DROP), "ts"),
    ("no ctr", doc(ctr=DROP), "ctr"),
    ("unknown member", doc(html="<b>"), "html"),
    ("repeated member", doc()[:-1] + b',"body":"y"}', "body"),
    ("repeated member with escapes", doc(body="a\\n")[:-1] + b',"ctr":2}', "ctr"),
    ("body a number", doc(body=5), "body"),
    ("ts a string", doc(ts="1"), "ts"),
    ("ts a bool", doc(ts=True), "ts"),
    ("ts a float", doc(ts=1.5), "ts"),
    ("ts negative", doc(ts=-1), "ts"),
    ("ts over 2**53-1", doc(ts=2**53), "ts"),
    ("ctr zero", doc(ctr=0), "ctr"),
    ("exp negative", doc(exp=-5), "exp"),
    ("exp null", doc(exp=None), "exp"),
    ("empty text", doc(body=""), "body"),
    ("reply without ref", doc(t="reply"), "ref"),
    ("ref too short", doc(t="reply", ref=MID[:-1]), "ref"),
    ("ref with +", doc(t="edit", ref="+" + MID[1:]), "ref"),
    ("ref non-canonical", doc(t="delete", body=DROP, ref=MID[:-1] + "x"), "ref"),
    ("ref 32 bytes", doc(t="delete", body=DROP, ref=KEY), "ref"),
    ("delete with a body", doc(t="delete", ref=MID), "body"),
    ("react on as 1", doc(t="react", body=DROP, ref=MID, emoji="👍", on=1), "on"),
    ("react empty emoji", doc(t="react", body=DROP, ref=MID, emoji="", on=True), "emoji"),
    ("react emoji with space", doc(t="react", body=DROP, ref=MID, emoji="👍 ", on=True), "emoji"),
    ("react emoji control", doc(t="react", body=DROP, ref=MID, emoji="\x1b[31m", on=True), "emoji"),
    ("react emoji too long", doc(t="react", body=DROP, ref=MID, emoji="😀" * 17, on=True), "emoji"),
    ("read upto negative", doc(t="read", body=DROP, ref=MID, upto=-1), "upto"),
    ("read upto a string", doc(t="read", body=DROP, ref=MID, upto="7"), "upto"),
    ("expire over a year", doc(t="expire", body=DROP, seconds=366 * 86400 + 1), "seconds"),
    ("expire negative", doc(t="expire", body=DROP, seconds=-1), "seconds"),
    ("title empty", doc(t="title", body=DROP, title=""), "title"),
    ("title control", doc(t="title", body=DROP, title="a\nb"), "title"),
    ("title too long", doc(t="title", body=DROP, title="t" * 201), "title"),
    ("attachment without att", doc(t="attachment", body=""), "att"),
    ("att unknown member", att_doc(url="http://x"), "att.url"),
    ("att missing sha256", att_doc(sha256=DROP), "att.sha256"),
    ("att id with a slash", att_doc(id="../etc"), "att.id"),
    ("att id ..", att_doc(id=".."), "att.id"),
    ("att id .", att_doc(id="."), "att.id"),
    ("att id with a dot", att_doc(id="a.b"), "att.id"),
    ("att id 65 chars", att_doc(id="a" * 65), "att.id"),
    ("att id percent", att_doc(id="%2e%2e"), "att.id"),
    ("att key 16 bytes", att_doc(key=MID), "att.key"),
    ("att key padded", att_doc(key=KEY + "="), "att.key"),
    ("att name ..", att_doc(name=".."), "att.name"),
    ("att name a path", att_doc(name="a/b.txt"), "att.name"),
    ("att name backslash", att_doc(name="a\\b.txt"), "att.name"),
    ("att name control", att_doc(name="a\u202e\x07.txt"), "att.name"),
    ("att name empty", att_doc(name=""), "att.name"),
    ("att name 256 chars", att_doc(name="n" * 256), "att.name"),
    ("att type no slash", att_doc(type="jpeg"), "att.type"),
    ("att type with parameters", att_doc(type="text/plain; charset=utf-8"), "att.type"),
    ("att size negative", att_doc(size=-1), "att.size"),
    ("att size a string", att_doc(size="10"), "att.size"),
    ("att chunk too small", att_doc(chunk=1023), "att.chunk"),
    ("att chunk too large", att_doc(chunk=4 * 1024 * 1024 + 1), "att.chunk"),
    ("att sha256 short", att_doc(sha256=MID), "att.sha256"),
]


@pytest.mark.parametrize(("data", "field"), [(d, f) for _, d, f in MALFORMED], ids=[n for n, _, _ in MALFORMED])
def test_every_malformed_form_is_a_typed_error_naming_its_member(data, field):
    with pytest.raises(ContentInvalid) as exc:
        decode(data + b" " * 40)
    assert isinstance(exc.value, MalformedInput)
    assert (exc.value.code, exc.value.field) == ("content_invalid", field), exc.value.message


def test_a_valid_document_with_escapes_and_no_repeats_is_accepted():
    data = doc(body='say "hi"\\ \u2028')
    assert decode(data).body == 'say "hi"\\ \u2028'  # type: ignore[union-attr]
    assert decode(doc(exp=0)) == Text("x", ts=TS, ctr=1)  # an explicit exp 0 is "never"


def test_input_that_is_not_bytes_is_refused():
    with pytest.raises(ContentInvalid) as exc:
        decode("{}")  # type: ignore[arg-type]
    assert exc.value.field == "content"
