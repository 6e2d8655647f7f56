"""Writes: the relay's write ops over the models (:mod:`server.models`), plain functions of a sync
``Session`` that go through the single writer (:class:`server.writer.Writer`, group commit), and
the message insert of the hot path. Reads are :mod:`server.queries`.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, Table, bindparam, func, insert, select, text, tuple_, update
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

from shared.errors import Conflict

from . import kt_store
from .models import Delivery, Message, User, UserKey

log = logging.getLogger("e2ee.relay.store")
T = TypeVar("T")
# Core tables of the hot path (a declarative class's __table__ is typed as a FromClause)
_MESSAGES = cast(Table, Message.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)
COMMIT_ORDER_LOCK = 7265503  # PostgreSQL advisory lock held from drawing message seqs to the commit


def now_ms() -> int:
    """Unix time in ms."""
    return int(time.time() * 1000)


# -- writes (plain functions of a sync Session, run inside the Writer's transaction) -----------------
def add_user(
    username: str,
    password_hash: str,
    wrap_kid: str,
    wrap_der: bytes,
    sign_kid: str,
    sign_der: bytes,
) -> Callable[[Session], int]:
    """A write op creating a user with its first keys, logged as leaf counter 0 of the key
    transparency log (:mod:`server.kt_store`); returns the user id.

    Raises (when run):
        Conflict: the username or the wrap key is taken.
    """

    def op(s: Session) -> int:
        if s.execute(select(User.id).where(User.username == username)).first():
            raise Conflict(f"username {username!r} is taken", field="username")
        if s.execute(select(UserKey.id).where(UserKey.wrap_kid == wrap_kid)).first():
            raise Conflict("this wrap key is already registered", field="wrap_key")
        user = User(username=username, password_hash=password_hash, created_at_ms=now_ms())
        s.add(user)
        s.flush()
        key = UserKey(
            user_id=user.id,
            wrap_kid=wrap_kid,
            wrap_key=wrap_der,
            sign_kid=sign_kid,
            sign_key=sign_der,
            current=True,
            created_at_ms=now_ms(),
        )
        s.add(key)
        s.flush()
        kt_store.append_leaf(s, key.id, kt_store.leaf_of(username, 0, key))
        return user.id

    return op


def set_password_hash(user_id: int, old_hash: str, new_hash: str) -> Callable[[Session], bool]:
    """A write op replacing a user's password hash (an upgrade to the normalised form, or to the
    current argon2 parameters) if it is still ``old_hash``; returns whether it was replaced."""

    def op(s: Session) -> bool:
        # an UPDATE's result is a CursorResult (Session.execute is typed for SELECTs)
        stmt = update(User).where(User.id == user_id, User.password_hash == old_hash).values(password_hash=new_hash)
        done = cast("CursorResult[Any]", s.execute(stmt))
        return bool(done.rowcount)

    return op


@dataclass(frozen=True)
class StoreResult:
    seq: int
    duplicate: bool


@dataclass(frozen=True)
class NewMessage:
    """A message to store: the writer inserts all of a batch's messages with three statements
    (look up repeats, insert messages with RETURNING, insert deliveries).

    Raises:
        ValueError: ``wrap_kids`` is given and not as long as ``recipient_ids``.
    """

    conversation_id: str
    sender_id: int
    mid: str
    envelope: bytes
    recipient_ids: list[int]
    expires_at_ms: int = 0  # the envelope's expiry hint xp (0 = none)
    wrap_kids: Sequence[str | None] | None = None
    """Level 4: the wrap key id each recipient's key was wrapped to, aligned with
    ``recipient_ids`` (the header's ``rkids``); None at levels 1-3 (stored as NULL)."""

    def __post_init__(self) -> None:
        # checked here, before the writer's transaction that would store a whole batch with it
        if self.wrap_kids is not None and len(self.wrap_kids) != len(self.recipient_ids):
            raise ValueError(f"{len(self.wrap_kids)} wrap key ids for {len(self.recipient_ids)} recipients")

    def deliveries(self, seq: int, t: int) -> Iterator[tuple[int, int, int | None, str | None]]:
        """``(user_id, seq, acked_at_ms, wrap_kid)`` of each recipient's delivery row: the sender's
        own acknowledged at ``t`` (Unix ms), the others not yet."""
        kids = self.wrap_kids if self.wrap_kids is not None else [None] * len(self.recipient_ids)
        for uid, kid in zip(self.recipient_ids, kids, strict=True):
            yield uid, seq, t if uid == self.sender_id else None, kid


def insert_messages(s: Session, items: list[NewMessage]) -> list[StoreResult]:
    """Store ``items`` in one transaction, in order; one delivery row per recipient with the wrap
    key id it was sealed to (``NewMessage.wrap_kids``), the sender's own already acknowledged (its
    device has the message; the others' acks decide retention).

    Idempotent: a (sender, mid) already stored, or repeated within ``items``, returns the first
    ``seq`` with ``duplicate=True`` and stores nothing more.
    """
    if s.get_bind().dialect.name == "sqlite":
        # the writer's own sqlite3 connection (server.db.create_writer_engine)
        return _insert_messages_sqlite(cast(sqlite3.Connection, s.connection().connection.driver_connection), items)
    keys = {(m.sender_id, m.mid) for m in items}
    known: dict[tuple[int, str], int] = {}
    for chunk in _chunks(sorted(keys), 400):
        rows = s.execute(
            select(Message.sender_id, Message.mid, Message.seq).where(tuple_(Message.sender_id, Message.mid).in_(chunk))
        )
        known.update({(snd, mid): seq for snd, mid, seq in rows})
    fresh: list[NewMessage] = []
    first: set[tuple[int, str]] = set()
    for m in items:
        key = (m.sender_id, m.mid)
        if key not in known and key not in first:
            first.add(key)
            fresh.append(m)
    if fresh:
        # seq in commit order across relays: the lock is held until this transaction ends, so no
        # transaction can still commit a smaller seq once a larger one is visible (server.sendpath)
        s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": COMMIT_ORDER_LOCK})
        t = now_ms()
        conn = s.connection()  # Core statements: no ORM bulk-persistence work per row
        messages, deliveries = _MESSAGES, _DELIVERIES
        rows = conn.execute(
            insert(messages).returning(messages.c.seq, sort_by_parameter_order=True),
            [
                {
                    "conversation_id": m.conversation_id,
                    "sender_id": m.sender_id,
                    "mid": m.mid,
                    "envelope": m.envelope,
                    "size": len(m.envelope),
                    "created_at_ms": t,
                    "expires_at_ms": m.expires_at_ms,
                }
                for m in fresh
            ],
        )
        seqs = [r[0] for r in rows]
        conn.execute(
            insert(deliveries),
            [
                dict(zip(_DELIVERY_COLUMNS, row, strict=True))
                for m, seq in zip(fresh, seqs, strict=True)
                for row in m.deliveries(seq, t)
            ],
        )
        new = {(m.sender_id, m.mid): seq for m, seq in zip(fresh, seqs, strict=True)}
    else:
        new = {}
    out = []
    for m in items:
        key = (m.sender_id, m.mid)
        if key in new:
            out.append(StoreResult(new.pop(key), False))
            known[key] = out[-1].seq
        else:
            out.append(StoreResult(known[key], True))
    return out


def _sqlite_sql(stmt: ClauseElement, order: tuple[str, ...]) -> str:
    """``stmt`` compiled once for the ``sqlite3`` driver (qmark style), checking that its
    positional parameters come in ``order``."""
    compiled = stmt.compile(dialect=sqlite_dialect.dialect(paramstyle="qmark"))
    assert isinstance(compiled, SQLCompiler)
    if tuple(compiled.positiontup or ()) != order:
        raise RuntimeError(f"parameters {compiled.positiontup} are not in the order {order}")
    return str(compiled)


_MESSAGE_COLUMNS = ("conversation_id", "sender_id", "mid", "envelope", "size", "created_at_ms", "expires_at_ms")
# The hot path's SQL, compiled from the models (one place owns the schema).
_SQLITE_INSERT_MESSAGE = _sqlite_sql(
    sqlite_dialect.insert(_MESSAGES)
    .values({c: bindparam(c) for c in _MESSAGE_COLUMNS})
    .on_conflict_do_nothing(index_elements=["sender_id", "mid"]),
    _MESSAGE_COLUMNS,
)
_SQLITE_SEQ_OF = _sqlite_sql(
    select(Message.seq).where(Message.sender_id == bindparam("sender_id"), Message.mid == bindparam("mid")),
    ("sender_id", "mid"),
)
_DELIVERY_COLUMNS = ("user_id", "seq", "acked_at_ms", "wrap_kid")
_SQLITE_INSERT_DELIVERY = _sqlite_sql(
    insert(_DELIVERIES).values({c: bindparam(c) for c in _DELIVERY_COLUMNS}),
    _DELIVERY_COLUMNS,
)


def _insert_messages_sqlite(db: sqlite3.Connection, items: list[NewMessage]) -> list[StoreResult]:
    """:func:`insert_messages` on the ``sqlite3`` connection of the writer's open transaction.

    One prepared statement per message (``ON CONFLICT DO NOTHING`` on the (sender, mid) unique
    key: a repeat inserts nothing and its first ``seq`` is looked up) and one ``executemany``
    for the deliveries. SQLAlchemy's per-row parameter processing costs ~4x the SQLite work
    here, and the writer thread holds the GIL for it (measured: 150 messages of 2.9 KB, 9-12 ms
    through Core with RETURNING, ~4 ms this way through the writer, commit included).
    """
    t = now_ms()
    out: list[StoreResult] = []
    deliveries: list[tuple[int, int, int | None, str | None]] = []
    cur = db.cursor()
    try:
        for m in items:
            row = (m.conversation_id, m.sender_id, m.mid, m.envelope, len(m.envelope), t, m.expires_at_ms)
            cur.execute(_SQLITE_INSERT_MESSAGE, row)
            if cur.rowcount == 1:
                seq = cur.lastrowid
                assert seq is not None  # one row was inserted
                out.append(StoreResult(seq, False))
                deliveries.extend(m.deliveries(seq, t))
            else:
                out.append(StoreResult(cur.execute(_SQLITE_SEQ_OF, (m.sender_id, m.mid)).fetchone()[0], True))
        if deliveries:
            cur.executemany(_SQLITE_INSERT_DELIVERY, deliveries)
    finally:
        cur.close()
    return out


def _chunks(seq: Sequence[T], n: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def rotate_keys(
    user_id: int,
    wrap_kid: str,
    wrap_der: bytes,
    sign_kid: str,
    sign_der: bytes,
    rotation_sig: bytes,
    *,
    old_wrap_kid: str,
    counter: int,
) -> Callable[[Session], int]:
    """A write op replacing ``user_id``'s current keys with a v2-signed rotation (history is kept;
    the new keys are appended to the key transparency log as leaf ``counter``);
    returns the ``published_seq`` recorded: the highest message seq stored at that moment (the
    writer serialises writes, so every message at or below it was stored before the rotation).

    Raises (when run):
        Conflict: the new wrap key is already registered, or the current keys or the number of
            keys changed since the statement was checked (a concurrent rotation).
    """

    def op(s: Session) -> int:
        if s.execute(select(UserKey.id).where(UserKey.wrap_kid == wrap_kid)).first():
            raise Conflict("this wrap key is already registered", field="wrap_key")
        rows = s.execute(select(UserKey.wrap_kid, UserKey.current).where(UserKey.user_id == user_id)).all()
        if len(rows) != counter or [k for k, cur in rows if cur] != [old_wrap_kid]:
            raise Conflict(
                "the keys changed while this rotation was checked: fetch them and sign again", field="counter"
            )
        published = s.execute(select(func.coalesce(func.max(Message.seq), 0))).scalar_one()
        s.execute(update(UserKey).where(UserKey.user_id == user_id).values(current=False))
        key = UserKey(
            user_id=user_id,
            wrap_kid=wrap_kid,
            wrap_key=wrap_der,
            sign_kid=sign_kid,
            sign_key=sign_der,
            current=True,
            created_at_ms=now_ms(),
            rotation_sig=rotation_sig,
            rotation_v=2,
            published_seq=published,
        )
        s.add(key)
        s.flush()
        username = s.execute(select(User.username).where(User.id == user_id)).scalar_one()
        kt_store.append_leaf(s, key.id, kt_store.leaf_of(username, counter, key))
        return int(published)

    return op


def ack_up_to(user_id: int, seq: int, receipts: int = 1000) -> Callable[[Session], list[tuple[int, int]]]:
    """A write op marking every one of ``user_id``'s deliveries with ``seq <= seq`` acknowledged
    (retention deletes an envelope once all its deliveries are).

    Returns ``[(seq, sender_id)]`` newly acknowledged, for delivered receipts: the most recent
    ``receipts`` of them, oldest first (a client back after a long absence acknowledges thousands
    at once; its senders are told of the latest).
    """

    def op(s: Session) -> list[tuple[int, int]]:
        pending = (Delivery.user_id == user_id, Delivery.seq <= seq, Delivery.acked_at_ms.is_(None))
        rows = s.execute(
            select(Delivery.seq, Message.sender_id)
            .join(Message, Message.seq == Delivery.seq)
            .where(*pending)
            .order_by(Delivery.seq.desc())
            .limit(receipts)
        ).all()
        if rows:
            s.execute(update(Delivery).where(*pending).values(acked_at_ms=now_ms()))
        return [(r[0], r[1]) for r in reversed(rows)]

    return op
