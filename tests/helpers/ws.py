"""Raw websocket and token helpers for relay tests (no client core: exact frames on the wire)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import jwt
import msgspec
from websockets.asyncio.client import connect

from shared import frames


def relay_secret(data_dir: Path) -> bytes:
    return bytes.fromhex((data_dir / "jwt.secret").read_text().strip())


def make_token(
    data_dir: Path, sub: str = "alice", *, drop: tuple[str, ...] = (), alg: str = "HS256", key=None, **claims
) -> str:
    """A token signed with the relay's own HS256 secret (unless ``key``), claims overridable. Its
    ``sid`` names no session unless given (a real one: ``client.session.sid``)."""
    now = int(time.time())
    body = {
        "sub": sub,
        "iss": "e2ee-chat-relay",
        "aud": "e2ee-chat",
        "iat": now,
        "nbf": now,
        "exp": now + 300,
        "jti": "t1",
        "sid": "no-such-session",
        **claims,
    }
    for name in drop:
        body.pop(name, None)
    return jwt.encode(body, relay_secret(data_dir) if key is None else key, algorithm=alg)


def ws_url(relay) -> str:
    return relay.url.replace("http", "ws", 1) + "/v1/ws"


async def open_ws(relay, token: str | None = None, *, first_frame: str | None = None, query: str = "", **kw):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ws = await connect(ws_url(relay) + query, additional_headers=headers, compression=None, **kw)
    hello = json.loads(await ws.recv())
    assert hello["type"] == "hello"
    if first_frame is not None:
        await ws.send(first_frame)
    return ws


async def recv_type(ws, kind: str, timeout: float = 10) -> dict:
    """Next frame of type ``kind`` (others skipped)."""
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if frame["type"] == kind:
            return frame


def send_frame(conversation: str, env: bytes) -> str:
    return frames.encode(frames.Send(conversation, msgspec.Raw(env))).decode()
