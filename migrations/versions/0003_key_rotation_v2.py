"""key rotation v2: statement version and the relay sequence at publication

Each key row records which rotation statement its ``rotation_sig`` is (1: legacy, 2: names the user,
the old keys and a counter) and ``published_seq``, the highest message sequence the relay had
stored when the row was published: clients accept a replaced signing key only on messages stored
up to that sequence.

Revision ID: 0003_key_rotation_v2
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_key_rotation_v2"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("user_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rotation_v", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("published_seq", sa.BigInteger(), nullable=True))
    op.execute("UPDATE user_keys SET rotation_v = 1 WHERE rotation_sig IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("user_keys", schema=None) as batch_op:
        batch_op.drop_column("published_seq")
        batch_op.drop_column("rotation_v")
