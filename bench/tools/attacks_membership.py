"""The membership attacks of ``e2ee-demo --attacks`` (issue 11): a relay, or a member's relay
password alone, tries to let someone into a conversation. Each runs a real relay (hostile modes:
``bench/tools/hostile_membership.py``) and real clients; alice, bob and carol chat, canary texts are
sent after the attack, and the attacker's client store and captured frames are searched for them.

* ``member-insert``: the relay appends a forged "alice adds mallory" to the log, lists mallory as a
  member and hands her every message.
* ``drop-removal``: alice removes carol; the relay hides the removal from everyone and keeps handing
  carol the messages.
* ``fork``: the relay shows bob, after he verified the real log, a variant of it that lists mallory.
* ``replay-statement``: the relay appends to the log a valid statement of another conversation, one
  in which mallory is a member.
* ``password-only``: someone holding bob's relay password (not his keys) tries every way the relay
  offers to add mallory, and listens on bob's account.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
from websockets.asyncio.client import connect

from client_tui.core import ChatClient, MessageReceived, MessageUnreadable
from client_tui.core import membership_lines as lines
from client_tui.core.errors import ClientError
from shared import frames, membership
from shared.b64 import b64u_encode
from shared.keys import Identity, spki_der

from .attacks import PASSWORD, Outcome, Stage, canaries, canary_hits

MEMBERS = ("alice", "bob", "carol")


async def _team(
    stage: Stage, attacker: str | None = "mallory", capture: str | None = None
) -> tuple[dict[str, ChatClient], str]:
    """The attacker (capturing its frames) and alice, bob, carol (``capture``: one of them
    captures too); alice creates "attack team" with bob and carol."""
    if attacker:
        await stage.user(attacker, capture=True)
    people = {n: await stage.user(n, capture=n == capture) for n in MEMBERS}
    conv = await people["alice"].create_conversation("attack team", ["bob", "carol"])
    for c in people.values():
        await c.refresh_conversations()
    return people, conv


async def _send(people: dict[str, ChatClient], conv: str, texts: list[str], senders=("alice", "bob")) -> dict:
    """Each sender sends its canary; returns ``{sender: "stored" | error code}``."""
    result = {}
    for sender, text in zip(senders, texts, strict=False):
        try:
            await people[sender].send_text(conv, text)
            result[sender] = "stored"
        except ClientError as exc:
            result[sender] = exc.code
        except Exception as exc:  # any refusal is what the table reports
            result[sender] = getattr(exc, "code", type(exc).__name__)
    for c in people.values():
        await c.settle()
    return result


async def _lines(client: ChatClient, conv: str) -> list:
    return [r for r in await client.load_history(conv, 500) if r.state == "system"]


async def _shown(stage: Stage, client: ChatClient, conv: str, sent: str | None) -> tuple[str, dict]:
    """What ``client`` showed its user about ``conv``, in words, and the facts behind it."""
    warnings = [r.info.warning for r in await _lines(client, conv) if r.info.warning]
    unreadable = [e.reason for e in stage.of(client.username, MessageUnreadable) if e.conversation == conv]
    read = [e.text for e in stage.of(client.username, MessageReceived) if e.conversation == conv]
    parts = [f"⚠ {lines.warning_words(w)}" for w in dict.fromkeys(warnings)]
    parts.append(f"members {', '.join(client.members.get(conv, [])) or 'none verified'}")
    if read:
        parts.append(f"read {len(read)}")
    if unreadable:
        parts.append(f"could not verify {len(unreadable)} ({', '.join(dict.fromkeys(unreadable))})")
    if sent and sent != "stored":
        parts.append(f"own message not sent ({sent})")
    return "; ".join(parts), {
        "warnings": warnings,
        "unreadable": unreadable,
        "read": read,
        "members": list(client.members.get(conv, [])),
    }


async def _outcome(
    stage: Stage, name: str, relay_did: str, people: dict, conv: str, attacker: ChatClient, texts: list[str], sent: dict
) -> Outcome:
    shown, facts = {}, {}
    for n, c in people.items():
        shown[n], facts[n] = await _shown(stage, c, conv, sent.get(n))
    read = sum(1 for e in stage.of(attacker.username, MessageReceived) if e.conversation == conv)
    got = [e.reason for e in stage.of(attacker.username, MessageUnreadable) if e.conversation == conv]
    shown[attacker.username] = f"received {len(got)} envelope(s), read {read}" + (
        f" ({', '.join(dict.fromkeys(got))})" if got else ""
    )
    return Outcome(
        name,
        relay_did,
        shown,
        attacker.username,
        read,
        await canary_hits(attacker, texts),
        details={"clients": facts, "attacker_unreadable": got, "sent": sent},
    )


async def _relay_attack(root: Path, name: str, mode: str, relay_did: str, prepare) -> Outcome:
    """Start the hostile relay; ``prepare(stage)`` sets the scene and returns ``(members, conversation,
    attacker)``; then alice and bob send a canary each, and the outcome is read off every client."""
    stage = Stage(root, mode)
    try:
        people, conv, attacker = await prepare(stage)
        texts = canaries(name, 2)
        sent = await _send(people, conv, texts)
        return await _outcome(stage, name, relay_did, people, conv, attacker, texts, sent)
    finally:
        await stage.close()


async def member_insert(root: Path) -> Outcome:
    async def prepare(stage):
        people, conv = await _team(stage)
        return people, conv, stage.clients["mallory"]

    return await _relay_attack(
        root,
        "member-insert",
        "member-insert:mallory",
        "appended a forged “alice adds mallory” (bad signature) to the log, listed mallory, handed her every message",
        prepare,
    )


async def drop_removal(root: Path) -> Outcome:
    async def prepare(stage):
        people, conv = await _team(stage, attacker=None, capture="carol")
        carol = people.pop("carol")  # removed below; she keeps her session, the relay keeps feeding it
        await people["alice"].change_members(conv, remove=["carol"])
        return people, conv, carol

    return await _relay_attack(
        root,
        "drop-removal",
        "drop-removal",
        "hid alice's removal of carol from everyone's log and head, kept handing carol every message",
        prepare,
    )


async def fork(root: Path) -> Outcome:
    async def prepare(stage):
        people, conv = await _team(stage)
        await people["bob"].refresh_conversations()  # bob now sees the relay's variant of what he verified
        return people, conv, stage.clients["mallory"]

    return await _relay_attack(
        root,
        "fork",
        "fork:bob",
        "after bob verified the log, showed him a variant of it "
        "listing mallory (the real signature kept); handed mallory every message",
        prepare,
    )


async def replay_statement(root: Path) -> Outcome:
    async def prepare(stage):
        mallory = await stage.user("mallory", capture=True)
        alice = await stage.user("alice")
        await alice.create_conversation("alice and mallory", ["mallory"])  # the statement to replay
        people = {"alice": alice, **{n: await stage.user(n) for n in ("bob", "carol")}}
        conv = await alice.create_conversation("attack team", ["bob", "carol"])
        for c in people.values():
            await c.refresh_conversations()
        return people, conv, mallory

    return await _relay_attack(
        root,
        "replay-statement",
        "replay-statement",
        "appended the valid creation statement "
        "of “alice and mallory” to this conversation's log; handed mallory every message",
        prepare,
    )


async def password_only(root: Path) -> Outcome:
    """Bob's relay password, not his keys: every route that could add mallory is refused."""
    stage = Stage(root, None)
    try:
        mallory = await stage.user("mallory", connect=False)
        people, conv = await _team(stage, attacker=None)
        bob = people["bob"]
        head = bob.membership.head(conv)
        tries = {}
        async with httpx2.AsyncClient(base_url=stage.relay.url, timeout=30) as http:
            token = (await http.post("/v1/token", json={"username": "bob", "password": PASSWORD})).json()["token"]
            auth = {"Authorization": f"Bearer {token}"}
            as_bob = Identity("bob", mallory.identity.wrap_private, mallory.identity.sign_private)
            forged = membership.change(head, as_bob, "add", add=[membership.member_of(mallory.identity.public)])
            body = forged.body_b64
            claimed_bob = f"{_rewrite_akid(body, bob.identity.sign_kid)}"
            sig = b64u_encode(mallory.identity.sign_private.sign(membership.signing_input(claimed_bob)))
            attempts = {
                "old members route": ("POST", f"/v1/conversations/{conv}/members", {"add": ["mallory"]}),
                "statement signed by the thief's own key": (
                    "POST",
                    f"/v1/conversations/{conv}/log",
                    {"statement": forged.signed},
                ),
                "statement claiming bob's key": (
                    "POST",
                    f"/v1/conversations/{conv}/log",
                    {"statement": f"{claimed_bob}.{sig}"},
                ),
                "replace bob's keys": (
                    "POST",
                    "/v1/keys/rotate",
                    {
                        "wrap_key": b64u_encode(spki_der(mallory.identity.public.wrap_key)),
                        "sign_key": b64u_encode(spki_der(mallory.identity.public.sign_key)),
                        "counter": 1,
                        "signature": b64u_encode(bytes(64)),
                    },
                ),
            }
            for what, (method, path, doc) in attempts.items():
                r = await http.request(method, path, json=doc, headers=auth)
                try:
                    code = (r.json().get("error") or {}).get("code")
                except ValueError:
                    code = "no such route"
                tries[what] = (r.status_code, code)
            frames_seen: list[bytes] = []
            url = stage.relay.url.replace("http", "ws", 1) + "/v1/ws"
            async with connect(url, additional_headers=auth, compression=None) as ws:  # listens as bob
                await ws.recv()
                await ws.recv()
                texts = canaries("password-only", 2)
                sent = await _send(people, conv, texts)
                await ws.send(frames.encode(frames.Sync(after=0)).decode())
                while True:
                    raw = await ws.recv()
                    frames_seen.append(raw.encode() if isinstance(raw, str) else raw)
                    if b'"synced"' in frames_seen[-1]:
                        break
        for c in people.values():
            await c.refresh_conversations()
        shown = {n: (await _shown(stage, c, conv, sent.get(n)))[0] for n, c in people.items()}
        refused = all(status >= 400 for status, _ in tries.values())
        shown["bob's password holder"] = "; ".join(f"{w}: {s} {code}" for w, (s, code) in tries.items())
        from .demo import forms

        hits = sum(1 for blob in frames_seen for t in texts for needle in forms(t).values() if needle in blob)
        envelopes = sum(1 for f in frames_seen if b'"type":"msg"' in f)
        return Outcome(
            "password-only",
            "honest relay; the password holder tried the old members route, "
            "statements signed with its own key or claiming bob's, replacing bob's keys, and listened "
            "on bob's account",
            shown,
            "bob's password holder",
            0,
            hits,
            held=refused and people["alice"].membership.head(conv).ep == 0,
            details={"tries": tries, "envelopes": envelopes, "members": people["alice"].members[conv]},
        )
    finally:
        await stage.close()


def _rewrite_akid(body_b64: str, akid: str) -> str:
    """The statement body with ``akid`` replaced (canonical again): a claim to sign as bob."""
    import json

    from shared.b64 import b64u_decode

    doc = json.loads(b64u_decode(body_b64))
    doc["akid"] = akid
    return b64u_encode(json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())


ATTACKS = {
    "member-insert": member_insert,
    "drop-removal": drop_removal,
    "fork": fork,
    "replay-statement": replay_statement,
    "password-only": password_only,
}
"""The membership attacks by name, in the order the demo runs them."""
