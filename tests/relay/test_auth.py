"""JWT and websocket authentication against a real relay (cases K01, K02, K03)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sqlite3
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.helpers.relays import relay_log, start_relay
from tests.helpers.ws import make_token, open_ws, recv_type


def b64(d: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


async def refused_in_header(relay, token: str) -> None:
    with pytest.raises(InvalidStatus) as err:
        await open_ws(relay, token)
    assert err.value.response.status_code == 403  # closed before the socket was accepted


async def refused_in_first_frame(relay, token: str) -> str:
    ws = await open_ws(relay, first_frame=json.dumps({"type": "auth", "token": token}))
    frame = await recv_type(ws, "error")
    with pytest.raises(ConnectionClosed):
        await ws.recv()
    assert ws.close_code == 1008
    return frame["message"]


def stored(relay) -> int:
    db = sqlite3.connect(relay.data_dir / "relay.db")
    try:
        return db.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        db.close()


async def test_valid_token_in_header_or_first_frame_is_accepted(make_client, relay):
    alice = await make_client("alice")
    token = make_token(relay.data_dir, sid=alice.session.sid)
    ws = await open_ws(relay, token)
    assert (await recv_type(ws, "ready"))["user"] == "alice"
    await ws.close()
    ws = await open_ws(relay, first_frame=json.dumps({"type": "auth", "token": token}))
    assert (await recv_type(ws, "ready"))["user"] == "alice"
    await ws.close()


async def test_alg_none_is_refused(make_client, relay):
    await make_client("alice")
    none = b64({"alg": "none", "typ": "JWT"}) + "." + b64({"sub": "alice", "exp": int(time.time()) + 300}) + "."
    await refused_in_header(relay, none)
    assert await refused_in_first_frame(relay, none) == "token algorithm not allowed"
    assert stored(relay) == 0
    log = (relay.data_dir / "relay.log").read_text()
    assert "ws refused" in log
    assert none not in log


@pytest.mark.parametrize(
    ("claims", "drop", "reason"),
    [
        ({}, ("exp",), "token lacks the 'exp' claim"),
        ({"exp": -3}, (), "token expired"),  # 3 s ago: past the relay's 2 s leeway
        ({"nbf": 3600}, (), "token not yet valid"),
        ({}, ("aud",), "token lacks the 'aud' claim"),
        ({"aud": "someone-else"}, (), "token audience is wrong"),
        ({"iss": "xx-e2ee-chat-relay-xx"}, (), "token issuer is wrong"),
    ],
)
async def test_claim_checks_each_refused_with_its_reason(make_client, relay, claims, drop, reason):
    await make_client("alice")
    now = int(time.time())
    token = make_token(
        relay.data_dir, drop=drop, **{k: now + v if k in ("exp", "nbf") else v for k, v in claims.items()}
    )
    await refused_in_header(relay, token)
    assert await refused_in_first_frame(relay, token) == reason
    assert stored(relay) == 0
    assert token.split(".")[2] not in (relay.data_dir / "relay.log").read_text()


async def test_wrong_secret_is_refused(make_client, relay):
    await make_client("alice")
    await refused_in_header(relay, make_token(relay.data_dir, key=b"x" * 32))


async def test_token_in_url_is_refused_and_never_logged(make_client, relay):
    await make_client("alice")
    token = make_token(relay.data_dir)
    with pytest.raises(InvalidStatus):
        await open_ws(relay, query=f"?token={token}")
    with pytest.raises(InvalidStatus):
        await open_ws(relay, token, query=f"?access_token={token}")
    text = relay_log(relay)
    signature = token.split(".")[2]
    assert signature not in text
    assert signature[:16] not in text
    assert "query string present" in text


async def test_eddsa_relay_refuses_hs256_signed_with_its_public_key(tmp_path, make_client):
    from cryptography.hazmat.primitives import serialization

    relay = start_relay(tmp_path / "eddsa", "--jwt-algorithm", "EdDSA")
    try:
        client = await make_client("alice", url=relay.url)
        assert client.token.count(".") == 2
        key = serialization.load_pem_private_key((relay.data_dir / "jwt-ed25519.pem").read_bytes(), None)
        pub = key.public_key()
        pem = pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        for secret in (pem, raw):
            header = b64({"alg": "HS256", "typ": "JWT"})
            body = b64(
                {
                    "sub": "alice",
                    "iss": "e2ee-chat-relay",
                    "aud": "e2ee-chat",
                    "iat": int(time.time()),
                    "exp": int(time.time()) + 300,
                    "jti": "x",
                }
            )
            sig = (
                base64.urlsafe_b64encode(hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest())
                .rstrip(b"=")
                .decode()
            )
            await refused_in_header(relay, f"{header}.{body}.{sig}")
        ws = await open_ws(relay, client.token)
        assert (await recv_type(ws, "ready"))["user"] == "alice"
        await ws.close()
        await client.close()
    finally:
        relay.stop()


async def test_no_auth_frame_in_time_closes(make_client, tmp_path):
    relay = start_relay(tmp_path / "slowauth", "--auth-timeout-s", "0.5")
    try:
        ws = await open_ws(relay)
        frame = await recv_type(ws, "error")
        assert frame["code"] == "auth_failed"
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1008
    finally:
        relay.stop()


async def test_connection_closes_when_its_token_expires_unless_renewed(make_client, tmp_path):
    relay = start_relay(tmp_path / "short", env={"E2EE_TOKEN_TTL_S": "2", "E2EE_JWT_LEEWAY_S": "0"})
    try:
        sid = (await make_client("alice", url=relay.url)).session.sid
        short = make_token(relay.data_dir, exp=int(time.time()) + 4, sid=sid)  # minted now, not at registration
        stale = await open_ws(relay, short)
        await recv_type(stale, "ready")
        kept = await open_ws(relay, short)
        await recv_type(kept, "ready")
        fresh = make_token(relay.data_dir, exp=int(time.time()) + 60, sid=sid)
        await kept.send(json.dumps({"type": "auth", "token": fresh}))
        assert (await recv_type(kept, "ready"))["user"] == "alice"  # renewal acknowledged
        bob_token = make_token(relay.data_dir, sub="bob", exp=int(time.time()) + 60)
        await kept.send(json.dumps({"type": "auth", "token": bob_token}))
        assert (await recv_type(kept, "error"))["code"] == "auth_failed"  # not someone else's token
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(stale.recv(), 10)
        assert stale.close_code == 4401
        await kept.send(json.dumps({"type": "ping", "nonce": 7}))
        assert (await recv_type(kept, "pong"))["nonce"] == 7  # the renewed connection lives on
        await kept.close()
    finally:
        relay.stop()
