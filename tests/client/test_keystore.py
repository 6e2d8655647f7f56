"""The keystore: no plaintext key material on disk, a wrong passphrase fails cleanly, 0600 files,
export/import, and old keys kept across a rotation."""

from __future__ import annotations

import json
import os
import stat

import pytest
from cryptography.hazmat.primitives import serialization

from client_tui.core import keystore
from shared.b64 import b64u_encode
from tests.helpers.config import FAST_KDF


def _secret_forms(identity) -> dict[str, bytes]:
    """Every form the private key material could be written in."""
    der = identity.wrap_private.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pem = identity.wrap_private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    seed = identity.sign_private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    d = identity.wrap_private.private_numbers().d
    return {
        "pkcs8 der": der[30:90],
        "pkcs8 b64url": b64u_encode(der)[40:120].encode(),
        "pem": pem[40:120],
        "seed": seed,
        "seed b64url": b64u_encode(seed).encode(),
        "seed hex": seed.hex().encode(),
        "d hex": f"{d:x}"[:64].encode(),
        "d dec": str(d)[:64].encode(),
    }


def test_the_file_holds_no_plaintext_key_material(tmp_path, identities):
    alice = identities["alice"]
    path = tmp_path / "alice" / "keystore.json"
    local_key = keystore.save(path, alice, "correct horse", FAST_KDF)
    blob = path.read_bytes()
    for name, needle in _secret_forms(alice).items():
        assert needle not in blob, name
    assert local_key not in blob and b64u_encode(local_key).encode() not in blob
    doc = json.loads(blob)
    assert set(doc) == {
        "format",
        "v",
        "username",
        "wrap_kid",
        "sign_kid",
        "kdf",
        "passphrase_form",
        "nonce",
        "ciphertext",
    }
    assert doc["kdf"]["name"] == "argon2id"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["keystore.json"]  # no temp file left
    assert keystore.load(path, "correct horse").wrap_kid == alice.wrap_kid


def test_a_wrong_passphrase_fails_cleanly(tmp_path, identities):
    path = tmp_path / "keystore.json"
    keystore.save(path, identities["alice"], "correct horse", FAST_KDF)
    before = path.read_bytes()
    for wrong in ("correct hors", "Correct horse", "", "correct horse "):
        with pytest.raises(keystore.WrongPassphrase) as err:
            keystore.load(path, wrong)
        assert err.value.code == "wrong_passphrase" and err.value.field == "passphrase"
        assert "correct" not in str(err.value)
    assert path.read_bytes() == before  # a failed attempt changes nothing


def test_an_altered_header_or_a_damaged_file_is_refused(tmp_path, identities):
    path = tmp_path / "keystore.json"
    keystore.save(path, identities["alice"], "pp", FAST_KDF)
    doc = json.loads(path.read_text())
    altered = {**doc, "username": "mallory"}  # the header is the AAD: any change fails the check
    path.write_text(json.dumps(altered))
    with pytest.raises(keystore.WrongPassphrase):
        keystore.load(path, "pp")
    path.write_text("{not json")
    with pytest.raises(keystore.KeystoreError, match="damaged"):
        keystore.load(path, "pp")
    with pytest.raises(keystore.KeystoreError, match="no keystore"):
        keystore.load(tmp_path / "missing.json", "pp")
    with pytest.raises(keystore.KeystoreError):
        keystore.save(path, identities["alice"], "", FAST_KDF)


def test_export_and_import_move_the_encrypted_file(tmp_path, identities):
    src = tmp_path / "a" / "keystore.json"
    keystore.save(src, identities["alice"], "pp", FAST_KDF)
    out = keystore.export_to(src, tmp_path / "alice-keys.json")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert out.read_bytes() == src.read_bytes()
    with pytest.raises(keystore.KeystoreError):
        keystore.export_to(src, out)  # never overwrites
    dest = tmp_path / "b" / "keystore.json"
    with pytest.raises(keystore.WrongPassphrase):
        keystore.import_from(out, dest, "nope", "alice")
    with pytest.raises(keystore.KeystoreError, match="holds the keys of 'alice'"):
        keystore.import_from(out, dest, "pp", "bob")
    bundle = keystore.import_from(out, dest, "pp", "alice")
    assert bundle.identity.sign_kid == identities["alice"].sign_kid
    with pytest.raises(keystore.KeystoreError, match="exists"):
        keystore.import_from(out, dest, "pp", "alice")


def test_retired_keys_and_the_history_key_survive_a_save(tmp_path, identities):
    path = tmp_path / "keystore.json"
    key = keystore.save(path, identities["bob"], "pp", FAST_KDF, retired=[identities["alice"]])
    bundle = keystore.load_bundle(path, "pp")
    assert bundle.local_key == key and len(key) == 32
    assert [r.wrap_kid for r in bundle.retired] == [identities["alice"].wrap_kid]
    assert "local_key" not in repr(bundle)
