"""The sealed trust store (issue 12): pins, verified flags and the key-change log are encrypted and
authenticated under a key kept in the keystore; a damaged or missing store (or history cache) is set
aside under a new name, never overwritten, the user is told in words, and contacts are not re-pinned
as if first seen."""

from __future__ import annotations

import json
import stat

import pytest

from client_tui.core import ChatClient, LocalDataWarning, keystore
from client_tui.core.trust import FILE_NAME
from tests.helpers.clients import barrier
from tests.helpers.config import FAST_KDF, PASSWORD, passphrase


async def setup(world):
    relay = world.relay()
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob")
    conv = await alice.create_conversation("pair", ["bob"])
    alice.verify_contact("bob", shown=alice.shown_key("bob").kids)
    await alice.close()
    return relay, alice, bob, conv


async def reopen(world, relay):
    return await world.client(relay, "alice", register=False, connect=False)


def aside(profile, name: str) -> list:
    return sorted(p for p in profile.iterdir() if p.name.startswith(name + "."))


async def test_the_store_is_sealed_and_round_trips(world):
    relay, alice, bob, conv = await setup(world)
    path = alice.profile / FILE_NAME
    blob = path.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert bob.identity.wrap_kid.encode() not in blob and b"bob" not in blob and b"verified" not in blob
    assert set(json.loads(blob)) == {"format", "v", "username", "nonce", "ciphertext"}
    assert not (alice.profile / "contacts.json").exists()
    again = await reopen(world, relay)
    assert again.contacts["bob"].verified
    assert again.contacts["bob"].kids == (bob.identity.wrap_kid, bob.identity.sign_kid)
    assert again.local_warnings == []


@pytest.mark.parametrize("damage", ["flip", "empty", "garbage", "other-account"])
async def test_a_damaged_store_is_set_aside_with_a_warning_and_contacts_are_marked_repinned(world, damage):
    relay, alice, bob, conv = await setup(world)
    path = alice.profile / FILE_NAME
    original = path.read_bytes()
    doc = json.loads(original)
    if damage == "flip":
        ct = bytearray(doc["ciphertext"], "ascii")
        ct[10] = ord("A") if ct[10] != ord("A") else ord("B")
        path.write_text(json.dumps({**doc, "ciphertext": ct.decode()}))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    else:
        path.write_text(json.dumps({**doc, "username": "mallory"}))
    damaged = path.read_bytes()
    again = await reopen(world, relay)  # login works: the damage costs the pins, not the account
    (moved,) = aside(again.profile, FILE_NAME)
    assert moved.read_bytes() == damaged  # set aside as it was, never overwritten
    (text,) = again.local_warnings
    assert f"set aside as {moved.name}" in text and "The keys you had pinned" in text and "are lost" in text
    await world.rec(again).until(lambda r: [e.text for e in r.of(LocalDataWarning)] == [text])
    assert set(again.contacts) == {"alice"}
    await again.fetch_keys("bob")
    c = again.contacts["bob"]
    assert not c.verified and "pinned again after your trust store was damaged" in c.note
    # the store written now is a fresh sealed one; the damaged one is still beside it
    assert json.loads(path.read_bytes())["format"] == "e2ee-chat-trust" and moved.exists()


async def test_a_deleted_store_is_reported_missing_and_contacts_are_not_treated_as_new(world):
    relay, alice, bob, conv = await setup(world)
    (alice.profile / FILE_NAME).unlink()
    again = await reopen(world, relay)
    (text,) = again.local_warnings
    assert "was missing" in text
    await again.fetch_keys("bob")
    assert "pinned again" in again.contacts["bob"].note


async def test_a_legacy_plaintext_contacts_file_is_imported_once_and_kept(world):
    relay, alice, bob, conv = await setup(world)
    again = await reopen(world, relay)
    legacy = {n: c.to_json() for n, c in again.contacts.items()}
    await again.close()
    (alice.profile / FILE_NAME).unlink()
    (alice.profile / "contacts.json").write_text(json.dumps(legacy))
    # an older keystore (no trust key yet): its store never existed, the contacts file is the old form
    bundle = keystore.load_bundle(alice.keystore_path, passphrase("alice"))
    keystore.save(alice.keystore_path, bundle.identity, passphrase("alice"), FAST_KDF, local_key=bundle.local_key)
    again = await reopen(world, relay)
    assert again.contacts["bob"].verified and again.contacts["bob"].note == ""
    (text,) = again.local_warnings
    assert "moved from the old unprotected file contacts.json" in text
    (kept,) = aside(again.profile, "contacts.json")
    assert json.loads(kept.read_text()) == legacy and not (again.profile / "contacts.json").exists()


async def test_a_damaged_history_cache_is_set_aside_and_refetched(world):
    relay, alice, bob, conv = await setup(world)
    await bob.send_text(conv, "kept by the relay")
    cache = alice.history_path
    for suffix in ("-wal", "-shm"):
        cache.with_name(cache.name + suffix).unlink(missing_ok=True)
    cache.write_bytes(b"this is not an SQLite database" * 100)
    again = await reopen(world, relay)
    (moved,) = aside(again.profile, cache.name)
    assert moved.read_bytes().startswith(b"this is not an SQLite")
    (text,) = again.local_warnings
    assert f"set aside as {moved.name}" in text and "fetched again from the relay" in text
    await again.connect()
    await again.wait_synced()
    await barrier(again)
    assert [r.text for r in await again.load_history(conv)] == ["kept by the relay"]


async def test_the_cli_says_what_was_lost(world, monkeypatch, capsys):
    relay, alice, bob, conv = await setup(world)
    (alice.profile / FILE_NAME).write_bytes(b"")
    client = ChatClient(relay.url, "alice", world.root / "clients", kdf=FAST_KDF)
    world.clients.append(client)
    from client_tui import cli, commands

    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", passphrase("alice"))
    args = cli.build_parser().parse_args(
        ["keys", "show", "--user", "alice", "--server", relay.url, "--profile", str(world.root / "clients")]
    )
    args.profile = world.root / "clients"
    args.cafile, args.password, args.passphrase = None, PASSWORD, passphrase("alice")
    logged, _ = await commands.logged_in(args)
    err = capsys.readouterr().err
    assert "warning: Your trust store (trust.sealed) was damaged" in err
    await logged.close()
