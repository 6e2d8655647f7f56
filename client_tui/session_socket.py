"""One websocket around the sans-I/O session (:class:`shared.session.ClientProtocol`).

The protocol decides every frame (hello, auth for the level, ready, sync pages, acks, pings);
this module only moves bytes: it opens the socket with the headers the protocol asks for,
writes what :meth:`~shared.session.ClientProtocol.frames_to_send` drains, feeds what arrives to
:meth:`~shared.session.ClientProtocol.receive_frame`, and calls ``on_timer()`` when
``next_deadline()`` passes. The level client (:mod:`client_tui.levels`), the bench client
(``bench/wsclient.py``) and the load generator (``bench/tools/loadgen.py``) are loops over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from shared.errors import E2EEError
from shared.session import ClientEvent, ClientProtocol, Opened

MAX_FRAME_BYTES = 2 * 1024 * 1024
"""The largest frame read by default (the relay announces its own, smaller, limit in ``hello``)."""


def ws_url(server_url: str) -> str:
    """The relay's websocket endpoint for its base URL (``http`` -> ``ws``, ``https`` -> ``wss``)."""
    return server_url.rstrip("/").replace("http", "ws", 1) + "/v1/ws"


class SessionSocket:
    """A websocket connection driven by ``protocol``; make one with :meth:`open`."""

    def __init__(self, protocol: ClientProtocol, ws: ClientConnection) -> None:
        self.protocol = protocol
        self.ws = ws

    @classmethod
    async def open(
        cls,
        server_url: str,
        protocol: ClientProtocol,
        *,
        ssl: ssl_module.SSLContext | None = None,
        max_size: int | None = MAX_FRAME_BYTES,
        **options: Any,
    ) -> tuple[SessionSocket, Opened]:
        """Connect to ``server_url``'s websocket (per-message deflate off: ciphertext does not
        compress) and run the handshake until the relay's ``ready``.

        Args:
            server_url: relay base URL (``http://`` or ``https://``).
            protocol: a fresh :class:`ClientProtocol` (state CONNECTING).
            ssl: the TLS context for ``https://`` relays.
            max_size: the largest frame accepted, bytes.
            options: more ``websockets.asyncio.client.connect`` arguments (``max_queue``, ``ping_interval``).

        Returns:
            ``(socket, opened)``: the open session and its :class:`~shared.session.Opened` event.

        Raises:
            what ``receive_frame`` raises during the handshake (``LevelMismatch``, ``DowngradeRefused``,
            ``KeyInvalid``, ``AuthFailed``, ``ProtocolViolation``); the socket is closed first.
            ``ConnectionClosed``: the relay closed before ``ready``.
        """
        url = ws_url(server_url)
        ws = await connect(
            url,
            additional_headers=protocol.handshake_headers(),
            compression=None,
            max_size=max_size,
            ssl=ssl if url.startswith("wss") else None,
            **options,
        )
        sock = cls(protocol, ws)
        try:
            while True:
                await sock.flush()
                for event in protocol.receive_frame(await ws.recv()):
                    if isinstance(event, Opened):
                        await sock.flush()
                        return sock, event
        except (E2EEError, ConnectionClosed):
            await ws.close()
            raise
        except BaseException:  # cancelled while waiting for the relay (the client closing): no
            ws.transport.abort()  # closing handshake to wait for, and no socket left to the GC
            raise

    async def flush(self) -> None:
        """Write every frame the protocol queued (text messages, in order)."""
        for data in self.protocol.frames_to_send():
            await self.ws.send(data, text=True)  # UTF-8 JSON already: a text frame without decoding it

    async def events(self) -> AsyncIterator[ClientEvent]:
        """The session's events until the socket closes; the last one is :class:`~shared.session.Closed`.
        Frames the protocol queues meanwhile (sync pages, due acks and pings) are written as they come."""
        protocol, ws = self.protocol, self.ws
        try:
            while True:
                deadline = protocol.next_deadline()
                if deadline is None:
                    raw = await ws.recv()
                else:
                    try:
                        raw = await asyncio.wait_for(ws.recv(), max(0.0, deadline - protocol.clock()))
                    except TimeoutError:
                        for event in protocol.on_timer():
                            yield event
                        await self.flush()
                        continue
                for event in protocol.receive_frame(raw):
                    yield event
                await self.flush()
        except ConnectionClosed:
            rcvd = ws.close_code, ws.close_reason or ""
            for event in protocol.connection_lost(*rcvd):
                yield event

    async def close(self) -> None:
        """Send the due ack, then close the socket."""
        with contextlib.suppress(E2EEError, ConnectionClosed):
            self.protocol.flush_acks()
            await self.flush()
        await self.ws.close()
