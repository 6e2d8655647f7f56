"""Bad input against a live relay: undecodable frames and send frames whose envelopes were mutated
(bytes edited; members replaced, dropped or added; protected headers rewritten) get one typed error
frame each (a documented code, the offending ``mid`` as ``ref`` when readable) and a log line; the
relay keeps serving; no stored message is lost or changed; whatever mutation it did store (it
cannot check signatures) reaches the recipient as "could not verify", never as text.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3

import msgspec

from client_tui.core import MessageReceived, MessageUnreadable
from shared import errors, frames
from shared.errors import FrameInvalid
from tests.helpers import mutators
from tests.helpers.clients import barrier, messages_of
from tests.helpers.relays import db_count, relay_log
from tests.helpers.ws import open_ws, recv_type

INPUTS = 400
DOCUMENTED = {cls.code for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, errors.E2EEError)}


def stored_rows(relay) -> list[tuple]:
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return db.execute("SELECT seq, conversation_id, sender_id, mid, envelope FROM messages ORDER BY seq").fetchall()
    finally:
        db.close()


async def test_bad_frames_and_envelopes_get_typed_errors_and_nothing_stored_is_lost(world):
    relay = world.relay(name="bad-input", env={"E2EE_RATE_SENDS_PER_S": "0"})
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob", connect=False)
    conv = await alice.create_conversation("pair", ["bob"])
    for i in range(5):
        await alice.send_text(conv, f"original {i}")
    before = stored_rows(relay)
    base = (await messages_of(alice, conv))[0].envelope
    mutate = mutators.EnvelopeMutator(json.loads(base), alice.identity, alice.identity, [])
    rng = random.Random(7)
    answers: list[dict] = []
    bad_frames = sends = 0
    ws = None
    for n in range(INPUTS):
        if ws is None or n % 15 == 0:  # 20 undecodable frames close a connection (1008): use fresh ones
            if ws is not None:
                await ws.close()
            ws = await open_ws(relay, alice.token)
            await recv_type(ws, "ready")
        if n % 2:
            data = mutators.frame_input(rng, mutators.frame_corpus(base))
            try:
                frames.decode_client_frame(data)
                continue  # decodes: a valid frame of some type is not bad input here
            except FrameInvalid:
                bad_frames += 1
            await ws.send(data)
        else:
            data = rng.choice([mutate.structure, mutate.same_shape, lambda r: mutators.mutate_bytes(r, base)])(rng)
            sends += 1
            if not _is_json(data):  # not JSON: sent as a JSON string, as a confused client might
                data = json.dumps(data.decode("latin-1")).encode()
            frame = frames.encode(frames.Send(conv, msgspec.Raw(data)))
            try:
                await ws.send(frame.decode("utf-8"))
            except UnicodeDecodeError:  # not UTF-8 (a lone surrogate): a binary frame
                await ws.send(frame)
        answer = json.loads(await asyncio.wait_for(ws.recv(), 15))
        while answer["type"] not in ("error", "stored"):
            answer = json.loads(await asyncio.wait_for(ws.recv(), 15))
        answers.append(answer)
    await ws.close()
    assert len(answers) == bad_frames + sends  # one answer each
    codes = {a["code"] for a in answers if a["type"] == "error"}
    assert codes <= DOCUMENTED and "e2ee_error" not in codes  # typed, never "internal error"
    new = [a for a in answers if a["type"] == "stored" and not a["duplicate"]]
    log = relay_log(relay)
    assert log.count("bad frame user=alice code=frame_invalid") >= bad_frames
    assert log.count("send refused user=alice code=") >= sum(1 for a in answers if a["type"] == "error") - bad_frames
    for bad in ("Traceback", "send failed", "internal error"):
        assert bad not in log
    assert relay.running  # the relay's server is up, its thread alive
    after = stored_rows(relay)
    assert after[:5] == before  # nothing stored was lost or changed
    assert db_count(relay) == 5 + len(new)
    # the relay still serves, and what it stored from the mutations is never shown as text
    sent = await alice.send_text(conv, "after the storm")
    await bob.connect()
    await bob.wait_synced()
    await barrier(bob)
    rec = world.rec(bob)
    assert [e.text for e in rec.of(MessageReceived)] == [f"original {i}" for i in range(5)] + ["after the storm"]
    assert rec.of(MessageReceived)[-1].seq == sent.seq
    assert len(rec.of(MessageUnreadable)) == len(new)
    print(
        f"\nbad input: {bad_frames} undecodable frames, {sends} mutated envelopes -> "
        f"{sum(a['type'] == 'error' for a in answers)} typed errors ({len(codes)} codes), "
        f"{len(new)} stored by the blind relay and shown to bob as could-not-verify"
    )


def _is_json(data: bytes) -> bool:
    """JSON as the relay's decoder (msgspec) reads it: Python's json also takes a lone surrogate
    escape (``"\\ud800"``), which the relay refuses as a bad frame, not as a bad envelope."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return True
