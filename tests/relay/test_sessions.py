"""Login sessions that end (issue 13): refresh rotation and reuse detection, the absolute lifetime
and the idle timeout, logout here and everywhere, password change, the session list, and access
tokens that die with their session. In-process: ``create_app`` on a real SQLite file."""

from __future__ import annotations

import asyncio
import time

import jwt

from tests.helpers.asgi import account, http, register, running
from tests.helpers.config import PASSWORD

DAY_S = 86_400


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


async def refresh(c, credential: str):
    return await c.post("/v1/token/refresh", json={"refresh": credential})


def ended(r, reason: str) -> bool:
    err = r.json()["error"]
    return r.status_code == 401 and err["code"] == "session_ended" and err["detail"]["reason"] == reason


async def test_login_answers_lifetimes_and_refresh_rotates_the_credential(settings_for, identities):
    async with running(settings_for(token_ttl_s=600)) as app, http(app) as c:
        first = await register(c, identities["alice"])
        assert set(first) == {"token", "expires_in", "refresh", "refresh_expires_in", "session", "username"}
        assert 598 <= first["expires_in"] <= 600 and first["refresh"].startswith(first["session"] + ".")
        assert 14 * DAY_S - 2 <= first["refresh_expires_in"] <= 14 * DAY_S  # the idle timeout comes first
        claims = jwt.decode(first["token"], options={"verify_signature": False})
        assert claims["sid"] == first["session"]
        r = await refresh(c, first["refresh"])
        second = r.json()
        assert r.status_code == 200 and second["session"] == first["session"]
        assert second["refresh"] != first["refresh"] and second["token"] != first["token"]
        assert (await c.get("/v1/conversations", headers=auth(second["token"]))).status_code == 200
        assert (await c.get("/v1/conversations", headers=auth(first["token"]))).status_code == 200  # same session
        for bad in ("", "x.y", first["session"], "A" * 22 + "." + "B" * 43):
            r = await refresh(c, bad)
            assert r.status_code == 401 and r.json()["error"]["code"] in ("auth_failed", "session_ended")
        assert (await c.post("/v1/token/renew", headers=auth(second["token"]))).status_code == 404  # gone


async def test_a_reused_refresh_credential_ends_the_session(settings_for, identities):
    async with running(settings_for()) as app, http(app) as c:
        stolen = await register(c, identities["alice"])
        owner = (await refresh(c, stolen["refresh"])).json()  # the owner refreshed first
        r = await refresh(c, stolen["refresh"])  # the thief presents the old credential
        assert ended(r, "refresh_reused")
        assert ended(await refresh(c, owner["refresh"]), "refresh_reused")  # the whole session is over
        for token in (stolen["token"], owner["token"]):
            assert ended(await c.get("/v1/conversations", headers=auth(token)), "refresh_reused")
        m = (await c.get("/v1/metrics", headers=auth(app.state.e2ee.operator_token))).json()["sessions"]
        assert m["reuse_detected"] == 1


async def test_a_renewal_chain_cannot_outlive_the_sessions_absolute_lifetime(settings_for, identities):
    s = settings_for(session_lifetime_days=3 / DAY_S, token_ttl_s=900, jwt_leeway_s=0)
    async with running(s) as app, http(app) as c:
        login = await register(c, identities["alice"])
        end_s = jwt.decode(login["token"], options={"verify_signature": False})["iat"] + 3
        chain = [login]
        while True:
            r = await refresh(c, chain[-1]["refresh"])
            if r.status_code != 200:
                break
            chain.append(r.json())
            await asyncio.sleep(0.25)
        assert ended(r, "expired") and time.time() >= end_s - 1
        assert len(chain) > 3
        for link in chain:  # no token of the chain outlives the session, whatever the 900 s token lifetime
            assert jwt.decode(link["token"], options={"verify_signature": False})["exp"] <= end_s
            assert link["expires_in"] <= 3 and link["refresh_expires_in"] <= 3
        r = await c.get("/v1/conversations", headers=auth(chain[-1]["token"]))
        assert r.status_code == 401


async def test_an_idle_session_ends(settings_for, identities):
    async with running(settings_for(session_idle_days=1 / DAY_S)) as app, http(app) as c:
        login = await register(c, identities["alice"])
        kept = (await refresh(c, login["refresh"])).json()
        await asyncio.sleep(1.1)
        assert ended(await refresh(c, kept["refresh"]), "idle")


async def test_logout_and_logout_everywhere_end_access_at_once(settings_for, identities):
    async with running(settings_for()) as app, http(app) as c:
        one = await register(c, identities["alice"])
        two = (await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})).json()
        three = (await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})).json()
        r = await c.post("/v1/sessions/logout", headers=auth(one["token"]))
        assert r.status_code == 200 and r.json() == {"ended": 1}
        assert ended(await c.get("/v1/conversations", headers=auth(one["token"])), "logged_out")
        assert ended(await refresh(c, one["refresh"]), "logged_out")
        assert (await c.get("/v1/conversations", headers=auth(two["token"]))).status_code == 200
        r = await c.post("/v1/sessions/logout-everywhere", headers=auth(two["token"]))
        assert r.json() == {"ended": 2}
        for s in (two, three):
            assert ended(await c.get("/v1/conversations", headers=auth(s["token"])), "logged_out_everywhere")
            assert ended(await refresh(c, s["refresh"]), "logged_out_everywhere")


async def test_password_change_ends_every_other_session(settings_for, identities):
    async with running(settings_for()) as app, http(app) as c:
        here = await register(c, identities["alice"])
        other = (await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})).json()
        r = await c.post(
            "/v1/account/password", json={"password": "wrong", "new_password": "n" * 12}, headers=auth(here["token"])
        )
        assert r.status_code == 401
        r = await c.post(
            "/v1/account/password",
            json={"password": PASSWORD, "new_password": "new pass 1234"},
            headers=auth(here["token"]),
        )
        assert r.status_code == 200 and r.json() == {"ended": 1}
        assert ended(await c.get("/v1/conversations", headers=auth(other["token"])), "password_changed")
        assert ended(await refresh(c, other["refresh"]), "password_changed")
        assert (await c.get("/v1/conversations", headers=auth(here["token"]))).status_code == 200
        assert (await refresh(c, here["refresh"])).status_code == 200
        assert (await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})).status_code == 401
        assert (await c.post("/v1/token", json={"username": "alice", "password": "new pass 1234"})).status_code == 200


async def test_sessions_are_listed_and_one_can_be_ended_by_its_owner_only(settings_for, identities):
    async with running(settings_for(max_sessions_per_user=3)) as app, http(app) as c:
        assert (await c.post("/v1/accounts", json=account(identities["alice"]))).status_code == 201
        logins = []
        for agent in ("laptop", "phone", "tablet"):
            logins.append(
                (
                    await c.post(
                        "/v1/token",
                        json={"username": "alice", "password": PASSWORD},
                        headers={"user-agent": f"e2ee-chat ({agent})\x1b[31m"},
                    )
                ).json()
            )
        listed = (await c.get("/v1/sessions", headers=auth(logins[1]["token"]))).json()["sessions"]
        assert [s["user_agent"] for s in listed] == [
            "e2ee-chat (tablet)[31m",
            "e2ee-chat (phone)[31m",
            "e2ee-chat (laptop)[31m",
        ]  # control characters dropped
        assert [s["current"] for s in listed] == [False, True, False]
        bob = await register(c, identities["bob"])
        r = await c.post(f"/v1/sessions/{logins[0]['session']}/revoke", headers=auth(bob["token"]))
        assert r.status_code == 404  # not bob's
        r = await c.post(f"/v1/sessions/{logins[0]['session']}/revoke", headers=auth(logins[1]["token"]))
        assert r.json() == {"ended": 1}
        assert ended(await c.get("/v1/conversations", headers=auth(logins[0]["token"])), "revoked")
        # a fourth live login would pass max_sessions_per_user: the least recently used one ends
        await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})
        await c.post("/v1/token", json={"username": "alice", "password": PASSWORD})
        assert ended(await c.get("/v1/conversations", headers=auth(logins[1]["token"])), "too_many_sessions")
        assert len((await c.get("/v1/sessions", headers=auth(logins[2]["token"]))).json()["sessions"]) == 3


async def test_access_tokens_are_checked_against_a_cache_not_a_query_per_request(settings_for, identities):
    async with running(settings_for(session_cache_s=60)) as app, http(app) as c:
        login = await register(c, identities["alice"])
        guard = app.state.e2ee.relay.guard
        queries = guard.queries
        for _ in range(50):
            assert (await c.get("/v1/conversations", headers=auth(login["token"]))).status_code == 200
        assert guard.queries == queries  # the login put the session in the cache: no read at all
        guard._cache.clear()
        await asyncio.gather(*(c.get("/v1/conversations", headers=auth(login["token"])) for _ in range(20)))
        assert guard.queries == queries + 1  # twenty requests, one read
        assert app.state.e2ee.settings.session_cache_ttl_s == 60
    assert settings_for(token_ttl_s=30, session_cache_s=60).session_cache_ttl_s == 15  # never over half a token
