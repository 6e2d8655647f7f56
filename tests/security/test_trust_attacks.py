"""Attacks on the trust layer with inputs the membership and key tests did not cover, each against a
real relay whose answers to one client are rewritten (tests/security/lying.py), or an honest relay
and a thief holding a replaced key. Each ends with nothing sealed to someone who must not read it."""

from __future__ import annotations

import asyncio

import httpx2
import msgspec
import pytest

from client_tui.core import membership_ops
from client_tui.core.record import now_ms
from shared import envelope, frames, membership
from shared.content import Text
from shared.errors import E2EEError, MembershipFork, MembershipWithheld
from shared.keys import Identity
from tests.helpers.clients import messages_of
from tests.helpers.config import PASSWORD, TEST_BITS
from tests.helpers.lying import flip_signature, head_at, lie, listed, log_of, only_up_to, refuse
from tests.helpers.relays import db_count


async def warnings(client, conv: str) -> list[str]:
    return [r.info.warning for r in await client.load_history(conv) if r.state == "system" and r.info.warning]


async def team(make_client, creator: str = "bob"):
    """alice, bob, carol; ``creator`` makes "team" with the other two; alice verified epoch 0."""
    people = {n: await make_client(n) for n in ("alice", "bob", "carol")}
    conv = await people[creator].create_conversation("team", [n for n in people if n != creator])
    await people["alice"].refresh_conversations()
    await people["alice"].recipients_for(conv)
    return people, conv


# -- a removal the relay alters: it does not verify, and the removed member must still get nothing ----------
@pytest.mark.parametrize("head", ["new head", "old head"])
async def test_a_removal_altered_by_the_relay_stops_sealing_to_the_older_members(make_client, relay, head):
    people, conv = await team(make_client)
    alice, bob = people["alice"], people["bob"]
    epoch0 = alice.membership.head(conv)
    await bob.change_members(conv, remove=["carol"])
    altered = log_of(conv, lambda sts, _: [flip_signature(s) if membership.parse(s).op == "remove" else s for s in sts])
    lie(alice, altered, *([head_at(conv, epoch0)] if head == "old head" else []))
    await alice.refresh_conversations()
    if head == "old head":  # the listing names the old head: the log is fetched when something else asks
        await alice.membership.sync(conv)  # (here: alice's own change, or a message sealed to epoch 1)
    assert alice.members[conv] == ["alice", "bob", "carol"]  # the verified epoch: the removal is not acted on
    assert await warnings(alice, conv) == ["statement_signature_invalid"]
    with pytest.raises(MembershipWithheld):  # before: sealed to epoch 0, carol included
        await alice.recipients_for(conv)
    await alice.connect()
    with pytest.raises(MembershipWithheld):
        await alice.send_text(conv, "not for carol")
    assert db_count(relay) == 0


# -- a newer epoch a member sealed to: remembered across a restart --------------------------------------------
async def test_an_epoch_a_member_signed_a_message_to_stays_known_after_a_restart(make_client, relay):
    people, conv = await team(make_client)
    alice, bob = people["alice"], people["bob"]
    lie(alice, only_up_to(conv, 0), head_at(conv, alice.membership.head(conv)))  # the removal withheld from alice
    await bob.change_members(conv, remove=["carol"])
    await alice.connect()
    await bob.connect()
    await bob.send_text(conv, "after carol left")  # sealed to epoch 1: alice cannot verify it
    for _ in range(500):
        if [r.reason for r in await messages_of(alice, conv)] == ["epoch_mismatch"]:
            break
        await asyncio.sleep(0.02)
    with pytest.raises(MembershipWithheld):
        await alice.recipients_for(conv)
    await alice.close()
    again = await make_client("alice", register=False)  # restarted; the relay goes on withholding epoch 1
    await again.login(PASSWORD, "alice passphrase")
    lie(again, only_up_to(conv, 0), head_at(conv, again.membership.head(conv) or alice.membership.head(conv)))
    await again.refresh_conversations()
    with pytest.raises(MembershipWithheld):  # before: sealed to epoch 0, carol included
        await again.recipients_for(conv)
    await again.close()
    honest = await make_client("alice", register=False)  # once the relay shows epoch 1, alice writes again
    await honest.login(PASSWORD, "alice passphrase")
    await honest.refresh_conversations()
    audience = await honest.recipients_for(conv)
    assert (audience.epoch, audience.members) == (1, ("alice", "bob"))


async def test_an_epoch_claimed_by_an_envelope_no_member_signed_is_forgotten_at_a_restart(make_client, identities):
    people, conv = await team(make_client)
    alice = people["alice"]
    head = alice.membership.head(conv)
    as_bob = Identity("bob", identities["mallory"].wrap_private, identities["mallory"].sign_private)
    forged = envelope.seal(
        Text("no", ts=now_ms(), ctr=1), as_bob, conv, [alice.identity.public], epoch=7, head=head.hash
    )
    await alice._on_event(frames.Message(1, conv, "bob", msgspec.Raw(forged)))
    with pytest.raises(MembershipWithheld):  # this session: an epoch 7 may exist
        await alice.recipients_for(conv)
    await alice.close()
    again = await make_client("alice", register=False)
    await again.login(PASSWORD, "alice passphrase")
    await again.refresh_conversations()
    assert (await again.recipients_for(conv)).epoch == 0  # the relay's own forgery does not stop the chat for good


# -- a conversation listed as "made before signed membership" after its log was verified ----------------------
async def test_a_verified_conversation_listed_without_its_log_keeps_its_verified_members(make_client, relay):
    people, conv = await team(make_client, creator="alice")
    alice = people["alice"]
    await alice.change_members(conv, remove=["carol"])
    lie(alice, listed(conv, epoch=None, head=None, members=["alice", "bob", "carol", "mallory"], title="[b]x"))
    await alice.refresh_conversations()
    assert (alice.members[conv], alice.titles[conv]) == (["alice", "bob"], "team")  # before: the relay's list
    lines = [r for r in await alice.load_history(conv) if r.info.warning]
    assert [r.info.warning for r in lines] == ["membership_fork"]
    assert "verified here" in lines[0].text
    await alice.connect()
    with pytest.raises(MembershipFork):
        await alice.send_text(conv, "hello?")
    assert db_count(relay) == 0


# -- keys a member replaced: nothing is sealed to them -------------------------------------------------------
async def test_nothing_is_sealed_to_keys_a_contact_replaced(make_client):
    people, conv = await team(make_client)
    alice, bob = people["alice"], people["bob"]
    await bob.refresh_conversations()
    old = bob.identity.public
    gate = refuse(bob, "update")  # the relay refuses (or loses) bob's update: the log still binds his old keys
    new = await bob.rotate_keys(bits=TEST_BITS)
    assert alice.membership.head(conv).member("bob").wrap_kid == old.wrap_kid
    await alice.fetch_keys("bob")  # a rotation bob's pinned key signed: followed at once
    assert (alice.contacts["bob"].kids, alice.contacts["bob"].pending) == ((new.wrap_kid, new.sign_kid), None)
    with pytest.raises(E2EEError) as err:  # before: sealed to bob's old wrap key
        await alice.recipients_for(conv)
    assert (err.value.code, err.value.field) == ("member_key_replaced", "bob")
    gate[0] = False
    assert await membership_ops.update_keys(bob.membership, conv) == 1
    await alice.refresh_conversations()  # (what the relay's members_changed event makes a connected client do)
    audience = await alice.recipients_for(conv)
    assert [r.wrap_kid for r in audience.recipients if r.username == "bob"] == [new.wrap_kid]


async def test_a_member_seen_first_in_the_log_is_not_pinned_to_keys_they_replaced(make_client):
    people, conv = await team(make_client)
    bob, carol = people["bob"], people["carol"]
    await bob.refresh_conversations()
    gate = refuse(bob, "update")
    new = await bob.rotate_keys(bits=TEST_BITS)
    carol.contacts.pop("bob", None)  # carol never pinned bob (she was added by him)
    await carol.refresh_conversations()
    with pytest.raises(E2EEError) as err:  # before: bob's old keys pinned on first use and sealed to
        await carol.recipients_for(conv)
    assert err.value.code == "member_key_replaced"
    assert "bob" not in carol.contacts
    gate[0] = False
    await membership_ops.update_keys(bob.membership, conv)
    await carol.refresh_conversations()
    await carol.recipients_for(conv)
    assert carol.contacts["bob"].kids == (new.wrap_kid, new.sign_kid)


async def test_nothing_i_seal_goes_to_my_own_replaced_keys(make_client):
    people, conv = await team(make_client)
    bob = people["bob"]
    await bob.refresh_conversations()
    old = bob.identity.public
    gate = refuse(bob, "update")
    new = await bob.rotate_keys(bits=TEST_BITS)
    with pytest.raises(E2EEError) as err:  # before: sealed to my own old wrap key
        await bob.recipients_for(conv)
    assert err.value.code == "member_key_replaced"
    gate[0] = False
    audience = await bob.recipients_for(conv)  # the update is posted first
    assert audience.epoch == 1 and old.wrap_kid not in [r.wrap_kid for r in audience.recipients]
    assert new.wrap_kid in [r.wrap_kid for r in audience.recipients]


async def test_a_replaced_signing_key_signs_no_membership_change_at_the_relay(make_client, relay):
    """A thief with bob's old keys and his relay session, before bob moved his new keys into the log."""
    people, conv = await team(make_client)
    bob = people["bob"]
    await bob.refresh_conversations()
    thief = bob.identity
    gate = refuse(bob, "update")
    second = await bob.rotate_keys(bits=TEST_BITS)  # replaced too, by the third keys below
    await bob.rotate_keys(bits=TEST_BITS)
    mallory = await make_client("mallory")
    head = bob.membership.head(conv)
    assert head.member("bob").sign_kid == thief.sign_kid
    add = membership.change(head, thief, "add", add=[membership.member_of(mallory.identity.public)])
    back = membership.change(head, thief, "update", keys=membership.member_of(second.public))
    async with httpx2.AsyncClient(base_url=relay.url, timeout=30) as http:
        auth = {"Authorization": f"Bearer {bob.token}"}
        tries = {
            name: await http.post(f"/v1/conversations/{conv}/log", json={"statement": st.signed}, headers=auth)
            for name, st in (("add", add), ("update to replaced keys", back))
        }
    assert {n: (r.status_code, r.json()["error"]["code"]) for n, r in tries.items()} == {
        "add": (400, "actor_key_mismatch"),
        "update to replaced keys": (400, "invalid_request"),
    }
    gate[0] = False  # bob's own update, signed by the same old key, moves his current keys in
    assert await membership_ops.update_keys(bob.membership, conv) == 1
    assert bob.membership.head(conv).ep == head.ep + 1


# -- a lost trust store: members pinned again from a log are marked so ---------------------------------------
async def test_a_member_pinned_from_a_log_after_the_trust_store_was_lost_is_marked_repinned(make_client):
    people, conv = await team(make_client, creator="bob")
    alice = people["alice"]
    await alice.close()
    (alice.profile / "trust.sealed").unlink()
    again = await make_client("alice", register=False)
    await again.login(PASSWORD, "alice passphrase")
    await again.refresh_conversations()
    await again.recipients_for(conv)  # carol and bob pinned from the log
    notes = {n: again.contacts[n].note for n in ("bob", "carol")}
    assert all("pinned again" in note for note in notes.values()), notes


# -- a fork signed by a member, shown after the local copy of the log was lost --------------------------------
@pytest.mark.parametrize("length", [1, 2])
async def test_a_forked_log_that_contradicts_the_sealed_head_is_never_sealed_to(make_client, length):
    """bob (not an admin) signs another creation of the same conversation that adds mallory (and,
    with ``length`` 2, one more change, so the fork is longer than what alice verified); the relay
    shows it to alice after her history cache (the log kept here) was lost."""
    alice, bob, mallory = [await make_client(n) for n in ("alice", "bob", "mallory")]
    conv = await membership_ops.create(alice.membership, "team", ["bob"], admins=["alice"])
    real = alice.membership.head(conv)
    fork = [
        membership.create(
            bob.identity, conv, "team", [membership.member_of(c.identity.public) for c in (alice, bob, mallory)]
        )
    ]
    if length == 2:
        fork.append(membership.change(fork[0], bob.identity, "title", title="ours"))
    await alice.close()
    alice.history_path.unlink()
    again = await make_client("alice", register=False)
    await again.login(PASSWORD, "alice passphrase")
    lie(again, log_of(conv, lambda sts, _: [st.signed for st in fork]), head_at(conv, fork[-1]))
    await again.refresh_conversations()
    assert await warnings(again, conv) == ["membership_fork"]
    with pytest.raises(MembershipFork):  # before: sealed to bob's fork, mallory included
        await again.recipients_for(conv)
    assert again.membership._heads[conv] == {"ep": real.ep, "hash": real.hash}  # the fork is not remembered
    data = envelope.seal(
        Text("from the fork", ts=now_ms(), ctr=1),
        mallory.identity,
        conv,
        [c.identity.public for c in (alice, bob, mallory)],
        epoch=fork[-1].ep,
        head=fork[-1].hash,
    )
    await again._on_event(frames.Message(1, conv, "mallory", msgspec.Raw(data)))
    assert [(r.state, r.reason) for r in await messages_of(again, conv)] == [("unreadable", "epoch_mismatch")]


# -- a conversation the relay stops listing: "you are no longer a member" is the log's to say -----------------
async def test_a_conversation_the_relay_stops_listing_is_not_shown_as_left(make_client):
    people, conv = await team(make_client)
    alice = people["alice"]

    def hide(method, path, body, answer):
        if method == "GET" and path == "/v1/conversations":
            answer["conversations"] = [c for c in answer["conversations"] if c["id"] != conv]
        return answer

    lie(alice, hide)
    await alice.refresh_conversations()
    assert conv not in alice.inactive  # before: struck through, "you are no longer a member"
    assert await warnings(alice, conv) == ["membership_withheld"]
    await alice.close()
    again = await make_client("alice", register=False)  # and not after a restart either (the history cache)
    await again.login(PASSWORD, "alice passphrase")
    lie(again, hide)
    await again.refresh_conversations()
    assert conv not in again.inactive and again.members[conv] == ["alice", "bob", "carol"]
