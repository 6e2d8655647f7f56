"""The client's own errors (beside the protocol's, ``shared.errors``): a failed relay request
and the reasons a message waits for the user (a key change, a larger audience).
"""

from __future__ import annotations

import time

from shared.errors import E2EEError, ErrorCode, MalformedInput
from shared.keys import fingerprint

NOT_ANSWERED = (ErrorCode.UNREACHABLE, ErrorCode.OFFLINE)
"""Codes of a request the relay did not answer (it may later): nothing was decided by it."""


class SenderKeyUnavailable(Exception):
    """A message's sender has no pinned key and the relay could not be reached to fetch it.

    Not an :class:`E2EEError`: the message is not "could not verify", it is not processed yet.
    The reader drops the connection without advancing the cursor or acknowledging it, so the
    message comes again by the sync after the reconnect, and the key is fetched then.
    """

    def __init__(self, user: str) -> None:
        super().__init__(f"{user}'s keys could not be fetched: relay unreachable")
        self.user = user


class ClientError(E2EEError):
    """A request to the relay failed; ``code`` is the relay's error code when it sent one."""

    code = ErrorCode.CLIENT_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        detail: dict | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message, field=field)
        if code:
            self.code = code
        self.detail = detail
        self.status = status


class KeyChangeBlocked(E2EEError):
    """A member's key changed since it was pinned; sending waits until the user accepts it.

    ``users`` names every member whose change waits for a decision.
    """

    code = ErrorCode.KEY_CHANGE_BLOCKED

    def __init__(self, message: str, *, field: str | None = None, users: tuple[str, ...] = ()) -> None:
        super().__init__(message, field=field)
        self.users = users


class MemberWithoutKey(E2EEError):
    """A member of the conversation has published no key: nobody can send to them."""

    code = ErrorCode.MEMBER_WITHOUT_KEY


class AudienceGrew(KeyChangeBlocked):
    """The conversation gained members since this message was written: it is not sealed to them
    until its author agrees (``users`` names the newcomers). Like a key change, it waits for a
    decision; ``e2ee-chat send`` exits with code 4.
    """

    code = ErrorCode.AUDIENCE_GREW


class LogUnavailable(SenderKeyUnavailable):
    """The membership log a message was sealed to could not be fetched: the relay is unreachable.
    Like :class:`SenderKeyUnavailable`, the message is not judged; it comes again after the
    reconnect."""

    def __init__(self, conversation: str) -> None:
        Exception.__init__(self, f"the membership log of {conversation} could not be fetched: relay unreachable")
        self.user = conversation


class MemberKeyReplaced(E2EEError):
    """The newest verified epoch binds, for a member (or me), keys that were replaced since (a
    rotation the chain proved, or a key change the user accepted): whoever holds the old keys (a
    stolen laptop is why keys are replaced) could read what is sealed to them. Nothing is sealed
    until the member's ``update`` statement moves their new keys into the log."""

    code = ErrorCode.MEMBER_KEY_REPLACED


class NotAuthor(E2EEError):
    """An edit or a delete of a message whose verified sender is someone else: only its author
    may change it. Raised before sending one; a received one is kept ``ignored`` with this code."""

    code = ErrorCode.NOT_AUTHOR


class UnknownReference(E2EEError):
    """A reply, edit, delete, reaction or read receipt names a message id that no message stored
    here has (or that names no message: a line, an action). Raised before sending one; a received
    edit, delete or reaction is kept ``ignored`` with this code."""

    code = ErrorCode.UNKNOWN_REFERENCE


class LocalFileDamaged(MalformedInput):
    """A file of the profile (``kt-head.json``, ``trust.sealed``, ``contacts.json``, a history row)
    is not of its documented form: not JSON, JSON of another shape, or nested deeper than the
    decoder's stack. The reader sets it aside (never overwrites it) and tells the user."""


class WrapKeyErased(E2EEError):
    """A message sealed only to wrap keys of mine whose private halves were deleted for forward
    secrecy (``client_tui.core.epochs``): nobody can open it any more, this client included. Not a
    forgery and not a fault: shown in words of its own ("sealed to your key 3fa9…, deleted on
    2026-12-02 for forward secrecy": the first group of the key's fingerprint, the UTC day), never
    as "could not verify". ``wrap_kid``: the erased key id (43 characters, base64url);
    ``erased_ms``: when it was deleted, ms since the Unix epoch."""

    code = ErrorCode.KEY_ERASED

    def __init__(self, wrap_kid: str, erased_ms: int) -> None:
        try:
            day = time.strftime("%Y-%m-%d", time.gmtime(erased_ms / 1000))
        except (OverflowError, OSError, ValueError):  # a keystore time no calendar holds (a damaged file)
            day = "an unknown day"
        super().__init__(
            f"sealed to your key {fingerprint(wrap_kid)[:4]}…, deleted on {day} for forward secrecy: "
            "it can no longer be opened",
            field="recipients",
        )
        self.wrap_kid, self.erased_ms = wrap_kid, erased_ms
