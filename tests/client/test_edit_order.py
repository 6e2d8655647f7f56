"""A hostile relay orders an author's documents (it numbers the envelopes; ``ts`` and ``ctr`` are
sealed inside them): edits of one message and one user's reaction toggles take effect in their
author's order, ``(ts, ctr)``, never in the relay's (attacker F4)."""

from client_tui.core.record import now_ms
from shared import envelope
from shared.content import Edit, React, Text


def sealer(relay, sender):
    members = relay.log_of("conv-1", ["alice", "bob", "carol"])[-1].usernames
    to = [relay.ids[u].public for u in members]
    return lambda doc: envelope.seal(doc, relay.ids[sender], "conv-1", to, **relay.epoch)


async def test_an_older_edit_delivered_last_does_not_replace_a_newer_one(offline_bob):
    bob, relay = offline_bob
    seal = sealer(relay, "alice")
    t0 = now_ms()
    original = seal(Text("meet at 5pm", ts=t0, ctr=1))
    await relay.deliver(original, sender="alice")
    mid = envelope.parse(original).header.mid
    first = seal(Edit("meet at 6pm", ref=mid, ts=t0 + 1000, ctr=2))
    second = seal(Edit("CANCELLED, do not come", ref=mid, ts=t0 + 2000, ctr=3))
    await relay.deliver(second, sender="alice")  # the relay hands out the newer edit first...
    await relay.deliver(first, sender="alice")  # ...and the older one last
    msg = next(r for r in await bob.history.by_mid(mid, "conv-1") if r.is_message)
    assert msg.text == "CANCELLED, do not come"
    assert [(v.body, v.ts) for v in msg.content.versions] == [("meet at 5pm", t0), ("meet at 6pm", t0 + 1000)]
    assert (msg.content.edited, msg.content.edited_ctr) == (t0 + 2000, 3)
    await relay.deliver(first, sender="alice")  # the same envelope again: a duplicate, dropped
    again = next(r for r in await bob.history.by_mid(mid, "conv-1") if r.is_message)
    assert len(again.content.versions) == 2


async def test_reaction_off_delivered_before_on_leaves_it_off(offline_bob):
    bob, relay = offline_bob
    t0 = now_ms()
    msg = sealer(relay, "alice")(Text("vote", ts=t0, ctr=1))
    await relay.deliver(msg, sender="alice")
    mid = envelope.parse(msg).header.mid
    carol = sealer(relay, "carol")
    on = carol(React(ref=mid, emoji="👍", on=True, ts=t0 + 1000, ctr=1))
    off = carol(React(ref=mid, emoji="👍", on=False, ts=t0 + 2000, ctr=2))
    await relay.deliver(off, sender="carol")
    await relay.deliver(on, sender="carol")
    rec = next(r for r in await bob.history.by_mid(mid, "conv-1") if r.is_message)
    assert rec.content.reactions == {}
    assert rec.content.toggles == {"carol\x00👍": [t0 + 2000, 2]}
    again = carol(React(ref=mid, emoji="👍", on=True, ts=t0 + 3000, ctr=3))
    await relay.deliver(again, sender="carol")
    rec = next(r for r in await bob.history.by_mid(mid, "conv-1") if r.is_message)
    assert rec.content.reactions == {"👍": ["carol"]}
