"""A member removed from the conversation (her envelope sealed to the epoch before her removal,
handed out by a hostile relay; honest relays refuse her sends): what her document *does* is
refused (docs/PROTOCOL.md §13.5, "Who may act"): she can neither set the conversation's
disappearing timer nor react; both are kept as ignored rows with ``actor_not_member``."""

from client_tui.core.record import RecordState, now_ms
from shared import envelope
from shared.content import Expire, React
from tests.client.test_removed_sender import remove


def sealed(epoch, sender, doc, identities):
    to = [identities[u].public for u in epoch.usernames]
    return envelope.seal(doc, identities[sender], epoch.cid, to, epoch=epoch.ep, head=epoch.hash)


async def test_a_removed_member_can_neither_set_the_timer_nor_react(offline_bob, identities):
    bob, relay = offline_bob
    msg = relay.seal("alice", "keep this forever")
    await relay.deliver(msg, sender="alice")
    mid = envelope.parse(msg).header.mid
    epoch0 = remove(bob, relay, identities, "carol")
    assert "carol" not in relay.log[-1].usernames
    expire = sealed(epoch0, "carol", Expire(seconds=60, ts=now_ms(), ctr=1), identities)
    react = sealed(epoch0, "carol", React(ref=mid, emoji="💩", on=True, ts=now_ms(), ctr=2), identities)
    await relay.deliver(expire, sender="carol")
    await relay.deliver(react, sender="carol")
    target = next(r for r in await bob.history.by_mid(mid, "conv-1") if r.is_message)
    assert target.content.reactions == {}
    assert "conv-1" not in bob.expiry.timers
    for sent in (expire, react):
        (row,) = await bob.history.by_mid(envelope.parse(sent).header.mid, "conv-1")
        assert (row.state, row.reason, row.sender) == (RecordState.IGNORED, "actor_not_member", "carol")
