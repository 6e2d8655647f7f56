"""The writer on a fresh database with three users in one conversation, and message ops for it."""

from __future__ import annotations

import asyncio
import secrets

from sqlalchemy import func, select

from server import db, store
from server.migrate import upgrade
from server.models import Conversation, Member, User
from server.writer import Writer


async def writer_on(url: str, synchronous: str):
    """``(writer, sessionmaker)`` on ``url`` (migrated), users 1-3 members of ``conv1``."""
    await asyncio.to_thread(upgrade, url)
    engine = db.create_engine(url, sqlite_synchronous=synchronous)
    sessions = db.sessionmaker(engine)
    w = Writer(
        sessions,
        db.create_writer_engine(url, sqlite_synchronous=synchronous),
        inline=not db.commits_wait_for_disk(synchronous),
    )
    w.start()

    def setup(s) -> None:
        s.add_all(
            [
                User(id=i, username=n, password_hash="x", created_at_ms=0)
                for i, n in ((1, "alice"), (2, "bob"), (3, "carol"))
            ]
        )
        s.flush()
        s.add(Conversation(id="conv1", title="t", created_by=1, created_at_ms=0))
        s.flush()
        s.add_all([Member(conversation_id="conv1", user_id=u, joined_at_ms=0) for u in (1, 2, 3)])

    await w.run(setup)
    yield w, sessions
    await w.stop()
    await engine.dispose()


def new(mid: str, sender: int = 1, conversation: str = "conv1") -> store.NewMessage:
    return store.NewMessage(conversation, sender, mid, secrets.token_bytes(2900), [1, 2, 3])


async def count(sessions, what) -> int:
    async with sessions() as s:
        return (await s.execute(select(func.count()).select_from(what))).scalar_one()
