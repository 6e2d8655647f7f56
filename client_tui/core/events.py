"""What the client core announces: the records put on :attr:`ChatClient.events`, and its states.

Every event is a frozen dataclass; a user interface reads them from the queue one at a time and
never needs a lock. Connection states are :class:`ConnState` values (a ``StrEnum``: they compare
equal to the words ``"connecting"``, ``"online"``, ``"offline"`` and ``"refused"``). What a message
record is (its states, its fields) is :class:`~client_tui.core.history.Record`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .record import Record

__all__ = [
    "ConnState",
    "ConnectionState",
    "ContactChanged",
    "ConversationsChanged",
    "Delivered",
    "Event",
    "GapDetected",
    "KeyChanged",
    "LocalDataWarning",
    "MessageReceived",
    "MessageStored",
    "MessageUnreadable",
    "ReadUpTo",
    "RecordChanged",
    "RttMeasured",
    "Sent",
    "TransparencyAlert",
]


class ConnState(StrEnum):
    """Where the session of a :class:`~client_tui.core.ChatClient` is."""

    OFFLINE = "offline"  # no connection; with ``retry_in`` the supervisor tries again after that many seconds
    CONNECTING = "connecting"  # the websocket is being opened
    ONLINE = "online"  # the relay said ready: sending and receiving
    REFUSED = "refused"  # the session stopped: password or session refused, or a relay below level 4


@dataclass(frozen=True)
class ConnectionState:
    """The session changed state; ``detail``: the relay address or why; ``retry_in``: seconds until
    the next attempt (``offline`` only)."""

    state: ConnState
    detail: str = ""
    retry_in: float | None = None


@dataclass(frozen=True)
class MessageReceived:
    """A message opened and verified: ``text`` from ``sender`` in ``conversation``, stored by the
    relay at ``seq``; ``sent_at_ms`` by the sender's clock; ``counter``: the sender's counter in the
    conversation; ``timings_ms``: ms per primitive; ``warning``: a mark for the sender
    (``key_not_accepted``, ``sender_removed``, ... see ``Contacts.mark``), empty if none."""

    seq: int
    conversation: str
    sender: str
    text: str
    mid: str
    sent_at_ms: int
    counter: int
    envelope: bytes
    timings_ms: dict[str, float]
    warning: str = ""


@dataclass(frozen=True)
class MessageUnreadable:
    """Shown as "could not verify"; ``reason`` (a project error code) goes to the log/inspector."""

    seq: int
    conversation: str
    sender: str
    reason: str
    detail: str


@dataclass(frozen=True)
class MessageStored:
    """The relay stored my message ``mid`` at ``seq``."""

    mid: str
    seq: int
    conversation: str


@dataclass(frozen=True)
class Sent:
    """Result of :meth:`ChatClient.send_text`: the message id and the relay's sequence."""

    mid: str
    seq: int


@dataclass(frozen=True)
class Delivered:
    """``user`` acknowledged every message up to ``seq`` (a delivery receipt)."""

    seq: int
    user: str


@dataclass(frozen=True)
class ReadUpTo:
    """``reader`` read every message of ``conversation`` up to relay seq ``seq`` (their end-to-end
    encrypted read receipt; ``client_tui.core.receipts``)."""

    conversation: str
    reader: str
    seq: int


@dataclass(frozen=True)
class RecordChanged:
    """A message record was added (``new``) or changed (state, seq, delivered_to ...)."""

    record: Record
    new: bool = False


@dataclass(frozen=True)
class ConversationsChanged:
    """The list of conversations, a title or a member list changed."""

    conversation: str | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class GapDetected:
    """Counters of ``sender`` in ``conversation`` skipped ``missing``: messages were withheld
    (or are still on their way)."""

    conversation: str
    sender: str
    missing: tuple[int, ...]


@dataclass(frozen=True)
class RttMeasured:
    """A ping's round trip over the websocket took ``ms`` milliseconds."""

    ms: float


@dataclass(frozen=True)
class KeyChanged:
    """``user`` serves other keys than the pinned ones; sending to them waits for a decision.

    ``signed_by_old``: a rotation chain signed by the pinned key leads to the new keys (True), not
    (False: a substitution is possible), or the relay gave no evidence (None). ``rollback``: the
    relay served keys older than ones already seen (nothing was pinned; the pending change stays).
    ``followed``: a rotation the pinned key signed, pinned at once (nothing waits, nothing to review).
    """

    user: str
    old_kids: tuple[str, str]
    new_kids: tuple[str, str]
    signed_by_old: bool | None = None
    rollback: bool = False
    followed: bool = False


@dataclass(frozen=True)
class ContactChanged:
    """A contact was pinned, verified, or its key change accepted."""

    user: str


@dataclass(frozen=True)
class LocalDataWarning:
    """Something kept on this machine was damaged or missing (trust store, history cache); ``text``
    says in words what was lost and what happens now."""

    text: str


@dataclass(frozen=True)
class TransparencyAlert:
    """The relay's key transparency log did not verify (``code``: ``split_view``,
    ``consistency_proof_invalid``, ``inclusion_proof_invalid``, ``tree_head_invalid``,
    ``log_key_mismatch``); ``text`` says in words what the relay did; ``field`` names the other
    user or the member at fault."""

    code: str
    text: str
    field: str | None = None


Event = (
    MessageReceived
    | MessageUnreadable
    | MessageStored
    | Delivered
    | ReadUpTo
    | ConnectionState
    | KeyChanged
    | RecordChanged
    | ConversationsChanged
    | ContactChanged
    | GapDetected
    | RttMeasured
    | LocalDataWarning
    | TransparencyAlert
)
"""Everything :attr:`ChatClient.events` carries."""
