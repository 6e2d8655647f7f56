"""The request-body cap: one pure ASGI middleware in front of every HTTP route.

A body is refused with 413 ``body_too_large`` before the relay holds more than the route's cap:
a declared ``Content-Length`` over the cap is answered before one byte of the body is read, and a
body without one (chunked) is counted while it streams in and refused as soon as the count passes
the cap. The answer carries ``Connection: close``, so the server stops reading the rest instead of
draining it. Websocket frames have their own limit (``ws_max_size``, close 1009).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.errors import BodyTooLarge, E2EEError, InvalidRequest

log = logging.getLogger("e2ee.relay.http")


def _answer(exc: E2EEError, status: int) -> tuple[Message, Message]:
    body = msgspec.json.encode({"error": exc.as_dict()})
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class BodyCap:
    """ASGI middleware: refuse request bodies larger than ``cap_for(path)`` bytes.

    Args:
        app: the ASGI app it guards.
        cap_for: for a request path, the cap in bytes (e.g. 64 KiB for JSON, the envelope limit for
            a REST send, ``max_blob_bytes`` for a blob) and the error refusing a larger body
            (:class:`BodyTooLarge`, or a subclass naming the route's limit: ``BlobTooLarge``).
    """

    def __init__(self, app: ASGIApp, cap_for: Callable[[str], tuple[int, type[BodyTooLarge]]]) -> None:
        self.app = app
        self.cap_for = cap_for
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap, error = self.cap_for(scope["path"])
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None:
            if not declared.isdigit():
                return await self._refuse(
                    scope, send, InvalidRequest("Content-Length is not a number", field="content-length"), 400
                )
            if int(declared) > cap:
                return await self._refuse(scope, send, self._too_large(cap, error), 413)
        received = 0
        over = False
        started = False

        async def capped_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    over = True
                    raise self._too_large(cap, error)
            return message

        async def closing_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if over:  # stop reading the rest of an oversized body: close after this answer
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, capped_receive, closing_send)
        except BodyTooLarge as exc:
            if started:
                raise
            await self._refuse(scope, send, exc, 413)

    def _too_large(self, cap: int, error: type[BodyTooLarge]) -> BodyTooLarge:
        self.refused += 1
        return error(f"request body over {cap} bytes", field="body")

    @staticmethod
    async def _refuse(scope: Scope, send: Send, exc: E2EEError, status: int) -> None:
        log.info("%s %s refused code=%s (body cap)", scope["method"], scope["path"], exc.code)
        start, body = _answer(exc, status)
        await send(start)
        await send(body)
