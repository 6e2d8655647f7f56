"""The key schedule's pure parts (issue 18, FS-SPEC 'Client'): the keystore's times and erased public
halves (and the upgrade of older files), the schedule's decisions under an injected clock, the words the
Keys dialog and ``keys show`` print, the public-key helper, and a message sealed to an erased key shown
as such. The real-relay half is tests/keys/test_forward_secrecy_live.py."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest
from rich.console import Console

from client_tui.app import ChatApp
from client_tui.cliargs import build_parser
from client_tui.core import Contact, WrapKeyErased, keystore
from client_tui.core.epochs import DAY_MS, HOUR_MS, plan, schedule_words
from client_tui.core.keybundle import KeyBundle, from_secret, to_secret
from client_tui.inspector import inspect_record, unreadable_text
from client_tui.screens import ContactScreen
from shared.errors import ErrorCode
from shared.keys import Identity, fingerprint
from tests.helpers.cli import run
from tests.helpers.clients import wait_until
from tests.helpers.config import FAST_KDF, TEST_BITS
from tests.helpers.keyschedule import T0, rotated
from tests.helpers.tui import chat_shown, rendered_text, screen_ready


@pytest.fixture(scope="module")
def spare() -> Identity:
    """A second key pair of bob's (his next one)."""
    return Identity.generate("bob", TEST_BITS)


def _secret(path, passphrase: str) -> dict:
    """The decrypted secret JSON of the keystore at ``path`` (what the passphrase opens)."""
    return keystore._open(path, passphrase)[1]


def test_times_and_erased_public_halves_survive_a_save(tmp_path, identities, spare):
    path = tmp_path / "keystore.json"
    erased = rotated(identities, spare).erase(identities["bob"].wrap_kid, T0 + 4 * DAY_MS)
    keystore.save_bundle(path, erased, "pp", FAST_KDF)
    back = keystore.load_bundle(path, "pp")
    assert back.retired == () and back.upgrade is False
    assert dict(back.created_ms) == {spare.wrap_kid: T0 + DAY_MS}
    (e,) = back.erased
    assert (e.public.wrap_kid, e.public.sign_kid) == (identities["bob"].wrap_kid, identities["bob"].sign_kid)
    assert (e.retired_ms, e.erased_ms) == (T0 + DAY_MS, T0 + 4 * DAY_MS)
    secret = _secret(path, "pp")
    assert secret["created_ms"] == T0 + DAY_MS
    assert set(secret["erased"][0]) == {"wrap_key", "sign_key", "retired_ms", "erased_ms"}  # public halves only
    assert [k for k in back.public_keys()] == [spare.public, identities["bob"].public]


def test_a_retired_pair_keeps_its_times(tmp_path, identities, spare):
    path = tmp_path / "keystore.json"
    keystore.save_bundle(path, rotated(identities, spare), "pp", FAST_KDF)
    back = keystore.load_bundle(path, "pp")
    old = identities["bob"].wrap_kid
    assert [r.wrap_kid for r in back.retired] == [old]
    assert (back.created_ms[old], back.retired_ms[old]) == (T0, T0 + DAY_MS)
    assert _secret(path, "pp")["retired"][0]["retired_ms"] == T0 + DAY_MS


def test_an_older_keystore_dates_its_keys_from_the_open_and_asks_to_be_saved_again(tmp_path, identities, spare):
    old = identities["bob"]
    secret = to_secret(KeyBundle(spare, b"L" * 32, (old,), b"T" * 32))  # no times at all
    secret.pop("erased")  # and no member of the key schedule: a file written before it
    assert "created_ms" not in secret and "retired_ms" not in secret["retired"][0]
    bundle = from_secret("bob", secret)
    assert bundle.upgrade is False and dict(bundle.created_ms) == {} and bundle.erased == ()
    done = bundle.complete(T0)
    assert done.upgrade is True
    assert dict(done.created_ms) == {spare.wrap_kid: T0, old.wrap_kid: T0}
    assert dict(done.retired_ms) == {old.wrap_kid: T0}  # its grace starts at this open, never earlier
    assert done.complete(T0 + 5).upgrade is True and done.complete(T0 + 5).created_ms == done.created_ms
    path = tmp_path / "keystore.json"
    keystore.save_bundle(path, dataclasses.replace(done, upgrade=False), "pp", FAST_KDF)
    assert keystore.load_bundle(path, "pp").complete(T0 + 9).upgrade is False  # now complete: not again


def test_the_private_half_of_an_erased_key_is_never_saved(tmp_path, identities, spare):
    path = tmp_path / "keystore.json"
    bundle = rotated(identities, spare)
    keystore.save_bundle(path, bundle, "pp", FAST_KDF)
    before = path.read_bytes()
    erased = bundle.erase(identities["bob"].wrap_kid, T0 + 3 * DAY_MS)
    both = dataclasses.replace(erased, retired=bundle.retired)  # erased, yet its private half still there
    with pytest.raises(keystore.KeystoreError, match="erased"):
        keystore.save_bundle(path, both, "pp", FAST_KDF)
    assert path.read_bytes() == before  # nothing written


def test_a_private_half_listed_as_erased_is_dropped_on_open(identities, spare):
    bundle = rotated(identities, spare)
    erased = bundle.erase(identities["bob"].wrap_kid, T0 + 3 * DAY_MS)
    secret = to_secret(erased)
    secret["retired"] = to_secret(bundle)["retired"]  # a process that did not know of the erase wrote it back
    back = from_secret("bob", secret)
    assert back.retired == () and back.upgrade is True and len(back.erased) == 1


def test_only_a_retired_pair_can_be_erased(identities, spare):
    bundle = rotated(identities, spare)
    with pytest.raises(keystore.KeystoreError):
        bundle.erase(spare.wrap_kid, T0)
    secret = to_secret(bundle.erase(identities["bob"].wrap_kid, T0))
    secret["erased"][0]["wrap_private"] = secret["wrap_private"]  # a private key where only public halves go
    with pytest.raises(keystore.KeystoreError, match="damaged"):
        from_secret("bob", secret)


def test_a_new_keystore_records_when_its_keys_were_made(tmp_path, identities):
    path = tmp_path / "keystore.json"
    before = keystore.now_ms()
    keystore.save(path, identities["alice"], "pp", FAST_KDF)
    made = keystore.load_bundle(path, "pp").created_ms[identities["alice"].wrap_kid]
    assert before <= made <= keystore.now_ms()


# -- the schedule's decisions (an injected clock) -----------------------------------------------
def test_a_rotation_is_due_once_the_lifetime_passed_and_not_before(identities, spare):
    bundle = rotated(identities, spare)  # current made at T0 + 1 day
    week = 7 * DAY_MS
    assert plan(bundle, T0 + DAY_MS + week - 1, week, 48 * HOUR_MS).rotate is False
    due = plan(bundle, T0 + DAY_MS + week, week, 48 * HOUR_MS)
    assert due.rotate is True and due.next_rotation_ms == T0 + DAY_MS + week
    never = plan(bundle, T0 + 1000 * week, 0, 48 * HOUR_MS)
    assert never.rotate is False and never.next_rotation_ms is None


def test_a_retired_pair_is_due_for_the_relays_count_only_after_the_grace(identities, spare):
    bundle = rotated(identities, spare)  # retired at T0 + 1 day
    grace = 48 * HOUR_MS
    assert plan(bundle, T0 + DAY_MS + grace - 1, 7 * DAY_MS, grace).due == ()
    assert plan(bundle, T0 + DAY_MS + grace, 7 * DAY_MS, grace).due == (identities["bob"].wrap_kid,)
    undated = dataclasses.replace(bundle, retired_ms={})  # no time: counted as retired now, so not due
    assert plan(undated, T0 + 100 * DAY_MS, 7 * DAY_MS, grace).due == ()


def test_due_pairs_come_oldest_first(identities, spare):
    older, old = identities["carol"], identities["bob"]
    older = Identity("bob", older.wrap_private, older.sign_private)
    bundle = dataclasses.replace(
        rotated(identities, spare), retired=(old, older), retired_ms={old.wrap_kid: T0 + DAY_MS, older.wrap_kid: T0}
    )
    assert plan(bundle, T0 + 10 * DAY_MS, 7 * DAY_MS, HOUR_MS).due == (older.wrap_kid, old.wrap_kid)


def test_the_schedule_in_words(identities, spare):
    bundle = rotated(identities, spare)
    words = schedule_words(bundle, 7, T0 + 2 * DAY_MS)
    next_day = time.strftime("%Y-%m-%d", time.localtime((T0 + 8 * DAY_MS) / 1000))
    assert words == [
        f"keys replaced every 7 days (next: {next_day})",
        "1 earlier key kept until their messages are delivered",
        "0 deleted (forward secrecy)",
    ]
    gone = bundle.erase(identities["bob"].wrap_kid, T0 + 4 * DAY_MS)
    assert schedule_words(gone, 0.5, T0 + 9 * DAY_MS) == [
        "keys replaced every 0.5 days (next: at the next check)",
        "0 earlier keys kept until their messages are delivered",
        "1 deleted (forward secrecy)",
    ]
    assert schedule_words(gone, 0, T0)[0] == "keys replaced only when you rotate them (no schedule: key lifetime 0)"


# -- what is shown ------------------------------------------------------------------------------------
def test_a_message_sealed_to_an_erased_key_says_which_and_when(identities):
    kid = identities["bob"].wrap_kid
    exc = WrapKeyErased(kid, T0 + 3 * HOUR_MS)
    assert exc.code == ErrorCode.KEY_ERASED == "key_erased"
    assert exc.message == (
        f"sealed to your key {fingerprint(kid)[:4]}…, deleted on 2025-12-02 for forward secrecy: "
        "it can no longer be opened"
    )
    assert unreadable_text("key_erased", "alice", exc.message) == exc.message
    assert "could not verify" not in unreadable_text("key_erased", "alice")


async def test_an_envelope_to_an_erased_key_is_shown_as_erased_not_as_could_not_verify(offline_bob, spare):
    bob, relay = offline_bob
    old = bob.identity
    erased = dataclasses.replace(
        bob._bundle, identity=spare, retired=(old,), retired_ms={old.wrap_kid: T0}, created_ms={spare.wrap_kid: T0}
    ).erase(old.wrap_kid, T0 + 3 * DAY_MS)
    bob._bundle, bob.identity, bob.retired = erased, spare, ()
    seq = await relay.deliver(relay.seal("alice", "sealed to bob's first key"), sender="alice")
    (rec,) = [r for r in await bob.load_history("conv-1") if r.seq == seq]
    assert (rec.state, rec.reason, rec.text) == ("unreadable", "key_erased", None)
    assert rec.detail.startswith(f"sealed to your key {fingerprint(old.wrap_kid)[:4]}…, deleted on ")
    assert bob.mark(rec) == "unverified"  # not ✖ "could not verify"
    shown = inspect_record(rec, kid_names={}, me="bob")
    console = Console(width=120, record=True)
    console.print(shown)
    text = console.export_text()
    assert "cannot be opened: key_erased" in text and "could not verify" not in text


def test_my_public_keys_keep_erased_keys_known(offline_bob, spare):
    bob, _ = offline_bob
    old = bob.identity
    assert bob.my_public_keys() == (old.public,) and bob.my_public_keys(old_only=True) == ()
    erased = dataclasses.replace(
        bob._bundle, identity=spare, retired=(old,), retired_ms={old.wrap_kid: T0}, created_ms={spare.wrap_kid: T0}
    ).erase(old.wrap_kid, T0 + 3 * DAY_MS)
    bob._bundle, bob.identity, bob.retired = erased, spare, ()
    assert bob.my_public_keys() == (spare.public, old.public)
    assert bob.my_public_keys(old_only=True) == (old.public,)
    bob.contacts["bob"] = Contact(spare.public, verified=True)  # my own entry knows no earlier key
    assert bob.pinned_sign_key("bob", old.sign_kid, 5) == (old.public.sign_key, "previous_key")  # my old signatures
    assert bob.membership._accepted("bob") == [spare.public, old.public]


# -- the command line ---------------------------------------------------------------------------------
def test_key_lifetime_on_the_command_line(monkeypatch, capsys):
    p = build_parser()
    assert p.parse_args(["send", "--to", "bob", "--text", "x", "--key-lifetime", "0"]).key_lifetime == 0.0
    assert p.parse_args(["--key-lifetime", "2.5"]).key_lifetime == 2.5
    with pytest.raises(SystemExit):
        p.parse_args(["tail", "--key-lifetime", "-1"])
    assert "is not a number of days from 0 to 3650" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        p.parse_args(["tail", "--key-lifetime", "nan"])
    help_text = p.subcommands["keys"].format_help()
    assert "E2EE_KEY_LIFETIME_DAYS; default 7;" in " ".join(help_text.split())
    assert json.dumps(p.parse_args([]).key_lifetime) == "null"  # filled from the environment by cli._prepare


def test_key_lifetime_from_the_environment(monkeypatch, capsys):
    from client_tui.cli import _prepare

    monkeypatch.setenv("E2EE_KEY_LIFETIME_DAYS", "3")
    assert _prepare(build_parser(), []).key_lifetime == 3.0
    assert _prepare(build_parser(), ["--key-lifetime", "1"]).key_lifetime == 1.0  # the option wins
    monkeypatch.setenv("E2EE_KEY_LIFETIME_DAYS", "a week")
    with pytest.raises(SystemExit) as exited:
        _prepare(build_parser(), [])
    assert (
        exited.value.code == 2 and "E2EE_KEY_LIFETIME_DAYS: 'a week' is not a number of days" in capsys.readouterr().err
    )
    monkeypatch.delenv("E2EE_KEY_LIFETIME_DAYS")
    assert _prepare(build_parser(), []).key_lifetime == 7.0


async def test_the_keys_dialog_describes_my_schedule(offline_bob, spare):
    bob, _ = offline_bob
    old = bob.identity
    made = keystore.now_ms()
    bob._bundle = dataclasses.replace(
        bob._bundle,
        identity=spare,
        retired=(old,),
        created_ms={spare.wrap_kid: made, old.wrap_kid: made - DAY_MS},
        retired_ms={old.wrap_kid: made},
    )
    bob.identity, bob.retired = spare, (old,)
    bob.contacts["bob"] = Contact(spare.public, verified=True)
    app = ChatApp(bob, "conv-1")
    async with app.run_test(size=(80, 24)) as pilot:  # the dialog at 60x20 .. 120x40: test_tui_sizes
        await wait_until(lambda: chat_shown(app))
        app.push_screen(ContactScreen(bob, "bob", ["alice", "bob", "carol"]))
        await wait_until(lambda: screen_ready(app, ContactScreen))
        await pilot.pause()
        body = rendered_text(app.screen.body)
        next_day = time.strftime("%Y-%m-%d", time.localtime((made + 7 * DAY_MS) / 1000))
        assert f"keys replaced every 7 days (next: {next_day})" in body
        assert "1 earlier key kept until their messages are delivered" in body
        assert "0 deleted (forward secrecy)" in body
        app.screen.user = "alice"
        app.screen.refresh_body()
        assert "forward secrecy" not in rendered_text(app.screen.body)  # a contact's keys: not my schedule


def test_keys_show_prints_my_schedule(profiles, monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "show")
    assert code == 0
    lines = [line.strip() for line in out.splitlines()]
    assert lines[3].startswith("keys replaced every 7 days (next: 20")
    assert lines[4:6] == ["0 earlier keys kept until their messages are delivered", "0 deleted (forward secrecy)"]
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "show", "--key-lifetime", "0")
    assert "keys replaced only when you rotate them (no schedule: key lifetime 0)" in out
    code, out, _ = run(monkeypatch, capsys, "alice", "keys", "show", "bob")
    assert "forward secrecy" not in out


async def test_the_hourly_timer_ticks_and_arms_itself_again_until_the_client_closes(offline_bob):
    bob, _ = offline_bob
    schedule = bob.epochs
    schedule.start()
    armed = schedule._handle
    assert armed is not None and 3599 < armed.when() - asyncio.get_running_loop().time() <= 3600
    schedule._fire()  # what the loop does an hour later: one tick (nothing due), then the timer again
    await wait_until(lambda: schedule._handle is not None and schedule._handle is not armed)
    await bob.close()
    assert schedule._handle is None
