"""The single write path (group commit): one asyncio task takes all writes queued at that moment
and commits them in one transaction. If a batch fails, each write in it is retried alone so one bad
write never fails another. Write ops are the plain functions of :mod:`server.store`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.orm import sessionmaker as SyncSessionmaker

from .db import Sessions
from .store import NewMessage, StoreResult, insert_messages

log = logging.getLogger("e2ee.relay.store")
T = TypeVar("T")

WriteOp = Callable[[Session], Any] | NewMessage


class Writer:
    """The single write path. ``await writer.run(op)`` returns after ``op`` is committed.

    Ops queued while a transaction runs are committed together in the next one (group commit,
    at most ``max_batch`` ops). Ops are plain functions of a sync :class:`Session`:

    * SQLite: the whole batch runs on a sync ``sqlite3`` engine as one ``BEGIN IMMEDIATE``
      transaction. With ``inline`` (commits that do not wait for the disk: ``synchronous=NORMAL``)
      it runs on the event loop itself: a batch of 150 messages takes ~3 ms of CPU, while two
      thread hops per batch cost 0.1 ms on an idle machine and several ms on a loaded one (each
      waits for the scheduler). The WAL is then checkpointed (``PASSIVE``: never blocks the
      writer; this is where the fsync happens) from the writer's thread, at most once every
      ``CHECKPOINT_INTERVAL_S`` after writes. On the loop the connection never waits for SQLite's
      write lock (``busy_timeout`` 0): when another process holds it, the batch is handed to the
      writer's thread, which waits there, so the event loop keeps answering (``busy_waits``).
      Without ``inline`` (``FULL``/``EXTRA``: every commit fsyncs) batches run in that thread.
    * other databases (PostgreSQL/asyncpg): the batch runs through the async session with
      ``run_sync``.
    """

    CHECKPOINT_INTERVAL_S = 1.0

    def __init__(
        self, sessions: Sessions, sync_engine: Engine | None = None, max_batch: int = 256, inline: bool = False
    ) -> None:
        self._sessions = sessions
        self._sync_sessions = SyncSessionmaker(sync_engine, expire_on_commit=False) if sync_engine else None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="db-writer") if sync_engine else None
        self._inline = inline and sync_engine is not None
        self._engine = sync_engine
        self._loop_conn_ready = False  # the event loop thread's connection has busy_timeout 0
        self._db_path = sync_engine.url.database if sync_engine is not None and self._inline else None
        self._checkpointer: sqlite3.Connection | None = None  # used only in the writer's thread
        self._checkpoint: asyncio.Future[Any] | None = None
        self._last_checkpoint = 0.0
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._held: collections.deque[_Item] = collections.deque()  # a background op met while batching
        self._max_batch = max_batch
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.ops = 0
        self.checkpoints = 0
        self.busy_waits = 0  # batches that found SQLite locked by another process and waited off the loop

    def start(self) -> None:
        """Start the writer's task (on the running loop)."""
        self._task = asyncio.create_task(self._loop(), name="db-writer")

    async def stop(self) -> None:
        """Finish what is queued, then stop."""
        if self._task is None:
            return
        await self._queue.join()
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        if self._checkpoint is not None:
            with contextlib.suppress(Exception):
                await self._checkpoint
        if self._thread is not None:
            if self._checkpointer is not None:
                self._thread.submit(self._checkpointer.close).result()
            self._thread.shutdown(wait=True)

    @overload
    async def run(self, op: NewMessage) -> StoreResult: ...
    @overload
    async def run(self, op: Callable[[Session], T], background: bool = False) -> T: ...

    async def run(self, op: Callable[[Session], T] | NewMessage, background: bool = False) -> T | StoreResult:
        """Queue ``op`` (a write function of a sync Session, or a :class:`NewMessage`, which
        returns a :class:`StoreResult`) and wait until its transaction committed; re-raises what
        ``op`` raised.

        ``background``: housekeeping (retention): ``op`` gets a transaction of its own, run off the
        event loop (SQLite: in the writer's thread), between the batches of other writes — never
        inside one, so it delays a send by at most its own duration.
        """
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        item = _Background(op) if background and not isinstance(op, NewMessage) else op
        await self._queue.put((item, fut))
        result: T | StoreResult = await fut
        return result

    async def _loop(self) -> None:
        while True:
            op, fut = self._held.popleft() if self._held else await self._queue.get()
            if isinstance(op, _Background):
                try:
                    await self._commit_background(op.op, fut)
                finally:
                    self._queue.task_done()
                continue
            batch: list[tuple[WriteOp, asyncio.Future[Any]]] = [(op, fut)]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if isinstance(item[0], _Background):
                    self._held.append(item)  # after this batch, alone
                    break
                batch.append((item[0], item[1]))
            try:
                await self._commit(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _commit_background(self, op: Callable[[Session], Any], fut: asyncio.Future[Any]) -> None:
        ops: list[WriteOp] = [op]
        try:
            if self._thread is not None:
                result = (await asyncio.get_running_loop().run_in_executor(self._thread, self._sync_transaction, ops))[
                    0
                ]
            else:
                async with self._sessions() as session:
                    result = await session.run_sync(op)
                    await session.commit()
        except Exception as exc:  # it goes to the caller that queued it
            if not fut.done():
                fut.set_exception(exc)
            return
        if not fut.done():
            fut.set_result(result)

    @staticmethod
    def _body(session: Session, ops: list[WriteOp]) -> list[Any]:
        results: list[Any] = [None] * len(ops)
        messages = [(i, op) for i, op in enumerate(ops) if isinstance(op, NewMessage)]
        for i, op in enumerate(ops):
            if not isinstance(op, NewMessage):
                results[i] = op(session)
        if messages:
            for (i, _), r in zip(messages, insert_messages(session, [op for _, op in messages]), strict=True):
                results[i] = r
        return results

    def _sync_transaction(self, ops: list[WriteOp]) -> list[Any]:
        assert self._sync_sessions is not None  # run only with a sync engine (SQLite)
        with self._sync_sessions() as session:
            session.connection(execution_options={"immediate": True})
            results = self._body(session, ops)
            session.commit()
            return results

    def _run_checkpoint(self) -> int:
        """In the writer's thread: copy committed WAL frames into the database file (PASSIVE:
        as many as readers allow, never waiting). Returns the frames copied."""
        if self._checkpointer is None:
            assert self._db_path is not None  # checkpoints run only inline, on an SQLite file
            self._checkpointer = sqlite3.connect(self._db_path, isolation_level=None)
            self._checkpointer.execute("PRAGMA busy_timeout=10000")
        row: tuple[int, int, int] = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        _busy, _wal_frames, copied = row
        return copied

    def _after_inline_commit(self) -> None:
        now = time.monotonic()
        if (
            self._checkpoint is not None and not self._checkpoint.done()
        ) or now - self._last_checkpoint < self.CHECKPOINT_INTERVAL_S:
            return
        self._last_checkpoint = now
        self._checkpoint = asyncio.get_running_loop().run_in_executor(self._thread, self._run_checkpoint)
        self._checkpoint.add_done_callback(self._checkpoint_done)

    def _checkpoint_done(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            return
        if fut.exception() is not None:  # the WAL only grows until the next one succeeds
            log.warning("WAL checkpoint failed: %r", fut.exception())
        else:
            self.checkpoints += 1

    def _inline_transaction(self, ops: list[WriteOp]) -> list[Any]:
        """The batch on the event loop's thread, never waiting for SQLite's write lock: that
        thread's connection has ``busy_timeout`` 0, so ``BEGIN IMMEDIATE`` fails at once with
        SQLITE_BUSY while another process holds the lock."""
        if not self._loop_conn_ready:
            assert self._engine is not None  # inline needs the sync engine
            raw = self._engine.raw_connection()  # SingletonThreadPool: this thread's own connection
            try:
                assert raw.driver_connection is not None
                raw.driver_connection.execute("PRAGMA busy_timeout=0")
            finally:
                raw.close()
            self._loop_conn_ready = True
        return self._sync_transaction(ops)

    async def _transaction(self, batch: list[tuple[WriteOp, asyncio.Future[Any]]]) -> list[Any]:
        ops = [op for op, _ in batch]
        if self._inline:
            try:
                results = self._inline_transaction(ops)
            except OperationalError as exc:
                if not _sqlite_busy(exc):
                    raise
                # Another process holds the write lock: wait for it in the writer's thread (its
                # connection has the usual busy_timeout) so the event loop keeps serving.
                self.busy_waits += 1
                log.info("SQLite is locked by another connection: this batch waits off the event loop")
                return await asyncio.get_running_loop().run_in_executor(self._thread, self._sync_transaction, ops)
            self._after_inline_commit()
            return results
        if self._thread is not None:
            return await asyncio.get_running_loop().run_in_executor(self._thread, self._sync_transaction, ops)
        async with self._sessions() as session:
            results = await session.run_sync(self._body, ops)
            await session.commit()
            return results

    async def _commit(self, batch: list[tuple[WriteOp, asyncio.Future[Any]]]) -> None:
        live = [(op, fut) for op, fut in batch if not fut.cancelled()]
        if not live:
            return
        try:
            results = await self._transaction(live)
        except Exception as exc:  # each error goes to the caller that queued it
            if len(live) > 1:  # find the culprit: each op alone, so the others still commit
                for item in live:
                    await self._commit([item])
                return
            if not live[0][1].done():
                live[0][1].set_exception(exc)
            return
        self.batches += 1
        self.ops += len(live)
        for (_, fut), result in zip(live, results, strict=True):
            if not fut.done():
                fut.set_result(result)


@dataclass(frozen=True)
class _Background:
    op: Callable[[Session], Any]


_Item = tuple[WriteOp | _Background, "asyncio.Future[Any]"]
"""A queued write and the future its caller waits on."""


def _sqlite_busy(exc: OperationalError) -> bool:
    """Whether ``exc`` is SQLite's SQLITE_BUSY ("database is locked"), extended codes included."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY
