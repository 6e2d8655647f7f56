"""Attacks on the key schedule's local half (issue 18): a keystore whose
secret JSON was damaged or edited by hand (times far in the future, erased entries repeated or not
matching the pair they name), key lifetimes at their edges, an envelope sealed to an erased key whose
erase time no calendar holds. Each must end in a typed KeystoreError or a safe repair, never a crash,
never a lost current, pending or retired key."""

from __future__ import annotations

import dataclasses
import json

import pytest

from client_tui.core import ChatClient, keystore
from client_tui.core.epochs import DAY_MS, HOUR_MS, MAX_LIFETIME_DAYS, KeySchedule, plan, schedule_words
from client_tui.core.keybundle import KeyBundle, from_secret, to_secret
from shared.keys import Identity
from tests.helpers.cli import run
from tests.helpers.config import FAST_KDF, TEST_BITS, passphrase
from tests.helpers.keyschedule import T0, rotated

WEEK, GRACE = 7 * DAY_MS, 48 * HOUR_MS


@pytest.fixture(scope="module")
def spare() -> Identity:
    return Identity.generate("bob", TEST_BITS)


def _rotated(identities, spare: Identity, made: int = T0 + DAY_MS, retired: int = T0 + DAY_MS) -> KeyBundle:
    """bob's bundle after one rotation (test_key_schedule's), his current pair made at ``made``
    and his first one retired at ``retired``."""
    bundle = rotated(identities, spare)
    old = identities["bob"].wrap_kid
    return dataclasses.replace(
        bundle, created_ms={**bundle.created_ms, spare.wrap_kid: made}, retired_ms={old: retired}
    )


# -- the wall clock going backwards, or jumping ahead and back --------------------------------------
def test_a_current_pair_dated_far_ahead_is_rotated_once_not_kept_for_ever(identities, spare):
    """A key made while the clock was 100 years ahead (or a time edited to 2**64) must not stop
    the schedule until that date: one rotation now, and none again right after it."""
    now = T0 + 10 * DAY_MS
    for ahead in (now + 100 * 365 * DAY_MS, 2**64, 10**30):
        p = plan(_rotated(identities, spare, made=ahead), now, WEEK, GRACE)
        assert p.rotate is True and p.next_rotation_ms == now
    assert plan(_rotated(identities, spare, made=now + WEEK), now, WEEK, GRACE).rotate is False  # within one lifetime
    assert plan(_rotated(identities, spare, made=now), now + 1, WEEK, GRACE).rotate is False  # the new pair: no storm


def test_a_clock_set_back_rotates_once_then_never_twice_in_a_row(identities, spare):
    bundle = _rotated(identities, spare, made=T0)
    back = T0 - 365 * DAY_MS  # the machine's clock a year behind
    assert plan(bundle, back, WEEK, GRACE).rotate is True
    renewed = dataclasses.replace(bundle, created_ms={**bundle.created_ms, spare.wrap_kid: back})
    assert [plan(renewed, back + k * HOUR_MS, WEEK, GRACE).rotate for k in range(1, 25)] == [False] * 24


def test_a_retired_pair_dated_far_ahead_is_asked_about_not_kept_for_ever(identities, spare):
    now = T0 + 10 * DAY_MS
    old = identities["bob"].wrap_kid
    assert plan(_rotated(identities, spare, retired=now + 100 * 365 * DAY_MS), now, WEEK, GRACE).due == (old,)
    assert plan(_rotated(identities, spare, retired=now + GRACE), now, WEEK, GRACE).due == ()  # in its grace


def test_the_words_for_a_date_no_calendar_holds(identities, spare):
    words = schedule_words(_rotated(identities, spare, made=10**30), 7, T0)
    assert words[0] == "keys replaced every 7 days (next: at the next check)"
    assert schedule_words(_rotated(identities, spare, made=T0), MAX_LIFETIME_DAYS, T0)[0].startswith(
        "keys replaced every 3650 days (next: 2035-"
    )


# -- key lifetime and grace at their edges ----------------------------------------------------------
@pytest.mark.parametrize(
    "lifetime, grace",
    [(-1, 48), (float("nan"), 48), (1e309, 48), (MAX_LIFETIME_DAYS + 1, 48), (7, -1), (7, float("nan")), (7, 1e309)],
)
def test_a_lifetime_or_grace_out_of_range_is_refused(tmp_path, lifetime, grace):
    with pytest.raises(ValueError, match="lifetime must be 0 to 3650 days"):
        ChatClient("http://127.0.0.1:9", "bob", tmp_path, key_lifetime_days=lifetime, retired_grace_hours=grace)


def test_a_tiny_lifetime_still_rotates(tmp_path, identities, spare):
    c = ChatClient("http://127.0.0.1:9", "bob", tmp_path, key_lifetime_days=1e-300)
    assert isinstance(c.epochs, KeySchedule) and c.epochs.lifetime_ms == 1  # not 0, which means "never"
    assert plan(_rotated(identities, spare, made=T0), T0 + 1, c.epochs.lifetime_ms, GRACE).rotate is True


# -- erased entries damaged or edited by hand -------------------------------------------------------
def _erased_secret(identities, spare) -> dict:
    return to_secret(_rotated(identities, spare).erase(identities["bob"].wrap_kid, T0 + 3 * DAY_MS))


def test_an_erased_entry_listed_twice_is_kept_once_and_saved_again(identities, spare):
    secret = _erased_secret(identities, spare)
    secret["erased"] *= 3
    bundle = from_secret("bob", secret)
    assert [e.public.wrap_kid for e in bundle.erased] == [identities["bob"].wrap_kid] and bundle.upgrade is True
    assert schedule_words(bundle, 7, T0)[2] == "1 deleted (forward secrecy)"


def test_an_erased_entry_naming_the_pending_pair_is_refused_not_dropped(identities, spare):
    nxt = Identity("bob", identities["carol"].wrap_private, identities["carol"].sign_private)
    bundle = dataclasses.replace(_rotated(identities, spare), pending=nxt)
    secret = to_secret(bundle)
    pub = nxt.public.to_json()
    secret["erased"] = [{"wrap_key": pub["wrap_key"], "sign_key": pub["sign_key"], "retired_ms": T0, "erased_ms": T0}]
    with pytest.raises(keystore.KeystoreError, match="its pending key is listed as erased"):
        from_secret("bob", secret)  # a pending pair may already be published: dropping it loses its messages


def test_an_erased_entry_that_half_matches_a_retired_pair_drops_nothing(identities, spare):
    secret = to_secret(_rotated(identities, spare))
    old, other = identities["bob"].public.to_json(), identities["carol"].public.to_json()
    secret["erased"] = [{"wrap_key": old["wrap_key"], "sign_key": other["sign_key"], "retired_ms": T0, "erased_ms": T0}]
    with pytest.raises(keystore.KeystoreError, match="public half differs from the key pair it names"):
        from_secret("bob", secret)  # before: bob's retired private pair was dropped and the file saved without it


@pytest.mark.parametrize("value", ["1", 1.5, -1, "NaN", True, [], {}])
def test_a_time_of_the_wrong_type_is_a_keystore_error(identities, spare, value):
    for where in ("created_ms", "retired"):
        secret = to_secret(_rotated(identities, spare))
        if where == "retired":
            secret["retired"][0]["retired_ms"] = value
        else:
            secret["created_ms"] = value
        with pytest.raises(keystore.KeystoreError, match="damaged"):
            from_secret("bob", json.loads(json.dumps(secret)))


# -- an envelope sealed to an erased key whose erase time is out of any calendar -----------------------
async def test_an_erase_time_no_calendar_holds_still_shows_key_erased(offline_bob, spare):
    bob, relay = offline_bob
    old = bob.identity
    erased = dataclasses.replace(
        bob._bundle, identity=spare, retired=(old,), retired_ms={old.wrap_kid: T0}, created_ms={spare.wrap_kid: T0}
    ).erase(old.wrap_kid, 10**30)
    bob._bundle, bob.identity, bob.retired = erased, spare, ()
    seq = await relay.deliver(relay.seal("alice", "sealed to bob's first key"), sender="alice")
    (rec,) = [r for r in await bob.load_history("conv-1") if r.seq == seq]
    assert (rec.state, rec.reason) == ("unreadable", "key_erased")
    assert "deleted on an unknown day for forward secrecy" in rec.detail


# -- a hand-edited keystore through the command line ----------------------------------------------------
def test_keys_show_with_a_current_key_dated_out_of_any_calendar(relay, profiles, monkeypatch, capsys):
    path = ChatClient(relay.url, "alice", profiles).keystore_path
    bundle = keystore.load_bundle(path, passphrase("alice"))
    first = bundle.identity.wrap_kid
    keystore.save_bundle(path, dataclasses.replace(bundle, created_ms={first: 10**30}), passphrase("alice"), FAST_KDF)
    code, out, err = run(monkeypatch, capsys, "alice", "keys", "show")  # only looks: no rotation
    assert code == 0, err
    assert "keys replaced every 7 days (next: at the next check)" in out
    assert keystore.load_bundle(path, passphrase("alice")).identity.wrap_kid == first
    assert run(monkeypatch, capsys, "alice", "send", "--to", "bob", "--text", "hi")[0] == 0  # runs the schedule
    assert keystore.load_bundle(path, passphrase("alice")).identity.wrap_kid != first  # rotated at the login, once
    code, out, err = run(monkeypatch, capsys, "alice", "keys", "show")
    assert code == 0, err
    assert "keys replaced every 7 days (next: 20" in out and "1 earlier key kept" in out
