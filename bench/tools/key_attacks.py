"""The key-trust attacks of ``e2ee-demo --attacks`` (issue 12): each runs a real relay (hostile
where the attack is the relay's), real clients with fresh keys, and reports what the attacker did
and what the user was shown. An attack *holds* when nothing is shown as verified that was not,
no text is shown under a name whose key did not sign it, and the user is told in plain words.

* ``key-name``: the relay answers a key fetch for carol with mallory's keys under mallory's name.
* ``key-swap``: the relay swaps bob's key for another at the moment the user verifies it.
* ``key-retired``: after bob rotates, the relay serves bob's retired key again, and a thief with
  bob's old key and password sends as bob.
* ``equivocation``: a hostile *sender* wraps different content keys for bob and carol under one
  signed envelope whose AES-GCM ciphertext opens under both (an "invisible salamander").
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from bench.tools.relayproc import RelayProcess
from client_tui.core import ChatClient, KeyChanged
from client_tui.core.contacts import KeyNotShown
from client_tui.core.record import now_ms
from shared import envelope
from shared.b64 import b64u_decode, b64u_encode
from shared.content import Text, canonical
from shared.errors import E2EEError, ErrorCode
from shared.keys import Identity, PublicIdentity

from .attacks import Outcome
from .salamander import salamander

FAST_RELAY = {
    "E2EE_ARGON2_TIME_COST": "1",
    "E2EE_ARGON2_MEMORY_KIB": "8192",
    "E2EE_ARGON2_PARALLELISM": "1",
    "E2EE_RATE_LOGINS_PER_MIN": "600",
}
FAST_KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}
PASSWORD = "attack demo password"
_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


class _Stage:
    """A relay (``--hostile MODE --demo-level`` or honest) and clients, torn down together."""

    def __init__(self, root: Path, mode: str | None) -> None:
        args = ["--hostile", mode, "--demo-level"] if mode else []
        self.relay = RelayProcess(root / "relay", extra_args=args, env=FAST_RELAY).start()
        self.root, self.clients = root, []

    async def user(self, name: str, *, connect: bool = False) -> ChatClient:
        client = ChatClient(self.relay.url, name, self.root / "clients", kdf=FAST_KDF)
        self.clients.append(client)
        await client.register(PASSWORD, f"{name} passphrase", bits=2048)
        if connect:
            await client.connect()
            await client.wait_synced()
        return client

    async def close(self) -> None:
        for c in self.clients:
            with contextlib.suppress(Exception):
                await c.close()
        self.relay.stop()


async def key_name(root: Path) -> Outcome:
    stage = _Stage(root, "key-name:mallory")
    try:
        await stage.user("mallory")
        await stage.user("carol")
        alice = await stage.user("alice")
        try:
            await alice.create_conversation("with carol", ["carol"])
            shown, refused = "the conversation was created with the relay's answer", False
        except E2EEError as exc:
            shown, refused = exc.message, exc.code == ErrorCode.KEY_ANSWER_MISMATCH
        held = refused and set(alice.contacts) == {"alice"}
        return Outcome(
            "key-name",
            "answered alice's key fetch for carol with mallory's keys, under mallory's name",
            {"alice": shown},
            attacker="the relay",
            read=None,
            held=held,
        )
    finally:
        await stage.close()


async def key_swap(root: Path) -> Outcome:
    stage = _Stage(root, "key-swap:mallory,carol")
    try:
        for name in ("mallory", "carol", "bob"):
            await stage.user(name)
        alice = await stage.user("alice")
        await alice.create_conversation("pair", ["bob"])  # the real bob, pinned
        await alice.fetch_keys("bob")  # mallory's keys, pending: this is the number alice compares
        shown_to_alice = alice.shown_key("bob")
        await alice.fetch_keys("bob")  # swapped for carol's while she compares
        try:
            alice.verify_contact("bob", shown=shown_to_alice.kids)
            shown, refused = "verified", False
        except KeyNotShown as exc:
            shown, refused = exc.message, True
        c = alice.contacts["bob"]
        held = refused and not c.verified and c.previous == []
        return Outcome(
            "key-swap",
            "served mallory's keys as bob's, then carol's while alice compared the number and pressed Mark verified",
            {"alice": shown},
            attacker="the relay",
            read=None,
            held=held,
        )
    finally:
        await stage.close()


async def key_retired(root: Path) -> Outcome:
    stage = _Stage(root, "key-retired")
    try:
        alice = await stage.user("alice")
        bob = await stage.user("bob")
        conv = await alice.create_conversation("pair", ["bob"])
        old = bob.identity
        await bob.rotate_keys()
        await alice.fetch_keys("bob")  # the new keys, signed by the old: accepted by alice
        alice.accept_key("bob", shown=alice.shown_key("bob").kids)
        await alice.fetch_keys("bob")  # now the relay serves the retired keys again
        rollback = any(isinstance(e, KeyChanged) and e.rollback for e in _drain(alice))
        head = bob.membership.head(conv)  # bob's update statement: the log binds his new keys
        stolen = envelope.seal(
            Text("wire the money to mallory", ts=now_ms(), ctr=7),
            old,
            conv,
            [alice.identity.public, bob.identity.public],
            epoch=head.ep,
            head=head.hash,
        )
        async with httpx2.AsyncClient(
            base_url=stage.relay.url, headers={"Authorization": f"Bearer {bob.token}"}
        ) as http:
            answer = await http.post(
                f"/v1/conversations/{conv}/messages", content=stolen, headers={"Content-Type": "application/json"}
            )
            seq = answer.json()["seq"]
        await alice.connect()  # the thief's message comes by sync
        await alice.wait_synced()
        rec = await alice.history.by_seq(seq)
        held = rollback and rec is not None and rec.text is None and rec.reason == ErrorCode.RETIRED_SENDER_KEY
        shown = (
            f"rollback refused; the thief's message: could not verify ({rec.reason if rec else 'missing'}: "
            "signed by a key bob replaced)"
        )
        return Outcome(
            "key-retired",
            "served bob's retired keys after his rotation; a thief with bob's old key and password sent as bob",
            {"alice": shown},
            attacker="the relay and a key thief",
            read=None,
            held=held,
        )
    finally:
        await stage.close()


def _drain(client: ChatClient) -> list:
    out = []
    while not client.events.empty():
        out.append(client.events.get_nowait())
    return out


def equivocating_envelope(
    template: bytes, sender: Identity, honest: PublicIdentity, fooled: PublicIdentity, text: str, ctr: int = 2
) -> tuple[bytes, bytes, bytes]:
    """What a hostile sender builds from one of its own envelopes (``template``: its epoch, head and
    recipients): a new message whose entry for ``fooled`` wraps another content key than every
    other entry, with a ciphertext that authenticates under both keys (:mod:`bench.tools.salamander`),
    a header committing to the first key, signed by ``sender`` (PROTOCOL.md §5.5). Under the first
    key it decrypts to the content document ``text`` (counter ``ctr``) followed by the block of noise
    the construction needs, which a v3 reader refuses as ``content_invalid`` (§13.2: only spaces may
    follow the document).

    Returns:
        ``(envelope, cek_of_the_others, cek_of_fooled)``.
    """
    doc = json.loads(template)
    header = json.loads(b64u_decode(doc["protected"], "protected"))
    cek, other, iv = os.urandom(32), os.urandom(32), os.urandom(12)
    header.update(
        mid=b64u_encode(os.urandom(16)),
        kc=b64u_encode(envelope._commitment(cek).finalize()),
    )
    protected = b64u_encode(json.dumps(header, separators=(",", ":")).encode())
    ct, tag = salamander(cek, other, iv, protected.encode("ascii"), canonical(Text(text, ts=now_ms(), ctr=ctr)))
    keys = {p.wrap_kid: p for p in (sender.public, honest, fooled)}
    recipients = [
        {
            "header": {"kid": kid},
            "encrypted_key": b64u_encode(keys[kid].wrap_key.encrypt(other if kid == fooled.wrap_kid else cek, _OAEP)),
        }
        for kid in header["rkids"]
    ]
    parts = [
        protected,
        ",".join(r["encrypted_key"] for r in recipients),
        b64u_encode(iv),
        b64u_encode(ct),
        b64u_encode(tag),
    ]
    sig = sender.sign_private.sign(".".join([envelope.SIG_CONTEXT.decode(), *parts]).encode())
    out = {
        "protected": protected,
        "recipients": recipients,
        "iv": parts[2],
        "ciphertext": parts[3],
        "tag": parts[4],
        "sig": b64u_encode(sig),
    }
    return json.dumps(out, separators=(",", ":")).encode(), cek, other


async def equivocation(root: Path) -> Outcome:
    stage = _Stage(root, None)
    try:
        alice = await stage.user("alice")
        bob = await stage.user("bob", connect=True)
        carol = await stage.user("carol", connect=True)
        conv = await alice.create_conversation("group", ["bob", "carol"])
        for c in (bob, carol):
            await c.refresh_conversations()
        await alice.connect()
        await alice.send_text(conv, "an honest message first")
        template = (await alice.load_history(conv))[-1].envelope
        data, _, _ = equivocating_envelope(
            template, alice.identity, bob.identity.public, carol.identity.public, "meet at noon at the north gate"
        )
        async with httpx2.AsyncClient(
            base_url=stage.relay.url, headers={"Authorization": f"Bearer {alice.token}"}
        ) as http:
            seq = (
                await http.post(
                    f"/v1/conversations/{conv}/messages", content=data, headers={"Content-Type": "application/json"}
                )
            ).json()["seq"]
        recs = {}
        for c in (bob, carol):
            await c.close()  # reopen and sync: every message up to seq processed
            again = ChatClient(stage.relay.url, c.username, stage.root / "clients", kdf=FAST_KDF)
            stage.clients.append(again)
            await again.login(PASSWORD, f"{c.username} passphrase")
            await again.connect()
            await again.wait_synced()
            recs[c.username] = await again.history.by_seq(seq)
        opened = [n for n, r in recs.items() if r is not None and r.text is not None]
        held = len(opened) <= 1 and all(r is not None for r in recs.values())
        shown = {n: "read it" if r.text is not None else f"could not verify ({r.reason})" for n, r in recs.items()}
        return Outcome(
            "equivocation",
            "(honest relay) alice, a member, wrapped different content keys for bob and "
            "carol under one signed envelope that AES-GCM opens under both",
            shown,
            attacker="a hostile sender",
            read=None,
            held=held,
            details={"opened": opened},
        )
    finally:
        await stage.close()


ATTACKS: dict[str, Callable[[Path], Awaitable[Outcome]]] = {
    "key-name": key_name,
    "key-swap": key_swap,
    "key-retired": key_retired,
    "equivocation": equivocation,
}
"""The key attacks by name, in the order ``e2ee-demo --attacks`` runs them (``bench.tools.attacks``)."""
