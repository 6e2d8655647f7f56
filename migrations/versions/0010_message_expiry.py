"""message_expiry: the envelope's readable expiry hint ``xp`` on each stored message

``messages.expires_at_ms`` (Unix ms, rounded up to the hour by the sender; 0 = none): sync stops
handing the envelope out and retention deletes it from then on, acknowledged or not
(``server.retention``). Messages stored before this migration have none.

Revision ID: 0010_message_expiry
Revises: 0009_kt_log
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_message_expiry"
down_revision = "0009_kt_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN (SQLite and PostgreSQL): no batch rebuild, which would drop SQLite's
    # AUTOINCREMENT on messages (migration 0007)
    op.add_column("messages", sa.Column("expires_at_ms", sa.BigInteger(), server_default="0", nullable=False))
    op.create_index(op.f("ix_messages_expires_at_ms"), "messages", ["expires_at_ms"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_messages_expires_at_ms"), table_name="messages")
    if op.get_bind().dialect.name == "sqlite":  # rebuilt, keeping AUTOINCREMENT
        with op.batch_alter_table(
            "messages", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ) as batch_op:
            batch_op.drop_column("expires_at_ms")
    else:
        op.drop_column("messages", "expires_at_ms")
