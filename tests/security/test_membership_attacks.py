"""The membership attacks of ``e2ee-demo --attacks`` (bench/tools/attacks_membership.py), each against a
real relay process (hostile modes of bench/tools/hostile_membership.py, or an honest relay for the
password holder): the attacker reads 0 messages, nothing is sealed to it, its client store and
captured frames hold none of the canary texts, and every member is told in plain words."""

from __future__ import annotations

import pytest

from bench.tools import attacks, demo
from bench.tools.attacks_membership import ATTACKS

HONEST = ("alice", "bob", "carol")


async def run(name: str, tmp_path) -> attacks.Outcome:
    (outcome,) = await attacks.run([name], tmp_path)
    return outcome


def facts(outcome: attacks.Outcome, user: str) -> dict:
    return outcome.details["clients"][user]


async def test_a_relay_that_inserts_a_member_is_detected_and_the_ghost_reads_nothing(tmp_path):
    o = await run("member-insert", tmp_path)
    assert (o.read, o.canary_hits, o.ok) == (0, 0, True)
    for user in HONEST:  # each told, in words, that a change was ignored; nobody added
        assert facts(o, user)["warnings"] == ["statement_signature_invalid"]
        assert facts(o, user)["members"] == list(HONEST)
        assert "ignored a change whose signature does not verify" in o.shown[user]
    # an epoch 1 exists that does not verify (forged, or a real removal altered): nothing is sealed past it
    assert o.details["sent"] == {"alice": "membership_withheld", "bob": "membership_withheld"}
    assert o.details["attacker_unreadable"] == [] and [len(facts(o, u)["read"]) for u in HONEST] == [0, 0, 0]


async def test_a_relay_that_drops_a_removal_is_detected_and_nothing_is_sealed_to_the_removed(tmp_path):
    o = await run("drop-removal", tmp_path)
    assert (o.read, o.canary_hits, o.ok) == (0, 0, True)
    assert o.attacker == "carol"
    alice, bob = facts(o, "alice"), facts(o, "bob")
    assert alice["members"] == ["alice", "bob"] and alice["warnings"] == ["membership_fork"]  # an older log served
    # bob never saw the removal; alice's message (sealed to the new epoch) told him a change is withheld, and
    # his client then refused to seal to the stale member list (which still holds carol)
    assert bob["members"] == ["alice", "bob", "carol"]
    assert bob["warnings"] == ["epoch_mismatch"] and bob["unreadable"] == ["epoch_mismatch"]
    assert o.details["sent"] == {"alice": "stored", "bob": "membership_withheld"}
    assert o.details["attacker_unreadable"] == ["not_a_recipient"]


async def test_a_relay_that_forks_the_log_for_one_member_is_detected_by_that_member(tmp_path):
    o = await run("fork", tmp_path)
    assert (o.read, o.canary_hits, o.ok) == (0, 0, True)
    assert facts(o, "bob")["warnings"] == ["membership_fork"]
    assert facts(o, "alice")["warnings"] == facts(o, "carol")["warnings"] == []
    assert all(facts(o, u)["members"] == list(HONEST) for u in HONEST)  # the variant listing mallory: not adopted
    assert o.details["sent"] == {"alice": "stored", "bob": "stored"}


async def test_a_statement_replayed_from_another_conversation_is_refused(tmp_path):
    o = await run("replay-statement", tmp_path)
    assert (o.read, o.canary_hits, o.ok) == (0, 0, True)
    for user in HONEST:
        assert facts(o, user)["warnings"] == ["conversation_mismatch"]
        assert facts(o, user)["members"] == list(HONEST)
    # the relay names an epoch 1 whose statement does not verify here: nothing is sealed past epoch 0
    assert o.details["sent"] == {"alice": "membership_withheld", "bob": "membership_withheld"}
    assert o.details["attacker_unreadable"] == []


async def test_a_members_relay_password_alone_cannot_add_anyone(tmp_path):
    o = await run("password-only", tmp_path)
    assert (o.read, o.canary_hits, o.ok) == (0, 0, True)
    assert o.details["tries"] == {
        "old members route": (404, "no such route"),
        "statement signed by the thief's own key": (400, "actor_key_mismatch"),
        "statement claiming bob's key": (400, "statement_signature_invalid"),
        "replace bob's keys": (400, "signature_invalid"),
    }
    assert o.details["members"] == list(HONEST)
    assert o.details["envelopes"] >= 2  # it listened on bob's account: ciphertext, and no canary in it


def test_every_membership_attack_is_in_the_registry_the_demo_runs():
    assert set(ATTACKS) <= set(attacks.registry())
    assert list(attacks.registry())[: len(ATTACKS)] == list(ATTACKS)


@pytest.mark.slow
def test_e2ee_demo_attacks_prints_the_table_and_exits_0(tmp_path, capsys):
    """The command itself, on one attack (each attack has its own test above)."""
    code = demo.main(["--attacks", "--only", "replay-statement", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "what the relay did" in out and "attacker read" in out and "replay-statement" in out
    assert "1 of 1 attacks held; attackers read 0 messages" in " ".join(out.split())


def test_the_table_fails_an_attack_where_the_attacker_read_something():
    bad = attacks.Outcome("x", "did", {"alice": "saw"}, "mallory", read=1)
    assert not bad.ok
    assert attacks.Outcome("y", "did", {}, canary_hits=1).ok is False
    assert attacks.Outcome("z", "did", {}).ok
