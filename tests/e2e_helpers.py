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


async def messages_of(client: ChatClient, conversation: str, limit: int = 200) -> list:
    """The client's cached records of ``conversation`` that are messages (not the lines about
    membership changes), oldest first."""
    return [r for r in await client.load_history(conversation, limit) if r.state != "system"]
