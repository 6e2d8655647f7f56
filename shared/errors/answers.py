"""The relay's answers (error frames, JSON error bodies) and the websocket session's errors."""

from __future__ import annotations

from .base import E2EEError
from .codes import ErrorCode

__all__ = [
    "AuthFailed",
    "SessionEnded",
    "Forbidden",
    "NotFound",
    "Conflict",
    "MembershipConflict",
    "EpochStale",
    "LegacyConversation",
    "RecipientsMismatch",
    "RateLimited",
    "Busy",
    "ProtocolViolation",
    "SessionStateError",
    "LevelMismatch",
    "DowngradeRefused",
]


# -- relay answers (sent as error frames or JSON error bodies) ---------------------------------------
class AuthFailed(E2EEError):
    """Missing, malformed, expired or otherwise unacceptable credentials or token."""

    code = ErrorCode.AUTH_FAILED
    status = 401


class SessionEnded(AuthFailed):
    """The login session is over (logged out, revoked, expired, idle, or its refresh credential was
    reused): refreshing cannot help, log in again. ``detail`` = ``{"reason": reason}``."""

    code = ErrorCode.SESSION_ENDED

    def __init__(self, message: str, *, reason: str, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.reason = reason
        self.detail = {"reason": reason}


class Forbidden(E2EEError):
    """Authenticated, but not allowed (e.g. not a member of the conversation)."""

    code = ErrorCode.FORBIDDEN
    status = 403


class NotFound(E2EEError):
    """No such user or conversation."""

    code = ErrorCode.NOT_FOUND
    status = 404


class Conflict(E2EEError):
    """The resource exists already (e.g. a username taken, ignoring case)."""

    code = ErrorCode.CONFLICT
    status = 409


class MembershipConflict(Conflict):
    """Another statement took that epoch first. ``detail`` = ``{"epoch", "head"}``: the log's
    head; fetch the log, verify it, try again."""

    code = ErrorCode.MEMBERSHIP_CONFLICT

    def __init__(self, message: str, *, epoch: int | None, head: str | None) -> None:
        super().__init__(message, field="ep")
        self.epoch, self.head = epoch, head
        self.detail = {"epoch": epoch, "head": head}


class EpochStale(E2EEError):
    """The envelope was sealed to another epoch than the conversation's head. ``detail`` =
    ``{"epoch", "head"}``: the log's head; fetch the log, verify it, seal again."""

    code = ErrorCode.EPOCH_STALE

    def __init__(self, message: str, *, epoch: int | None, head: str | None) -> None:
        super().__init__(message, field="ep")
        self.epoch, self.head = epoch, head
        self.detail = {"epoch": epoch, "head": head}


class LegacyConversation(E2EEError):
    """A conversation made before signed membership (it has no log): read-only; start a new one."""

    code = ErrorCode.LEGACY_CONVERSATION


class RecipientsMismatch(E2EEError):
    """The envelope's recipients are not exactly the current members' current wrap keys.

    ``detail`` = ``{"missing": [usernames without an entry], "extra": [key ids not expected]}``;
    the client fetches keys again and re-seals (like a "mismatched devices" reply).
    """

    code = ErrorCode.RECIPIENTS_MISMATCH

    def __init__(self, missing: list[str], extra: list[str]) -> None:
        super().__init__(
            f"recipients do not match the members' keys: missing {missing}, extra {len(extra)} key ids",
            field="recipients",
        )
        self.missing, self.extra = missing, extra
        self.detail = {"missing": missing, "extra": extra}


class RateLimited(E2EEError):
    """Too many requests; retry after ``retry_after`` seconds (``detail`` = ``{"retry_after"}``,
    rounded to ms; REST answers also carry ``Retry-After`` in whole seconds, at least 1)."""

    code = ErrorCode.RATE_LIMITED
    status = 429

    def __init__(self, message: str, *, retry_after: float, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after
        self.detail = {"retry_after": round(retry_after, 3)}


class Busy(E2EEError):
    """The relay is at a capacity limit (pre-auth connections, password hashing); retry after
    ``retry_after`` seconds (REST answers carry ``Retry-After``)."""

    code = ErrorCode.BUSY
    status = 503

    def __init__(self, message: str, *, retry_after: float = 1.0, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


# -- the websocket session (shared.session, PROTOCOL.md §4.2) ----------------------------------------
class ProtocolViolation(E2EEError):
    """The peer's frames break the session's order (e.g. the relay did not start with ``hello``)."""

    code = ErrorCode.PROTOCOL


class SessionStateError(E2EEError):
    """A session call its state does not allow (sending before ``ready``, after the close); the
    message names the state."""

    code = ErrorCode.INVALID_STATE


class LevelMismatch(E2EEError):
    """The relay runs another level than the one this client was asked to speak."""

    code = ErrorCode.LEVEL_MISMATCH


class DowngradeRefused(LevelMismatch):
    """The relay announced a lower security level than the client requires (no silent downgrade)."""

    code = ErrorCode.DOWNGRADE_REFUSED
