"""Blindness proof: at level 4 the relay never holds a message's plaintext.

A group chat of three real clients runs through a real relay, with a wiretap (a TCP proxy,
``tests/security/wiretap.py``) between them. Afterwards every canary plaintext is searched, as
UTF-8, JSON-escaped, hex, base64 and base64url (each at the three byte alignments), in:
the relay's database file (where it also keeps attachment blobs: a file of canary lines is
uploaded and downloaded too), its WAL and shared-memory files (while it runs and after it stopped),
its log and its stdout/stderr, every websocket frame it received and sent, every HTTP exchange,
and the relay process's writable memory. Level 4: 0 hits. The same chat at level 3 (where the
relay decrypts to read) is found by the same search, so the search is shown to work.
"""

from __future__ import annotations

import asyncio
import base64
import secrets

import pytest

from client_tui.core import MessageReceived
from client_tui.core.attachments import download, upload
from client_tui.levels import LevelClient, LevelMessage
from tests.helpers.clients import barrier
from tests.helpers.wiretap import Wiretap, files, forms, frame_types, process_memory, search

USERS = ("alice", "bob", "carol")
DB_FILES = ("relay.db", "relay.db-wal", "relay.db-shm")
LOG_FILES = ("relay.log", "relay.stdout")


def canaries() -> dict[str, list[str]]:
    """Two fresh canaries per user: one ASCII, one with non-ASCII text (so JSON escaping counts)."""
    return {
        u: [f"canary-{u}-plain-{secrets.token_hex(12)}", f"Kanarienvogel {u} 🐤 ünïcødé 你好 {secrets.token_hex(12)}"]
        for u in USERS
    }


async def chat_l4(world, url: str, texts: dict[str, list[str]]) -> list[str]:
    """The chat, then a file of canary lines that alice uploads and bob downloads (its canary is
    returned: the attachment's plaintext is searched for too)."""
    relay = world.relays[-1]
    clients = {u: await world.client(relay, u, url=url) for u in USERS}
    conv = await clients["alice"].create_conversation("canaries", ["bob", "carol"])
    for c in clients.values():
        await c.refresh_conversations()
    for u, ts in texts.items():
        for t in ts:
            await clients[u].send_text(conv, t)
    for u, c in clients.items():
        await barrier(c)
        expected = sorted(t for v, ts in texts.items() if v != u for t in ts)
        assert sorted(e.text for e in world.rec(c).of(MessageReceived)) == expected  # the chat worked
    canary = f"canary-file-{secrets.token_hex(12)}"
    folder = world.root / "files"
    folder.mkdir()
    data = b"".join(f"{canary} line {i}\n".encode() for i in range(20_000))  # ~780 KiB, 12 chunks
    (folder / "notes.txt").write_bytes(data)
    ref = await upload(clients["alice"].rest, conv, folder / "notes.txt")
    assert (await download(clients["bob"].rest, ref, folder / "bob.txt")).read_bytes() == data
    for c in clients.values():
        await c.close()
    return [canary]


async def chat_l3(world, url: str, texts: dict[str, list[str]]) -> list[str]:
    relay = world.relays[-1]
    accounts = {u: await world.client(relay, u, url=url, connect=False, level=3) for u in USERS}
    conv = await accounts["alice"].create_conversation("canaries", ["bob", "carol"])
    clients = {u: LevelClient(url, u, 3, token=a.token) for u, a in accounts.items()}
    for c in clients.values():
        await c.connect()
    for u, ts in texts.items():
        for t in ts:
            await clients[u].send_text(conv, t)
    for u, c in clients.items():
        got = [await asyncio.wait_for(c.events.get(), 15) for _ in range(2 * (len(USERS) - 1))]
        assert all(isinstance(m, LevelMessage) for m in got)
        assert sorted(m.text for m in got) == sorted(t for v, ts in texts.items() if v != u for t in ts)
    for c in clients.values():
        await c.close()
    return []


async def run(world, level: int) -> tuple[list[str], dict[str, bytes], dict[str, int], dict[str, int]]:
    """Run the chat at ``level`` through a wiretap; return the canaries, every place to search
    (name -> bytes), and the frame types the relay received and sent."""
    args = () if level == 4 else ("--level", str(level), "--demo-level")
    relay = world.relay(*args, name=f"l{level}")
    texts = canaries()
    tap = await Wiretap(relay.port).start()
    try:
        files_canaries = await (chat_l4 if level == 4 else chat_l3)(world, tap.url, texts)
        blobs = {f"{n} (live)": b for n, b in files(relay.data_dir, *DB_FILES).items()}
        blobs["relay memory"] = process_memory(relay.proc.pid)
    finally:
        await tap.close()
    relay.stop()  # graceful: the WAL is checkpointed into the database file, logs are flushed
    blobs |= {f"{n} (stopped)": b for n, b in files(relay.data_dir, *DB_FILES).items()}
    blobs |= files(relay.data_dir, *LOG_FILES)
    received, sent = tap.frames()
    blobs["frames received"] = b"\n".join(received)
    blobs["frames sent"] = b"\n".join(sent)
    blobs["http exchanges"] = b"\n".join(tap.http())
    return [t for ts in texts.values() for t in ts] + files_canaries, blobs, frame_types(received), frame_types(sent)


@pytest.mark.process  # the relay process's memory and output are searched
async def test_level4_relay_holds_no_plaintext_anywhere(world):
    texts, blobs, received, sent = await run(world, 4)
    assert {
        "relay.db (live)",
        "relay.db-wal (live)",
        "relay.db (stopped)",
        "relay.log",
        "relay.stdout",
        "relay memory",
    } <= set(blobs)
    assert (
        received["send"] == len(texts) - 1
    )  # every message went through the wiretap (the last canary is a file's) ...
    assert sent["msg"] == (len(texts) - 1) * (len(USERS) - 1)  # ... and every delivery
    assert b"POST /v1/blobs?conversation=" in blobs["http exchanges"]  # the file went through too ...
    assert b"GET /v1/blobs/" in blobs["http exchanges"]  # ... and came back
    hits = search(blobs, texts)
    print(
        f"\nL4 blindness: {len(texts)} canaries x {sum(len(v) for v in forms(texts[1]).values())} forms "
        f"in {len(blobs)} places ({sum(map(len, blobs.values())) // 1024} KiB; frames received "
        f"{sum(received.values())}, sent {sum(sent.values())}): {len(hits)} hits"
    )
    assert hits == []


@pytest.mark.process  # the relay process's memory and output are searched
async def test_level3_relay_reads_the_same_chat_so_the_search_works(world):
    texts, blobs, received, sent = await run(world, 3)
    assert received["send"] == len(texts) and sent["msg"] == len(texts) * (len(USERS) - 1)
    hits = search(blobs, texts)
    found_in_db = {t for where, form, t in hits if where.startswith("relay.db") and form == "utf-8"}
    print(f"\nL3 contrast: {len(hits)} hits; places: {sorted({w for w, _, _ in hits})}")
    assert found_in_db == set(texts)  # the relay stored every message readable
    assert {t for where, _, t in hits if where == "relay memory"}  # and held them in its memory
    # level 3 does protect the wire (per-connection session keys): nothing readable in the frames
    assert not [h for h in hits if h[0].startswith("frames")]


def test_search_finds_every_form_at_every_alignment():
    text = "canary-selftest-" + secrets.token_hex(8) + " é"
    raw = text.encode()
    for prefix in (b"", b"x", b"xy", b"xyz"):
        encoded = {
            "base64": base64.b64encode(prefix + raw + b"tail"),
            "base64url": base64.urlsafe_b64encode(prefix + raw + b"?>"),
            "hex": (prefix + raw).hex().encode(),
            "utf-8": prefix + raw,
        }
        for form, blob in encoded.items():
            assert ("blob", form, text) in search({"blob": b"...." + blob + b"...."}, [text]), (form, prefix)
    assert search(
        {"blob": b'{"text":"' + text.encode("ascii", "backslashreplace").replace(b"\\x", b"\\u00") + b'"}'}, [text]
    ) == [("blob", "json-escaped", text)]
    assert search({"blob": secrets.token_bytes(4096)}, [text]) == []
