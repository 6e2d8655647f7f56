"""A message sealed to an earlier epoch of the membership log, received after a change that removed
someone from it: its sender was removed (it may have been written after that; a relay can hand it
out whenever it likes), or a removed member was among its recipients. It opens - it was sealed
before the removal as far as anyone can prove - but is never shown with a plain ✔."""

from __future__ import annotations

import json

from client_tui import commands
from client_tui.core import MessageReceived, RecordChanged
from client_tui.core.record import now_ms
from shared import envelope, membership
from shared.content import Text
from tests.helpers.clients import drain


def remove(bob, relay, identities, who: str) -> membership.Statement:
    """alice removes ``who`` (epoch 1); bob verified it. Returns the statement of epoch 0."""
    epoch0 = relay.log[-1]
    st = membership.change(epoch0, identities["alice"], "remove", remove=[who])
    relay.log.append(st)
    bob.membership.chains[relay.conv].extend([st], lambda user, kid: identities[user].public.sign_key)
    bob.membership.claimed[relay.conv] = (st.ep, st.hash)
    return epoch0


def sealed_to(epoch: membership.Statement, sender, text: str, identities) -> bytes:
    return envelope.seal(
        Text(text, ts=now_ms(), ctr=1),
        identities[sender],
        epoch.cid,
        [identities[u].public for u in epoch.usernames],
        epoch=epoch.ep,
        head=epoch.hash,
    )


async def received(bob, relay, data: bytes, sender: str):
    drain(bob)
    await relay.deliver(data, sender=sender)
    events = drain(bob)
    (rec,) = [e.record for e in events if isinstance(e, RecordChanged)]
    (shown,) = [e for e in events if isinstance(e, MessageReceived)]
    return rec, shown


async def test_a_removed_members_message_sealed_to_an_epoch_before_the_removal_is_never_a_plain_tick(
    offline_bob, identities
):
    bob, relay = offline_bob
    epoch0 = remove(bob, relay, identities, "carol")
    bob.contacts["carol"].verified = True  # even a verified contact
    rec, shown = await received(bob, relay, sealed_to(epoch0, "carol", "I am still here", identities), "carol")
    assert (rec.state, rec.text, shown.warning) == ("received", "I am still here", "sender_removed")
    assert bob.mark(rec) == "warning"  # before: "verified" (✔)
    assert "⚠" in commands.line(bob, rec, as_json=False)
    assert json.loads(commands.line(bob, rec, as_json=True))["mark"] == "warning"


async def test_a_message_sealed_to_an_epoch_with_a_member_removed_since_is_marked(offline_bob, identities):
    bob, relay = offline_bob
    epoch0 = remove(bob, relay, identities, "carol")
    bob.contacts["alice"].verified = True
    rec, shown = await received(bob, relay, sealed_to(epoch0, "alice", "carol could read this", identities), "alice")
    assert (shown.warning, bob.mark(rec)) == ("audience_removed", "warning")
    newest = relay.log[-1]  # sealed to the newest epoch: nothing to say
    rec, shown = await received(
        bob,
        relay,
        envelope.seal(
            Text("only us", ts=now_ms(), ctr=2),
            identities["alice"],
            newest.cid,
            [identities[u].public for u in newest.usernames],
            epoch=newest.ep,
            head=newest.hash,
        ),
        "alice",
    )
    assert (shown.warning, bob.mark(rec)) == ("", "verified")
