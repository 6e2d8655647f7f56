"""Local JSON files damaged into valid JSON of the wrong shape, or nested deeper than the decoder's
stack, are set aside with a warning like any other damage (attacker F1, F11): never a crash, never
overwritten silently."""

from __future__ import annotations

import json
import os

import pytest

from client_tui.core.client import ChatClient
from client_tui.core.errors import LocalFileDamaged
from client_tui.core.private import load_local_json
from client_tui.core.transparency import FILE_NAME as KT_FILE
from client_tui.core.trust import FILE_NAME as TRUST_FILE
from client_tui.core.trust import LEGACY_FILE, TrustStore

DEEP = b"[" * 100_000


@pytest.mark.parametrize("payload", [b"[]", b'"x"', b"1", b"null", DEEP, b"\xff{"])
def test_load_local_json_raises_the_typed_error(payload):
    with pytest.raises(LocalFileDamaged, match="f.json"):
        load_local_json(payload, "f.json")


def test_load_local_json_returns_the_object():
    assert load_local_json(b'{"a": [1]}', "f.json") == {"a": [1]}
    assert load_local_json(b"[1, 2]", "f.json", list) == [1, 2]


@pytest.mark.parametrize(
    "payload",
    [
        b"[]",
        b'"x"',
        b"1",
        b"null",
        DEEP,
        json.dumps({"format": "x", "v": 1, "monitor": []}).encode(),
    ],
)
def test_damaged_kt_head_is_set_aside_not_a_crash(tmp_path, payload):
    first = ChatClient("http://127.0.0.1:9", "alice", profile_root=tmp_path)
    profile = first.profile
    profile.mkdir(parents=True, exist_ok=True)
    (profile / KT_FILE).write_bytes(payload)
    again = ChatClient("http://127.0.0.1:9", "alice", profile_root=tmp_path)
    assert again.transparency.head is None
    assert any(KT_FILE in w for w in again.local_warnings)
    assert not (profile / KT_FILE).exists()
    (aside,) = profile.glob(KT_FILE + ".damaged-*")
    assert aside.read_bytes() == payload


@pytest.mark.parametrize("name", [TRUST_FILE, LEGACY_FILE])
@pytest.mark.parametrize("payload", [DEEP, b"[]", b"null", b'"x"'])
def test_damaged_trust_file_is_set_aside(tmp_path, name, payload):
    (tmp_path / name).write_bytes(payload)
    store = TrustStore.open(tmp_path, "bob", os.urandom(32), existed=True)
    assert store.contacts == {}
    assert store.warnings
    (aside,) = tmp_path.glob(name + ".damaged-*")
    assert aside.read_bytes() == payload
