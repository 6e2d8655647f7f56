"""The headless client core: one account on one relay, without any user interface.

:class:`ChatClient` is the facade the Textual app, the CLI, the demo, the bench and the tests use;
the modules of this package are its parts (docs/ARCHITECTURE.md draws them). What the facade
announces arrives on :attr:`ChatClient.events` as the records re-exported here.
"""

from __future__ import annotations

from shared.errors import DowngradeRefused

from .client import ChatClient, default_profile_root
from .contacts import KeyNotShown, Shown
from .errors import (
    AudienceGrew,
    ClientError,
    KeyChangeBlocked,
    LogUnavailable,
    MemberWithoutKey,
    NotAuthor,
    SenderKeyUnavailable,
    UnknownReference,
    WrapKeyErased,
)
from .events import (
    ConnectionState,
    ConnState,
    ContactChanged,
    ConversationsChanged,
    Delivered,
    Event,
    GapDetected,
    KeyChanged,
    LocalDataWarning,
    MessageReceived,
    MessageStored,
    MessageUnreadable,
    ReadUpTo,
    RecordChanged,
    RttMeasured,
    Sent,
    TransparencyAlert,
)
from .record import RecordState
from .rotate import RotationNotSaved
from .trust import Contact

__all__ = [
    "AudienceGrew",
    "ChatClient",
    "ClientError",
    "ConnState",
    "ConnectionState",
    "Contact",
    "ContactChanged",
    "ConversationsChanged",
    "Delivered",
    "DowngradeRefused",
    "Event",
    "GapDetected",
    "KeyChangeBlocked",
    "KeyChanged",
    "KeyNotShown",
    "LocalDataWarning",
    "LogUnavailable",
    "MemberWithoutKey",
    "NotAuthor",
    "MessageReceived",
    "MessageStored",
    "MessageUnreadable",
    "ReadUpTo",
    "RecordChanged",
    "TransparencyAlert",
    "RecordState",
    "RotationNotSaved",
    "RttMeasured",
    "SenderKeyUnavailable",
    "Sent",
    "Shown",
    "UnknownReference",
    "WrapKeyErased",
    "default_profile_root",
]
