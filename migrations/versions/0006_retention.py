"""retention: indexes to find envelopes every recipient acknowledged, and envelopes past an age

Revision ID: 0006_retention
Revises: 0005_sessions
"""

from alembic import op

revision = "0006_retention"
down_revision = "0005_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_deliveries_seq_acked", ["seq", "acked_at_ms"], unique=False)
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index("ix_messages_created_at_ms", ["created_at_ms"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_created_at_ms")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_seq_acked")
