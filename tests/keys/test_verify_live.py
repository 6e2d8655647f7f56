"""Verification bound to the key shown (issue 12, Matrix CVE-2022-39250's class), against hostile relays:
during a pending substituted key the number to compare is the new key's, ``keys verify`` and "Mark
verified" pin nothing that was not compared, and a key swapped at the moment the user verifies is refused."""

from __future__ import annotations

from client_tui import cli
from client_tui.app import ChatApp
from client_tui.screens import ContactScreen
from shared.keys import safety_number
from tests.helpers.cli import register
from tests.helpers.clients import wait_until
from tests.helpers.config import PASSWORD
from tests.helpers.relays import attacks, start_relay
from tests.helpers.tui import rendered_text, screen_ready

SIZE = (120, 40)


def run(monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    monkeypatch.setenv("E2EE_PASSPHRASE", "alice passphrase")
    code = cli.main([*argv, "--user", "alice"])
    out = capsys.readouterr()
    return code, out.out, out.err


def contact(root, relay, user: str):
    """``user``'s and alice's entries in alice's sealed trust store, read from disk (no relay)."""
    from client_tui.core import keystore
    from client_tui.core.trust import TrustStore

    profile = next(root.iterdir()) / "alice"
    bundle = keystore.load_bundle(profile / "keystore.json", "alice passphrase")
    store = TrustStore.open(profile, "alice", bundle.trust_key, existed=True)
    assert store.warnings == []
    return store.contacts[user], store.contacts["alice"]


def hostile(tmp_path, monkeypatch, mode: str):
    relay = start_relay(tmp_path / "relay", "--hostile", mode, "--demo-level", env={"E2EE_RATE_LOGINS_PER_MIN": "600"})
    root = tmp_path / "profiles"
    register(relay, root, "alice", "bob", "mallory", "carol")
    monkeypatch.setenv("E2EE_SERVER", relay.url)
    monkeypatch.setenv("E2EE_PROFILE", str(root))
    return relay, root


def test_keys_verify_during_a_pending_substituted_key_pins_nothing(tmp_path, monkeypatch, capsys):
    relay, root = hostile(tmp_path, monkeypatch, "key-mid:mallory")
    try:
        assert run(monkeypatch, capsys, "send", "--to", "bob", "--text", "hi")[0] == 0  # pins the real bob
        real, me = contact(root, relay, "bob")
        code, out, _ = run(monkeypatch, capsys, "keys", "show", "bob")  # now the relay serves mallory's keys
        assert code == cli.EXIT_BLOCKED and "NOT signed by the pinned key" in out
        pending, _ = contact(root, relay, "bob")
        new_number = safety_number(me.identity, pending.pending)
        old_number = safety_number(me.identity, real.identity)  # what bob's own screen shows
        assert f"NEW safety number with alice (compare this one): {new_number}" in out
        assert f"previous safety number (pinned, for reference): {old_number}" in out
        code, _, err = run(monkeypatch, capsys, "keys", "verify", "bob")  # nothing compared: refused
        assert code == cli.EXIT_BLOCKED and "nothing verified" in err
        code, _, err = run(monkeypatch, capsys, "keys", "verify", "bob", "--compare", old_number)
        assert code == cli.EXIT_FAILED and "key_not_shown" in err and "nothing was verified" in err
        after, _ = contact(root, relay, "bob")
        assert after.kids == real.kids and not after.verified and after.pending is not None  # nothing pinned
        assert after.pending_kids == (pending.pending.wrap_kid, pending.pending.sign_kid)
    finally:
        relay.stop()


def test_keys_verify_with_a_key_swapped_at_that_moment_pins_nothing(tmp_path, monkeypatch, capsys):
    relay, root = hostile(tmp_path, monkeypatch, "key-swap:mallory,carol")
    try:
        assert run(monkeypatch, capsys, "send", "--to", "bob", "--text", "hi")[0] == 0  # fetch 1: real bob
        code, out, _ = run(monkeypatch, capsys, "keys", "show", "bob")  # fetch 2: mallory's keys
        shown = out.split("(compare this one): ")[1].splitlines()[0]
        code, _, err = run(monkeypatch, capsys, "keys", "verify", "bob", "--compare", shown)  # fetch 3: carol's
        assert code == cli.EXIT_FAILED and "nothing was verified" in err
        after, me = contact(root, relay, "bob")
        assert not after.verified and safety_number(me.identity, after.pending) != shown
        assert after.changes[-1]["decision"] is None
        assert len(attacks(relay, "key-swap")) == 2
    finally:
        relay.stop()


async def test_mark_verified_refuses_a_key_swapped_while_the_dialog_was_open(world):
    relay = world.hostile("key-swap:mallory,carol")
    for name in ("mallory", "carol", "bob"):
        await world.client(relay, name, connect=False)
    alice = await world.client(relay, "alice", connect=False)
    conv = await alice.create_conversation("pair", ["bob"])  # fetch 1: the real bob, pinned
    real = alice.contacts["bob"].kids
    await alice.fetch_keys("bob")  # fetch 2: mallory's keys, pending
    app = ChatApp(alice, conv)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: alice.online)
        await pilot.press("ctrl+k")
        await wait_until(lambda: screen_ready(app, ContactScreen))
        screen = app.screen
        body = rendered_text(screen.body)
        shown = screen.shown
        me = alice.contacts["alice"].identity
        assert shown.new and shown.kids == alice.contacts["bob"].pending_kids
        assert "compare THIS one" in body and shown.safety.split()[0] in body  # the new key's number
        await alice.fetch_keys("bob")  # fetch 3: the relay swaps in carol's keys while alice compares
        assert alice.contacts["bob"].pending_kids != shown.kids
        await pilot.press("v")  # Mark verified
        await wait_until(lambda: rendered_text(app.screen.body) != body)
        c = alice.contacts["bob"]
        assert c.kids == real and not c.verified and c.pending is not None  # nothing pinned, nothing verified
        assert c.changes[-1]["decision"] is None
        told = [n.message for n in app._notifications]
        assert any("bob's key changed again while you compared: nothing was verified" in m for m in told), told
        shown_now = app.screen.shown
        assert shown_now.kids == c.pending_kids and shown_now.safety == safety_number(me, c.pending)
    assert len(attacks(relay, "key-swap")) == 2
