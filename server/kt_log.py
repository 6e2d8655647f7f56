"""The relay's view of the key transparency log (docs/PROTOCOL.md §14): the Merkle tree over
``kt_log`` kept in memory, caught up from the database before every answer (relays sharing a
PostgreSQL database append to one log), and the tree heads signed with the relay's log key.

Memory: 64 bytes per leaf (:class:`shared.merkle.Tree`; 64 MB at 10^6 keys published);
catching up reads only the leaf hashes appended since the last answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from cryptography.hazmat.primitives.asymmetric import ed25519
from sqlalchemy import select

from shared import keys, kt, merkle

from .db import Sessions
from .models import KtLeaf

log = logging.getLogger("e2ee.relay.kt")


class KtLog:
    """The log's tree and signed heads.

    Args:
        sessions: async sessionmaker for the reads.
        log_key: the relay's Ed25519 log key (``Settings.resolve_kt_key``).
    """

    def __init__(self, sessions: Sessions, log_key: ed25519.Ed25519PrivateKey) -> None:
        self._sessions = sessions
        self._key = log_key
        self.public_spki = keys.spki_der(log_key.public_key())
        self._tree = merkle.Tree()
        self._lock = asyncio.Lock()
        self._head: kt.TreeHead | None = None

    @property
    def size(self) -> int:
        """Leaves in the tree as last caught up."""
        return self._tree.size

    async def sync(self) -> int:
        """Append the leaves stored since the last call (by any relay); returns the tree size."""
        async with self._lock:
            async with self._sessions() as s:
                rows = (
                    await s.execute(
                        select(KtLeaf.idx, KtLeaf.leaf_hash).where(KtLeaf.idx >= self._tree.size).order_by(KtLeaf.idx)
                    )
                ).all()
            for idx, leaf_hash in rows:
                if idx != self._tree.size:  # appends commit in index order under the log's lock
                    log.error("kt_log has a gap at %d (next row %d): stopped there", self._tree.size, idx)
                    break
                self._tree.append_hash(bytes(leaf_hash))
            return self._tree.size

    def head(self, size: int | None = None) -> kt.TreeHead:
        """The signed head of the first ``size`` leaves (default: all caught up); one signature
        per new size, reused while the log does not grow."""
        size = self._tree.size if size is None else size
        if self._head is not None and self._head.size == size:
            return self._head
        head = kt.sign_head(self._key, size, self._tree.root(size), int(time.time() * 1000))
        if size == self._tree.size:
            self._head = head
        return head

    def inclusion(self, index: int, leaf: kt.KeyLeaf, head: kt.TreeHead) -> kt.Inclusion:
        """Leaf ``index``'s inclusion proof to ``head``."""
        return kt.Inclusion(index, leaf, self._tree.inclusion_proof(index, head.size), head)

    def consistency(self, old_size: int, size: int) -> list[bytes]:
        """RFC 9162 consistency proof from ``old_size`` to ``size`` leaves. Raises ValueError."""
        return self._tree.consistency_proof(old_size, size)

    async def inclusions(self, user_key_ids: list[int]) -> dict[int, kt.Inclusion]:
        """For each key row id that is logged, its leaf's inclusion proof to the current signed head
        (one head for all of them)."""
        async with self._sessions() as s:
            rows = (
                await s.execute(
                    select(KtLeaf.user_key_id, KtLeaf.idx, KtLeaf.leaf).where(KtLeaf.user_key_id.in_(user_key_ids))
                )
            ).all()
        if not rows:
            return {}
        if max(idx for _, idx, _ in rows) >= self._tree.size:
            await self.sync()
        head = self.head()
        return {
            key_id: self.inclusion(idx, kt.KeyLeaf.from_json(json.loads(leaf)), head)
            for key_id, idx, leaf in rows
            if idx < head.size
        }

    async def entries(self, start: int, end: int) -> list[dict[str, object]]:
        """The leaves ``[start, end)`` as JSON objects, in log order."""
        async with self._sessions() as s:
            rows = (
                await s.execute(select(KtLeaf.leaf).where(KtLeaf.idx >= start, KtLeaf.idx < end).order_by(KtLeaf.idx))
            ).all()
        out: list[dict[str, object]] = [json.loads(leaf) for (leaf,) in rows]
        return out
