"""Appending to the key transparency log (``kt_log``, docs/PROTOCOL.md §14): write-op helpers run
by :class:`server.writer.Writer`, in the transaction that stores the key row they log.

The log must never fork, also when several relays share one PostgreSQL database: every append
first takes the log's lock (PostgreSQL: a transaction-scoped advisory lock, held until the commit;
SQLite: the writer's ``BEGIN IMMEDIATE`` already serialises every write), then reads the highest
index and writes the next one. ``idx`` is the primary key, so even without the lock two appends
could never share an index: one would fail and nothing would be stored.
"""

from __future__ import annotations

import time

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from shared import kt

from .models import KtLeaf, User, UserKey

KT_LOCK_ID = 0x6B745F6C6F67  # "kt_log": the advisory lock's key on PostgreSQL


def _lock(s: Session) -> None:
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": KT_LOCK_ID})


def append_leaf(s: Session, user_key_id: int, leaf: kt.KeyLeaf) -> int:
    """Append ``leaf`` (logging key row ``user_key_id``) under the log's lock; returns its index.
    Call inside a write op, after the key row was flushed."""
    _lock(s)
    idx = int(s.execute(select(func.coalesce(func.max(KtLeaf.idx), -1))).scalar_one()) + 1
    s.add(
        KtLeaf(
            idx=idx,
            user_key_id=user_key_id,
            username=leaf.username,
            leaf=leaf.data().decode(),
            leaf_hash=leaf.hash(),
            created_at_ms=int(time.time() * 1000),
        )
    )
    s.flush()
    return idx


def leaf_of(username: str, counter: int, row: UserKey) -> kt.KeyLeaf:
    """The log leaf of key row ``row``, ``username``'s ``counter``-th key (0: the first)."""
    sig = kt.sig_hash(row.rotation_sig) if row.rotation_sig else None
    return kt.KeyLeaf(username, counter, row.wrap_kid, row.sign_kid, sig)


def backfill(s: Session) -> int:
    """A write op: append a leaf for every key row that has none (keys published before the log
    existed, oldest first); returns how many. Run at every start; usually appends nothing."""
    _lock(s)
    logged = select(KtLeaf.user_key_id)
    missing = s.execute(
        select(UserKey, User.username)
        .join(User, User.id == UserKey.user_id)
        .where(UserKey.id.not_in(logged))
        .order_by(UserKey.id)
    ).all()
    for row, username in missing:
        counter = s.execute(
            select(func.count()).select_from(UserKey).where(UserKey.user_id == row.user_id, UserKey.id < row.id)
        ).scalar_one()
        append_leaf(s, row.id, leaf_of(username, int(counter), row))
    return len(missing)
