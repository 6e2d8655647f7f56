"""In-process relay helpers: ``create_app`` with its lifespan, reached through httpx2.ASGITransport."""

from __future__ import annotations

import contextlib
import os

import httpx2

from server.app import create_app
from server.settings import Settings
from shared import rotation
from shared.b64 import b64u_encode
from shared.keys import Identity, spki_der
from tests.helpers.config import PASSWORD

FAST = {"argon2_time_cost": 1, "argon2_memory_kib": 8192, "argon2_parallelism": 1}
SECRET = "ab" * 32


@contextlib.asynccontextmanager
async def running(settings: Settings):
    """The app with its lifespan running: ``async with running(s) as app``."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


def http(app, address: str = "127.0.0.1") -> httpx2.AsyncClient:
    """An HTTP client whose requests reach ``app`` from ``address``."""
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app, client=(address, 40000)), base_url="http://relay")


def account(ident: Identity) -> dict:
    return {
        "username": ident.username,
        "password": PASSWORD,
        "wrap_key": b64u_encode(spki_der(ident.public.wrap_key)),
        "sign_key": b64u_encode(spki_der(ident.public.sign_key)),
    }


async def register(client: httpx2.AsyncClient, ident: Identity) -> dict:
    """Register ``ident`` and log in; the login answer (token, ...)."""
    r = await client.post("/v1/accounts", json=account(ident))
    assert r.status_code == 201, r.text
    r = await client.post("/v1/token", json={"username": ident.username, "password": PASSWORD})
    assert r.status_code == 200, r.text
    return r.json()


def bearer(login: dict) -> dict:
    return {"Authorization": f"Bearer {login['token']}"}


async def new_conversation(
    client: httpx2.AsyncClient, login: dict, creator: Identity, members: list[Identity], title: str = "t"
) -> tuple[str, str]:
    """Create a conversation over REST from ``creator``'s signed creation statement (with
    ``members`` besides the creator); returns ``(id, head hash)``: what an envelope to it names."""
    from shared import membership

    st = membership.create(
        creator, b64u_encode(os.urandom(16)), title, [membership.member_of(i.public) for i in (creator, *members)]
    )
    r = await client.post("/v1/conversations", json={"statement": st.signed}, headers=bearer(login))
    assert r.status_code == 201, r.text
    return st.cid, st.hash


async def rest_send(client: httpx2.AsyncClient, login: dict, conversation: str, env: bytes) -> int:
    """Store the envelope ``env`` in ``conversation`` with a REST send as ``login``'s user (201
    asserted); its seq."""
    r = await client.post(
        f"/v1/conversations/{conversation}/messages",
        content=env,
        headers={**bearer(login), "Content-Type": "application/jose+json"},
    )
    assert r.status_code == 201, r.text
    return r.json()["seq"]


async def rotate(client: httpx2.AsyncClient, login: dict, old: Identity, new: Identity, counter: int) -> None:
    """Publish ``new`` as ``old``'s successor (``POST /v1/keys/rotate``, a v2 rotation statement
    signed by ``old``; ``counter``: the number of key pairs published before); asserts 200."""
    st = rotation.Rotation(old.username, (old.wrap_kid, old.sign_kid), (new.wrap_kid, new.sign_kid), counter)
    body = {
        "wrap_key": b64u_encode(spki_der(new.public.wrap_key)),
        "sign_key": b64u_encode(spki_der(new.public.sign_key)),
        "counter": counter,
        "signature": b64u_encode(old.sign_private.sign(st.statement())),
    }
    r = await client.post("/v1/keys/rotate", json=body, headers=bearer(login))
    assert r.status_code == 200, r.text
