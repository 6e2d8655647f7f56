"""A wiretap between clients and a relay, and a search for plaintexts in every form.

:class:`Wiretap` is a TCP proxy on 127.0.0.1 that keeps every byte each way. Websocket
connections are decoded into their messages (client frames unmasked, fragments joined), so the
search sees exactly the frames the relay received and sent; plain HTTP exchanges are kept whole.

:func:`forms` gives what a plaintext may be stored or logged as: UTF-8, its JSON-escaped form,
lower and upper hex, and base64 and base64url at each of the three byte alignments it can have
inside a longer encoded value (not only when it starts the value).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.tools.relayproc import free_port


@dataclass
class Tap:
    """One TCP connection through the wiretap: the bytes each way."""

    up: bytearray = field(default_factory=bytearray)  # client -> relay
    down: bytearray = field(default_factory=bytearray)  # relay -> client

    @property
    def websocket(self) -> bool:
        return bytes(self.up[:11]) == b"GET /v1/ws " and b" 101 " in bytes(self.down[:64])


def ws_messages(stream: bytes) -> list[tuple[int, bytes]]:
    """Decode a websocket byte stream (after the HTTP upgrade) into ``(opcode, payload)`` messages;
    masked payloads are unmasked and fragmented messages joined."""
    out: list[tuple[int, bytes]] = []
    i, parts, first_op = 0, [], 0
    while i + 2 <= len(stream):
        b0, b1 = stream[i], stream[i + 1]
        fin, op, masked, n, j = b0 & 0x80, b0 & 0x0F, b1 & 0x80, b1 & 0x7F, i + 2
        if n == 126:
            n, j = int.from_bytes(stream[j : j + 2], "big"), j + 2
        elif n == 127:
            n, j = int.from_bytes(stream[j : j + 8], "big"), j + 8
        key = stream[j : j + 4] if masked else b""
        j += 4 if masked else 0
        payload = bytes(stream[j : j + n])
        if len(payload) < n:
            break  # cut off by the end of the capture
        if masked and n:
            mask = (key * (n // 4 + 1))[:n]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big")
        i = j + n
        if op >= 8:
            out.append((op, payload))
            continue
        if op != 0:
            first_op, parts = op, []
        parts.append(payload)
        if fin:
            out.append((first_op, b"".join(parts)))
    return out


class Wiretap:
    """``await Wiretap(relay_port).start()``; point clients at :attr:`url`."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.taps: list[Tap] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Wiretap:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tap = Tap()
        self.taps.append(tap)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bytearray) -> None:
            try:
                while data := await src.read(65536):
                    keep += data
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        tasks = [
            asyncio.create_task(pipe(reader, up_writer, tap.up)),
            asyncio.create_task(pipe(up_reader, writer, tap.down)),
        ]
        self._tasks.update(tasks)
        await asyncio.gather(*tasks)
        self._tasks.difference_update(tasks)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def frames(self) -> tuple[list[bytes], list[bytes]]:
        """``(received, sent)``: every websocket message the relay received and sent."""
        received, sent = [], []
        for tap in self.taps:
            if not tap.websocket:
                continue
            up = bytes(tap.up)
            down = bytes(tap.down)
            received += [p for _, p in ws_messages(up[up.index(b"\r\n\r\n") + 4 :])]
            sent += [p for _, p in ws_messages(down[down.index(b"\r\n\r\n") + 4 :])]
        return received, sent

    def http(self) -> list[bytes]:
        """Every plain HTTP exchange (requests and answers, whole)."""
        return [bytes(t.up) + bytes(t.down) for t in self.taps if not t.websocket]


def frame_types(messages: list[bytes]) -> dict[str, int]:
    """How many frames of each ``type`` (JSON text frames)."""
    counts: dict[str, int] = {}
    for m in messages:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            kind = json.loads(m).get("type", "?")
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def _b64_windows(raw: bytes, urlsafe: bool) -> list[bytes]:
    """The base64 characters that depend only on ``raw``, for each alignment it can have (0-2 bytes
    before it in the encoded value)."""
    out = []
    enc = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    for shift in range(3):
        text = enc(b"\0" * shift + raw)
        start = -(-8 * shift // 6)
        end = 8 * (shift + len(raw)) // 6
        out.append(text[start:end])
    return out


def forms(text: str) -> dict[str, list[bytes]]:
    """What a plaintext may appear as in stored bytes, by the name of the form."""
    raw = text.encode("utf-8")
    out = {
        "utf-8": [raw],
        "hex": [raw.hex().encode(), raw.hex().upper().encode()],
        "base64": _b64_windows(raw, urlsafe=False),
        "base64url": _b64_windows(raw, urlsafe=True),
    }
    escaped = json.dumps(text).encode()[1:-1]
    if escaped != raw:
        out["json-escaped"] = [escaped]
    return out


def search(blobs: dict[str, bytes], texts: list[str]) -> list[tuple[str, str, str]]:
    """Every ``(where, form, text)`` such that a form of ``text`` occurs in ``blobs[where]``."""
    hits = []
    for where, blob in blobs.items():
        for text in texts:
            for name, needles in forms(text).items():
                if any(n in blob for n in needles):
                    hits.append((where, name, text))
    return hits


def files(folder: Path, *names: str) -> dict[str, bytes]:
    return {n: (folder / n).read_bytes() for n in names if (folder / n).exists()}


def process_memory(pid: int) -> bytes:
    """The writable memory of process ``pid`` (heap, anonymous maps, stacks), read through /proc."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            parts = line.split()
            if "rw" not in parts[1]:
                continue
            if len(parts) > 5 and parts[5] in ("[vvar]", "[vsyscall]", "[vdso]"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            with contextlib.suppress(OSError, ValueError, OverflowError):
                mem.seek(start)
                chunks.append(mem.read(end - start))
    return b"\n".join(chunks)
