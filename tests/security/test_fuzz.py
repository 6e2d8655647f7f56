"""Fuzzing (hypothesis): the frame decoders, the envelope parser and opener, and the L3 opener get
generated inputs — random bytes and text, JSON of the right shape, and mutations of valid frames,
envelopes and tokens (byte flips, insertions, cuts; members replaced, dropped or added; protected
headers rewritten and re-encoded; well-formed values swapped for other well-formed ones; envelopes
re-signed by the real sender so the mutation reaches RSA-OAEP and AES-GCM). They may raise only
project errors (``shared.errors.E2EEError``), never another exception; whatever they accept must
be exactly the original message.

Each target gets ``E2EE_FUZZ_EXAMPLES`` inputs (default 10,000, what CI runs) made by the mutators
of ``tests/security/mutators.py`` from hypothesis-drawn seeds (a batch per example), plus a
tenth as many from hypothesis strategies directly. The longer run::

    E2EE_FUZZ_EXAMPLES=300000 .venv/bin/pytest tests/security/test_fuzz.py -q -s

A hang fails the run: each target runs under a watchdog (``faulthandler``) that dumps every
thread's stack and exits the process if the target has not finished after
``E2EE_FUZZ_WATCHDOG_S`` (default 900) seconds. Runs are derandomized (the same inputs every
run) and keep no example database; ``-s`` prints how many inputs each error code refused.
"""

from __future__ import annotations

import faulthandler
import json
import os
import random
from collections import Counter
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared import envelope, frames, l3
from shared.b64 import b64u_decode
from shared.errors import E2EEError, FrameInvalid
from tests.helpers import mutators
from tests.vectors import vectorlib

EXAMPLES = int(os.environ.get("E2EE_FUZZ_EXAMPLES", "10000"))
WATCHDOG_S = float(os.environ.get("E2EE_FUZZ_WATCHDOG_S", "900"))
BATCH = 20  # inputs made per hypothesis example by the mutators


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


IDS = vectorlib.identities()
BASE_VECTOR = next(v for v in vectorlib.load("l4.json")["vectors"] if v["name"] == "two_recipients_text")
BASE = BASE_VECTOR["envelope"].encode()
BASE_HEADER = json.loads(b64u_decode(json.loads(BASE)["protected"]))
L3V = vectorlib.load("l3.json")
SESSION = l3.Session._from_key(b64u_decode(L3V["session_key"]))
L3_MSG = L3V["messages"][0]
ENVELOPES = mutators.EnvelopeMutator(json.loads(BASE), IDS["alice"], IDS["mallory"], [IDS["alice"], IDS["bob"]])
FRAMES = mutators.frame_corpus(BASE)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=16),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@contextmanager
def watchdog():
    """An input that never returns dumps all stacks and ends the process (a hang fails the run)."""
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def fuzz(check, make, native) -> Counter:
    """Feed ``check`` EXAMPLES inputs from ``make(rng)`` and EXAMPLES/10 from the strategy ``native``."""
    outcomes: Counter = Counter()

    @fuzz_settings(max(1, EXAMPLES // BATCH))
    @given(st.integers(0, 2**64 - 1))
    def batches(seed: int) -> None:
        rng = random.Random(seed)  # a failure names the seed: random.Random(seed) remakes the batch
        for _ in range(BATCH):
            outcomes[check(make(rng))] += 1

    @fuzz_settings(max(1, EXAMPLES // 10))
    @given(native)
    def direct(data) -> None:
        outcomes[check(data)] += 1

    with watchdog():
        batches()
        direct()
    return outcomes


def open_envelope(data: bytes) -> str:
    """The outcome of the relay's parse and the recipient's open: an error code or ``opened``."""
    try:
        envelope.parse(data)
    except E2EEError:
        pass
    try:
        opened = envelope.open(data, IDS["bob"], IDS["alice"].public.sign_key, conversation="conv-1", sender="alice")
    except E2EEError as exc:
        return exc.code
    assert opened.plaintext == b64u_decode(BASE_VECTOR["plaintext"])  # only the original comes out
    assert {f: getattr(opened.header, f) for f in opened.header.__struct_fields__} == BASE_HEADER
    return "opened"


def test_envelope_parse_and_open_raise_only_project_errors():
    outcomes = fuzz(
        open_envelope,
        ENVELOPES,
        st.one_of(
            st.binary(max_size=2048),
            st.dictionaries(
                st.sampled_from(["protected", "recipients", "iv", "ciphertext", "tag", "sig", "x"]), JSON, max_size=7
            ).map(lambda d: json.dumps(d).encode()),
        ),
    )
    print(f"\nenvelope fuzz: {sum(outcomes.values())} inputs: {dict(outcomes.most_common())}")
    assert sum(outcomes.values()) >= EXAMPLES
    # the mutations reach every step of the documented order, through RSA-OAEP and AES-GCM
    assert {
        "envelope_malformed",
        "base64_invalid",
        "signature_invalid",
        "unwrap_failed",
        "decryption_failed",
        "conversation_mismatch",
        "sender_mismatch",
        "not_a_recipient",
        "unknown_sender_key",
        "recipient_list_invalid",
    } <= set(outcomes)


def decode_frame(data: bytes | str) -> str:
    ok = []
    for decode in (frames.decode_client_frame, frames.decode_relay_frame):
        try:
            frame = decode(data)
        except FrameInvalid:
            continue
        ok.append(type(frame).__name__)
        if isinstance(frame, frames.Send | frames.Message):  # what the relay and the client do next
            try:
                envelope.parse(bytes(frame.envelope))
            except E2EEError:
                pass
    return "+".join(ok) or "frame_invalid"


def test_frame_decoders_raise_only_frame_invalid():
    outcomes = fuzz(
        decode_frame,
        lambda rng: mutators.frame_input(rng, FRAMES),
        st.one_of(
            st.binary(max_size=1024),
            st.text(max_size=512),
            st.builds(
                lambda kind, fields: json.dumps({"type": kind, **fields}),
                st.sampled_from(mutators.FRAME_TYPES),
                st.dictionaries(st.sampled_from(mutators.FRAME_FIELDS), JSON, max_size=6),
            ),
        ),
    )
    print(f"\nframe fuzz: {sum(outcomes.values())} inputs: {dict(outcomes.most_common(12))}")
    assert sum(outcomes.values()) >= EXAMPLES
    assert outcomes["frame_invalid"] < sum(outcomes.values())  # some mutations still decode


def open_token(token) -> str:
    try:
        opened = l3.open(SESSION, token, direction=L3_MSG["direction"], after_seq=0)
    except E2EEError as exc:
        return exc.code
    assert opened.plaintext == L3_MSG["plaintext_utf8"].encode()
    return "opened"


def test_l3_open_raises_only_project_errors():
    outcomes = fuzz(
        open_token,
        lambda rng: mutators.token_input(rng, L3_MSG["token"], SESSION.id),
        st.one_of(st.binary(max_size=1024), st.text(max_size=1024)),
    )
    print(f"\nL3 fuzz: {sum(outcomes.values())} inputs: {dict(outcomes.most_common())}")
    assert sum(outcomes.values()) >= EXAMPLES
    assert {"envelope_malformed", "base64_invalid", "decryption_failed", "session_mismatch"} <= set(outcomes)
