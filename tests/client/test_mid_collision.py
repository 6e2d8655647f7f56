"""A member who reuses another member's message id (mid) elsewhere never gets her file saved, nor
a reaction or reply aimed, for the mid printed next to alice's: a mid naming messages in several
conversations is refused as ambiguous, ``--conversation`` / ``--from`` pick the one meant
(attacker F3), and inside one conversation a reaction is never sent for alice's message when its
receivers would apply it to the earlier message carol stored under the same id."""

from __future__ import annotations

import os

import pytest

import shared.envelope as envmod
from client_tui.cliargs import build_parser, mid_argv
from client_tui.core.errors import UnknownReference
from client_tui.core.record import now_ms
from shared import envelope
from shared.b64 import b64u_encode
from shared.content import Attachment, AttachmentRef, Text
from shared.errors import InvalidRequest

MID = b"\x11" * 16


def att(name: str, blob: str) -> AttachmentRef:
    return AttachmentRef(
        id=blob, key=b64u_encode(os.urandom(32)), name=name, type="application/pdf", size=10,
        sha256=b64u_encode(os.urandom(32)), chunk=1024,
    )  # fmt: skip


@pytest.fixture
async def colliding(offline_bob, monkeypatch):
    """carol's file (conv-2) stored first under alice's leaked mid, then alice's (conv-1)."""
    bob, relay = offline_bob
    real = os.urandom
    monkeypatch.setattr(envmod.os, "urandom", lambda n: real(n - 16) + MID if n > 16 else real(n))

    def sealed(sender, conv, ref, members):
        log = relay.log_of(conv, members)
        doc = Attachment(att=ref, body="", ts=now_ms(), ctr=1)
        recipients = [relay.ids[u].public for u in log[-1].usernames]
        return envelope.seal(doc, relay.ids[sender], conv, recipients, **relay.epoch_of(conv))

    carol = sealed("carol", "conv-2", att("evil.pdf", "blob-carol"), ["carol", "bob"])
    await relay.deliver(carol, sender="carol", conv="conv-2")
    alice = sealed("alice", "conv-1", att("contract.pdf", "blob-alice"), ["alice", "bob", "carol"])
    await relay.deliver(alice, sender="alice", conv="conv-1")
    return bob, b64u_encode(MID)


async def test_a_mid_naming_two_messages_is_refused(colliding):
    bob, mid = colliding
    assert sorted(r.sender for r in await bob.history.by_mid(mid)) == ["alice", "carol"]
    with pytest.raises(InvalidRequest, match="names 2 messages here .*alice in conv-1.*carol in conv-2") as exc:
        await bob.attachments.reference(mid)
    assert exc.value.field == "mid"
    with pytest.raises(InvalidRequest, match="names 2 messages"):
        await bob.attachments.save(mid, bob.profile / "out.pdf")
    assert not (bob.profile / "out.pdf").exists()


async def test_conversation_or_sender_picks_the_message(colliding):
    bob, mid = colliding
    assert (await bob.attachments.reference(mid, conversation="conv-1")).id == "blob-alice"
    assert (await bob.attachments.reference(mid, sender="alice")).name == "contract.pdf"
    assert (await bob.attachments.reference(mid, conversation="conv-2", sender="carol")).id == "blob-carol"
    with pytest.raises(UnknownReference):
        await bob.attachments.reference(mid, conversation="conv-1", sender="carol")


def test_get_attachment_takes_conversation_and_from():
    mid = b64u_encode(MID)
    argv = ["get-attachment", mid, "--out", "f", "--conversation", "conv-1", "--from", "alice"]
    args = build_parser().parse_args(mid_argv(argv))
    assert (args.mid, args.conversation, args.sender) == (mid, "conv-1", "alice")
    plain = build_parser().parse_args(mid_argv(["get-attachment", mid, "--out", "f"]))
    assert (plain.conversation, plain.sender) == (None, None)


async def test_a_reaction_to_a_mid_in_two_conversations_is_refused(colliding):
    bob, mid = colliding
    with pytest.raises(InvalidRequest, match="names 2 messages here .*alice in conv-1.*carol in conv-2"):
        await bob.messaging.react(mid, "👍")
    assert list(bob.outgoing.items) == []
    rec = await bob.messaging.react(mid, "👍", conversation="conv-1")
    assert (rec.conversation, rec.content.t, rec.content.ref) == ("conv-1", "react", mid)
    with pytest.raises(InvalidRequest, match="names 2 messages"):
        await bob.messaging.message(mid)
    assert (await bob.messaging.message(mid, sender="carol")).conversation == "conv-2"


def test_react_takes_conversation_and_from():
    mid = b64u_encode(MID)
    args = build_parser().parse_args(mid_argv(["react", mid, "👍", "--conversation", "conv-1", "--from", "alice"]))
    assert (args.mid, args.emoji, args.conversation, args.sender) == (mid, "👍", "conv-1", "alice")


async def test_inside_one_conversation_the_first_stored_is_what_a_reaction_names(offline_bob, monkeypatch):
    """carol (through a relay that reorders) stores her message under alice's mid first, in the
    same conversation: every receiver resolves ``ref`` to carol's, so reacting to alice's row is
    refused with who would get it, not sent to carol's message."""
    bob, relay = offline_bob
    real = os.urandom
    monkeypatch.setattr(envmod.os, "urandom", lambda n: real(n - 16) + MID if n > 16 else real(n))
    members = ["alice", "bob", "carol"]
    for sender, body in (("carol", "first under the id"), ("alice", "the real one")):
        log = relay.log_of("conv-1", members)
        recipients = [relay.ids[u].public for u in log[-1].usernames]
        doc = Text(body=body, ts=now_ms(), ctr=1)
        sealed = envelope.seal(doc, relay.ids[sender], "conv-1", recipients, **relay.epoch_of("conv-1"))
        await relay.deliver(sealed, sender=sender, conv="conv-1")
    mid = b64u_encode(MID)
    assert [r.sender for r in await bob.history.by_mid(mid, "conv-1")] == ["carol", "alice"]
    with pytest.raises(InvalidRequest, match="used first in this conversation by carol") as exc:
        await bob.messaging.react(mid, "👍", conversation="conv-1", sender="alice")
    assert exc.value.field == "mid"
    assert list(bob.outgoing.items) == []
    assert (await bob.messaging.message(mid, "conv-1")).sender == "carol"
