"""The history cache's SQLite schema (tables, indexes, version) and the upgrade of a cache file
written by an older client (:mod:`client_tui.core.history` owns the file and every query)."""

from __future__ import annotations

import sqlite3

__all__ = ["COLUMNS", "INDEXES", "SCHEMA_VERSION", "TABLES", "upgrade"]

MESSAGES_TABLE = """
CREATE TABLE IF NOT EXISTS {name} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lid TEXT NOT NULL UNIQUE,
    conversation TEXT NOT NULL,
    sender TEXT NOT NULL,
    mid TEXT,
    seq INTEGER,
    pos REAL NOT NULL,
    ts INTEGER NOT NULL,
    ctr INTEGER,
    state TEXT NOT NULL,
    body BLOB,
    reason TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    envelope BLOB,
    info TEXT NOT NULL DEFAULT '{{}}',
    visible INTEGER NOT NULL DEFAULT 1,
    exp INTEGER
);
"""
"""``seq`` is not a key: a message is one by (sender, mid); two messages may carry one seq (a relay
that handed a seq out again, or a hostile one), and both are kept. ``visible``: a row of the log
(``Record.visible``; 0 for an edit, reaction or receipt applied, and for what was deleted);
``exp``: when it expires (ms), for the expiry timer. Both are readable in the file: the document
type, its text and its references are sealed in ``body``."""

TABLES = (
    MESSAGES_TABLE.format(name="messages")
    + """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    members TEXT NOT NULL,
    unread INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
)
INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS messages_sender_mid ON messages(sender, mid) WHERE mid IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_mid ON messages(mid) WHERE mid IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_conversation ON messages(conversation, pos);
CREATE INDEX IF NOT EXISTS messages_state ON messages(state);
CREATE INDEX IF NOT EXISTS messages_seq ON messages(seq);
CREATE INDEX IF NOT EXISTS messages_exp ON messages(exp) WHERE exp IS NOT NULL;
"""
SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of this schema. 0: ``seq`` was UNIQUE (a message whose seq collided with
a stored one was dropped); 1: no ``visible`` and ``exp`` columns, ``body`` sealed the text alone.
:func:`upgrade` brings either up, keeping every row."""
_V1_COLUMNS = "id, lid, conversation, sender, mid, seq, pos, ts, ctr, state, body, reason, detail, envelope, info"


def upgrade(db: sqlite3.Connection) -> None:
    """Bring a cache file written by an older client to :data:`SCHEMA_VERSION` (in one transaction)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version >= SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        unique_seq = any(
            unique and [c[2] for c in db.execute(f"PRAGMA index_info('{name}')")] == ["seq"]
            for _, name, unique, *_ in db.execute("PRAGMA index_list('messages')").fetchall()
        )
        if unique_seq:  # SQLite cannot drop a column constraint: copy into a new table
            db.execute(MESSAGES_TABLE.format(name="messages_v1"))
            db.execute(f"INSERT INTO messages_v1 ({_V1_COLUMNS}) SELECT {_V1_COLUMNS} FROM messages")  # noqa: S608
            db.execute("DROP TABLE messages")
            db.execute("ALTER TABLE messages_v1 RENAME TO messages")
        have = {row[1] for row in db.execute("PRAGMA table_info('messages')")}
        if "visible" not in have:  # rows of a version-1 cache are all messages or lines: visible
            db.execute("ALTER TABLE messages ADD COLUMN visible INTEGER NOT NULL DEFAULT 1")
        if "exp" not in have:
            db.execute("ALTER TABLE messages ADD COLUMN exp INTEGER")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


COLUMNS = "lid, conversation, sender, mid, seq, pos, ts, ctr, state, body, reason, detail, envelope, info, visible, exp"
