"""seq: strictly monotonic for the life of the database, 64-bit

Before this, SQLite handed out the seq of deleted messages again (``INTEGER PRIMARY KEY`` without
``AUTOINCREMENT`` takes max(rowid)+1): once retention deleted the newest envelopes, a new message
could get a seq that clients had already synced past, and they never received it. PostgreSQL's
sequence never goes back but was 32-bit. Now SQLite's ``messages`` is rebuilt with ``AUTOINCREMENT``
(rows copied with their seqs; ``deliveries`` untouched) and PostgreSQL's ``seq`` columns and their
sequence are ``bigint``.

SQLite cannot know the seqs it handed out to rows deleted before this upgrade; the next seq is
above the highest one it still has a trace of: stored messages and ``user_keys.published_seq``.

Revision ID: 0007_seq_monotonic
Revises: 0006_retention
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_seq_monotonic"
down_revision = "0006_retention"
branch_labels = None
depends_on = None


def _sqlite_rebuild_messages(autoincrement: bool) -> None:
    """Copy ``messages`` into a table with or without ``AUTOINCREMENT`` (rows keep their seqs)."""
    # Rebuilding drops the old table: with foreign keys on, that would cascade into deliveries.
    if op.get_bind().exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("migration 0007 rebuilds messages and needs PRAGMA foreign_keys=OFF")
    with op.batch_alter_table(
        "messages", recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
    ) as batch_op:
        batch_op.alter_column("seq", existing_type=sa.Integer(), existing_nullable=False, autoincrement=True)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild_messages(autoincrement=True)
        # the copy set sqlite_sequence to the highest stored seq; published_seq may know a higher one
        op.execute(
            "INSERT INTO sqlite_sequence (name, seq) SELECT 'messages', 0 WHERE NOT EXISTS "
            "(SELECT 1 FROM sqlite_sequence WHERE name = 'messages')"
        )
        op.execute(
            "UPDATE sqlite_sequence SET seq = max(seq, (SELECT coalesce(max(published_seq), 0) "
            "FROM user_keys)) WHERE name = 'messages'"
        )
    else:
        op.alter_column("messages", "seq", type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)
        op.alter_column("deliveries", "seq", type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)
        op.execute("ALTER SEQUENCE messages_seq_seq AS bigint")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild_messages(autoincrement=False)
    else:
        # refuses (out of range) when a seq above 2**31-1 is stored: those cannot go back to 32 bits
        op.execute("ALTER SEQUENCE messages_seq_seq AS integer")
        op.alter_column("deliveries", "seq", type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
        op.alter_column("messages", "seq", type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
