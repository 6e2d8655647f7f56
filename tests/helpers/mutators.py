"""Input generators for the fuzz tests, driven by a ``random.Random`` that hypothesis provides.

Hypothesis strategies cost about a millisecond per drawn input here; these plain-Python mutators
cost tens of microseconds, so each hypothesis example draws one ``Random`` and makes a batch of
inputs from it. Every generator returns bytes or text for the function under test.
"""

from __future__ import annotations

import copy
import json
import random

import msgspec

from shared import frames
from shared.b64 import b64u_decode, b64u_encode
from shared.keys import Identity
from tests.vectors import vectorlib

PUNCT = b'"{}[],:\\0aA=+/-_ \t\n\x00\xff\xc3\xa9'
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
ODD_TEXT = ["", "=", "+/", " ", "\n", "é", "\ud800", "A" * 43, "AAAA=", "x" * 300, "0", "-1", "1e999", "null"]


def _dumps(rng: random.Random, doc) -> bytes:
    """JSON bytes, with non-ASCII text raw or escaped (lone surrogates kept: not valid UTF-8)."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def random_bytes(rng: random.Random, most: int) -> bytes:
    return rng.randbytes(rng.randint(0, most))


def random_text(rng: random.Random, most: int = 24) -> str:
    pools = [B64_ALPHABET, "abc", '\x00\x1f"\\/é你🐤\u202e', "".join(map(chr, range(32, 127)))]
    pool = rng.choice(pools)
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, most)))


def random_json(rng: random.Random, depth: int = 3):
    kind = rng.randrange(10 if depth > 0 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 2**31, 2**53 - 1, 2**53, 2**63, -(2**64), rng.randint(-(10**6), 10**6)])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, 1e-308, rng.random()])
    if kind in (4, 5):
        return random_text(rng)
    if kind == 6:
        return rng.choice(ODD_TEXT + [b64u_encode(random_bytes(rng, 64))])
    if kind in (7, 8):
        return [random_json(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    return {random_text(rng, 8): random_json(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def mutate_bytes(rng: random.Random, base: bytes) -> bytes:
    """1-4 byte-level edits: flip a bit, set a byte, insert, delete a range, cut, repeat a slice."""
    data = bytearray(base)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(data)) if data else 0
        if op == 0 and data:
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            data[i] = rng.choice(PUNCT)
        elif op == 2:
            data[i:i] = rng.choice([random_bytes(rng, 8), b'"', b",", b"}", b"]", b"\\u0000", b'"x":1,'])
        elif op == 3:
            del data[i : i + rng.randint(1, 64)]
        elif op == 4:
            del data[i:]
        else:
            j = min(len(data), i + rng.randint(1, 128))
            data[j:j] = data[i:j]
    return bytes(data)


class EnvelopeMutator:
    """Mutations of one valid L4 envelope (a committed vector), from bytes to re-signed content."""

    def __init__(self, doc: dict, signer: Identity, other: Identity, recipients: list[Identity]) -> None:
        self.doc = doc
        self.raw = json.dumps(doc, separators=(",", ":")).encode()
        self.header = json.loads(b64u_decode(doc["protected"]))
        self.signer = signer
        self.other = other
        self.recipients = recipients

    def __call__(self, rng: random.Random) -> bytes:
        kind = rng.randrange(10)
        if kind < 3:
            return mutate_bytes(rng, self.raw)
        if kind < 6:
            return self.structure(rng)
        if kind < 9:
            return self.same_shape(rng)
        if kind == 9 and rng.random() < 0.5:
            return random_bytes(rng, 2048)
        return _dumps(
            rng,
            {
                rng.choice(["protected", "recipients", "iv", "ciphertext", "tag", "sig", "x"]): random_json(rng)
                for _ in range(rng.randint(0, 7))
            },
        )

    def _finish(self, rng: random.Random, doc: dict, header: dict) -> bytes:
        if header != self.header:
            doc["protected"] = b64u_encode(
                json.dumps(header, separators=(",", ":"), ensure_ascii=rng.random() < 0.5).encode(
                    "utf-8", "surrogatepass"
                )
            )
        roll = rng.random()
        signer = self.signer if roll < 0.5 else self.other if roll < 0.6 else None
        if signer is not None:  # signed by the real sender: the check that fails is past the signature
            try:
                vectorlib.resign(doc, signer.sign_private)
            except (KeyError, TypeError, AttributeError, ValueError):  # members no longer of signable form
                pass
        return _dumps(rng, doc)

    def structure(self, rng: random.Random) -> bytes:
        """Members (of the envelope, a recipient entry, or the protected header) replaced, dropped
        or added, with any JSON value."""
        doc, header = copy.deepcopy(self.doc), copy.deepcopy(self.header)
        for _ in range(rng.randint(1, 3)):
            where = rng.randrange(3)
            if where == 0:
                target = doc
            elif where == 1 and isinstance(doc.get("recipients"), list) and doc["recipients"]:
                target = rng.choice(doc["recipients"])
                if isinstance(target, dict) and isinstance(target.get("header"), dict) and rng.random() < 0.5:
                    target = target["header"]
            else:
                target = header
            if not isinstance(target, dict):
                continue
            key = rng.choice([*target, "x", "kid", "epk", "zip", "crit"]) if target else "x"
            op = rng.randrange(4)
            value = rng.choice(
                [
                    random_json(rng),
                    b64u_encode(random_bytes(rng, 600)),
                    self.header["rkids"][::-1],
                    self.header["rkids"][:1],
                    [],
                    0,
                    2**53,
                ]
            )
            if op == 0:
                target.pop(key, None)
            else:
                target[key] = value
        return self._finish(rng, doc, header)

    def same_shape(self, rng: random.Random) -> bytes:
        """The documented shape kept (right types, lengths, alphabets): a value changed for another
        well-formed one, so the parser passes and the later checks must refuse it."""
        doc, header = copy.deepcopy(self.doc), copy.deepcopy(self.header)
        for _ in range(rng.randint(1, 2)):
            field = rng.choice(
                [
                    "iv",
                    "tag",
                    "ciphertext",
                    "encrypted_key",
                    "swap_keys",
                    "xp",
                    "ep",
                    "mid",
                    "cid",
                    "snd",
                    "skid",
                    "rkids",
                    "drop_recipient",
                    "sig",
                ]
            )
            if field in ("iv", "tag", "sig"):
                doc[field] = b64u_encode(rng.randbytes({"iv": 12, "tag": 16, "sig": 64}[field]))
            elif field == "ciphertext":
                ct = bytearray(b64u_decode(doc["ciphertext"]))
                if ct and rng.random() < 0.7:
                    ct[rng.randrange(len(ct))] ^= 1 << rng.randrange(8)
                else:
                    ct = bytearray(random_bytes(rng, 64))
                doc["ciphertext"] = b64u_encode(bytes(ct))
            elif field == "encrypted_key":
                r = rng.choice(doc["recipients"])
                size = len(b64u_decode(r["encrypted_key"]))
                r["encrypted_key"] = b64u_encode(rng.randbytes(rng.choice([size, max(0, size - 1), 32, 0])))
            elif field == "swap_keys" and len(doc["recipients"]) > 1:
                a, b = doc["recipients"][0], doc["recipients"][1]
                a["encrypted_key"], b["encrypted_key"] = b["encrypted_key"], a["encrypted_key"]
            elif field in ("xp", "ep"):
                header[field] = rng.choice([0, 1, 3_600_000, header[field] + 1, header[field] - 1, 2**53 - 1])
            elif field == "mid":
                header["mid"] = b64u_encode(rng.randbytes(16))
            elif field in ("cid", "snd"):
                header[field] = rng.choice(["conv-1", "conv-2", "alice", "bob", "mallory", "a" * 64])
            elif field == "skid":
                header["skid"] = rng.choice([self.other.sign_kid, self.signer.sign_kid, self.other.wrap_kid])
            elif field == "rkids":
                header["rkids"] = header["rkids"][::-1]
                doc["recipients"] = doc["recipients"][::-1] if rng.random() < 0.5 else doc["recipients"]
            elif field == "drop_recipient" and len(doc["recipients"]) > 1:
                i = rng.randrange(len(doc["recipients"]))
                del doc["recipients"][i]
                if rng.random() < 0.7:
                    del header["rkids"][i]
        return self._finish(rng, doc, header)


def frame_corpus(envelope: bytes) -> list[bytes]:
    """One valid frame of every type, both directions."""
    raw = msgspec.Raw(envelope)
    return [
        frames.encode(f)
        for f in (
            frames.Send("conv-1", raw),
            frames.Message(7, "conv-1", "alice", raw),
            frames.Auth(token="a.b.c"),
            frames.Auth(user="alice"),
            frames.Sync(after=3, limit=10),
            frames.Ack(5),
            frames.Ping(9),
            frames.Hello(1, 4, 266240, 262144, 256, 5.0),
            frames.Ready("bob"),
            frames.Stored("m", 1, "c"),
            frames.Synced(4, False),
            frames.Delivered(3, "bob"),
            frames.Pong(1),
            frames.Event("key_changed", "bob"),
            frames.Error("forbidden", "no", "conversation", {"missing": ["x"]}, "mid"),
        )
    ]


FRAME_TYPES = [
    "auth",
    "send",
    "sync",
    "ack",
    "ping",
    "hello",
    "ready",
    "stored",
    "msg",
    "synced",
    "delivered",
    "pong",
    "event",
    "error",
    "nope",
    "",
]
FRAME_FIELDS = [
    "token",
    "user",
    "l3_key",
    "conversation",
    "envelope",
    "after",
    "limit",
    "seq",
    "nonce",
    "version",
    "level",
    "code",
    "message",
    "mid",
    "sender",
    "cursor",
    "more",
    "kind",
    "ref",
    "detail",
    "x",
    "type",
]


def frame_input(rng: random.Random, corpus: list[bytes]) -> bytes | str:
    kind = rng.randrange(8)
    if kind < 4:
        return mutate_bytes(rng, rng.choice(corpus))
    if kind == 4:
        return random_bytes(rng, 1024)
    if kind == 5:
        return random_text(rng, 256)
    doc = {"type": rng.choice(FRAME_TYPES)}
    doc.update({rng.choice(FRAME_FIELDS): random_json(rng) for _ in range(rng.randint(0, 6))})
    return _dumps(rng, doc)


def token_input(rng: random.Random, token: str, session_id: str) -> str | bytes:
    """Mutations of one valid L3 token: a part replaced, header members changed, parts added or
    removed, bytes edited; or random text."""
    parts = token.split(".")
    kind = rng.randrange(6)
    if kind == 0:
        parts[rng.randrange(5)] = rng.choice([b64u_encode(random_bytes(rng, 600)), random_text(rng, 64)])
    elif kind == 1:
        header = json.loads(b64u_decode(parts[0]))
        key = rng.choice([*header, "x"])
        header[key] = rng.choice([random_json(rng), "c2r", "r2c", 0, 2**53, session_id])
        parts[0] = b64u_encode(_dumps(rng, header))
    elif kind == 2:
        parts = parts[: rng.randint(0, 5)] + [b64u_encode(random_bytes(rng, 40)) for _ in range(rng.randint(0, 2))]
    elif kind == 3:
        return mutate_bytes(rng, token.encode())
    elif kind == 4:
        return random_text(rng, 512)
    else:
        return random_bytes(rng, 1024)
    return ".".join(parts)
