"""Issue 18's "an honest relay raises no alert over 1,000 messages with rotations in between"
(docs/PROTOCOL.md §14, FS-SPEC "Bench + test"): alice, bob and carol in one conversation on an
honest relay (in this process, real SQLite), 1,000 messages from all three, and each of them rotates
their keys once (after messages 250, 500 and 750). Every message is opened with its exact text by
both other members; no transparency alert, no other warning; the gossiped heads agree and grow with
every rotation; ``e2ee-chat audit`` finds each profile's held head consistent with the relay's log.

``E2EE_KT_LONG_MESSAGES`` runs another size (a multiple of 4·3 keeps the segments even).
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from client_tui import cli
from client_tui.core import (
    GapDetected,
    KeyChanged,
    LocalDataWarning,
    MessageReceived,
    MessageUnreadable,
    RecordChanged,
    TransparencyAlert,
)
from tests.helpers.config import PASSWORD, passphrase

MESSAGES = int(os.environ.get("E2EE_KT_LONG_MESSAGES", 1_000))
NAMES = ("alice", "bob", "carol")
SEGMENTS = len(NAMES) + 1  # a rotation between two segments: alice's, then bob's, then carol's
NO_LIMITS = {"E2EE_RATE_SENDS_PER_S": "0", "E2EE_RATE_KEY_FETCHES_PER_MIN": "0", "E2EE_LOG_LEVEL": "WARNING"}


def text_of(k: int, sender: str) -> str:
    """Message ``k``'s text: lengths from 14 to 411 characters (several padding buckets, with and
    without the gossiped head), non-ASCII and markup-looking characters in some."""
    return f"{k:04d} {sender} " + ["plain", "é✓ ünïcode", "[b]not bold[/b] <i>", "x" * 400][k % 4]


def moved(rec, who: str) -> int:
    """How many "moved to new keys" lines about ``who`` the recorded client drew (it verified
    ``who``'s membership update after a rotation)."""
    return len(
        {
            e.record.lid
            for e in rec.of(RecordChanged)
            if e.record.sender == who and (e.record.text or "").startswith("moved to new keys")
        }
    )


@pytest.mark.slow  # 1,000 messages: ~2,000 RSA-OAEP unwraps and three key rotations
@pytest.mark.timeout(900)
async def test_an_honest_relay_raises_no_alert_over_1000_messages_with_three_rotations(world, monkeypatch, capsys):
    t0 = time.monotonic()
    relay = world.relay(env=NO_LIMITS)
    clients = {n: await world.client(relay, n) for n in NAMES}
    conv = await clients["alice"].create_conversation("long run", ["bob", "carol"])
    for c in clients.values():
        await c.refresh_conversations()
    leaves = len(NAMES)  # one registration each
    assert {n: c.transparency.head.size for n, c in clients.items()} == dict.fromkeys(NAMES, leaves)

    sent: dict[str, list[str]] = {n: [] for n in NAMES}
    heads: list[dict[str, int]] = []
    per_segment = MESSAGES // SEGMENTS
    k = 0
    for segment in range(SEGMENTS):
        end = MESSAGES if segment == SEGMENTS - 1 else k + per_segment
        mine = {n: [] for n in NAMES}
        for i in range(k, end):
            sender = NAMES[i % len(NAMES)]
            mine[sender].append(text_of(i, sender))
            sent[sender].append(mine[sender][-1])
        k = end

        async def produce(name: str, texts: list[str]) -> None:
            for text in texts:
                await clients[name].queue_text(conv, text)

        await asyncio.gather(*(produce(n, t) for n, t in mine.items()))
        for name, c in clients.items():  # every other member's messages so far, opened
            want = sum(len(t) for n, t in sent.items() if n != name)
            await world.rec(c).until(lambda r, want=want: len(r.of(MessageReceived)) >= want, timeout=300)
        heads.append({n: c.transparency.head.size for n, c in clients.items()})
        if segment < len(NAMES):  # alice, then bob, then carol replaces her keys
            who = NAMES[segment]
            await clients[who].rotate_keys()
            leaves += 1
            for name, c in clients.items():
                if name == who:
                    continue
                # the key change arrives (key_changed → a key answer with its log proof), then the
                # membership update that moves the new keys into the conversation's log
                await world.rec(c).until(lambda r, who=who: any(e.user == who for e in r.of(KeyChanged)))
                await world.rec(c).until(lambda r, who=who: moved(r, who) == 1)
                c.accept_key(who, shown=c.shown_key(who).kids)  # as the user would, seeing "signed by old key"

    # every message opened once, with its exact text, by both other members, in its sender's order
    for name, c in clients.items():
        got: dict[str, list[str]] = {}
        for e in world.rec(c).of(MessageReceived):
            assert e.conversation == conv and e.warning == "", (e.sender, e.text[:20], e.warning)
            got.setdefault(e.sender, []).append(e.text)
        assert got == {n: t for n, t in sent.items() if n != name}
        assert c.progress.missing == {}
    assert sum(len(t) for t in sent.values()) == MESSAGES

    # no alert of any kind; the only key changes are the three rotations, each signed by the old key
    for name, c in clients.items():
        rec = world.rec(c)
        assert rec.of(TransparencyAlert, LocalDataWarning, MessageUnreadable, GapDetected) == []
        assert c.transparency.alerts == [] and c.local_warnings == []
        changes = rec.of(KeyChanged)
        assert [e.user for e in changes] == [n for n in NAMES if n != name]
        assert all(e.signed_by_old is True and not e.rollback for e in changes)

    # the newest verified head grew with each rotation (carried by the messages after it: gossip),
    # and every client holds the same one at the end
    assert [h["alice"] for h in heads] == [len(NAMES) + r for r in range(SEGMENTS)]
    assert all(h == dict.fromkeys(NAMES, h["alice"]) for h in heads), heads
    final = {c.transparency.head for c in clients.values()}
    assert len(final) == 1 and final.pop().size == leaves == 2 * len(NAMES)

    # e2ee-chat audit on each profile: the held head is consistent with the relay's log, and the
    # monitor finds the user's two keys (first and rotated) and nothing planted under the name
    for c in clients.values():
        await c.close()
    monkeypatch.setenv("E2EE_SERVER", relay.url)
    monkeypatch.setenv("E2EE_PROFILE", str(world.root / "clients"))
    monkeypatch.setenv("E2EE_PASSWORD", PASSWORD)
    for name in NAMES:
        monkeypatch.setenv("E2EE_PASSPHRASE", passphrase(name))
        code = await asyncio.to_thread(cli.main, ["audit", "--user", name])
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        assert f"held: {leaves} keys" in out.out and f"relay: {leaves} keys" in out.out
        assert f"consistent: the relay's log extends the held head of {leaves} keys" in out.out
        assert "yours in the log: 2, none planted under your name" in out.out
        assert "ALERT" not in out.out
    print(f"\n{MESSAGES} messages, {len(NAMES)} rotations, heads {heads}: {time.monotonic() - t0:.1f} s")
