"""TLS with the relay's own certificate (--cafile / E2EE_CAFILE, the lock on the status bar, a
certificate failure named as such) and profiles found by relay address however it is written."""

from __future__ import annotations

import json

import pytest

from client_tui import cli
from client_tui.app import ChatApp
from client_tui.core import ChatClient, profiles
from server import cli as relay_cli
from server.devcert import write_dev_cert
from shared.errors import E2EEError
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF, PASSWORD
from tests.helpers.relays import start_relay
from tests.helpers.tui import chat_shown


@pytest.fixture(scope="module")
def tls_relay(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    cert, key = write_dev_cert(folder / "tls")
    relay = start_relay(folder / "relay", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    yield relay, cert
    relay.stop()


async def test_cafile_trusts_the_dev_certificate_and_the_status_bar_shows_the_lock(tls_relay, tmp_path):
    relay, cert = tls_relay
    assert relay.url.startswith("https://")
    alice = ChatClient(relay.url, "alice", tmp_path / "p", kdf=FAST_KDF, cafile=str(cert))
    bob = ChatClient(relay.url, "bob", tmp_path / "p", kdf=FAST_KDF, cafile=str(cert))
    await alice.register(PASSWORD, "alice passphrase", bits=2048)
    await bob.register(PASSWORD, "bob passphrase", bits=2048)
    conv = await alice.create_conversation("tls", ["bob"])
    app = ChatApp(alice, conv)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: chat_shown(app) and alice.online)  # wss:// with the same trust
            await wait_until(lambda: "🔒 TLS" in str(app.chat.query_one("#status").render()))
            await pilot.press(*"over tls", "enter")
            await bob.connect()
            await wait_until(lambda: alice.outbox == [])
    finally:
        await bob.close()


async def test_without_the_certificate_the_failure_is_named_and_says_what_to_do(tls_relay, tmp_path, monkeypatch):
    relay, cert = tls_relay
    monkeypatch.delenv("E2EE_CAFILE", raising=False)
    client = ChatClient(relay.url, "carol", tmp_path / "p", kdf=FAST_KDF)
    try:
        with pytest.raises(E2EEError) as caught:
            await client.register(PASSWORD, "carol passphrase", bits=2048)
        assert "certificate is not trusted (self-signed certificate)" in caught.value.message
        assert "--cafile" in caught.value.message
        assert "Error" not in caught.value.message  # no exception class name
    finally:
        await client.close()
    monkeypatch.setenv("E2EE_CAFILE", str(cert))  # the environment variable does the same as --cafile
    client = ChatClient(relay.url, "carol", tmp_path / "p", kdf=FAST_KDF)
    try:
        await client.register(PASSWORD, "carol passphrase", bits=2048)
    finally:
        await client.close()


def test_a_cafile_that_is_not_a_certificate_is_a_clear_error(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", "x passphrase")
    code = cli.main(["tail", "--user", "xyz", "--profile", str(tmp_path), "--cafile", str(bad)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED and "not a PEM certificate file" in err and "Traceback" not in err


def test_dev_cert_prints_the_exact_client_command(tmp_path, capsys):
    assert relay_cli.main(["dev-cert", "--data-dir", str(tmp_path), "--port", "9443"]) == 0
    out = capsys.readouterr().out
    cert = tmp_path / "tls" / "cert.pem"
    assert f"e2ee-chat --server https://127.0.0.1:9443 --cafile {cert}" in out


def test_dev_cert_keeps_a_certificate_clients_trust_unless_forced(tmp_path, capsys):
    """A second ``dev-cert`` would break every client's --cafile: refused, naming the file and
    --force; with --force a new certificate replaces it."""
    argv = ["dev-cert", "--data-dir", str(tmp_path)]
    assert relay_cli.main(argv) == 0
    cert = tmp_path / "tls" / "cert.pem"
    first = cert.read_bytes(), (tmp_path / "tls" / "key.pem").read_bytes()
    capsys.readouterr()
    assert relay_cli.main(argv) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert str(cert) in out.err and "dev-cert --force" in out.err
    assert (cert.read_bytes(), (tmp_path / "tls" / "key.pem").read_bytes()) == first
    assert relay_cli.main([*argv, "--force"]) == 0
    assert cert.read_bytes() != first[0] and (tmp_path / "tls" / "key.pem").read_bytes() != first[1]
    assert f"--cafile {cert}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "typed, normal",
    [
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
        ("HTTP://LocalHost:8765/", "http://localhost:8765"),
        ("localhost:8765/v1", "http://localhost:8765"),
        ("127.0.0.1:8765/v1/ws/", "http://127.0.0.1:8765"),
        ("ws://[::1]:8765", "http://[::1]:8765"),
        ("https://Relay.Example:443/v1", "https://relay.example"),
        ("relay.example", "https://relay.example"),
        ("http://relay.example:80/chat/", "http://relay.example/chat"),
        ("wss://relay.example:8443/chat/v1?x=1#f", "https://relay.example:8443/chat"),
    ],
)
def test_relay_addresses_are_normalised(typed, normal):
    assert profiles.normalize_url(typed) == normal


@pytest.mark.parametrize("bad", ["ftp://relay.example", "http://", "http://host:99999", "http://host:port"])
def test_what_is_not_a_relay_address_is_refused_in_words(bad):
    with pytest.raises(E2EEError) as caught:
        profiles.normalize_url(bad)
    assert "is not a relay address" in caught.value.message


def test_the_ways_of_writing_one_relay_share_one_profile_folder():
    keys = {
        profiles.relay_key(u)
        for u in (
            "http://127.0.0.1:8765",
            "http://localhost:8765/",
            "localhost:8765/v1",
            "http://[::1]:8765",
            "ws://127.0.0.1:8765/v1/ws",
        )
    }
    assert keys == {"127_0_0_1_8765"}  # the folder name older clients used for the default address
    assert profiles.relay_key("http://127.0.0.1:8766") != profiles.relay_key("http://127.0.0.1:8765")


async def test_an_older_profile_folder_is_found_and_moved(make_client, relay, tmp_path):
    alice = await make_client("alice")
    await alice.close()
    root = alice.profile.parent.parent
    port = relay.port
    legacy = root / f"localhost_{port}_v1" / "alice"  # what an older client made for http://localhost:PORT/v1
    legacy.parent.mkdir(parents=True)
    alice.profile.rename(legacy)
    typed = ChatClient(f"http://localhost:{port}/v1", "alice", root, kdf=FAST_KDF)
    try:
        assert typed.profile == root / f"127_0_0_1_{port}" / "alice" and not legacy.exists()
        await typed.login(PASSWORD, "alice passphrase")  # the same keys, history and contacts
        assert typed.server_url == f"http://localhost:{port}"
    finally:
        await typed.close()


async def test_no_keystore_lists_the_profiles_this_user_has(make_client, relay, tmp_path):
    alice = await make_client("alice")
    await alice.close()
    root = alice.profile.parent.parent
    wrong_port = ChatClient(f"http://127.0.0.1:{relay.port + 1}", "alice", root, kdf=FAST_KDF)
    try:
        with pytest.raises(E2EEError) as caught:
            await wrong_port.login(PASSWORD, "alice passphrase")
    finally:
        await wrong_port.close()
    message = caught.value.message
    assert f"no keys for alice at http://127.0.0.1:{relay.port + 1}" in message
    assert f"alice has keys for: http://127.0.0.1:{relay.port}" in message and "--server" in message
    assert "keys import" in message
    nobody = ChatClient(relay.url, "zoe", root, kdf=FAST_KDF)
    try:
        with pytest.raises(E2EEError) as caught:
            await nobody.login(PASSWORD, "x")
    finally:
        await nobody.close()
    assert "--register" in caught.value.message and "keys import" in caught.value.message
    assert json.dumps(profiles.profiles_of(root, "alice")) == json.dumps([f"http://127.0.0.1:{relay.port}"])
