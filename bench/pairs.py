"""Each client pair of the path and network suites in its own process, so that one pair's RSA
work (an unwrap is 0.7 ms at RSA-3072) never queues another pair's frames on a shared event loop.

The parent (:func:`run_pairs`) registers users and creates conversations over HTTP itself, then
starts one ``python -m bench.pairs`` per pair and hands it, on stdin, one JSON line: both users'
keys (PKCS#8 DER and the Ed25519 seed, base64url), their tokens, the conversation and where to
open the websockets (the relay, or a delay proxy in front of it). The child connects both users,
sends the warm-up messages and 20 websocket pings, says ``{"ready": ...}`` and waits for ``go``;
then the sender sends ``messages`` messages one after another (the next leaves when the receiver
has decrypted the previous) and the child prints every message's timings. Sender and receiver of
one pair share a process, so one ``time.perf_counter`` clock times each message end to end
(``perf_counter`` is CLOCK_MONOTONIC here: the parent compares the children's start and end).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from shared.b64 import b64u_decode, b64u_encode
from shared.keys import Identity

FIELDS = ("t_send", "t_stored", "t_done", "seal_ms", "encode_ms", "decode_ms", "open_ms")


def identity_to_json(ident: Identity) -> dict[str, str]:
    """An identity's private keys for a child process (PKCS#8 DER and the raw Ed25519 seed)."""
    wrap = ident.wrap_private.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    seed = ident.sign_private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return {"username": ident.username, "wrap": b64u_encode(wrap), "sign": b64u_encode(seed)}


def identity_from_json(d: dict[str, str]) -> Identity:
    """Inverse of :func:`identity_to_json`."""
    wrap = serialization.load_der_private_key(b64u_decode(d["wrap"]), password=None)
    return Identity(d["username"], wrap, ed25519.Ed25519PrivateKey.from_private_bytes(b64u_decode(d["sign"])))


async def _child(spec: dict) -> None:
    from .primitives import text_of
    from .relays import client_ssl
    from .wsclient import HEADS, BenchClient, Timing

    ssl_ctx = client_ssl(spec["cafile"]) if spec.get("cafile") else None
    a, b = (
        BenchClient(spec["urls"][i], identity_from_json(spec[k]), spec["level"], ssl=ssl_ctx)
        for i, k in enumerate(("a", "b"))
    )
    registry: dict[str, Timing] = {}
    a._ctr = spec.get("counter_start", 0)  # this sender's envelope counter continues across runs
    for c, k in ((a, "a"), (b, "b")):
        c.token = spec[f"token_{k}"]
        c.registry = registry
        c.trust([a.identity.public, b.identity.public])
        await c.connect()
    cid, text = spec["cid"], text_of(spec["size"])
    HEADS[cid] = tuple(spec["head"])  # the membership head the parent's conversation was created at
    recipients = [a.identity.public, b.identity.public]

    async def one() -> Timing:
        mid, fut = await a.send(cid, text, recipients, registry)
        t = registry[mid]
        await asyncio.wait_for(asyncio.gather(t.done.wait(), fut), 60)
        return t

    for _ in range(spec["warmup"]):
        await one()
    pings = [await a.ping() for _ in range(spec.get("pings", 20))]
    registry.clear()
    print(json.dumps({"ready": True, "pings": pings}), flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    if line.strip() != "go":
        return
    start = time.perf_counter()
    timings = [await one() for _ in range(spec["messages"])]
    end = time.perf_counter()
    await a.close()
    await b.close()
    print(
        json.dumps(
            {
                "start": start,
                "end": end,
                "errors": a.errors + b.errors,
                "timings": [[getattr(t, f) for f in FIELDS] for t in timings],
            }
        ),
        flush=True,
    )


class PairProcess:
    """One pair's child process (see the module doc): :meth:`start` until ready, :meth:`go`,
    :meth:`result`."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.pings: list[float] = []

    async def _line(self, timeout: float) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            err = (await self.proc.stderr.read()).decode(errors="replace")[-3000:] if self.proc.stderr else ""
            raise RuntimeError(f"pair process exited with {await self.proc.wait()}: {err}")
        return json.loads(raw)

    async def start(self, timeout: float = 120) -> None:
        """Start the child, send the spec, wait until it is connected and warmed up."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.pairs",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        self.proc.stdin.write(json.dumps(self.spec).encode() + b"\n")
        await self.proc.stdin.drain()
        self.pings = (await self._line(timeout))["pings"]

    def go(self) -> None:
        """Start the measured messages."""
        self.proc.stdin.write(b"go\n")

    async def result(self, timeout: float) -> dict:
        """The child's timings: ``{"start", "end", "errors", "timings": [[FIELDS...], ...]}``."""
        out = await self._line(timeout)
        await self.proc.wait()
        return out

    async def kill(self) -> None:
        """End the child if it still runs."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def main() -> None:
    """Child entry point: one JSON spec line on stdin, then ``go``."""
    asyncio.run(_child(json.loads(sys.stdin.readline())))


if __name__ == "__main__":
    main()
