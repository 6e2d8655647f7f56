"""The membership heads the send path checks every send against, cached.

A head (:class:`server.membership.Head`: epoch, statement hash, members with their bound wrap key
ids) is read once per conversation however many sends wait for it, and kept until this relay
drops it (the log changed here, or a broker note said it changed elsewhere) or, when relays share
a database, until ``ttl_s`` passes: the bound on how stale a head can be when a note is lost.
"""

from __future__ import annotations

import asyncio
import time

from shared.errors import Forbidden

from . import membership
from .db import Sessions

MAX_HEADS = 50_000


class HeadCache:
    """Membership heads by conversation id.

    Args:
        sessions: async sessionmaker for the reads.
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions
        self._cache: dict[str, tuple[float, membership.Head]] = {}
        self._loading: dict[str, asyncio.Future[membership.Head]] = {}
        self._generation = 0

    async def member_head(self, conversation: str, user_id: int, ttl_s: float) -> membership.Head:
        """The head of ``conversation``, read from the database at most once every ``ttl_s``
        seconds (``inf``: until :meth:`forget`).

        Raises:
            Forbidden: ``user_id`` is not one of its members (an unknown conversation has none).
        """
        hit = self._cache.get(conversation)
        if hit is not None and hit[0] > time.monotonic():
            head = hit[1]
        else:
            loading = self._loading.get(conversation)
            if loading is None:  # one query per conversation, however many sends wait for it
                loading = self._loading[conversation] = asyncio.ensure_future(self._load(conversation, ttl_s))
                loading.add_done_callback(
                    lambda f: self._loading.pop(conversation, None) if self._loading.get(conversation) is f else None
                )
            head = await asyncio.shield(loading)
        if not any(m.user_id == user_id for m in head.members):
            raise Forbidden("not a member of this conversation", field="conversation")
        return head

    async def _load(self, conversation: str, ttl_s: float) -> membership.Head:
        generation = self._generation
        async with self._sessions() as session:
            head = await membership.load_head(session, conversation)
        if generation == self._generation:  # not invalidated while the query ran
            if len(self._cache) >= MAX_HEADS:
                self._cache.clear()
            self._cache[conversation] = (time.monotonic() + ttl_s, head)
        return head

    def forget(self, conversation: str | None = None) -> None:
        """Drop one conversation's head, or all of them (``None``: after a key rotation); a read
        running meanwhile is not cached."""
        self._generation += 1
        if conversation is None:
            self._cache.clear()
            self._loading.clear()
        else:
            self._cache.pop(conversation, None)
            self._loading.pop(conversation, None)
