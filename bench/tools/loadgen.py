"""Load generator: many real websocket clients against a relay, with exactly-once accounting.

Each user has real keys (RSA-2048 + Ed25519, generated in a process pool) and a websocket
session (``shared.session.ClientProtocol`` through ``client_tui.session_socket``); senders seal
real L4 envelopes (``shared.envelope.seal``) for their group, receivers parse every delivered
envelope, drop duplicates by (sender, mid) like the client does, and open a sample of them
fully. Used by the load tests and the bench; it only talks to the URL it is given (run it
against 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from cryptography.hazmat.primitives import serialization

from client_tui.core.record import now_ms
from client_tui.session_socket import SessionSocket
from shared import envelope, frames, membership
from shared.b64 import b64u_encode
from shared.content import Text
from shared.keys import Identity, spki_der
from shared.session import ClientProtocol, RelayError, SendRefused

PASSWORD = "load-test-password"


def _keypair(_: int) -> tuple[bytes, bytes]:
    ident = Identity.generate("x", 2048)
    return (
        ident.wrap_private.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        ident.sign_private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        ),
    )


def make_identities(names: list[str]) -> list[Identity]:
    """RSA-2048 + Ed25519 identities for ``names``, generated on all cores."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    with ProcessPoolExecutor() as pool:
        pairs = list(pool.map(_keypair, range(len(names)), chunksize=8))
    return [
        Identity(n, serialization.load_der_private_key(w, None), ed25519.Ed25519PrivateKey.from_private_bytes(s))
        for n, (w, s) in zip(names, pairs, strict=True)
    ]


@dataclass
class LoadResult:
    """What a load run measured. Times in ms; memory in KiB."""

    users: int
    messages: int
    acked: int = 0
    expected_deliveries: int = 0
    delivered_unique: int = 0
    duplicates: int = 0
    missing: int = 0
    opened_ok: int = 0
    errors: Counter = field(default_factory=Counter)
    latency_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    relay_rss_peak_kib: int = 0

    @property
    def throughput(self) -> float:
        """Acked messages per second."""
        return self.acked / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        s = sorted(self.latency_ms)
        return s[min(len(s) - 1, int(p / 100 * len(s)))] if s else 0.0


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _register(http: httpx2.AsyncClient, ident: Identity) -> str:
    body = {
        "username": ident.username,
        "password": PASSWORD,
        "wrap_key": b64u_encode(spki_der(ident.public.wrap_key)),
        "sign_key": b64u_encode(spki_der(ident.public.sign_key)),
    }
    (await http.post("/v1/accounts", json=body)).raise_for_status()
    r = await http.post("/v1/token", json={"username": ident.username, "password": PASSWORD})
    r.raise_for_status()
    return r.json()["token"]


async def run_load(
    url: str,
    *,
    users: int,
    messages: int,
    group_size: int = 3,
    senders: int | None = None,
    window: int = 8,
    open_every: int = 50,
    relay_pid: int | None = None,
    seed: int = 7,
    timeout_s: float = 600,
) -> LoadResult:
    """Connect ``users`` clients in groups of ``group_size``; ``senders`` of them (default all)
    send ``messages`` envelopes in total, each with at most ``window`` unacked; wait until every
    member received every message or ``timeout_s`` passes.

    Returns a :class:`LoadResult`; ``missing`` counts (message, member) pairs never delivered.
    """
    rng = random.Random(seed)
    names = [f"load{i:05d}" for i in range(users)]
    idents = make_identities(names)
    by_name = {i.username: i for i in idents}
    result = LoadResult(users, messages)
    groups = [names[i : i + group_size] for i in range(0, users - users % group_size, group_size)]
    async with httpx2.AsyncClient(base_url=url, timeout=60) as http:
        sem = asyncio.Semaphore(16)

        async def reg(ident: Identity) -> str:
            async with sem:
                return await _register(http, ident)

        tokens = dict(zip(names, await asyncio.gather(*(reg(i) for i in idents)), strict=True))
        convs = []
        heads: dict[str, str] = {}
        for g in groups:
            created = membership.create(
                by_name[g[0]], b64u_encode(os.urandom(16)), "load", [membership.member_of(by_name[m].public) for m in g]
            )
            r = await http.post(
                "/v1/conversations",
                json={"statement": created.signed},
                headers={"Authorization": f"Bearer {tokens[g[0]]}"},
            )
            r.raise_for_status()
            convs.append((created.cid, list(created.usernames)))
            heads[created.cid] = created.hash
    member_of = {n: (cid, g) for cid, g in convs for n in g}
    sender_names = [n for _, g in convs for n in g][: senders or users]
    plan = Counter(rng.choice(sender_names) for _ in range(messages))
    seen: dict[str, set[tuple[str, str]]] = {n: set() for n in names}
    sent_at: dict[str, float] = {}
    expected: dict[str, tuple[str, list[str]]] = {}  # mid -> (sender, the other members)
    done = asyncio.Event()

    def sample_memory() -> None:
        if relay_pid:
            result.relay_rss_peak_kib = max(result.relay_rss_peak_kib, rss_kib(relay_pid))

    async def reader(sock: SessionSocket, me: str) -> None:
        async for frame in sock.events():
            if isinstance(frame, frames.Message):
                parsed = envelope.parse(bytes(frame.envelope))
                key = (parsed.header.snd, parsed.header.mid)
                if key in seen[me]:
                    result.duplicates += 1
                    continue
                seen[me].add(key)
                result.delivered_unique += 1
                t0 = sent_at.get(parsed.header.mid)
                if t0 is not None:
                    result.latency_ms.append((time.perf_counter() - t0) * 1000)
                if result.delivered_unique % open_every == 0:
                    envelope.open(parsed, by_name[me], by_name[parsed.header.snd].public.sign_key)
                    result.opened_ok += 1
                if result.delivered_unique >= result.expected_deliveries and result.acked == messages:
                    done.set()
            elif isinstance(frame, frames.Stored):
                pending.pop(frame.mid).set_result(frame.seq)
            elif isinstance(frame, SendRefused | RelayError):
                result.errors[frame.error.code] += 1
                fut = pending.pop(frame.error.ref or "", None)
                if fut is not None:
                    fut.set_exception(RuntimeError(frame.error.code))

    pending: dict[str, asyncio.Future] = {}
    conns = {}
    for n in names:
        sock, _ = await SessionSocket.open(url, ClientProtocol(n, token=tokens[n]), max_size=2**21, max_queue=None)
        conns[n] = (sock, asyncio.create_task(reader(sock, n)))

    async def sender(me: str, count: int) -> None:
        cid, group = member_of[me]
        recipients = [by_name[m].public for m in group]
        sock = conns[me][0]
        slots = asyncio.Semaphore(window)
        tasks = []
        for i in range(count):
            await slots.acquire()
            data = envelope.seal(
                Text(f"load message {i} from {me}", ts=now_ms(), ctr=i + 1),
                by_name[me],
                cid,
                recipients,
                epoch=0,
                head=heads[cid],
            )
            mid = envelope.parse(data).header.mid
            expected[mid] = (me, [m for m in group if m != me])
            result.expected_deliveries += len(group) - 1
            fut = asyncio.get_running_loop().create_future()
            pending[mid] = fut
            sent_at[mid] = time.perf_counter()
            sock.protocol.send(cid, data, mid)
            await sock.flush()

            def acked(f: asyncio.Future) -> None:
                slots.release()
                if not f.exception():
                    result.acked += 1

            fut.add_done_callback(acked)
            tasks.append(fut)
            if i % 50 == 0:
                sample_memory()
        await asyncio.gather(*tasks, return_exceptions=True)

    t0 = time.perf_counter()
    await asyncio.gather(*(sender(n, c) for n, c in plan.items()))
    if result.delivered_unique < result.expected_deliveries:
        try:
            await asyncio.wait_for(done.wait(), timeout_s)
        except TimeoutError:
            pass
    result.seconds = time.perf_counter() - t0
    sample_memory()
    result.missing = sum(1 for mid, (snd, others) in expected.items() for r in others if (snd, mid) not in seen[r])
    for sock, task in conns.values():
        await sock.close()
        task.cancel()
    return result
