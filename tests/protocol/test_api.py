"""Sealing is hard to misuse: no public function takes a key, CEK or nonce; fresh values each time."""

from __future__ import annotations

import inspect
import json

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from client_tui.core.record import now_ms
from shared import envelope, l3
from shared.b64 import b64u_decode
from shared.content import Text

CHOSEN = {"cek", "iv", "nonce", "key", "session_key", "message_key"}


def public_functions(module):
    return [getattr(module, n) for n in module.__all__ if inspect.isfunction(getattr(module, n))]


def test_no_public_function_takes_a_key_or_nonce():
    for module in (envelope, l3):
        for fn in public_functions(module):
            if fn is l3.session_id:  # derives the public id of a key; encrypts nothing
                continue
            assert not CHOSEN & set(inspect.signature(fn).parameters), f"{module.__name__}.{fn.__name__}"


def test_no_primitive_is_exported():
    for module in (envelope, l3):
        for name in module.__all__:
            obj = getattr(module, name)
            assert not name.startswith("_")
            assert obj is not AESGCM
            assert "cryptography" not in (getattr(obj, "__module__", None) or ""), name
        assert "_seal_with" not in module.__all__ and "_OAEP" not in envelope.__all__


def test_every_seal_draws_fresh_key_nonce_and_id(ids):
    seen_iv, seen_mid, seen_ek = set(), set(), set()
    for _ in range(60):
        doc = json.loads(
            envelope.seal(
                Text("same text", ts=now_ms(), ctr=1),
                ids["alice"],
                "conv-1",
                [ids["bob"].public],
                epoch=0,
                head="A" * 43,
            )
        )
        iv = b64u_decode(doc["iv"])
        header = json.loads(b64u_decode(doc["protected"]))
        assert len(iv) == 12 and len(b64u_decode(header["mid"])) == 16
        seen_iv.add(iv)
        seen_mid.add(header["mid"])
        seen_ek.add(doc["recipients"][0]["encrypted_key"])
    assert len(seen_iv) == len(seen_mid) == len(seen_ek) == 60


def test_wrapped_cek_is_32_random_bytes(ids):
    ceks = set()
    for _ in range(20):
        doc = json.loads(
            envelope.seal(
                Text("x", ts=now_ms(), ctr=1), ids["alice"], "conv-1", [ids["carol"].public], epoch=0, head="A" * 43
            )
        )
        cek = ids["carol"].wrap_private.decrypt(b64u_decode(doc["recipients"][0]["encrypted_key"]), envelope._OAEP)
        assert len(cek) == 32
        ceks.add(cek)
    assert len(ceks) == 20
