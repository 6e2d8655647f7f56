"""The Starlette application: the route table (read it top to bottom), REST handlers, lifespan."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator

import msgspec
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from shared import frames, keys, rotation
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import (
    AuthFailed,
    Conflict,
    E2EEError,
    InvalidRequest,
    KeyInvalid,
    LimitExceeded,
    NotFound,
)
from shared.names import canonical_username

from . import membership, metrics, queries, session_api, store
from .auth import Passwords, Tokens
from .bodycap import BodyCap
from .db import UserKey, commits_wait_for_disk, create_engine, create_writer_engine, sessionmaker
from .relay import Relay
from .retention import Retention
from .sessions import BearerAuth
from .settings import Settings
from .web import ENVELOPE_TYPES, Limits, State, error_answer
from .web import claims_of as _claims
from .web import client_address as _peer
from .web import json_response as _json
from .web import read_body as _body
from .web import require_type as _require_type
from .web import state as _state
from .writer import Writer

log = logging.getLogger("e2ee.relay.http")


# -- request bodies --------------------------------------------------------------------------------
class RegisterBody(msgspec.Struct, forbid_unknown_fields=True):
    username: str
    password: str
    wrap_key: str  # b64url SPKI DER (RSA 2048-4096, e = 65537)
    sign_key: str  # b64url SPKI DER (Ed25519)


class StatementBody(msgspec.Struct, forbid_unknown_fields=True):
    statement: str  # a membership statement's signed form (shared.membership, PROTOCOL.md §12)


class RotateBody(msgspec.Struct, forbid_unknown_fields=True):
    wrap_key: str  # b64url SPKI DER
    sign_key: str  # b64url SPKI DER
    counter: int  # this rotation's place in the user's chain: 1 for the first (shared.rotation, v2)
    signature: str  # b64url Ed25519 by the current signing key over shared.rotation.Rotation(...).statement()


# -- handlers --------------------------------------------------------------------------------------
async def healthz(request: Request) -> Response:
    return _json({"ok": True, "level": _state(request).settings.level})


async def _load_keys(body: RegisterBody | RotateBody, username: str) -> keys.PublicIdentity:
    try:
        wrap = keys.load_wrap_public_key(b64u_decode(body.wrap_key, "wrap_key"), username)
        sign = keys.load_signing_public_key(b64u_decode(body.sign_key, "sign_key"), username)
    except KeyInvalid:
        raise  # its precise code (key_size_refused, key_exponent_refused, ...) reaches the client
    except E2EEError as exc:
        raise KeyInvalid(exc.message, field=exc.field) from None
    return keys.PublicIdentity(username, wrap, sign)


async def relay_key(request: Request) -> Response:
    """Level 3: the relay's RSA public key (SPKI DER, b64url) and its key id, for clients to pin."""
    levels = _state(request).relay.levels
    if levels.relay_key_b64 is None or levels.relay_private is None:
        raise NotFound(f"this relay runs level {_state(request).settings.level}: it has no L3 key")
    return _json({"relay_key": levels.relay_key_b64, "kid": keys.key_id(levels.relay_private.public_key())})


async def register(request: Request) -> Response:
    st = _state(request)
    st.limits.registrations.check(_peer(request))
    body = await _body(request, RegisterBody)
    username = canonical_username(body.username)
    ident = await _load_keys(body, username)
    password_hash = await st.passwords.hash(body.password)
    await st.writer.run(
        store.add_user(username, password_hash, ident.wrap_kid, keys.spki_der(ident.wrap_key),
                       ident.sign_kid, keys.spki_der(ident.sign_key))
    )
    log.info("registered user=%s wrap_bits=%d", username, ident.wrap_key.key_size)
    return _json({"username": username, "wrap_kid": ident.wrap_kid, "sign_kid": ident.sign_kid}, 201)


def _key_json(username: str, row: UserKey) -> dict[str, object]:
    return {
        "username": username, "wrap_key": b64u_encode(row.wrap_key), "sign_key": b64u_encode(row.sign_key),
        "wrap_kid": row.wrap_kid, "sign_kid": row.sign_kid,
    }


async def user_keys(request: Request) -> Response:
    claims = _claims(request)
    st = _state(request)
    st.limits.key_fetches.check(claims.sub)
    username = canonical_username(request.path_params["username"])
    async with st.sessions() as session:
        row = await queries.current_keys(session, username)
    return _json(_key_json(username, row))


async def user_key_history(request: Request) -> Response:
    """Every key the user published, oldest first, each with the rotation signature (b64url or null)
    made by the signing key before it, the statement's version, its counter (the row's index) and
    ``published_seq`` (the highest message seq stored when it was published; null for first keys)."""
    claims = _claims(request)
    st = _state(request)
    st.limits.key_fetches.check(claims.sub)
    username = canonical_username(request.path_params["username"])
    async with st.sessions() as session:
        rows = await queries.key_history(session, username)
    if not rows:
        raise NotFound(f"no user {username!r}", field="username")
    return _json({"username": username, "keys": [
        {**_key_json(username, r), "current": r.current, "created_at_ms": r.created_at_ms,
         "rotation_sig": b64u_encode(r.rotation_sig) if r.rotation_sig else None,
         "rotation_v": r.rotation_v if r.rotation_sig else None, "counter": i,
         "published_seq": r.published_seq} for i, r in enumerate(rows)]})


async def rotate_keys(request: Request) -> Response:
    """Publish new keys under a v2 rotation statement (shared.rotation) signed by the current
    signing key, naming the user, the current key ids and the next counter; members are told by a
    key_changed event. Answers the ``published_seq`` recorded with the new keys."""
    claims = _claims(request)
    st = _state(request)
    body = await _body(request, RotateBody)
    new = await _load_keys(body, claims.sub)
    async with st.sessions() as session:
        history = await queries.key_history(session, claims.sub)
        user = await queries.get_user(session, claims.sub)
    old = next((r for r in history if r.current), None)
    if user is None or old is None:
        raise NotFound(f"{claims.sub} has no keys to rotate", field="wrap_key")
    if body.counter != len(history):
        raise Conflict(f"rotation counter {body.counter}: the next one is {len(history)}", field="counter")
    statement = rotation.Rotation(claims.sub, (old.wrap_kid, old.sign_kid), (new.wrap_kid, new.sign_kid), body.counter)
    sig = b64u_decode(body.signature, "signature")
    rotation.verify(keys.load_signing_public_key(old.sign_key, claims.sub), statement, sig)
    st.relay.forget_members()
    published = await st.writer.run(store.rotate_keys(
        user.id, new.wrap_kid, keys.spki_der(new.wrap_key), new.sign_kid, keys.spki_der(new.sign_key), sig,
        old_wrap_kid=old.wrap_kid, counter=body.counter))
    async with st.sessions() as session:
        peers = await queries.peers_of(session, user.id)
    st.relay.forget_members()
    st.relay.notify(peers, frames.Event("key_changed", user=claims.sub))
    log.info("keys rotated user=%s counter=%d published_seq=%d peers=%d", claims.sub, body.counter, published,
             len(peers))
    return _json({"wrap_kid": new.wrap_kid, "sign_kid": new.sign_kid, "counter": body.counter,
                  "published_seq": published})


async def _statement(request: Request, cid: str | None) -> Response:
    """Check a membership statement against the stored log, store it (the member table follows its
    members), and tell every member before and after (``members_changed``)."""
    claims = _claims(request)
    st = _state(request)
    (st.limits.conversations if cid is None else st.limits.member_changes).check(claims.sub)
    body = await _body(request, StatementBody)
    async with st.sessions() as session:
        checked = await membership.check(session, body.statement, claims.sub, cid=cid,
                                          max_members=st.settings.max_members)
    s = checked.statement
    if not checked.duplicate:
        before, after = await st.writer.run(membership.append(checked))
        st.relay.forget_members(s.cid)
        st.relay.notify(before + after, frames.Event("members_changed", conversation=s.cid))
        log.info("membership conv=%s epoch=%d op=%s by=%s members=%d", s.cid, s.ep, s.op, claims.sub, len(s.members))
    return _json({"id": s.cid, "title": s.title, "members": list(s.usernames), "epoch": s.ep, "head": s.hash},
                 200 if checked.duplicate else 201)


async def create_conversation(request: Request) -> Response:
    """A new conversation from its signed creation statement (the client chose its id)."""
    return await _statement(request, None)


async def append_statement(request: Request) -> Response:
    """The next statement of a conversation's membership log (add, remove, title, admins, update)."""
    return await _statement(request, request.path_params["cid"])


async def membership_log(request: Request) -> Response:
    """The conversation's membership log, oldest first (after epoch ``?after=N`` if given): all of
    it for a member, up to their removal for a former member."""
    claims = _claims(request)
    st = _state(request)
    try:
        after = int(request.query_params.get("after", "-1"))
    except ValueError:
        raise InvalidRequest("after: an epoch number", field="after") from None
    async with st.sessions() as session:
        statements, epoch, head = await membership.log_for(session, request.path_params["cid"], claims.sub, after)
    return _json({"id": request.path_params["cid"], "statements": statements, "epoch": epoch, "head": head})


async def post_message(request: Request) -> Response:
    """REST send: the body is the envelope; same checks as the websocket; 201 with mid and seq.

    Level 1 takes the sender from the ``X-E2EE-User`` header without any check (the point of
    L1); level 3 needs a websocket session key, so it has no REST send.
    """
    st = _state(request)
    level = st.settings.level
    if level == 3:
        raise InvalidRequest("level 3 sends need a websocket session key", field="level")
    subject = request.headers.get("x-e2ee-user", "") if level == 1 else _claims(request).sub
    _require_type(request, ENVELOPE_TYPES)
    data = await request.body()
    if len(data) > st.settings.max_envelope_bytes:
        raise LimitExceeded(f"envelope over {st.settings.max_envelope_bytes} bytes", field="envelope")
    async with st.sessions() as session:
        user = await queries.get_user(session, subject)
    if user is None:
        raise AuthFailed("token subject is unknown", field="sub")
    st.relay.sends.check(user.username)
    stored = await st.relay.accept(user.username, user.id, request.path_params["cid"], data)
    return _json({"mid": stored.mid, "seq": stored.seq, "duplicate": stored.duplicate},
                 200 if stored.duplicate else 201)


async def list_conversations(request: Request) -> Response:
    claims = _claims(request)
    st = _state(request)
    async with st.sessions() as session:
        user = await queries.get_user(session, claims.sub)
        if user is None:
            raise AuthFailed("token subject is unknown", field="sub")
        return _json({"conversations": await queries.conversations_of(session, user.id)})


async def websocket(ws: WebSocket) -> None:
    await _state(ws).relay.serve(ws)


routes = [
    Route("/healthz", healthz),
    Route("/v1/metrics", metrics.metrics),
    Route("/v1/relay-key", relay_key),
    Route("/v1/accounts", register, methods=["POST"]),
    Route("/v1/token", session_api.login, methods=["POST"]),
    Route("/v1/token/refresh", session_api.refresh, methods=["POST"]),
    Route("/v1/sessions", session_api.list_sessions, methods=["GET"]),
    Route("/v1/sessions/logout", session_api.logout, methods=["POST"]),
    Route("/v1/sessions/logout-everywhere", session_api.logout_everywhere, methods=["POST"]),
    Route("/v1/sessions/{sid}/revoke", session_api.revoke, methods=["POST"]),
    Route("/v1/account/password", session_api.change_password, methods=["POST"]),
    Route("/v1/users/{username}/keys", user_keys),
    Route("/v1/users/{username}/keys/history", user_key_history),
    Route("/v1/keys/rotate", rotate_keys, methods=["POST"]),
    Route("/v1/conversations", create_conversation, methods=["POST"]),
    Route("/v1/conversations", list_conversations, methods=["GET"]),
    Route("/v1/conversations/{cid}/log", append_statement, methods=["POST"]),
    Route("/v1/conversations/{cid}/log", membership_log, methods=["GET"]),
    Route("/v1/conversations/{cid}/messages", post_message, methods=["POST"]),
    WebSocketRoute("/v1/ws", websocket),
]


def create_app(settings: Settings) -> Starlette:
    """Build the relay app. The database must be migrated before it starts (see server.cli)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = create_engine(settings.db_url, sqlite_synchronous=settings.sqlite_synchronous)
        writer_engine = create_writer_engine(settings.db_url, sqlite_synchronous=settings.sqlite_synchronous)
        sessions = sessionmaker(engine)
        writer = Writer(sessions, writer_engine, inline=not commits_wait_for_disk(settings.sqlite_synchronous))
        writer.start()
        jwt_key = settings.resolve_jwt_key()
        tokens = Tokens(settings.jwt_algorithm, jwt_key, settings.jwt_issuer,
                        settings.jwt_audience, settings.token_ttl_s, settings.jwt_leeway_s)
        passwords = Passwords(settings.argon2_time_cost, settings.argon2_memory_kib, settings.argon2_parallelism,
                              settings.max_password_hashes, settings.max_password_queue)
        relay = Relay(settings, tokens, sessions, writer)
        if settings.broker:
            from .broker import RedisBroker, note_key

            relay.broker = RedisBroker(settings.broker, settings.broker_channel, relay, note_key(jwt_key))
            await relay.broker.start()
        retention = Retention(settings, writer)
        retention.start()
        app.state.e2ee = State(settings, sessions, writer, tokens, passwords, relay, Limits.from_settings(settings),
                               settings.resolve_operator_token(), retention)
        log.info("relay ready level=%d db=%s", settings.level, engine.dialect.name)
        try:
            yield
        finally:
            await retention.stop()
            await relay.shutdown()
            if relay.broker is not None:
                await relay.broker.stop()
            await writer.stop()
            await engine.dispose()
            if writer_engine is not None:
                writer_engine.dispose()
            log.info("relay stopped")

    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware(settings),
                     exception_handlers={E2EEError: error_answer})


def middleware(settings: Settings) -> list[Middleware]:
    """Outermost first: client addresses from a trusted proxy's X-Forwarded-For (only when the
    peer is one of ``trusted_proxies``; uvicorn's own proxy handling is off), then the body cap."""
    messages = re.compile(r"^/v1/conversations/[^/]+/messages$")

    def cap_for(path: str) -> int:
        return settings.max_envelope_bytes if messages.match(path) else settings.max_json_body_bytes

    stack = [Middleware(BodyCap, cap_for=cap_for), Middleware(BearerAuth)]
    if settings.trusted_proxy_list():
        stack.insert(0, Middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxy_list()))
    return stack
