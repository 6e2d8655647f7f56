"""The Starlette application: the route table (read it top to bottom), the lifespan that builds the
relay's parts, and the middleware. The handlers are in ``session_api``, ``keys_api`` and
``conversations_api``; the websocket in :mod:`server.endpoint`."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from shared.errors import BlobTooLarge, BodyTooLarge, E2EEError

from . import blobs_api, conversations_api, keys_api, kt_api, kt_store, metrics, session_api
from .auth import Passwords, Tokens
from .bodycap import BodyCap
from .db import commits_wait_for_disk, create_engine, create_writer_engine, sessionmaker
from .kt_log import KtLog
from .relay import Relay
from .retention import Retention
from .sessions import BearerAuth
from .settings import Settings
from .web import Limits, State, error_answer
from .web import json_response as _json
from .web import state as _state
from .writer import Writer

log = logging.getLogger("e2ee.relay.http")


# -- handlers --------------------------------------------------------------------------------------
async def healthz(request: Request) -> Response:
    """``{"ok": true, "level"}``: the relay answers."""
    return _json({"ok": True, "level": _state(request).settings.level})


async def websocket(ws: WebSocket) -> None:
    """``/v1/ws``: :meth:`server.relay.Relay.serve`."""
    await _state(ws).relay.serve(ws)


routes = [
    Route("/healthz", healthz),
    Route("/v1/metrics", metrics.metrics),
    Route("/v1/relay-key", keys_api.relay_key),
    Route("/v1/accounts", keys_api.register, methods=["POST"]),
    Route("/v1/token", session_api.login, methods=["POST"]),
    Route("/v1/token/refresh", session_api.refresh, methods=["POST"]),
    Route("/v1/sessions", session_api.list_sessions, methods=["GET"]),
    Route("/v1/sessions/logout", session_api.logout, methods=["POST"]),
    Route("/v1/sessions/logout-everywhere", session_api.logout_everywhere, methods=["POST"]),
    Route("/v1/sessions/{sid}/revoke", session_api.revoke, methods=["POST"]),
    Route("/v1/account/password", session_api.change_password, methods=["POST"]),
    Route("/v1/users/{username}/keys", keys_api.user_keys),
    Route("/v1/users/{username}/keys/history", keys_api.user_key_history),
    Route("/v1/keys/rotate", keys_api.rotate_keys, methods=["POST"]),
    Route("/v1/keys/outstanding", keys_api.outstanding, methods=["GET"]),
    Route("/v1/kt/head", kt_api.head),
    Route("/v1/kt/consistency", kt_api.consistency),
    Route("/v1/kt/entries", kt_api.entries),
    Route("/v1/conversations", conversations_api.create_conversation, methods=["POST"]),
    Route("/v1/conversations", conversations_api.list_conversations, methods=["GET"]),
    Route("/v1/conversations/{cid}/log", conversations_api.append_statement, methods=["POST"]),
    Route("/v1/conversations/{cid}/log", conversations_api.membership_log, methods=["GET"]),
    Route("/v1/conversations/{cid}/messages", conversations_api.post_message, methods=["POST"]),
    Route("/v1/blob-limits", blobs_api.limits, methods=["GET"]),
    Route("/v1/blobs", blobs_api.upload, methods=["POST"]),
    Route("/v1/blobs/{blob_id}", blobs_api.download, methods=["GET"]),
    Route("/v1/blobs/{blob_id}", blobs_api.remove, methods=["DELETE"]),
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
        tokens = Tokens(
            settings.jwt_algorithm,
            jwt_key,
            settings.jwt_issuer,
            settings.jwt_audience,
            settings.token_ttl_s,
            settings.jwt_leeway_s,
        )
        passwords = Passwords(
            settings.argon2_time_cost,
            settings.argon2_memory_kib,
            settings.argon2_parallelism,
            settings.max_password_hashes,
            settings.max_password_queue,
        )
        relay = Relay(settings, tokens, sessions, writer)
        if settings.broker:
            from .broker import RedisBroker, note_key

            relay.broker = RedisBroker(settings.broker, settings.broker_channel, relay, note_key(jwt_key))
            await relay.broker.start()
        retention = Retention(settings, writer)
        retention.start()
        ktlog = KtLog(sessions, settings.resolve_kt_key())
        logged = await writer.run(kt_store.backfill)
        size = await ktlog.sync()
        log.info("key transparency log: %d leaves (%d appended for keys published before it)", size, logged)
        app.state.e2ee = State(
            settings,
            sessions,
            writer,
            tokens,
            passwords,
            relay,
            Limits.from_settings(settings),
            settings.resolve_operator_token(),
            retention,
            ktlog,
        )
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

    return Starlette(
        routes=routes, lifespan=lifespan, middleware=middleware(settings), exception_handlers={E2EEError: error_answer}
    )


def middleware(settings: Settings) -> list[Middleware]:
    """Outermost first: client addresses from a trusted proxy's X-Forwarded-For (only when the
    peer is one of ``trusted_proxies``; uvicorn's own proxy handling is off), then the body cap."""
    messages = re.compile(r"^/v1/conversations/[^/]+/messages$")

    def cap_for(path: str) -> tuple[int, type[BodyTooLarge]]:
        if path == "/v1/blobs":
            return settings.max_blob_bytes, BlobTooLarge
        return (settings.max_envelope_bytes if messages.match(path) else settings.max_json_body_bytes), BodyTooLarge

    stack = [Middleware(BodyCap, cap_for=cap_for), Middleware(BearerAuth)]
    if settings.trusted_proxy_list():
        stack.insert(0, Middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxy_list()))
    return stack
