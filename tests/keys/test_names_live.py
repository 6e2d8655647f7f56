"""``Bob``/``bob`` and composed/decomposed secrets behave as the same, against a real relay; a relay
answer naming another user is refused and never becomes a path (issue 12)."""

from __future__ import annotations

import json
import sqlite3

import httpx2
import pytest
from argon2 import PasswordHasher

from client_tui import cli
from client_tui.core import ChatClient, ClientError, keystore
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import KeyAnswerMismatch
from tests.helpers.config import FAST_KDF, PASSWORD
from tests.helpers.names import COMPOSED, DECOMPOSED
from tests.helpers.relays import attacks, db_count


def relay_hash(relay, user: str) -> str:
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return db.execute("SELECT password_hash FROM users WHERE username = ?", (user,)).fetchone()[0]
    finally:
        db.close()


def set_relay_hash(relay, user: str, value: str) -> None:
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        with db:
            db.execute("UPDATE users SET password_hash = ? WHERE username = ?", (value, user))
    finally:
        db.close()


async def test_bob_and_BOB_are_one_user_in_every_client_call(world):
    relay = world.relay()
    alice = await world.client(relay, "alice", connect=False, register=False, login=False)
    assert alice.username == "alice"
    typed = ChatClient(relay.url, "ALICE", world.root / "clients", kdf=FAST_KDF)
    assert typed.username == "alice" and typed.profile == alice.profile  # one profile folder, not two
    await typed.close()
    await alice.register(PASSWORD, "alice passphrase", identity=world.identities["alice"])
    bob = await world.client(relay, "bob", connect=False)
    conv = await alice.create_conversation("pair", ["Bob"])
    assert alice.members[conv] == ["alice", "bob"]
    assert set(alice.contacts) == {"alice", "bob"}
    assert (await alice.fetch_keys("BOB")).wrap_kid == bob.identity.wrap_kid
    alice.verify_contact("Bob")
    assert alice.contacts["bob"].verified and "Bob" not in alice.contacts
    assert await alice.change_members(conv, remove=["BOB"]) == ["alice"]


def test_the_cli_canonicalises_every_name(relay, tmp_path, monkeypatch, capsys):
    from tests.helpers.cli import register

    root = tmp_path / "profiles"
    register(relay, root, "alice", "bob")
    monkeypatch.setenv("E2EE_SERVER", relay.url)
    monkeypatch.setenv("E2EE_PROFILE", str(root))
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", "alice passphrase")
    assert cli.main(["send", "--user", "Alice", "--to", "Bob", "--text", "one"]) == 0
    first = capsys.readouterr().out.split("conversation=")[1].strip()
    assert cli.main(["send", "--user", "ALICE", "--to", "bob", "--text", "two"]) == 0
    assert capsys.readouterr().out.split("conversation=")[1].strip() == first  # the same conversation
    assert cli.main(["keys", "verify", "BOB", "--user", "Alice"]) == 0
    assert capsys.readouterr().out.startswith("bob: verified")
    assert sorted(p.name for p in (root / next(iter(p.name for p in root.iterdir()))).iterdir()) == ["alice", "bob"]
    with pytest.raises(SystemExit):
        cli.main(["send", "--user", "../alice", "--to", "bob", "--text", "x"])
    assert "username: 3-32 characters" in capsys.readouterr().err


async def test_composed_and_decomposed_passwords_and_passphrases_are_the_same(world):
    relay = world.relay()
    alice = ChatClient(relay.url, "alice", world.root / "clients", kdf=FAST_KDF)
    world.clients.append(alice)
    await alice.register(DECOMPOSED, DECOMPOSED, identity=world.identities["alice"])
    await alice.close()
    again = ChatClient(relay.url, "alice", world.root / "clients", kdf=FAST_KDF)
    world.clients.append(again)
    ident = await again.login(COMPOSED, COMPOSED)  # the same secrets, typed in composed form
    assert ident.wrap_kid == world.identities["alice"].wrap_kid
    assert PasswordHasher().verify(relay_hash(relay, "alice"), COMPOSED)  # hashed in the normalised form


async def test_a_legacy_raw_password_hash_opens_once_and_is_rehashed_normalised(world):
    relay = world.relay()
    alice = await world.client(relay, "alice", connect=False)
    set_relay_hash(relay, "alice", PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(DECOMPOSED))
    with pytest.raises(ClientError) as err:
        await alice.rest.login(COMPOSED)  # the legacy hash is of the raw decomposed text only
    assert err.value.status == 401
    await alice.rest.login(DECOMPOSED)  # the raw form, once: accepted and upgraded
    assert PasswordHasher().verify(relay_hash(relay, "alice"), COMPOSED)
    await alice.rest.login(COMPOSED)  # from now on both forms open the account
    assert "password hash upgraded user=alice" in (relay.data_dir / "relay.log").read_text()


def make_legacy_keystore(path, passphrase_raw: str, reopen_with: str) -> None:
    """Rewrite a keystore as the client wrote it before passphrases were normalised: no
    ``passphrase_form`` member, the key derived from the raw passphrase."""
    doc = json.loads(path.read_text())
    header = {k: v for k, v in doc.items() if k not in ("ciphertext", "passphrase_form")}
    _, secret, _ = keystore._open(path, reopen_with)
    key = keystore._derive(passphrase_raw, header["kdf"], b64u_decode(header["kdf"]["salt"]))
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    sealed = AESGCM(key).encrypt(b64u_decode(header["nonce"]), json.dumps(secret).encode(), keystore._aad(header))
    path.write_text(json.dumps({**header, "ciphertext": b64u_encode(sealed)}))


def test_keystores_open_with_either_form_and_legacy_ones_are_upgraded(tmp_path, identities):
    path = tmp_path / "keystore.json"
    keystore.save(path, identities["alice"], DECOMPOSED, FAST_KDF)
    assert keystore.load(path, COMPOSED).wrap_kid == identities["alice"].wrap_kid
    assert json.loads(path.read_text())["passphrase_form"] == "rfc8265-opaque"
    make_legacy_keystore(path, DECOMPOSED, COMPOSED)  # an old file, made from the raw decomposed text
    assert "passphrase_form" not in json.loads(path.read_text())
    with pytest.raises(keystore.WrongPassphrase):
        keystore.load_bundle(path, COMPOSED)
    bundle = keystore.load_bundle(path, DECOMPOSED)  # the raw form, once
    assert bundle.upgrade and bundle.identity.wrap_kid == identities["alice"].wrap_kid
    keystore.save_bundle(path, bundle.complete(), DECOMPOSED, FAST_KDF)  # what the client does on login
    assert keystore.load_bundle(path, COMPOSED).upgrade is False


async def test_a_registration_answer_for_another_name_is_refused_and_makes_no_folder(tmp_path, identities):
    def relay(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/healthz":  # a level-4 relay, as asked before registering
            return httpx2.Response(200, json={"ok": True, "level": 4})
        return httpx2.Response(201, json={"username": "../../evil", "wrap_kid": "x", "sign_kid": "y"})

    client = ChatClient("http://127.0.0.1:9", "alice", tmp_path / "profiles", kdf=FAST_KDF)
    await client.rest.http.aclose()
    client.rest.http = httpx2.AsyncClient(base_url=client.server_url, transport=httpx2.MockTransport(relay))
    with pytest.raises(KeyAnswerMismatch):
        await client.register(PASSWORD, "p", identity=identities["alice"])
    await client.close()
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert not any("evil" in p for p in made) and not client.keystore_path.exists()


async def test_hostile_key_answer_naming_another_user_is_refused_and_nothing_pinned(world):
    relay = world.hostile("key-name:mallory")
    await world.client(relay, "mallory", connect=False)
    await world.client(relay, "carol", connect=False)
    alice = await world.client(relay, "alice")
    with pytest.raises(KeyAnswerMismatch) as err:
        await alice.fetch_keys("carol")
    assert err.value.code == "key_answer_mismatch"
    assert "answered a key fetch for carol with the keys of 'mallory'" in err.value.message
    with pytest.raises(KeyAnswerMismatch):
        await alice.create_conversation("with carol", ["carol"])
    assert set(alice.contacts) == {"alice"}  # neither carol nor mallory pinned
    assert db_count(relay, "SELECT count(*) FROM conversations") == 0
    assert len(attacks(relay, "key-name")) == 2
