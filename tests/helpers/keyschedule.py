"""Helpers of the key schedule's tests (epoch forward secrecy, issue 18): a wall clock the test
moves, bob after one rotation whose first key passed its grace, bob's bundle after one rotation,
and a wait for the relay's count of outstanding envelopes."""

from __future__ import annotations

import asyncio

from client_tui.core import ChatClient, keystore
from client_tui.core.epochs import DAY_MS, HOUR_MS
from client_tui.core.keybundle import KeyBundle
from shared.keys import Identity

GRACE_MS = 48 * HOUR_MS
T0 = 1_764_633_600_000  # 2025-12-02 00:00 UTC, ms


class Clock:
    """A wall clock the test moves (ms since the Unix epoch), starting at the real time."""

    def __init__(self) -> None:
        self.now = keystore.now_ms()

    def __call__(self) -> int:
        return self.now


async def outstanding_is(client: ChatClient, kid: str, n: int, timeout: float = 15) -> None:
    """Wait until the relay counts ``n`` unacknowledged envelopes of ``client`` sealed to ``kid``
    (an ack travels on the websocket and is written by the relay after it)."""
    async with asyncio.timeout(timeout):
        while (await client.epochs.outstanding([kid]))[kid] != n:
            await asyncio.sleep(0.02)


async def retired_past_its_grace(world):
    """bob (not connected, an injected clock) after one rotation, his first key past its grace."""
    relay = world.relay()
    clock = Clock()
    bob = await world.client(relay, "bob", wall_clock=clock, connect=False)
    old = bob.identity
    await bob.rotate_keys()
    clock.now += GRACE_MS
    return relay, clock, bob, old


def rotated(identities, spare: Identity) -> KeyBundle:
    """bob's bundle after one rotation at T0 + 1 day: ``spare`` current, his first pair retired."""
    old = identities["bob"]
    return KeyBundle(
        spare,
        b"L" * 32,
        (old,),
        b"T" * 32,
        created_ms={spare.wrap_kid: T0 + DAY_MS, old.wrap_kid: T0},
        retired_ms={old.wrap_kid: T0 + DAY_MS},
    )
