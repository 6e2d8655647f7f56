"""The database schema: SQLAlchemy 2 models, the single source of the Alembic migrations in
``migrations/`` (the schema is created only by them; ``render_as_batch`` and :data:`NAMING` keep
SQLite's ALTERs and constraint names stable). Engines and sessions are :mod:`server.db`; reads
:mod:`server.queries`; write ops :mod:`server.store`, run by :mod:`server.writer`.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(32), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at_ms: Mapped[int] = mapped_column(BigInteger)


class LoginSession(Base):
    """One login of one client: its refresh credential (SHA-256 of the current secret only), when it
    was created and last used, the client's User-Agent, its absolute end, and whether it ended."""

    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(String(22), primary_key=True)  # b64url of 16 random bytes
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    refresh_hash: Mapped[bytes] = mapped_column(LargeBinary(32))
    generation: Mapped[int] = mapped_column(Integer)  # refreshes so far
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
    last_used_at_ms: Mapped[int] = mapped_column(BigInteger)
    expires_at_ms: Mapped[int] = mapped_column(BigInteger)  # absolute: created + the session lifetime
    user_agent: Mapped[str] = mapped_column(String(200))
    ended_at_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    ended_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)


class UserKey(Base):
    """A user's published key pair (wrap + signing); ``current`` marks the one in use."""

    __tablename__ = "user_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    wrap_kid: Mapped[str] = mapped_column(String(43), unique=True)
    wrap_key: Mapped[bytes] = mapped_column(LargeBinary)  # SPKI DER
    sign_kid: Mapped[str] = mapped_column(String(43))
    sign_key: Mapped[bytes] = mapped_column(LargeBinary)  # SPKI DER
    current: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
    # Ed25519 signature by the previous signing key over "e2ee-chat/v1/rotate.<wrap_kid>.<sign_kid>";
    # None for a user's first keys.
    rotation_sig: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    # Which statement rotation_sig signs: 1 (legacy, new key ids only) or 2 (shared.rotation: user, old and
    # new key ids, counter); None for a user's first keys.
    rotation_v: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The highest message seq stored when these keys were published (None for first keys): the keys before
    # them count only on messages stored up to it.
    published_seq: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class Conversation(Base):
    """A conversation. ``epoch``/``head``/``title`` are those of the newest statement of its
    membership log (None for a conversation made before the log: read-only, "legacy")."""

    __tablename__ = "conversations"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    title: Mapped[str] = mapped_column(String(200))
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
    epoch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    head: Mapped[str | None] = mapped_column(String(43), nullable=True)


class Member(Base):
    """A member of a conversation, derived from the head of its membership log, with the key ids
    the log binds for them (None only in legacy conversations)."""

    __tablename__ = "members"
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    joined_at_ms: Mapped[int] = mapped_column(BigInteger)
    wrap_kid: Mapped[str | None] = mapped_column(String(43), nullable=True)
    sign_kid: Mapped[str | None] = mapped_column(String(43), nullable=True)
    __table_args__ = (Index("ix_members_user_id", "user_id"),)


class MembershipStatement(Base):
    """One verified statement of a conversation's membership log (``shared.membership``), kept as
    its signed form; ``members`` (JSON list of usernames) lets the relay serve an ex-member the
    log up to their removal."""

    __tablename__ = "membership_log"
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    hash: Mapped[str] = mapped_column(String(43), unique=True)
    statement: Mapped[str] = mapped_column(Text)
    actor_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    members: Mapped[str] = mapped_column(Text)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)


# A message's seq: 64-bit on PostgreSQL (BIGSERIAL); on SQLite exactly ``INTEGER PRIMARY KEY`` (the
# rowid, 64-bit), which AUTOINCREMENT can only be added to in that spelling.
SEQ = BigInteger().with_variant(Integer, "sqlite")


class Message(Base):
    """A stored envelope. ``seq`` is the relay-assigned cursor; (sender, mid) is unique.

    ``seq`` only grows, for the life of the database: never handed out twice, also after retention
    deleted the newest messages (SQLite ``AUTOINCREMENT``, migration 0007; a PostgreSQL sequence
    never goes back). A client's cursor past a deleted seq must not hide a later message.
    """

    __tablename__ = "messages"
    seq: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    sender_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    mid: Mapped[str] = mapped_column(String(22))
    envelope: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
    expires_at_ms: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    """The envelope's readable expiry hint ``xp`` (Unix ms, rounded up to the hour; 0 = none):
    from then on it is not delivered and retention deletes it, acknowledged or not."""
    __table_args__ = (
        UniqueConstraint("sender_id", "mid", name="uq_messages_sender_mid"),
        Index("ix_messages_conversation_seq", "conversation_id", "seq"),
        Index("ix_messages_created_at_ms", "created_at_ms"),  # retention: what is older than a cutoff
        Index("ix_messages_expires_at_ms", "expires_at_ms"),  # retention: what has expired
        {"sqlite_autoincrement": True},
    )


class Delivery(Base):
    """One row per (recipient, message): the recipient's inbox, read by cursor ``seq``, with the
    wrap key it was sealed to (forward secrecy: a client keeps a retired key while any is unacked)."""

    __tablename__ = "deliveries"
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(SEQ, ForeignKey("messages.seq", ondelete="CASCADE"), primary_key=True)
    acked_at_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The recipient's wrap key id this envelope was wrapped to (level 4: the header's ``rkids[i]``
    # for member i; migration 0011). None at levels 1-3 and for rows stored before 0011: such a row
    # counts for every key id in ``GET /v1/keys/outstanding`` (server.queries.outstanding).
    wrap_kid: Mapped[str | None] = mapped_column(String(43), nullable=True)
    # retention: "is anyone still to acknowledge this message?" (and the cascade from messages)
    __table_args__ = (Index("ix_deliveries_seq_acked", "seq", "acked_at_ms"),)


class Blob(Base):
    """An attachment blob: opaque bytes (a file sealed by the client, ``shared.attachment``) that
    ``owner`` uploaded to ``conversation``. ``complete`` once every byte is stored; its bytes are
    the rows of :class:`BlobPart`, its readers the rows of :class:`BlobFetch`."""

    __tablename__ = "blobs"
    id: Mapped[str] = mapped_column(String(22), primary_key=True)  # b64url of 16 random bytes
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    size: Mapped[int] = mapped_column(BigInteger)  # bytes stored
    complete: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
    __table_args__ = (
        Index("ix_blobs_owner_id", "owner_id"),  # the owner's quota
        Index("ix_blobs_created_at_ms", "created_at_ms"),  # retention
    )


class BlobPart(Base):
    """Part ``part`` (0-based, in order) of a blob's bytes: at most ``server.blobs.PART_BYTES``.
    Blobs live in the database, so relays sharing one PostgreSQL serve each other's uploads."""

    __tablename__ = "blob_parts"
    blob_id: Mapped[str] = mapped_column(ForeignKey("blobs.id", ondelete="CASCADE"), primary_key=True)
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class BlobFetch(Base):
    """Who may fetch a blob: its owner and the members of its conversation when it was uploaded.
    ``fetched_at_ms`` is set by a complete download (the owner's at upload): retention deletes a
    blob once every row has it, as an envelope once every delivery is acknowledged."""

    __tablename__ = "blob_fetches"
    blob_id: Mapped[str] = mapped_column(ForeignKey("blobs.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    fetched_at_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    __table_args__ = (Index("ix_blob_fetches_blob_fetched", "blob_id", "fetched_at_ms"),)


class KtLeaf(Base):
    """One leaf of the key transparency log (``shared.kt``, docs/PROTOCOL.md §14): a key
    publication or rotation, at index ``idx`` (0, 1, 2, … with no gap). Append-only: rows are
    never updated or deleted (no foreign key, so nothing cascades into the log); appended only
    under the log's lock (:func:`server.kt_store.append_leaf`), in the transaction that stores the
    key row ``user_key_id``."""

    __tablename__ = "kt_log"
    idx: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    user_key_id: Mapped[int] = mapped_column(Integer, unique=True)
    username: Mapped[str] = mapped_column(String(32), index=True)
    leaf: Mapped[str] = mapped_column(Text)  # the leaf data: canonical JSON (shared.kt.KeyLeaf.data)
    leaf_hash: Mapped[bytes] = mapped_column(LargeBinary(32))  # SHA-256(0x00 || leaf)
    created_at_ms: Mapped[int] = mapped_column(BigInteger)
