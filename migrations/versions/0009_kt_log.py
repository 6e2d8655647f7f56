"""kt_log: the key transparency log (docs/PROTOCOL.md §14)

One row per key publication or rotation, in log order (``idx`` 0, 1, 2, …): the leaf data
(canonical JSON, ``shared.kt.KeyLeaf``), its RFC 9162 leaf hash, the key row it logs and the
username. Rows for keys published before this migration are appended by the relay at start
(``server.kt_store.backfill``), so the leaf encoding lives in one place.

Revision ID: 0009_kt_log
Revises: 0008_blobs
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_kt_log"
down_revision = "0008_blobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kt_log",
        sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("user_key_id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=32), nullable=False),
        sa.Column("leaf", sa.Text(), nullable=False),
        sa.Column("leaf_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("idx", name=op.f("pk_kt_log")),
        sa.UniqueConstraint("user_key_id", name=op.f("uq_kt_log_user_key_id")),
    )
    with op.batch_alter_table("kt_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_kt_log_username"), ["username"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("kt_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kt_log_username"))
    op.drop_table("kt_log")
