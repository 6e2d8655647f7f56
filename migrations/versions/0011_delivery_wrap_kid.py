"""delivery_wrap_kid: the recipient's wrap key id on each delivery

``deliveries.wrap_kid`` (b64url key id, 43 chars, NULL allowed): at level 4 the relay fills it on
every stored envelope from the protected header's ``rkids[i]`` for recipient i (the epoch's member
order), so a client can ask how many envelopes wrapped to a retired key it has not acknowledged yet
(``GET /v1/keys/outstanding``) before it deletes that private key (forward secrecy). Levels 1-3
store NULL. Rows stored before this migration keep NULL: the relay counts them for every key id
asked (it does not know which key they were wrapped to), so no client erases a key early.

Revision ID: 0011_delivery_wrap_kid
Revises: 0010_message_expiry
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_delivery_wrap_kid"
down_revision = "0010_message_expiry"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN of a nullable column without a default: no table rewrite on either engine
    op.add_column("deliveries", sa.Column("wrap_kid", sa.String(length=43), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch_op:  # SQLite: the table is rebuilt without it
        batch_op.drop_column("wrap_kid")
