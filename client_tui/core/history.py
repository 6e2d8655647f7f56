"""The local history cache: decrypted messages, the outbox and the sync cursor, in SQLite.

One file per account (``history.sqlite3`` beside the keystore, mode 0600). Message text and the
typed document (its type, references, edits, reactions) are stored
encrypted under the account's ``local_key`` (AES-256-GCM, 12-byte random nonce, AAD = row id +
conversation + sender), a random key kept inside the passphrase-protected keystore: the cache
shows history after a restart without any RSA work, and the file alone reveals no text. Envelopes
are stored as the relay stored them (ciphertext), for the inspector.

Every call runs on one dedicated thread (sqlite3 connections are not shared between threads), so
an event loop that drives a UI never waits on disk I/O. The cursor and the per-sender counters are
written in the same transaction as the message that advanced them: after a crash the client syncs
again from a cursor that matches what the cache holds (duplicates are dropped by message id).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .history_schema import COLUMNS, INDEXES, TABLES, upgrade
from .private import ensure_private, set_aside
from .record import OUTGOING_STATES, UNSENT_POS, Doc, MessageInfo, Record, RecordState

log = logging.getLogger("e2ee.client")


class Sealed(msgspec.Struct, omit_defaults=True):
    """What a row's ``body`` seals (version 2): the text as shown and the record's document."""

    text: str | None
    content: Doc = msgspec.field(default_factory=Doc)


class History:
    """The SQLite cache of one account. Create with :meth:`open` (async)."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.path = Path(path)
        self._aead = AESGCM(key)
        self._exec = ThreadPoolExecutor(max_workers=1, thread_name_prefix="history")
        self._db: sqlite3.Connection | None = None
        self.set_aside: Path | None = None

    @classmethod
    async def open(cls, path: Path, key: bytes) -> History:
        """Open (or create, 0600) the cache at ``path``. A file SQLite cannot read is renamed aside
        (``history.sqlite3.damaged-<time>``, with its ``-wal``/``-shm``), never overwritten, and a
        new cache is started; ``set_aside`` then names where the old one went."""
        h = cls(path, key)
        try:
            await h._call(h._open)
        except sqlite3.DatabaseError as exc:
            if h._db is not None:
                await h._call(h._db.close)
                h._db = None
            h.set_aside = set_aside(h.path, "damaged", ("-wal", "-shm"))
            log.warning("history cache damaged (%s): set aside as %s", exc, h.set_aside.name)
            await h._call(h._open)
        return h

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._exec, fn, *args)

    def _open(self) -> None:
        ensure_private(self.path)
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=5000")
            db.executescript(TABLES)
            upgrade(db)
            db.executescript(INDEXES)
            db.execute("SELECT count(*) FROM messages").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        self._db = db

    async def close(self) -> None:
        if self._db is not None:
            await self._call(self._db.close)
            self._db = None
        self._exec.shutdown(wait=True)

    # -- encryption of the text ------------------------------------------------------------------
    @staticmethod
    def _aad(lid: str, conversation: str, sender: str, version: int = 2) -> bytes:
        return f"e2ee-chat/v{version}/history.{lid}.{conversation}.{sender}".encode()

    def _seal(self, r: Record) -> bytes | None:
        """``body``: the text and the document (:class:`Sealed`) under the local key; None when
        there is neither (a message that did not open, one deleted)."""
        if r.text is None and r.content == Doc():
            return None
        nonce = os.urandom(12)
        plain = msgspec.json.encode(Sealed(r.text, r.content))
        return nonce + self._aead.encrypt(nonce, plain, self._aad(r.lid, r.conversation, r.sender))

    def _unseal(self, lid: str, conversation: str, sender: str, body: bytes) -> Sealed | None:
        """What :meth:`_seal` sealed; a version-1 body (the text alone, its own AAD) as text; None
        for a body that does not open (damaged)."""
        for version in (2, 1):
            try:
                plain = self._aead.decrypt(body[:12], body[12:], self._aad(lid, conversation, sender, version))
            except (InvalidTag, ValueError):
                continue
            try:
                return msgspec.json.decode(plain, type=Sealed) if version == 2 else Sealed(plain.decode("utf-8"))
            except (msgspec.DecodeError, UnicodeDecodeError):
                return None
        return None

    def _row(self, row: tuple) -> Record:
        lid, conv, sender, mid, seq, pos, ts, ctr, state, body, reason, detail, env, info, _visible, _exp = row
        sealed = Sealed(None) if body is None else self._unseal(lid, conv, sender, body)
        if sealed is None:
            state, reason, sealed = RecordState.UNREADABLE, reason or "history_damaged", Sealed(None)
        try:
            state, message_info = RecordState(state), MessageInfo.decode(info)
        except (msgspec.DecodeError, ValueError, TypeError, AttributeError, RecursionError) as exc:
            # one row's unencrypted columns damaged (bit rot, a sqlite tool): that row is shown as
            # unreadable, the others are listed; its stored bytes are kept as they are
            log.warning("history row lid=%s in %s damaged (%s): shown as unreadable", lid, conv, type(exc).__name__)
            state, reason, message_info = RecordState.UNREADABLE, "history_damaged", MessageInfo()
        return Record(
            lid,
            conv,
            sender,
            sealed.text,
            mid,
            seq,
            pos,
            ts,
            ctr,
            state,
            reason,
            detail,
            bytes(env) if env is not None else None,
            message_info,
            sealed.content,
        )

    # -- writes --------------------------------------------------------------------------------------
    def _put(self, r: Record, meta: dict[str, Any] | None) -> bool:
        assert self._db is not None
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            inserted = self._write(r)
            for k, v in (meta or {}).items():
                db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (k, json.dumps(v)),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return inserted

    def _write(self, r: Record) -> bool:
        """Insert or update ``r`` by ``lid`` inside the open transaction; False for a duplicate.

        A duplicate is the same (sender, mid), or, for a record without a mid (unreadable), the same
        envelope under the same seq. Another message under a seq already stored is kept beside it.
        """
        assert self._db is not None
        db = self._db
        if r.seq is not None:
            for lid, sender, mid, env in db.execute(
                "SELECT lid, sender, mid, envelope FROM messages WHERE seq=? AND lid!=?", (r.seq, r.lid)
            ):
                if r.mid is None and env is not None and bytes(env) == r.envelope:
                    return False  # the same undecodable delivery again
                if r.mid is None or (sender, mid) != (r.sender, r.mid):
                    log.warning(
                        "seq %d is also the seq of a stored message (%s, mid %s, lid %s): keeping both",
                        r.seq,
                        sender,
                        mid,
                        lid,
                    )
        try:
            cur = db.execute(
                f"INSERT INTO messages ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "  # noqa: S608 - constants
                "ON CONFLICT(lid) DO UPDATE SET mid=excluded.mid, seq=excluded.seq, pos=excluded.pos, "
                "ts=excluded.ts, ctr=excluded.ctr, state=excluded.state, body=excluded.body, "
                "reason=excluded.reason, detail=excluded.detail, envelope=excluded.envelope, info=excluded.info, "
                "visible=excluded.visible, exp=excluded.exp",
                (
                    r.lid,
                    r.conversation,
                    r.sender,
                    r.mid,
                    r.seq,
                    r.pos,
                    r.ts,
                    r.ctr,
                    r.state,
                    self._seal(r),
                    r.reason,
                    r.detail,
                    r.envelope,
                    r.info.encode(),
                    int(r.visible),
                    r.content.exp if r.state != RecordState.DELETED else None,
                ),
            )
        except sqlite3.IntegrityError:
            return False  # the same (sender, mid) again: dedup is by message id
        return cur.rowcount > 0

    async def put(self, record: Record, meta: dict[str, Any] | None = None) -> bool:
        """Insert or update ``record`` (by ``lid``) and ``meta`` in one transaction.

        Returns False when it was refused as a duplicate: the same sender and mid (or, without a mid,
        the same envelope under the same seq). A different message under a stored ``seq`` is kept
        (both rows; a warning is logged).
        """
        return await self._call(self._put, record, meta)

    def _set_meta(self, meta: dict[str, Any]) -> None:
        assert self._db is not None
        with self._db:
            for k, v in meta.items():
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (k, json.dumps(v)),
                )

    async def set_meta(self, **meta: Any) -> None:
        await self._call(self._set_meta, meta)

    def _save_conversations(self, convs: list[tuple[str, str, list[str]]], active_ids: set[str] | None) -> None:
        assert self._db is not None
        with self._db:
            for cid, title, members in convs:
                self._db.execute(
                    "INSERT INTO conversations (id, title, members, active) VALUES (?, ?, ?, 1) "
                    "ON CONFLICT(id) DO UPDATE SET title=excluded.title, members=excluded.members, active=1",
                    (cid, title, json.dumps(members)),
                )
            if active_ids is not None:
                for (cid,) in self._db.execute("SELECT id FROM conversations").fetchall():
                    if cid not in active_ids:
                        self._db.execute("UPDATE conversations SET active=0 WHERE id=?", (cid,))

    async def save_conversations(self, convs: list[tuple[str, str, list[str]]], complete: bool = False) -> None:
        """Remember conversations ``(id, title, members)``; with ``complete`` the others are
        marked inactive (I left or was removed)."""
        await self._call(self._save_conversations, convs, {c[0] for c in convs} if complete else None)

    def _set_unread(self, cid: str, n: int) -> None:
        assert self._db is not None
        with self._db:
            self._db.execute("UPDATE conversations SET unread=? WHERE id=?", (n, cid))

    async def set_unread(self, cid: str, n: int) -> None:
        await self._call(self._set_unread, cid, n)

    # -- reads ---------------------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        assert self._db is not None
        meta: dict[str, Any] = {}
        for k, v in self._db.execute("SELECT key, value FROM meta"):
            try:
                meta[k] = json.loads(v)
            except (ValueError, TypeError, RecursionError) as exc:  # a damaged value: dropped, never a failed login
                log.warning("history meta %r damaged (%s): dropped", k, type(exc).__name__)
        return meta

    async def meta(self) -> dict[str, Any]:
        return await self._call(self._meta)

    def _seen(self) -> set[tuple[str, str]]:
        assert self._db is not None
        return {(s, m) for s, m in self._db.execute("SELECT sender, mid FROM messages WHERE mid IS NOT NULL")}

    async def seen(self) -> set[tuple[str, str]]:
        """Every (sender, mid) in the cache: the dedup set."""
        return await self._call(self._seen)

    def _recent(self, conversation: str, limit: int, before: float | None) -> list[Record]:
        assert self._db is not None
        q = f"SELECT {COLUMNS} FROM messages WHERE conversation=? AND visible=1"  # noqa: S608 - constants
        args: list[Any] = [conversation]
        if before is not None:
            q += " AND pos < ?"
            args.append(before)
        q += " ORDER BY pos DESC, id DESC LIMIT ?"
        args.append(limit)
        return [self._row(r) for r in reversed(self._db.execute(q, args).fetchall())]

    async def recent(self, conversation: str, limit: int = 200, before: float | None = None) -> list[Record]:
        """The last ``limit`` rows of a conversation's log (before ``pos``), oldest first: records
        that are not ``visible`` (actions applied, what was deleted) are left out."""
        return await self._call(self._recent, conversation, limit, before)

    def _select(self, where: str, args: tuple) -> list[Record]:
        assert self._db is not None
        return [
            self._row(r)
            for r in self._db.execute(
                f"SELECT {COLUMNS} FROM messages WHERE {where} ORDER BY id",  # noqa: S608 - callers pass constants
                args,
            ).fetchall()
        ]

    async def outbox(self) -> list[Record]:
        """My messages not stored by the relay yet, in the order they were written."""
        marks = ",".join("?" * len(OUTGOING_STATES))
        return await self._call(self._select, f"state IN ({marks})", OUTGOING_STATES)

    async def unreadable(self, reasons: tuple[str, ...], sender: str | None = None) -> list[Record]:
        """Messages that did not open for one of ``reasons`` (optionally only ``sender``'s), oldest first."""
        where = f"state='unreadable' AND reason IN ({','.join('?' * len(reasons))})"
        args = tuple(reasons)
        if sender is not None:
            where, args = where + " AND sender=?", (*args, sender)
        return await self._call(self._select, where, args)

    async def ignored(self, reason: str) -> list[Record]:
        """Documents kept as ``ignored`` with ``reason`` (an error code), oldest first."""
        return await self._call(self._select, "state='ignored' AND reason=?", (reason,))

    async def by_seq(self, seq: int) -> Record | None:
        """The record stored under ``seq``; if several are (a seq the relay handed out again), the newest."""
        rows = await self._call(self._select, "seq=?", (seq,))
        return rows[-1] if rows else None

    async def by_lid(self, lid: str) -> Record | None:
        rows = await self._call(self._select, "lid=?", (lid,))
        return rows[0] if rows else None

    async def by_mid(self, mid: str, conversation: str | None = None) -> list[Record]:
        """The records with message id ``mid`` (in ``conversation``), oldest first: one, unless
        a member reused someone else's id (a message is one by sender and id)."""
        if conversation is None:
            return await self._call(self._select, "mid=?", (mid,))
        return await self._call(self._select, "mid=? AND conversation=?", (mid, conversation))

    async def expiring(self, until_ms: int) -> list[Record]:
        """Records not deleted yet whose ``exp`` is at or before ``until_ms``, oldest first."""
        return await self._call(self._select, "exp IS NOT NULL AND exp<=? AND state!='deleted'", (until_ms,))

    def _next_exp(self) -> int | None:
        assert self._db is not None
        return self._db.execute("SELECT min(exp) FROM messages WHERE exp IS NOT NULL AND state!='deleted'").fetchone()[
            0
        ]

    async def next_exp(self) -> int | None:
        """The earliest ``exp`` (ms) of a record not deleted yet; None if none expires."""
        return await self._call(self._next_exp)

    def _search(self, match, conversation: str | None, limit: int) -> list[Record]:
        assert self._db is not None
        q = f"SELECT {COLUMNS} FROM messages WHERE body IS NOT NULL AND visible=1"  # noqa: S608 - constants
        args: tuple = ()
        if conversation is not None:
            q, args = q + " AND conversation=?", (conversation,)
        found: list[Record] = []
        for row in self._db.execute(q + " ORDER BY pos DESC, id DESC", args):
            rec = self._row(row)  # decrypted here, in memory only
            if rec.text is not None and match(rec.text):
                found.append(rec)
                if len(found) >= limit:
                    break
        return found

    async def search(self, match, conversation: str | None = None, limit: int = 100) -> list[Record]:
        """Records whose decrypted text ``match(text)`` accepts, newest first, at most ``limit``.

        The text is decrypted row by row in the history thread and dropped after the test:
        there is no index, and nothing readable is written anywhere.
        """
        return await self._call(self._search, match, conversation, limit)

    def _conversations(self) -> list[dict[str, Any]]:
        assert self._db is not None
        return [
            {"id": cid, "title": t, "members": _members(cid, m), "unread": u, "active": bool(a)}
            for cid, t, m, u, a in self._db.execute(
                "SELECT id, title, members, unread, active FROM conversations ORDER BY rowid"
            )
        ]

    async def conversations(self) -> list[dict[str, Any]]:
        return await self._call(self._conversations)

    def _max_pos(self) -> float:
        assert self._db is not None
        q = "SELECT coalesce(max(pos), 0) FROM messages WHERE pos < ?"
        return self._db.execute(q, (UNSENT_POS,)).fetchone()[0]

    async def max_pos(self) -> float:
        """The pos of the newest line that is not an unsent message of mine (0.0 in an empty cache)."""
        return await self._call(self._max_pos)

    def _rows_written(self) -> int:
        assert self._db is not None
        return self._db.total_changes

    async def rows_written(self) -> int:
        """Rows inserted, updated or deleted in this cache since it was opened (SQLite's
        ``total_changes``: messages, meta and conversations alike). What the cache costs per
        message, counted rather than timed (tests and the bench)."""
        return await self._call(self._rows_written)

    def _count(self, conversation: str | None) -> int:
        assert self._db is not None
        q = "SELECT count(*) FROM messages WHERE state != 'system' AND visible=1"
        if conversation is None:
            return self._db.execute(q).fetchone()[0]
        return self._db.execute(q + " AND conversation=?", (conversation,)).fetchone()[0]

    async def count(self, conversation: str | None = None) -> int:
        """How many messages (not membership lines) the cache holds, in ``conversation`` or in all."""
        return await self._call(self._count, conversation)


def _members(cid: str, stored: str) -> list[str]:
    """A conversation row's JSON list of usernames; damaged (not JSON, not a list of strings): an
    empty list, logged (the signed membership chain is the source of truth and fills it again)."""
    try:
        members = json.loads(stored)
    except (ValueError, TypeError, RecursionError):
        members = None
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        log.warning("history conversation %s: stored member list damaged: shown as empty", cid)
        return []
    return members
