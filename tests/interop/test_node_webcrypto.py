"""Independent implementation 1: Node.js with only its built-in WebCrypto (no npm packages).

``webcrypto_interop.mjs`` (with ``wc_common.mjs`` and ``wc_membership.mjs``) was written from
docs/PROTOCOL.md. It reads the committed vectors, checks key ids, safety numbers, L4 (v2: key
commitment, epoch and membership hash), membership logs and L3 vectors (every negative vector must
give the same error code and field as ours), then signs a membership log, seals an L4 envelope to
its head, and makes an L3 handshake + message that our code must verify and open. Skips only
when ``node`` is missing and ``CI`` is unset.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from shared import content, envelope, l3, membership
from shared.b64 import b64u_encode
from shared.errors import ChallengeMismatch, NotARecipient
from shared.membership_chain import Chain, check_audience
from tests.helpers.config import require_tool
from tests.vectors import vectorlib

pytestmark = pytest.mark.process  # Node runs the WebCrypto side

SCRIPT = Path(__file__).with_name("webcrypto_interop.mjs")


@pytest.fixture(scope="module")
def node_run() -> dict:
    node = require_tool("node")
    challenge = os.urandom(16)
    proc = subprocess.run(
        [node, str(SCRIPT), str(vectorlib.VECTORS_DIR), b64u_encode(challenge)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"node failed:\n{proc.stderr[-4000:]}"
    out = json.loads(proc.stdout)
    out["challenge"] = challenge
    return out


def test_node_is_recent_enough(node_run):
    major = int(node_run["node"].lstrip("v").split(".")[0])
    assert major >= 20, "Ed25519 in WebCrypto needs Node 20 or later"


def test_node_checks_every_vector_and_all_pass(node_run):
    checks = {c["name"]: c for c in node_run["checks"]}
    failed = [f"{c['name']}: {c['detail']}" for c in checks.values() if not c["ok"]]
    assert not failed, "\n".join(failed)
    # Not vacuous: each vector of each file was checked by name.
    for v in vectorlib.load("l4_negative.json")["vectors"]:
        assert f"L4 negative {v['name']} -> {v['code']}" in checks
    for v in vectorlib.load("l4.json")["vectors"]:
        for r in v["recipients"]:
            assert f"L4 {v['name']} opened by {r}" in checks
    l3v = vectorlib.load("l3.json")
    for v in l3v["negative"]:
        assert f"L3 negative {v['name']} -> {v['code']}" in checks
    for v in l3v["handshake_negative"]:
        assert f"L3 handshake negative {v['name']} -> {v['code']}" in checks
    for v in vectorlib.load("safety.json")["vectors"]:
        assert f"safety number {v['a']}-{v['b']}" in checks
    assert "L3 handshake vector accepted" in checks
    mem = vectorlib.load("membership.json")
    for c in mem["chains"]:
        assert f"membership chain {c['name']} verifies" in checks
    for kind in ("negative", "forks", "audience"):
        word = {"negative": "negative", "forks": "fork", "audience": "audience"}[kind]
        for v in mem[kind]:
            assert f"membership {word} {v['name']} -> {v['code'] if v['code'] is not None else 'null'}" in checks


def test_python_verifies_the_node_log_and_opens_its_envelope(node_run, ids):
    """Node signed a creation (alice) and an add (bob); its envelope is sealed to that head."""
    statements = [membership.parse(s) for s in node_run["produced"]["membership"]]
    chain = Chain("conv-node")
    assert chain.extend(statements, lambda user, kid: ids[user].public.sign_key) == statements
    assert [s.op for s in statements] == ["create", "add"] and chain.head.usernames == ("alice", "bob", "carol")
    p = node_run["produced"]["l4"]
    data = p["envelope"].encode()
    h = envelope.parse(data).header
    assert check_audience(chain, ep=h.ep, mh=h.mh, sender=h.snd, rkids=h.rkids) is chain.head
    for name in p["recipients"]:
        opened = envelope.open(
            data, ids[name], ids["alice"].public.sign_key, conversation=p["conversation"], sender=p["sender"]
        )
        assert opened.text == p["plaintext"]
        assert opened.content == content.Reply(
            p["plaintext"], "AAECAwQFBgcICQoLDA0ODw", ts=p["sent_at"], ctr=5, exp=p["sent_at"] + 86_400_000
        )
        assert opened.header.xp == envelope.expiry_hint(p["sent_at"] + 86_400_000) and len(opened.plaintext) == 256
        reaction = envelope.open(p["reaction"].encode(), ids[name], ids["alice"].public.sign_key)
        assert reaction.content == content.React("AAECAwQFBgcICQoLDA0ODw", "🎉", True, ts=p["sent_at"], ctr=6)
    with pytest.raises(NotARecipient):
        envelope.open(data, ids["mallory"], ids["alice"].public.sign_key)


def test_python_relay_accepts_the_node_handshake_and_message(node_run):
    p = node_run["produced"]["l3"]
    session = l3.accept_handshake(p["handshake"], vectorlib.relay_private(), node_run["challenge"])
    assert session.id == p["session_id"]
    opened = l3.open(session, p["token"], direction="c2r", after_seq=0)
    assert opened.text == p["plaintext"]
    assert (opened.header.cid, opened.header.snd, opened.header.seq) == ("conv-node", "alice", 1)
    with pytest.raises(ChallengeMismatch):
        l3.accept_handshake(p["handshake"], vectorlib.relay_private(), os.urandom(16))
