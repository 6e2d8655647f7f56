"""blobs: attachment blobs stored by the relay (docs/PROTOCOL.md §13)

``blobs`` (one row per upload: conversation, owner, size, complete), ``blob_parts`` (its bytes in
parts (``server.blob_store.PART_BYTES``), in the database so relays sharing PostgreSQL serve each other's blobs)
and ``blob_fetches`` (who may fetch it and whether they did: retention deletes a blob once all
did, as it deletes an envelope once every recipient acknowledged it).

Revision ID: 0008_blobs
Revises: 0007_seq_monotonic
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_blobs"
down_revision = "0007_seq_monotonic"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("id", sa.String(length=22), nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_blobs_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_blobs_owner_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_blobs")),
    )
    with op.batch_alter_table("blobs", schema=None) as batch_op:
        batch_op.create_index("ix_blobs_owner_id", ["owner_id"], unique=False)
        batch_op.create_index("ix_blobs_created_at_ms", ["created_at_ms"], unique=False)
    op.create_table(
        "blob_parts",
        sa.Column("blob_id", sa.String(length=22), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["blob_id"], ["blobs.id"], name=op.f("fk_blob_parts_blob_id_blobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("blob_id", "part", name=op.f("pk_blob_parts")),
    )
    op.create_table(
        "blob_fetches",
        sa.Column("blob_id", sa.String(length=22), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("fetched_at_ms", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["blob_id"], ["blobs.id"], name=op.f("fk_blob_fetches_blob_id_blobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_blob_fetches_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("blob_id", "user_id", name=op.f("pk_blob_fetches")),
    )
    with op.batch_alter_table("blob_fetches", schema=None) as batch_op:
        batch_op.create_index("ix_blob_fetches_blob_fetched", ["blob_id", "fetched_at_ms"], unique=False)


def downgrade() -> None:
    op.drop_table("blob_fetches")
    op.drop_table("blob_parts")
    op.drop_table("blobs")
