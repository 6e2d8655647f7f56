"""Fixtures for client tests: an offline client fed frames by hand (a hostile relay), the CLI's profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from client_tui.core import ChatClient, Contact, keystore
from tests.helpers.cli import register
from tests.helpers.config import FAST_KDF
from tests.helpers.hostile import Hostile


@pytest.fixture
async def offline_bob(tmp_path: Path, identities):
    """bob's client with keys, cache and alice + carol pinned, never connected (no relay)."""
    client = ChatClient("http://127.0.0.1:9", "bob", tmp_path / "clients", kdf=FAST_KDF)
    local_key = keystore.save(client.keystore_path, identities["bob"], "bob passphrase", FAST_KDF)
    await client.open_local(keystore.KeyBundle(identities["bob"], local_key), "bob passphrase")
    for name in ("alice", "carol"):
        client.contacts[name] = Contact(identities[name].public)
    client.members["conv-1"] = ["alice", "bob", "carol"]
    client.titles["conv-1"] = "hostile"
    client._key_fetched_at = {n: float("inf") for n in ("alice", "carol", "mallory")}  # never fetch
    yield client, Hostile(client, identities)
    await client.close()


@pytest.fixture
def profiles(relay, tmp_path, monkeypatch):
    """alice and bob registered on ``relay``; ``e2ee-chat`` reads that relay and their profiles' folder."""
    root = tmp_path / "profiles"
    register(relay, root, "alice", "bob")
    monkeypatch.setenv("E2EE_SERVER", relay.url)
    monkeypatch.setenv("E2EE_PROFILE", str(root))
    return root
