"""The failure cases of ../shared/cases/CASES.md (K01-K14) that no other test asserts whole.

Where a case is already asserted elsewhere the test is named in docs/THREAT_MODEL.md (the case
table); the tests here add what was missing: the refusals of K01/K02 on both authentication paths
with their logged reasons, K02 at zero leeway, tokens in REST URLs (K03), the relay-side half of
K08, a member without a key (K09), 1 MiB + 1 / 16 MiB / 100 MiB frames (K11), concurrent fan-out
to 20 (K13) and the client core's work staying off its event loop (K14).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sqlite3
import threading
import time

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from websockets.exceptions import ConnectionClosed, InvalidStatus

from bench.tools.loadgen import _register, make_identities, rss_kib
from client_tui.core import MemberWithoutKey, MessageReceived, measure
from server.settings import Settings
from shared.errors import EnvelopeTooLarge
from shared.keys import Identity
from tests.helpers.clients import barrier, messages_of
from tests.helpers.config import PASSWORD
from tests.helpers.relays import db_count, relay_log
from tests.helpers.ws import open_ws, recv_type, send_frame
from tests.vectors import vectorlib

NO_LIMITS = {
    "E2EE_RATE_SENDS_PER_S": "0",
    "E2EE_RATE_REGISTRATIONS_PER_MIN": "0",
    "E2EE_RATE_LOGINS_PER_MIN": "0",
    "E2EE_RATE_KEY_FETCHES_PER_MIN": "0",
}


def b64(d: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def claims(**changes) -> dict:
    now = int(time.time())
    body = {
        "sub": "alice",
        "iss": "e2ee-chat-relay",
        "aud": "e2ee-chat",
        "iat": now,
        "nbf": now,
        "exp": now + 300,
        "jti": "k-case",
        "sid": "no-such-session",
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


async def refused_both_ways(relay, token: str) -> str:
    """The token is refused in the Authorization header (HTTP 403, before the socket is accepted)
    and in the first frame (an error frame, then close 1008); returns the error frame's reason."""
    with pytest.raises(InvalidStatus) as err:
        await open_ws(relay, token)
    assert err.value.response.status_code == 403
    ws = await open_ws(relay, first_frame=json.dumps({"type": "auth", "token": token}))
    frame = await recv_type(ws, "error")
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(ws.recv(), 10)
    assert (frame["code"], ws.close_code) == ("auth_failed", 1008)
    return frame["message"]


async def test_k01_alg_none_and_key_confusion_are_refused_with_a_logged_reason(world):
    relay = world.relay("--jwt-algorithm", "EdDSA", name="eddsa")
    await world.client(relay, "alice", connect=False)
    pub = serialization.load_pem_private_key((relay.data_dir / "jwt-ed25519.pem").read_bytes(), None).public_key()
    pem = pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    tokens = [b64({"alg": "none", "typ": "JWT"}) + "." + b64({"sub": "alice", "exp": int(time.time()) + 300}) + "."]
    for secret in (pem, raw):  # HS256 whose HMAC key is the relay's public key
        signing_input = b64({"alg": "HS256", "typ": "JWT"}) + "." + b64(claims())
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        tokens.append(signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode())
    reasons = [await refused_both_ways(relay, t) for t in tokens]
    assert reasons == ["token algorithm not allowed"] * 3
    assert db_count(relay) == 0
    log = relay_log(relay)
    assert log.count("ws refused peer=127.0.0.1:") >= 6  # each refusal has its line ...
    assert log.count("reason=token algorithm not allowed") >= 6  # ... naming the reason ...
    for t in tokens:  # ... and never the token
        assert t not in log and (t.split(".")[2] == "" or t.split(".")[2][:16] not in log)


async def test_k02_each_claim_failure_has_its_own_reason_at_zero_leeway(world):
    relay = world.relay("--jwt-algorithm", "EdDSA", "--jwt-leeway-s", "0", name="eddsa-strict")
    alice = await world.client(relay, "alice", connect=False)
    key = serialization.load_pem_private_key((relay.data_dir / "jwt-ed25519.pem").read_bytes(), None)
    now = int(time.time())
    cases = {
        "token lacks the 'exp' claim": claims(exp=None),
        "token expired": claims(exp=now - 1),  # 1 s ago: refused at zero leeway
        "token not yet valid": claims(nbf=now + 3600),
        "token lacks the 'aud' claim": claims(aud=None),
        "token audience is wrong": claims(aud="someone-else"),
        "token issuer is wrong": claims(iss="xx-e2ee-chat-relay-xx"),
    }
    for reason, body in cases.items():
        token = jwt.encode(body, key, algorithm="EdDSA")
        assert await refused_both_ways(relay, token) == reason
        assert token.split(".")[2] not in relay_log(relay)
    assert db_count(relay) == 0
    # the same key and claims, in alice's live session: accepted
    good = jwt.encode(claims(sid=alice.session.sid), key, algorithm="EdDSA")
    ws = await open_ws(relay, good)
    assert (await recv_type(ws, "ready"))["user"] == "alice"
    await ws.close()
    # the leeway is a named setting of at most a few seconds
    assert Settings(jwt_leeway_s=5).jwt_leeway_s == 5
    with pytest.raises(ValueError, match="jwt_leeway_s must be in 0..5"):
        Settings(jwt_leeway_s=6)


async def test_k03_tokens_in_rest_urls_are_not_accepted_and_not_logged(world):
    relay = world.relay(name="k03")
    alice = await world.client(relay, "alice", connect=False)
    token = alice.token
    async with httpx2.AsyncClient(base_url=relay.url) as http:
        for path in ("/v1/conversations", "/v1/users/alice/keys"):
            r = await http.get(f"{path}?token={token}&access_token={token}")
            assert r.status_code == 401 and r.json()["error"]["code"] == "auth_failed"
    log = relay_log(relay)
    assert "?[redacted]" in log  # the access log line is there, without its query string
    assert token.split(".")[2][:16] not in log and token.split(".")[1][:16] not in log


async def test_k08_relay_stores_a_resent_envelope_once_and_answers_the_first_seq(world):
    relay = world.relay(name="k08")
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob", connect=False)
    conv = await alice.create_conversation("pair", ["bob"])
    sent = [await alice.send_text(conv, f"m{i}") for i in range(1, 7)]
    fifth = (await messages_of(alice, conv))[4].envelope
    ws = await open_ws(relay, alice.token)
    await recv_type(ws, "ready")
    for _ in range(2):  # envelope #5 again, twice
        await ws.send(send_frame(conv, fifth))
        stored = await recv_type(ws, "stored")
        assert (stored["seq"], stored["duplicate"]) == (sent[4].seq, True)
    await ws.close()
    assert db_count(relay) == 6
    await bob.connect()
    await bob.wait_synced()
    await barrier(bob)
    assert world.rec(bob).texts == [f"m{i}" for i in range(1, 7)]


async def test_k09_a_member_without_a_key_is_named_before_anything_is_sent(world):
    relay = world.relay(name="k09")
    alice = await world.client(relay, "alice")
    await world.client(relay, "bob", connect=False)
    await world.client(relay, "carol", connect=False)
    db = sqlite3.connect(relay.data_dir / "relay.db")
    with db:  # carol's account has no published key (the schema allows it; the relay lists her as missing)
        db.execute("UPDATE user_keys SET current = 0 WHERE user_id = (SELECT id FROM users WHERE username='carol')")
    db.close()
    with pytest.raises(MemberWithoutKey) as err:
        await alice.create_conversation("group", ["bob", "carol"])
    assert err.value.field == "carol" and "carol has published no key" in err.value.message
    # adding her to a conversation is refused the same way, before any statement is signed: a member's
    # keys are bound in the membership log, so a member without keys never gets into one
    conv = await alice.create_conversation("pair", ["bob"])
    with pytest.raises(MemberWithoutKey) as err:
        await alice.change_members(conv, add=["carol"])
    assert err.value.field == "carol"
    assert alice.membership.head(conv).ep == 0 and alice.members[conv] == ["alice", "bob"]
    assert db_count(relay, "SELECT count(*) FROM membership_log") == 1
    assert db_count(relay) == 0


@pytest.mark.process  # the relay process's own memory (RSS)
@pytest.mark.parametrize("size", [1024 * 1024 + 1, 16 * 1024 * 1024, 100 * 1024 * 1024])
async def test_k11_oversized_frames_are_closed_1009_before_being_buffered(world, size):
    relay = world.relay(name="k11")
    alice = await world.client(relay, "alice")
    bob = await world.client(relay, "bob")
    conv = await alice.create_conversation("pair", ["bob"])
    assert (alice.hello.max_frame, alice.hello.max_envelope) == (256 * 1024 + 4096, 256 * 1024)  # announced
    before = rss_kib(relay.proc.pid)
    ws = await open_ws(relay, alice.token, max_size=None)
    await recv_type(ws, "ready")
    with pytest.raises(ConnectionClosed):
        await ws.send("y" * size)
        await asyncio.wait_for(ws.recv(), 30)
    assert ws.close_code == 1009
    grown = rss_kib(relay.proc.pid) - before
    assert grown < 16 * 1024, f"relay grew {grown} KiB for a {size}-byte frame"  # never buffered whole
    sent = await alice.send_text(conv, "still serving")  # everyone else is served
    await barrier(bob)
    assert [(m.text, m.seq) for m in world.rec(bob).of(MessageReceived)] == [("still serving", sent.seq)]
    with pytest.raises(EnvelopeTooLarge, match="262144"):  # the client knows the same limit
        await alice.send_text(conv, "z" * 200_000)


async def test_k13_concurrent_fan_out_to_20_keeps_sessions_apart(world):
    # kept a day: the count below is of what was stored, which a retention sweep (every 60 s) would
    # already have deleted once everyone acked, when the test runs past a minute on a loaded machine
    relay = world.relay(name="k13", env={**NO_LIMITS, "E2EE_RETENTION_KEEP_DAYS": "1"})
    pool = vectorlib.key_pool()[:20]
    alice = await world.client(relay, "alice")
    members = [await world.client(relay, ident.username, identity=ident) for ident in pool]
    conv = await alice.create_conversation("twenty", [m.username for m in members])
    for m in members:
        await m.refresh_conversations()
    # one envelope to 20, then all 21 members send at once while membership and keys are read
    await alice.send_text(conv, "to twenty")
    await asyncio.gather(
        *(c.send_text(conv, f"from {c.username}") for c in [alice, *members]),
        *(m.fetch_keys("alice") for m in members),
        alice.refresh_conversations(),
    )
    everyone = [alice, *members]
    for c in everyone:
        await barrier(c)
        others = {f"from {o.username}" for o in everyone if o is not c}
        got = world.rec(c).texts
        assert len(got) == len(set(got))
        assert set(got) - {"to twenty"} == others
        assert ("to twenty" in got) == (c is not alice)
    assert db_count(relay) == 22
    assert db_count(relay, "SELECT count(*) FROM deliveries") == 22 * 21
    log = relay_log(relay)
    for bad in ("Traceback", "MissingGreenlet", "DetachedInstanceError", "send failed", "internal error", " ERROR "):
        assert bad not in log


async def test_k14_crypto_and_disk_work_stay_off_the_clients_event_loop(world, monkeypatch):
    """The UI shares the client core's event loop: key generation, sealing and every RSA private-key
    operation must run in worker threads, and a 5 MB paste gets a size error before any crypto.
    The loop's longest pause in each phase is printed (not asserted: timing); the Textual app's own
    keystroke test under a 500-message burst is tests/client/test_app_resilience.py."""
    relay = world.relay(name="k14", env=NO_LIMITS)
    crowd = [*vectorlib.key_pool(), *make_identities([f"r{i:03d}" for i in range(34)])]  # 98 more members
    async with httpx2.AsyncClient(base_url=relay.url) as http:
        for ident in crowd:
            await _register(http, ident)
    alice = await world.client(relay, "alice")
    loop_thread = threading.get_ident()
    where: dict[str, set[bool]] = {"generate": set(), "seal": set(), "open": set()}

    def spy(name, fn):
        def wrapped(*a, **kw):
            where[name].add(threading.get_ident() == loop_thread)
            return fn(*a, **kw)

        return wrapped

    monkeypatch.setattr(Identity, "generate", classmethod(spy("generate", Identity.generate.__func__)))
    monkeypatch.setattr(measure, "seal", spy("seal", measure.seal))
    monkeypatch.setattr(measure, "open_", spy("open", measure.open_))
    pauses: dict[str, float] = {}
    phase = ["setup"]

    async def ticker():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            pauses[phase[0]] = max(pauses.get(phase[0], 0.0), now - last)
            last = now

    tick = asyncio.create_task(ticker())
    phase[0] = "generate a 4096-bit key"
    bob = await world.client(relay, "bob", register=False, login=False, connect=False)  # events recorded
    await bob.register(PASSWORD, "bob passphrase", bits=4096)
    await bob.connect()
    await bob.wait_synced()
    pair = await alice.create_conversation("pair", ["bob"])
    big = await bob.create_conversation("hundred", ["alice", *[i.username for i in crowd]])
    phase[0] = "receive a burst of 500"
    for i in range(500):
        await alice.queue_text(pair, f"burst {i}")
    await world.rec(bob).until(lambda r: len(r.texts) == 500, timeout=120)
    phase[0] = "send to 100 recipients"
    sent = await bob.send_text(big, "to a hundred")
    phase[0] = "paste 5 MB"
    with pytest.raises(EnvelopeTooLarge, match="5000000 bytes"):
        await bob.send_text(big, "x" * 5_000_000)  # refused before any crypto
    await asyncio.sleep(0.02)
    tick.cancel()
    assert world.rec(bob).texts == [f"burst {i}" for i in range(500)]
    assert sent.seq == 501 and len(bob.members[big]) == 100
    assert where == {"generate": {False}, "seal": {False}, "open": {False}}  # never on the loop's thread
    print(
        "\nK14, the client event loop's longest pause: "
        + ", ".join(f"{k}: {v * 1000:.0f} ms" for k, v in pauses.items() if k != "setup")
    )
