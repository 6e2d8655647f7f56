"""Sessions across two relays on one PostgreSQL and Redis (issue 13): a session ended on relay A is
refused on relay B at once (a broker note) and, when that note is lost, within ``session_cache_s``
(B re-reads the session); its websocket on B is closed either way."""

from __future__ import annotations

import asyncio
import time

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed

from tests.helpers.asgi import account
from tests.helpers.config import PASSWORD
from tests.helpers.scale import two_relays, wait_broker
from tests.helpers.ws import open_ws, recv_type

CACHE_S = 2


async def login(http: httpx2.AsyncClient, url: str) -> dict:
    return (await http.post(url + "/v1/token", json={"username": "alice", "password": PASSWORD})).json()


def auth(s: dict) -> dict:
    return {"Authorization": f"Bearer {s['token']}"}


async def closed(ws) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    return ws.close_code, ws.close_reason


@pytest.mark.process  # two relay processes on PostgreSQL and Redis
async def test_a_session_ended_on_one_relay_is_refused_on_the_other(tmp_path, pg_url, redis_path, identities):
    a, b = two_relays(tmp_path, pg_url, redis_path.url, env={"E2EE_SESSION_CACHE_S": str(CACHE_S)})
    try:
        await wait_broker(a, True)
        await wait_broker(b, True)
        async with httpx2.AsyncClient() as http:
            assert (await http.post(a.url + "/v1/accounts", json=account(identities["alice"]))).status_code == 201
            here, there = await login(http, a.url), await login(http, b.url)
            ws = await open_ws(b, there["token"])
            await recv_type(ws, "ready")
            assert (await http.get(b.url + "/v1/conversations", headers=auth(there))).status_code == 200
            # 1. the broker carries the news: B refuses at once and closes the socket
            t0 = time.monotonic()
            r = await http.post(a.url + "/v1/sessions/logout-everywhere", headers=auth(here))
            assert r.json() == {"ended": 2}
            assert await closed(ws) == (4403, "session ended (logged_out_everywhere): log in again")
            note_s = time.monotonic() - t0
            r = await http.get(b.url + "/v1/conversations", headers=auth(there))
            assert r.json()["error"]["code"] == "session_ended"
            # 2. Redis cut: the note is lost; B learns from the database within session_cache_s
            here, there = await login(http, a.url), await login(http, b.url)
            assert (await http.get(b.url + "/v1/conversations", headers=auth(there))).status_code == 200
            await redis_path.cut()
            await wait_broker(a, False)
            t0 = time.monotonic()
            await http.post(a.url + "/v1/sessions/logout-everywhere", headers=auth(here))
            while (await http.get(b.url + "/v1/conversations", headers=auth(there))).status_code == 200:
                await asyncio.sleep(0.05)
            cache_s = time.monotonic() - t0
        print(
            f"\nsession ended on A: refused on B after {note_s * 1000:.0f} ms with the broker, "
            f"{cache_s:.2f} s without it (session_cache_s {CACHE_S})"
        )
        assert cache_s <= CACHE_S + 1
    finally:
        a.stop()
        b.stop()
