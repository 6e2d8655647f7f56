"""Send pre-sealed envelopes as fast as a websocket takes them, from another process.

    python -m tests.helpers.blast WS_URL TOKEN CONVERSATION FILE

FILE holds one envelope per line. Used by the burst test, so that the sender's own work does not
run on the event loop whose stalls the test measures. Exits once the relay stored them all.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from websockets.asyncio.client import connect


async def main(url: str, token: str, conversation: str, path: str) -> None:
    envelopes = Path(path).read_bytes().splitlines()
    prefix = b'{"type":"send","conversation":' + json.dumps(conversation).encode() + b',"envelope":'
    async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}, compression=None) as ws:
        await ws.recv()  # hello
        await ws.recv()  # ready
        for env in envelopes:
            await ws.send((prefix + env + b"}").decode())
        stored = 0
        while stored < len(envelopes):
            frame = json.loads(await ws.recv())
            if frame["type"] == "stored":
                stored += 1
            elif frame["type"] == "error":
                raise SystemExit(f"relay refused a send: {frame}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
