"""Property tests (hypothesis), bounded so the folder stays fast on 2 cores.

* Any unicode plaintext from 0 bytes to 256 KiB, 1-64 recipients: every recipient opens exactly it.
* Any single-byte change anywhere in a serialized envelope is rejected with a project error.
* Arbitrary bytes given to the frame decoders, the envelope parser or the L3 opener raise only
  project errors. Canonical base64url has exactly one text form per byte string.

Runs are derandomized (the same examples every run) and keep no example database.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from client_tui.core.record import now_ms
from shared import envelope, frames, l3
from shared.b64 import b64u_decode, b64u_encode
from shared.content import Text
from shared.errors import Base64Invalid, E2EEError, FrameInvalid
from shared.strictjson import MAX_SAFE_INTEGER
from tests.helpers.mutators import FRAME_FIELDS, FRAME_TYPES
from tests.vectors import vectorlib

MAX_PLAINTEXT = 10_000  # UTF-8 bytes; JSON escapes at most 6x: the document stays under 64 KiB
BIG = 2 * 1024 * 1024  # limits raised so that 256 KiB plaintexts to 64 recipients fit

L4 = vectorlib.load("l4.json")
BASE = next(v for v in L4["vectors"] if v["name"] == "two_recipients_text")
L3V = vectorlib.load("l3.json")
SESSION = l3.Session._from_key(b64u_decode(L3V["session_key"]))

FAST = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@st.composite
def plaintexts(draw) -> str:
    """Unicode text of 0 bytes up to 256 KiB (UTF-8): a drawn chunk repeated to a drawn size."""
    chunk = draw(st.text(min_size=1, max_size=48))  # a text message is never empty (shared.content)
    if draw(st.booleans()):
        return chunk
    target = draw(st.integers(0, MAX_PLAINTEXT))
    return chunk * max(1, target // len(chunk.encode("utf-8")))


@settings(FAST, max_examples=14)
@given(text=plaintexts(), n=st.integers(1, 64), sender=st.integers(0, 63), counter=st.integers(1, 2**53 - 1))
@example(text=".", n=1, sender=0, counter=1)
@example(text="x" * MAX_PLAINTEXT, n=64, sender=63, counter=2**53 - 1)
@example(text="\U0001f510" * (MAX_PLAINTEXT // 4), n=2, sender=5, counter=7)
def test_every_recipient_opens_exactly_the_plaintext(pool, text, n, sender, counter):
    assert len(text.encode()) <= MAX_PLAINTEXT
    recipients = pool[:n]
    me = pool[sender]
    data = envelope.seal(
        Text(text, ts=now_ms(), ctr=counter),
        me,
        "conv-p",
        [r.public for r in recipients],
        epoch=counter,
        head="A" * 43,
        max_bytes=BIG,
    )
    parsed = envelope.parse(data, max_bytes=BIG)  # parsed once, opened by everyone (as a client would)
    for r in recipients:
        opened = envelope.open(parsed, r, me.public.sign_key, conversation="conv-p", sender=me.username)
        assert opened.text == text
        assert opened.ctr == counter
    if me not in recipients:
        with pytest.raises(E2EEError):
            envelope.open(parsed, me, me.public.sign_key)


def _open_base(ids, data: bytes):
    return envelope.open(data, ids["bob"], ids["alice"].public.sign_key, conversation="conv-1", sender="alice")


def test_base_opens(ids):
    assert _open_base(ids, BASE["envelope"].encode()).text == BASE["content"]["body"]


@settings(FAST, max_examples=400)
@given(data=st.data())
def test_any_single_byte_change_is_rejected(ids, data):
    raw = bytearray(BASE["envelope"].encode())
    i = data.draw(st.integers(0, len(raw) - 1), label="position")
    value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[i]), label="new byte")
    raw[i] = value
    with pytest.raises(E2EEError):
        _open_base(ids, bytes(raw))


@pytest.mark.parametrize("mask", [0x01, 0x20, 0x80])
def test_every_position_flipped_is_rejected(ids, mask):
    """Exhaustive: each byte of the vector envelope XOR ``mask``, one at a time."""
    raw = BASE["envelope"].encode()
    accepted = []
    for i in range(len(raw)):
        changed = bytearray(raw)
        changed[i] ^= mask
        try:
            _open_base(ids, bytes(changed))
        except E2EEError:
            continue
        accepted.append(i)
    assert accepted == []


@settings(FAST, max_examples=300)
@given(st.binary(max_size=2048))
@example(b"[" * 50_000)
@example(b'{"type":"send","conversation":"c","envelope":' + b"[" * 20_000 + b"}")
@example(b'{"type":"sync","after":1e999}')
@example(b"\xef\xbb\xbf{}")
def test_frame_decoders_raise_only_frame_invalid(data):
    for decode in (frames.decode_client_frame, frames.decode_relay_frame):
        try:
            decode(data)
        except FrameInvalid:
            pass


@settings(FAST, max_examples=200)
@given(st.text(max_size=512))
@example("\ud800")
@example('{"type":"ping","nonce":"\udfff"}')
def test_frame_decoders_take_any_text(text):
    for decode in (frames.decode_client_frame, frames.decode_relay_frame):
        try:
            decode(text)
        except FrameInvalid:
            pass


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(FAST, max_examples=300)
@given(
    kind=st.sampled_from(FRAME_TYPES),
    fields=st.dictionaries(
        st.sampled_from(FRAME_FIELDS),
        JSON,
        max_size=6,
    ),
)
def test_frame_decoders_on_frame_shaped_json(kind, fields):
    data = json.dumps({"type": kind, **fields}).encode()
    for decode in (frames.decode_client_frame, frames.decode_relay_frame):
        try:
            decode(data)
        except FrameInvalid:
            pass


@settings(FAST, max_examples=300)
@given(st.binary(max_size=4096))
@example(b'{"protected":"' + b"A" * 10 + b'","recipients":[' + b"[" * 10_000 + b"]}")
def test_envelope_parser_raises_only_project_errors(data):
    try:
        envelope.parse(data)
    except E2EEError:
        pass


@settings(FAST, max_examples=200)
@given(
    doc=st.dictionaries(
        st.sampled_from(["protected", "recipients", "iv", "ciphertext", "tag", "sig", "x"]), JSON, max_size=7
    )
)
def test_envelope_parser_on_envelope_shaped_json(doc):
    try:
        envelope.parse(json.dumps(doc).encode())
    except E2EEError:
        pass


@settings(FAST, max_examples=300)
@given(
    st.one_of(
        st.binary(max_size=1024),
        st.text(max_size=1024),
        st.lists(
            st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=40),
            min_size=5,
            max_size=5,
        ).map(".".join),
    )
)
def test_l3_open_raises_only_project_errors(token):
    try:
        l3.open(SESSION, token, direction="c2r")
    except E2EEError:
        pass


@settings(FAST, max_examples=60)
@given(text=plaintexts(), seq=st.integers(1, 2**53 - 1), direction=st.sampled_from(["c2r", "r2c"]))
def test_l3_round_trip(text, seq, direction):
    token = l3.seal(SESSION, text, direction=direction, conversation="c", sender="alice", seq=seq, max_bytes=BIG)
    opened = l3.open(SESSION, token, direction=direction, after_seq=seq - 1, max_bytes=BIG)
    assert opened.text == text and opened.header.seq == seq


@settings(FAST, max_examples=500)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=24) | st.text(max_size=8))
def test_base64url_has_one_text_form(text):
    try:
        raw = b64u_decode(text)
    except Base64Invalid:
        return
    assert b64u_encode(raw) == text


@settings(FAST, max_examples=300)
@given(st.binary(max_size=100))
def test_base64url_round_trip(raw):
    text = b64u_encode(raw)
    assert b64u_decode(text) == raw and "=" not in text and len(text) == (4 * len(raw) + 2) // 3


RELAY_SEQ_FRAMES = [
    '{{"type":"stored","mid":"m","seq":{n},"conversation":"c"}}',
    '{{"type":"msg","seq":{n},"conversation":"c","sender":"bob","envelope":{{}}}}',
    '{{"type":"synced","cursor":{n},"more":false}}',
    '{{"type":"delivered","seq":{n},"user":"bob"}}',
]


@pytest.mark.parametrize("frame", RELAY_SEQ_FRAMES, ids=["stored", "msg", "synced", "delivered"])
def test_a_relay_seq_or_cursor_outside_0_to_2_53_is_refused(frame):
    """A hostile relay's seq of 2**53 would sort after every unsent message in the client's cache
    (positions from 2**53 up) and is not exact in JavaScript: the decoder refuses it."""
    assert frames.decode_relay_frame(frame.format(n=MAX_SAFE_INTEGER))  # the largest is fine
    for n in (MAX_SAFE_INTEGER + 1, 2**64, -1):
        with pytest.raises(FrameInvalid) as err:
            frames.decode_relay_frame(frame.format(n=n))
        assert err.value.code == "frame_invalid"
