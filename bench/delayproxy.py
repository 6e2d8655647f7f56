"""A loopback TCP proxy that adds a set one-way delay in each direction: the network rows of the
bench (a round trip of ``2 x delay`` between a client and the relay, on 127.0.0.1 only).

Every chunk read from one side is written to the other ``delay`` ms after it was read, in order
(a queue per direction; a slow writer delays later chunks, as a real link would). With 0 ms it
forwards at once. asyncio's timers wake within ~1 ms, so each leg may add up to ~1 ms to the set
delay: the bench reports the round trip it measured (websocket pings through the proxy), not the
one it asked for.

Run: ``python -m bench.delayproxy --target 127.0.0.1:8765 --one-way-ms 15`` prints
``{"port": N}`` on its first line once it listens on 127.0.0.1:N, then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys

CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def forward(data: bytes) -> bool:
        """Write ``data`` on (b"" = the peer closed: half-close this side); False when done."""
        if not data:
            with contextlib.suppress(OSError):
                writer.write_eof()
            return False
        writer.write(data)
        await writer.drain()
        return True

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            if not await forward(data):
                return

    task = asyncio.create_task(deliver()) if delay_s > 0 else None
    try:
        while True:
            data = await reader.read(CHUNK)
            if task is None:  # no delay: straight through
                if not await forward(data):
                    return
                continue
            queue.put_nowait((loop.time() + delay_s, data))
            if not data:
                await task
                return
    except (ConnectionError, OSError):
        pass
    finally:
        if task is not None and not task.done():
            task.cancel()


async def serve(target: tuple[str, int], one_way_ms: float, port: int = 0) -> asyncio.Server:
    """Listen on 127.0.0.1:``port`` (0: a free one) and proxy every connection to ``target``
    with ``one_way_ms`` added in each direction."""
    delay = one_way_ms / 1000

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            relay_r, relay_w = await asyncio.open_connection(*target)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(_pipe(client_r, relay_w, delay), _pipe(relay_r, client_w, delay))
        finally:
            for w in (client_w, relay_w):
                w.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def _main(target: tuple[str, int], one_way_ms: float) -> None:
    server = await serve(target, one_way_ms)
    print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
    async with server:
        await server.serve_forever()


class DelayProxy:
    """The proxy as a child process (its own event loop and core time, apart from the clients and
    the relay): ``with DelayProxy(relay_url, one_way_ms) as proxy: proxy.url``."""

    def __init__(self, relay_url: str, one_way_ms: float) -> None:
        hostport = relay_url.split("://", 1)[1].rstrip("/")
        self.scheme = relay_url.split("://", 1)[0]
        self.target = hostport
        self.one_way_ms = one_way_ms
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> DelayProxy:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.delayproxy", "--target", self.target, "--one-way-ms", str(self.one_way_ms)],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"delay proxy exited with {self.proc.wait()}")
        self.url = f"{self.scheme}://127.0.0.1:{json.loads(line)['port']}"
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.delayproxy --target HOST:PORT --one-way-ms MS``."""
    p = argparse.ArgumentParser(prog="python -m bench.delayproxy", description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True, help="HOST:PORT of the relay (loopback)")
    p.add_argument("--one-way-ms", type=float, default=0.0, help="delay added in each direction, ms")
    args = p.parse_args(argv)
    host, port = args.target.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        p.error("the delay proxy forwards to loopback addresses only")
    asyncio.run(_main((host, int(port)), args.one_way_ms))


if __name__ == "__main__":
    main()
