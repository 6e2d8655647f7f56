"""Independent implementation 2: the ``openssl`` command line checks our envelopes' cryptography.

RSA-OAEP-256 as JOSE defines it (RFC 7518 §4.3) is OAEP with SHA-256 and MGF1-SHA-256 and an
empty label; ``openssl pkeyutl`` with exactly those options must agree with us both ways. It also
recomputes the v2 key commitment (``openssl mac`` HMAC-SHA-256) and verifies the Ed25519
signatures of envelopes and membership statements over their documented inputs (``pkeyutl
-verify -rawin``). (The openssl command line has no AES-GCM, so it cannot decrypt.) Skips only
when ``openssl`` is missing and ``CI`` is unset.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from shared import content, envelope, l3
from shared.b64 import b64u_decode
from shared.errors import UnwrapFailed
from tests.helpers.config import require_tool
from tests.vectors import vectorlib

pytestmark = pytest.mark.process  # the openssl command line

L4 = vectorlib.load("l4.json")
MEMBERSHIP = vectorlib.load("membership.json")
OAEP_256_OPTS = [
    "-pkeyopt",
    "rsa_padding_mode:oaep",
    "-pkeyopt",
    "rsa_oaep_md:sha256",
    "-pkeyopt",
    "rsa_mgf1_md:sha256",
]


@pytest.fixture(scope="module")
def openssl() -> str:
    return require_tool("openssl")


def write_private(tmp: Path, name: str, key) -> Path:
    path = tmp / f"{name}.pem"
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
    return path


def write_public(tmp: Path, name: str, key) -> Path:
    path = tmp / f"{name}.pub.pem"
    path.write_bytes(key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def pkeyutl(openssl: str, tmp: Path, *args: str, data: bytes) -> bytes:
    src = tmp / "in.bin"
    src.write_bytes(data)
    proc = subprocess.run([openssl, "pkeyutl", *args, "-in", str(src)], capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def unwrap(openssl: str, tmp: Path, key_path: Path, wrapped: bytes) -> bytes:
    return pkeyutl(openssl, tmp, "-decrypt", "-inkey", str(key_path), *OAEP_256_OPTS, data=wrapped)


@pytest.mark.parametrize("vec", L4["vectors"], ids=[v["name"] for v in L4["vectors"]])
def test_openssl_unwraps_the_vector_keys(openssl, tmp_path, ids, vec):
    doc = json.loads(vec["envelope"])
    for name, entry in zip(vec["recipients"], doc["recipients"], strict=True):
        key_path = write_private(tmp_path, name, ids[name].wrap_private)
        assert unwrap(openssl, tmp_path, key_path, b64u_decode(entry["encrypted_key"])) == b64u_decode(vec["cek"])


def test_openssl_unwraps_a_freshly_sealed_key(openssl, tmp_path, ids):
    cek = os.urandom(32)
    data = envelope._seal_with(
        content.Text("fresh", ts=0, ctr=1),
        ids["alice"],
        "conv-1",
        [ids["bob"].public, ids["carol"].public],
        epoch=0,
        head="A" * 43,
        cek=cek,
        iv=os.urandom(12),
        message_id=os.urandom(16),
        scheme="padme",
        max_bytes=1 << 18,
        max_recipients=8,
    )
    doc = json.loads(data)
    for name, entry in zip(("bob", "carol"), doc["recipients"], strict=True):
        key_path = write_private(tmp_path, name, ids[name].wrap_private)
        assert unwrap(openssl, tmp_path, key_path, b64u_decode(entry["encrypted_key"])) == cek


def test_openssl_wrapped_key_opens_in_our_code(openssl, tmp_path, ids):
    """openssl wraps the CEK for bob; the (re-signed) envelope opens with our open()."""
    cek, iv, mid = os.urandom(32), os.urandom(12), os.urandom(16)
    plaintext = content.encode(content.Text("wrapped by openssl", ts=1, ctr=1))
    doc = vectorlib.build(ids["alice"], [ids["alice"], ids["bob"]], plaintext, cek=cek, iv=iv, mid=mid)
    pub = write_public(tmp_path, "bob", ids["bob"].public.wrap_key)
    wrapped = pkeyutl(openssl, tmp_path, "-encrypt", "-pubin", "-inkey", str(pub), *OAEP_256_OPTS, data=cek)
    doc["recipients"][1]["encrypted_key"] = vectorlib.b64u(wrapped)
    vectorlib.resign(doc, ids["alice"].sign_private)
    opened = envelope.open(vectorlib.compact_json(doc), ids["bob"], ids["alice"].public.sign_key)
    assert opened.plaintext == plaintext and opened.text == "wrapped by openssl" and len(plaintext) == 256


@pytest.mark.parametrize(
    "opts",
    [
        ["rsa_oaep_md:sha256", "rsa_mgf1_md:sha1"],
        ["rsa_oaep_md:sha1", "rsa_mgf1_md:sha1"],
        ["rsa_oaep_md:sha256", "rsa_mgf1_md:sha256", "rsa_oaep_label:6532656500"],
    ],
    ids=["mgf1-sha1", "oaep-sha1", "label"],
)
def test_openssl_wrapped_with_other_oaep_parameters_is_unwrap_failed(openssl, tmp_path, ids, opts):
    cek = os.urandom(32)
    doc = vectorlib.build(ids["alice"], [ids["bob"]], b"x", cek=cek, iv=os.urandom(12), mid=os.urandom(16))
    pub = write_public(tmp_path, "bob", ids["bob"].public.wrap_key)
    args = ["-pkeyopt", "rsa_padding_mode:oaep"] + [a for o in opts for a in ("-pkeyopt", o)]
    wrapped = pkeyutl(openssl, tmp_path, "-encrypt", "-pubin", "-inkey", str(pub), *args, data=cek)
    doc["recipients"][0]["encrypted_key"] = vectorlib.b64u(wrapped)
    vectorlib.resign(doc, ids["alice"].sign_private)
    with pytest.raises(UnwrapFailed):
        envelope.open(vectorlib.compact_json(doc), ids["bob"], ids["alice"].public.sign_key)


@pytest.mark.parametrize("vec", L4["vectors"], ids=[v["name"] for v in L4["vectors"]])
def test_openssl_recomputes_the_key_commitment_and_verifies_the_signature(openssl, tmp_path, ids, vec):
    ctx = tmp_path / "ctx.bin"
    ctx.write_bytes(L4["key_commitment_context"].encode())
    mac = subprocess.run(
        [
            openssl,
            "mac",
            "-digest",
            "SHA256",
            "-macopt",
            "hexkey:" + b64u_decode(vec["cek"]).hex(),
            "-in",
            str(ctx),
            "HMAC",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert bytes.fromhex(mac.stdout.strip()) == b64u_decode(vec["kc"])
    doc = json.loads(vec["envelope"])
    assert verify_ed25519(
        openssl, tmp_path, ids[vec["sender"]].public.sign_key, vectorlib.signing_input(doc), b64u_decode(doc["sig"])
    )
    assert not verify_ed25519(
        openssl, tmp_path, ids["mallory"].public.sign_key, vectorlib.signing_input(doc), b64u_decode(doc["sig"])
    )


def test_openssl_verifies_every_membership_statement(openssl, tmp_path, ids):
    """Ed25519 over ASCII "e2ee-chat/v1/membership." + the body part, by the actor's bound key."""
    pool = vectorlib.key_pool()
    keys = {ids[n].sign_kid: ids[n].public.sign_key for n in ids} | {
        e["sign_kid"]: pool[e["pool_index"]].sign_private.public_key() for e in MEMBERSHIP["extra_keys"]
    }
    for st in MEMBERSHIP["chains"][0]["statements"]:
        body_b64, sig = st["signed"].split(".")
        akid = json.loads(b64u_decode(body_b64))["akid"]
        assert verify_ed25519(
            openssl, tmp_path, keys[akid], f"{MEMBERSHIP['signing_context']}.{body_b64}".encode(), b64u_decode(sig)
        ), st["ep"]
    forged = next(v for v in MEMBERSHIP["negative"] if v["name"] == "forged_signature")
    body_b64, sig = forged["statement"].split(".")
    assert not verify_ed25519(
        openssl,
        tmp_path,
        ids["bob"].public.sign_key,
        f"{MEMBERSHIP['signing_context']}.{body_b64}".encode(),
        b64u_decode(sig),
    )


def verify_ed25519(openssl: str, tmp: Path, key, data: bytes, sig: bytes) -> bool:
    pub = write_public(tmp, "ed25519", key)
    (tmp / "data.bin").write_bytes(data)
    (tmp / "sig.bin").write_bytes(sig)
    proc = subprocess.run(
        [
            openssl,
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            str(pub),
            "-rawin",
            "-in",
            str(tmp / "data.bin"),
            "-sigfile",
            str(tmp / "sig.bin"),
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return proc.returncode == 0


def test_openssl_unwraps_the_l3_session_key(openssl, tmp_path):
    data = vectorlib.load("l3.json")
    relay = vectorlib.relay_private()
    key_path = write_private(tmp_path, "relay", relay)
    wrapped = b64u_decode(data["handshake"]["token"].split(".")[1])
    assert unwrap(openssl, tmp_path, key_path, wrapped) == b64u_decode(data["session_key"])
    session, token = l3.start_handshake(relay.public_key(), os.urandom(16))
    key = unwrap(openssl, tmp_path, key_path, b64u_decode(token.split(".")[1]))
    assert l3.session_id(key) == session.id
