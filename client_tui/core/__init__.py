"""The headless client core: one account on one relay, without any user interface.

:class:`ChatClient` is the facade the Textual app, the CLI, the demo, the bench and the tests use;
the modules of this package are its parts (docs/ARCHITECTURE.md draws them). What the facade
announces arrives on :attr:`ChatClient.events` as the records re-exported here.
"""

from __future__ import annotations

from shared.errors import DowngradeRefused

from .client import (
    ChatClient,
    ConnectionState,
    ConversationsChanged,
    Delivered,
    Event,
    GapDetected,
    MessageReceived,
    MessageStored,
    MessageUnreadable,
    RecordChanged,
    RttMeasured,
    Sent,
    default_profile_root,
)
from .contacts import ContactChanged, KeyChanged, KeyNotShown, LocalDataWarning, Shown
from .errors import (
    AudienceGrew,
    ClientError,
    KeyChangeBlocked,
    LogUnavailable,
    MemberWithoutKey,
    SenderKeyUnavailable,
)
from .rotate import RotationNotSaved
from .trust import Contact

__all__ = [
    "AudienceGrew", "ChatClient", "ClientError", "ConnectionState", "Contact", "ContactChanged", "ConversationsChanged",
    "Delivered", "DowngradeRefused", "Event", "GapDetected", "KeyChangeBlocked", "KeyChanged", "KeyNotShown",
    "LocalDataWarning", "LogUnavailable", "MemberWithoutKey", "MessageReceived", "MessageStored", "MessageUnreadable",
    "RecordChanged", "RotationNotSaved", "RttMeasured", "SenderKeyUnavailable", "Sent", "Shown",
    "default_profile_root",
]
