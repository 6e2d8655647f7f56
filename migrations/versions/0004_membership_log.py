"""membership log: signed statements per conversation; members and head derived from it

Revision ID: 0004_membership_log
Revises: 0003_key_rotation_v2
Create Date: 2026-12-01 15:00:00

Conversations made before this revision have no log (``epoch`` NULL): they stay readable and are
refused new messages (``legacy_conversation``, docs/PROTOCOL.md §12.8).
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_membership_log"
down_revision = "0003_key_rotation_v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "membership_log",
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=43), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=False),
        sa.Column("members", sa.Text(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["actor_id"], ["users.id"], name=op.f("fk_membership_log_actor_id_users")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_membership_log_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("conversation_id", "epoch", name=op.f("pk_membership_log")),
        sa.UniqueConstraint("hash", name=op.f("uq_membership_log_hash")),
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("epoch", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("head", sa.String(length=43), nullable=True))
    with op.batch_alter_table("members", schema=None) as batch_op:
        batch_op.add_column(sa.Column("wrap_kid", sa.String(length=43), nullable=True))
        batch_op.add_column(sa.Column("sign_kid", sa.String(length=43), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("members", schema=None) as batch_op:
        batch_op.drop_column("sign_kid")
        batch_op.drop_column("wrap_kid")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("head")
        batch_op.drop_column("epoch")
    op.drop_table("membership_log")
