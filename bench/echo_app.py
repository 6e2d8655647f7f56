"""A bare Starlette websocket echo app, served by uvicorn exactly as the relay is (same websocket
implementation, per-message deflate off, same frame limit): the baseline for ``e2ee-bench relay``.

Run: ``python -m bench.echo_app --port 8799`` (127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import contextlib
import time

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from shared.envelope import DEFAULT_MAX_ENVELOPE_BYTES


async def healthz(_request) -> PlainTextResponse:
    """``ok`` (the bench polls it until the app is up)."""
    return PlainTextResponse("ok")


async def cpu(_request) -> PlainTextResponse:
    """This process's CPU time so far, in seconds (``time.process_time``: ns resolution, where
    /proc/PID/stat counts 10 ms ticks); the bench reads it before and after a run."""
    return PlainTextResponse(repr(time.process_time()))


async def echo(ws: WebSocket) -> None:
    """Send every text frame back unchanged until the peer closes."""
    await ws.accept()
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            await ws.send_text(await ws.receive_text())


app = Starlette(routes=[Route("/healthz", healthz), Route("/cpu", cpu), WebSocketRoute("/ws", echo)])


def main(argv: list[str] | None = None) -> None:
    """Serve :data:`app` with uvicorn on 127.0.0.1 with the relay's websocket settings."""
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m bench.echo_app")
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        ws_max_size=DEFAULT_MAX_ENVELOPE_BYTES + 4096,
        ws_per_message_deflate=False,
        lifespan="on",
        log_level="warning",
    )


if __name__ == "__main__":
    main()
