"""``e2ee-chat keys accept`` decides on the key the user was shown, like ``keys verify``: between
``keys show bob`` and ``keys accept bob`` another command of the same account (``send``, a ``tail
--follow``) may have fetched other keys from the relay; a key no verified rotation leads to is
accepted only with the key ids (or number) ``keys show`` printed for it."""

from __future__ import annotations

import asyncio

from client_tui import cli
from client_tui.core import ChatClient
from client_tui.core.contacts import kid_token
from shared.keys import Identity
from tests.helpers.cli import run
from tests.helpers.config import FAST_KDF, PASSWORD
from tests.helpers.lying import lie, logged_substitute
from tests.helpers.relays import drop_rotation_signatures


def swap_pending(relay, root, identities) -> tuple[str, str]:
    """Another command of alice's fetches bob's keys from a relay that now answers mallory's under
    bob's name (a substitution, not signed by bob's key, logged in its key transparency log as a
    relay must now do); returns their key ids."""
    fake = Identity("bob", identities["mallory"].wrap_private, identities["mallory"].sign_private).public

    async def go() -> tuple[str, str]:
        alice = ChatClient(relay.url, "alice", root, kdf=FAST_KDF)
        await alice.login(PASSWORD, "alice passphrase")

        served = await logged_substitute(relay, alice, fake)  # the relay logs it: the proof must hold

        def substitute(method, path, body, answer):
            return served if path == "/v1/users/bob/keys" else answer

        lie(alice, substitute)
        await alice.fetch_keys("bob")
        pending = alice.contacts["bob"].pending_kids
        await alice.close()
        return pending

    return asyncio.run(go())


def test_keys_accept_takes_only_the_key_that_was_shown(profiles, relay, monkeypatch, capsys, identities):
    assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "one")[0] == 0
    drop_rotation_signatures(relay)  # a change without a signed chain (a signed rotation is followed)
    assert run(monkeypatch, capsys, "bob", "keys", "rotate")[0] == 0
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "show", "bob")
    assert code == cli.EXIT_BLOCKED and "CHANGED (NOT signed by the pinned key)" in out
    shown = out.split("new key ids: ")[1].split()[0]  # what alice saw: bob's rotation
    swapped = swap_pending(relay, profiles, identities)
    code, out, err = run(monkeypatch, capsys, "alice", "keys", "accept", "bob")
    assert code == cli.EXIT_BLOCKED and "nothing accepted" in err  # before: mallory's keys pinned as bob's
    assert "--compare" in err
    code, out, err = run(monkeypatch, capsys, "alice", "keys", "accept", "bob", "--compare", shown)
    assert code != 0 and "nothing was accepted" in err  # the keys shown are no longer the pending ones
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "accept", "bob", "--compare", kid_token(swapped))
    assert code == 0 and "not verified" in out  # accepting the substitution knowingly: the ids it printed
