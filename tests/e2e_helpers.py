"""Helpers shared by tests that drive real clients."""

from __future__ import annotations

import asyncio

from client_tui.core import ChatClient, MessageReceived


async def next_message(client: ChatClient, timeout: float = 15) -> MessageReceived:
    """The next decrypted message the client emits (other events are skipped)."""
    while True:
        ev = await asyncio.wait_for(client.events.get(), timeout)
        if isinstance(ev, MessageReceived):
            return ev
