"""``e2ee-bench rotation``: what one rotation of a user's keys costs that user's client, for a user in
1, 10 and 50 conversations (issue 18: "the cost of one scheduled rotation"; docs/PROTOCOL.md §14).

A relay process (level 4, SQLite, no rate limits) and, per conversation count ``N``, a user of its
own (``rotN``) with ``N`` conversations with one other user, made beforehand. Each round is one
``ChatClient.rotate_keys()`` (the client the scheduled rotation runs: generate, save as pending,
publish, commit, move the new keys into every membership log), timed in phases by wrapping the
client's own steps (nothing is replaced; the real ones run):

* **keygen + pending save**: new RSA + Ed25519 key pairs, and the keystore saved with them as
  ``pending`` (argon2id at the keystore's default cost unless ``kdf`` says otherwise);
* **publish (+ KT append)**: the relay's key history read, the signed rotation posted; the relay
  appends the key transparency leaf in the same transaction;
* **commit**: the keystore saved again with the new keys current and the old ones retired;
* **membership updates**: every conversation's log verified and an ``update`` statement moving
  the new keys in signed and posted (``membership_ops.after_rotation``);
* **total**: the whole ``rotate_keys()``.

Next to it, key generation alone (``Identity.generate``, the same call), timed in its own rounds:
RSA key generation searches for primes, so single figures vary by several times; the medians are
reported. The rotating client is not connected (the relay's ``key_changed`` push and the keystore
reload it causes in a running client come after ``rotate_keys()`` returns, and are not counted).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from client_tui.core import ChatClient, keystore
from server.settings import Settings
from shared.keys import Identity

from .relays import start_relay

PASSWORD = "bench-password"
CHEAP_KDF = {"iterations": 1, "memory_kib": 8192, "lanes": 1}
PHASES = ("keygen_save_ms", "publish_ms", "commit_ms", "membership_ms", "total_ms")


class _Clock:
    """Wall times (ms since the round's start) at which the client's own rotation steps began and
    ended: its ``_publish`` and ``_commit_rotation`` methods are wrapped on the instance."""

    def __init__(self, client: ChatClient) -> None:
        self.t0 = 0.0
        self.marks: dict[str, float] = {}
        for step in ("_publish", "_commit_rotation"):
            inner = getattr(client, step, None)
            if inner is None:
                raise RuntimeError(f"ChatClient has no {step}: bench/rotation.py times a rotation's steps by it")
            setattr(client, step, self._timed(step, inner))

    def _timed(self, step: str, inner: Callable):
        async def timed(*args, **kwargs):
            self.marks[step + "_start"] = self.now()
            try:
                return await inner(*args, **kwargs)
            finally:
                self.marks[step + "_end"] = self.now()

        return timed

    def now(self) -> float:
        return (time.perf_counter() - self.t0) * 1000


async def _rotation(client: ChatClient, clock: _Clock, bits: int) -> dict[str, float]:
    """One rotate_keys(), split into :data:`PHASES` (ms)."""
    clock.marks.clear()
    clock.t0 = time.perf_counter()
    await client.rotate_keys(bits=bits)
    total, m = clock.now(), clock.marks
    return {
        "keygen_save_ms": m["_publish_start"],
        "publish_ms": m["_publish_end"] - m["_publish_start"],
        "commit_ms": m["_commit_rotation_end"] - m["_commit_rotation_start"],
        "membership_ms": total - m["_commit_rotation_end"],
        "total_ms": total,
    }


async def _user(
    url: str, root: Path, name: str, conversations: int, bits: int, kdf: dict | None
) -> tuple[ChatClient, list[str]]:
    """``name`` registered (keys of ``bits``) with ``conversations`` conversations with ``peer``."""
    client = ChatClient(url, name, root, kdf=kdf)
    await client.register(PASSWORD, f"{name} passphrase", bits=bits)
    return client, [await client.create_conversation(f"{name} {i}", ["peer"]) for i in range(conversations)]


async def _peer(url: str, root: Path) -> ChatClient:
    """``peer``, the other member of every conversation (registered, never rotating)."""
    peer = ChatClient(url, "peer", root, kdf=CHEAP_KDF)
    await peer.register(PASSWORD, "peer passphrase", bits=2048)
    return peer


def _epochs(client: ChatClient, cids: list[str]) -> list[int]:
    """The verified membership epoch of each conversation (one more per update statement)."""
    return sorted({head.ep for cid in cids if (head := client.membership.head(cid)) is not None})


async def _limited(root: Path, conversations: int, bits: int, kdf: dict | None) -> dict:
    """One rotation in ``conversations`` conversations against a relay at its default limits of
    member changes and of update statements per user (``rate_member_changes_per_min``,
    ``rate_key_updates_per_min``: the updates a rotation posts count only against the second): how
    many of the logs the rotation moved the new keys into (any other waits for a later sync)."""
    fields = Settings.__dataclass_fields__
    per_min = fields["rate_member_changes_per_min"].default
    updates_per_min = fields["rate_key_updates_per_min"].default
    env = {"E2EE_RATE_MEMBER_CHANGES_PER_MIN": str(per_min), "E2EE_RATE_KEY_UPDATES_PER_MIN": str(updates_per_min)}
    relay = start_relay(root / "relay", 4, env=env)
    made: list[ChatClient] = []
    try:
        made.append(await _peer(relay.url, root / "clients"))
        client, cids = await _user(relay.url, root / "clients", "capped", conversations, bits, kdf)
        made.append(client)
        before = {cid: client.membership.head(cid) for cid in cids}
        await client.rotate_keys(bits=bits)
        moved = sum(1 for cid in cids if client.membership.head(cid) != before[cid])
        return {
            "conversations": conversations,
            "limit_per_min": per_min,
            "updates_per_min": updates_per_min,
            "moved": moved,
        }
    finally:
        for c in made:
            await c.close()
        relay.stop()


async def run_async(
    conversations: tuple[int, ...], rounds: int, bits: int, kdf: dict | None, limited: int | None, say
) -> dict:
    with tempfile.TemporaryDirectory(prefix="e2ee-bench-rotation-") as tmp:
        root = Path(tmp)
        relay = start_relay(root / "relay", 4)
        made: list[ChatClient] = []
        try:
            made.append(await _peer(relay.url, root / "clients"))
            rows = []
            for n in conversations:
                say(f"rotation: a user in {n} conversation(s), {rounds} rounds")
                client, cids = await _user(relay.url, root / "clients", f"rot{n}", n, bits, kdf)
                made.append(client)
                clock = _Clock(client)
                before = _epochs(client, cids)
                runs = [await _rotation(client, clock, bits) for _ in range(rounds)]
                rows.append(
                    {
                        "conversations": n,
                        "rounds": rounds,
                        **{p: statistics.median(r[p] for r in runs) for p in PHASES},
                        "runs": runs,
                        "epochs_before": before,
                        "epochs_after": _epochs(client, cids),
                        "retired_keys": len(client.retired),
                    }
                )
            capped = None
            if limited:
                say(f"rotation: {limited} conversations at the relay's default member-change limit")
                capped = await _limited(root / "limited", limited, bits, kdf)
            say(f"rotation: RSA-{bits} + Ed25519 key generation alone, {rounds * 2} rounds")
            keygen = []
            for _ in range(rounds * 2):
                t0 = time.perf_counter()
                await asyncio.to_thread(Identity.generate, "keygen", bits)
                keygen.append((time.perf_counter() - t0) * 1000)
            return {
                "params": {
                    "conversations": list(conversations),
                    "rounds": rounds,
                    "bits": bits,
                    "kdf": kdf or keystore.DEFAULT_KDF,
                    "kdf_default": kdf is None,
                },
                "rows": rows,
                "keygen_ms": {"median": statistics.median(keygen), "min": min(keygen), "max": max(keygen)},
                "limited": capped,
            }
        finally:
            for c in made:
                await c.close()
            relay.stop()


def run(
    progress=None,
    conversations: tuple[int, ...] = (1, 10, 50),
    rounds: int = 5,
    bits: int = 3072,
    kdf: dict | None = None,
    limited: int | None = 50,
) -> dict:
    """Medians of ``rounds`` rotations per conversation count (see the module docstring).

    Args:
        conversations: how many conversations the rotating user is in, one user per count.
        rounds: rotations per count (each one adds an update statement to each of its logs).
        bits: RSA modulus of the new wrap key (3072: the client's default).
        kdf: the keystore's argon2id parameters; None = the keystore's default (what users pay).
        limited: if set, one more rotation in this many conversations against a relay that keeps
            its default member-change rate limit (the relays above run without it, as the bench's do).

    Returns:
        ``{"params", "rows": [{"conversations", "rounds", "keygen_save_ms", "publish_ms", "commit_ms",
        "membership_ms", "total_ms", "runs": [...], "epochs_before", "epochs_after", "retired_keys"}],
        "keygen_ms": {"median", "min", "max"}}`` (ms; ``epochs_*``: the distinct verified epochs of the
        user's conversations before and after the rounds, each rotation adding one update statement;
        ``limited``: ``{"conversations", "limit_per_min", "moved"}`` or None).
    """
    say = progress or (lambda _label: None)
    return asyncio.run(run_async(tuple(conversations), rounds, bits, kdf, limited, say))


def section(result: dict, results: dict) -> str:
    """REPORT.md: the phases of one rotation per conversation count."""
    p, kg = result["params"], result["keygen_ms"]
    kdf = "argon2id t={iterations}, {memory_kib} KiB, {lanes} lanes".format(**p["kdf"])
    kdf += " (its default)" if p["kdf_default"] else " (cheaper than its default)"
    lines = [
        "### One key rotation (issue 18)",
        "",
        f"`ChatClient.rotate_keys()` through a relay process, RSA-{p['bits']} + Ed25519, keystore "
        f"{kdf}; "
        f"medians of {p['rounds']} rotations per row (ms). Key generation alone: median {kg['median']:.0f} ms "
        f"(min {kg['min']:.0f}, max {kg['max']:.0f}: prime search). *publish* includes the relay's key "
        "transparency append; *membership* verifies each log and posts one `update` statement per conversation.",
        "",
        "| conversations | keygen + pending save | publish (+ KT append) | commit | membership updates | total |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['conversations']} | {r['keygen_save_ms']:.0f} | {r['publish_ms']:.1f} | {r['commit_ms']:.0f} | "
            f"{r['membership_ms']:.0f} | {r['total_ms']:.0f} |"
        )
    if (cap := result.get("limited")) is not None:
        lines += [
            "",
            f"These relays run without rate limits. Against a relay at its default limits "
            f"({cap['limit_per_min']:g} member changes and {cap.get('updates_per_min', 0):g} update statements "
            f"per user per minute: a rotation's updates count only against the second), one rotation in "
            f"{cap['conversations']} conversations moved the new keys into {cap['moved']} of their logs; any other "
            "is refused (`rate_limited`) and waits for a later sync of its log.",
        ]
    return "\n".join(lines)


def print_result(console, result: dict) -> None:
    """One line per conversation count for the console."""
    for r in result["rows"]:
        console.print(
            f"rotation in {r['conversations']} conversation(s): total {r['total_ms']:.0f} ms = keygen + save "
            f"{r['keygen_save_ms']:.0f}, publish {r['publish_ms']:.1f}, commit {r['commit_ms']:.0f}, "
            f"membership {r['membership_ms']:.0f}"
        )
    console.print(f"key generation alone: median {result['keygen_ms']['median']:.0f} ms")
    if (cap := result.get("limited")) is not None:
        console.print(
            f"at the relay's default limit ({cap['limit_per_min']:g} member changes/min): a rotation in "
            f"{cap['conversations']} conversations moved {cap['moved']} of their logs"
        )
