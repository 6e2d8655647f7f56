"""Typed errors of the e2ee-chat protocol, rooted in :class:`E2EEError`, and every error code.

Every error carries a stable machine ``code`` (an :class:`ErrorCode`, sent in relay error frames
and JSON error bodies, written to logs), the offending ``field`` where it applies, and for some a
``detail`` object built from its constructor's fields (``RateLimited(retry_after=…)``). Messages
never contain key material, tokens or plaintext. A client that meets a code it does not know
treats it as its parent's (docs/PROTOCOL.md §9). ``status`` is the HTTP status of a REST answer.

The tree, in the order of this module (code, [HTTP status] where it is not its parent's)::

    E2EEError                     e2ee_error [400]
    ├── MalformedInput            malformed
    │   ├── FrameInvalid          frame_invalid
    │   ├── InvalidRequest        invalid_request
    │   ├── UnsupportedMediaType  unsupported_media_type [415]
    │   ├── StatementMalformed    statement_malformed
    │   └── EnvelopeMalformed     envelope_malformed
    │       ├── Base64Invalid     base64_invalid
    │       ├── NonceInvalid      nonce_invalid
    │       ├── TagInvalid        tag_invalid
    │       ├── UnsupportedAlgorithm  unsupported_algorithm
    │       ├── TrailingData      trailing_data
    │       ├── DuplicateMember   duplicate_member
    │       └── RecipientListInvalid  recipient_list_invalid
    │           └── DuplicateRecipient  recipient_duplicated
    ├── LimitExceeded             limit_exceeded [413]
    │   ├── EnvelopeTooLarge      envelope_too_large
    │   ├── TooManyRecipients     too_many_recipients
    │   └── BodyTooLarge          body_too_large
    ├── KeyInvalid                key_invalid [422]
    │   └── KeyRefused            key_refused
    │       ├── KeyTypeRefused    key_type_refused
    │       ├── KeySizeRefused    key_size_refused
    │       └── KeyExponentRefused  key_exponent_refused
    ├── VerificationFailed        verification_failed
    │   ├── NotARecipient         not_a_recipient
    │   ├── UnwrapFailed          unwrap_failed
    │   ├── KeyCommitmentInvalid  key_commitment_invalid
    │   ├── DecryptionFailed      decryption_failed
    │   ├── SignatureInvalid      signature_invalid
    │   ├── UnknownSenderKey      unknown_sender_key
    │   ├── RetiredSenderKey      retired_sender_key
    │   ├── KeyChangeUnreviewed   key_change_unreviewed
    │   ├── KeyAnswerMismatch     key_answer_mismatch
    │   ├── ConversationMismatch  conversation_mismatch
    │   ├── SenderMismatch        sender_mismatch
    │   ├── AudienceMismatch      audience_mismatch
    │   ├── EpochMismatch         epoch_mismatch
    │   ├── SessionMismatch       session_mismatch
    │   ├── DirectionMismatch     direction_mismatch
    │   ├── Replayed              replayed
    │   ├── RelayKeyMismatch      relay_key_mismatch
    │   ├── ChallengeMismatch     challenge_mismatch
    │   └── MembershipInvalid     membership_invalid
    │       ├── StatementSignatureInvalid  statement_signature_invalid
    │       ├── ActorNotMember    actor_not_member
    │       ├── ActorKeyMismatch  actor_key_mismatch
    │       ├── EpochSkipped      epoch_skipped
    │       ├── ChainBroken       chain_broken
    │       ├── PolicyViolation   policy_violation
    │       ├── MembershipFork    membership_fork
    │       └── MembershipWithheld  membership_withheld
    ├── AuthFailed                auth_failed [401]
    │   └── SessionEnded          session_ended
    ├── Forbidden                 forbidden [403]
    ├── NotFound                  not_found [404]
    ├── Conflict                  conflict [409]
    │   └── MembershipConflict    membership_conflict
    ├── EpochStale                epoch_stale
    ├── LegacyConversation        legacy_conversation
    ├── RecipientsMismatch        recipients_mismatch
    ├── RateLimited               rate_limited [429]
    ├── Busy                      busy [503]
    ├── ProtocolViolation         protocol
    ├── SessionStateError         invalid_state
    └── LevelMismatch             level_mismatch
        └── DowngradeRefused      downgrade_refused

Errors only a client raises (never on the wire) have their codes here too, at the end of
:class:`ErrorCode`; their classes live with the client (``client_tui``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class ErrorCode(StrEnum):
    """Every error code, in the order of the tree above (docs/PROTOCOL.md §9), then the codes of
    errors only a client raises. A member is a ``str``: ``ErrorCode.FORBIDDEN == "forbidden"``."""

    E2EE_ERROR = "e2ee_error"
    MALFORMED = "malformed"
    FRAME_INVALID = "frame_invalid"
    INVALID_REQUEST = "invalid_request"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    STATEMENT_MALFORMED = "statement_malformed"
    ENVELOPE_MALFORMED = "envelope_malformed"
    BASE64_INVALID = "base64_invalid"
    NONCE_INVALID = "nonce_invalid"
    TAG_INVALID = "tag_invalid"
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm"
    TRAILING_DATA = "trailing_data"
    DUPLICATE_MEMBER = "duplicate_member"
    RECIPIENT_LIST_INVALID = "recipient_list_invalid"
    RECIPIENT_DUPLICATED = "recipient_duplicated"
    LIMIT_EXCEEDED = "limit_exceeded"
    ENVELOPE_TOO_LARGE = "envelope_too_large"
    TOO_MANY_RECIPIENTS = "too_many_recipients"
    BODY_TOO_LARGE = "body_too_large"
    KEY_INVALID = "key_invalid"
    KEY_REFUSED = "key_refused"
    KEY_TYPE_REFUSED = "key_type_refused"
    KEY_SIZE_REFUSED = "key_size_refused"
    KEY_EXPONENT_REFUSED = "key_exponent_refused"
    VERIFICATION_FAILED = "verification_failed"
    NOT_A_RECIPIENT = "not_a_recipient"
    UNWRAP_FAILED = "unwrap_failed"
    KEY_COMMITMENT_INVALID = "key_commitment_invalid"
    DECRYPTION_FAILED = "decryption_failed"
    SIGNATURE_INVALID = "signature_invalid"
    UNKNOWN_SENDER_KEY = "unknown_sender_key"
    RETIRED_SENDER_KEY = "retired_sender_key"
    KEY_CHANGE_UNREVIEWED = "key_change_unreviewed"
    KEY_ANSWER_MISMATCH = "key_answer_mismatch"
    CONVERSATION_MISMATCH = "conversation_mismatch"
    SENDER_MISMATCH = "sender_mismatch"
    AUDIENCE_MISMATCH = "audience_mismatch"
    EPOCH_MISMATCH = "epoch_mismatch"
    SESSION_MISMATCH = "session_mismatch"
    DIRECTION_MISMATCH = "direction_mismatch"
    REPLAYED = "replayed"
    RELAY_KEY_MISMATCH = "relay_key_mismatch"
    CHALLENGE_MISMATCH = "challenge_mismatch"
    MEMBERSHIP_INVALID = "membership_invalid"
    STATEMENT_SIGNATURE_INVALID = "statement_signature_invalid"
    ACTOR_NOT_MEMBER = "actor_not_member"
    ACTOR_KEY_MISMATCH = "actor_key_mismatch"
    EPOCH_SKIPPED = "epoch_skipped"
    CHAIN_BROKEN = "chain_broken"
    POLICY_VIOLATION = "policy_violation"
    MEMBERSHIP_FORK = "membership_fork"
    MEMBERSHIP_WITHHELD = "membership_withheld"
    AUTH_FAILED = "auth_failed"
    SESSION_ENDED = "session_ended"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    MEMBERSHIP_CONFLICT = "membership_conflict"
    EPOCH_STALE = "epoch_stale"
    LEGACY_CONVERSATION = "legacy_conversation"
    RECIPIENTS_MISMATCH = "recipients_mismatch"
    RATE_LIMITED = "rate_limited"
    BUSY = "busy"
    PROTOCOL = "protocol"  # the peer broke the session protocol (e.g. no hello, no ready)
    INVALID_STATE = "invalid_state"
    LEVEL_MISMATCH = "level_mismatch"
    DOWNGRADE_REFUSED = "downgrade_refused"
    # -- raised only by a client (never on the wire) ----------------------------------------------
    CLIENT_ERROR = "client_error"  # a relay request failed without an error code of the relay's
    UNREACHABLE = "unreachable"  # the relay did not answer (refused, timed out, TLS failure)
    OFFLINE = "offline"  # not connected: the websocket is down
    TIMEOUT = "timeout"  # connected, but the relay did not answer in time
    KEY_CHANGE_BLOCKED = "key_change_blocked"
    AUDIENCE_GREW = "audience_grew"
    MEMBER_WITHOUT_KEY = "member_without_key"
    MEMBER_KEY_REPLACED = "member_key_replaced"
    KEY_NOT_SHOWN = "key_not_shown"
    KEYSTORE_ERROR = "keystore_error"
    WRONG_PASSPHRASE = "wrong_passphrase"  # noqa: S105 - an error code, not a secret
    ROTATION_NOT_SAVED = "rotation_not_saved"


class E2EEError(Exception):
    """Root of every error this project raises on purpose.

    Attributes:
        code: stable snake_case identifier (:class:`ErrorCode`; docs/PROTOCOL.md §9).
        status: the HTTP status of a REST answer carrying it.
        message: one line for people (no secrets).
        field: name of the offending field, or ``None``.
        detail: machine-readable data for the client (``{"retry_after": 1.5}``), or ``None``.
    """

    code: str = ErrorCode.E2EE_ERROR
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.detail: dict[str, object] | None = None

    def as_dict(self) -> dict[str, object]:
        """``{"code", "message", "field"[, "detail"]}`` for an error frame or a JSON body
        (``detail`` only when the error has one)."""
        out: dict[str, object] = {"code": str(self.code), "message": self.message, "field": self.field}
        if self.detail is not None:
            out["detail"] = self.detail
        return out


# -- malformed input (caught before any crypto runs) -----------------------------------------------
class MalformedInput(E2EEError):
    """Input does not have the documented shape (JSON, fields, types, lengths)."""

    code = ErrorCode.MALFORMED


class FrameInvalid(MalformedInput):
    """A websocket or REST frame is not valid JSON of a known frame type."""

    code = ErrorCode.FRAME_INVALID


class InvalidRequest(MalformedInput):
    """A request is well-formed JSON but a value is not acceptable (e.g. a username)."""

    code = ErrorCode.INVALID_REQUEST


class UnsupportedMediaType(MalformedInput):
    """A JSON route was sent a body whose ``Content-Type`` is not ``application/json``."""

    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE
    status = 415


class StatementMalformed(MalformedInput):
    """A membership statement is not of the documented form (encoding, canonical JSON, fields)."""

    code = ErrorCode.STATEMENT_MALFORMED


class EnvelopeMalformed(MalformedInput):
    """An envelope is not a valid e2ee-chat JWE (General JSON Serialization)."""

    code = ErrorCode.ENVELOPE_MALFORMED


class Base64Invalid(EnvelopeMalformed):
    """A field is not canonical unpadded base64url (RFC 4648 §5, RFC 7515 §2)."""

    code = ErrorCode.BASE64_INVALID


class NonceInvalid(EnvelopeMalformed):
    """The AES-GCM nonce (``iv``) is not exactly 12 bytes."""

    code = ErrorCode.NONCE_INVALID


class TagInvalid(EnvelopeMalformed):
    """The AES-GCM authentication tag is not exactly 16 bytes."""

    code = ErrorCode.TAG_INVALID


class UnsupportedAlgorithm(EnvelopeMalformed):
    """``alg``/``enc``/``typ``/``v`` name something this version does not implement."""

    code = ErrorCode.UNSUPPORTED_ALGORITHM


class TrailingData(EnvelopeMalformed):
    """Bytes other than JSON whitespace follow the envelope's (or the header's) JSON value."""

    code = ErrorCode.TRAILING_DATA


class DuplicateMember(EnvelopeMalformed):
    """A JSON object repeats a member name (RFC 7515 §5.2: parsers disagree on which one wins)."""

    code = ErrorCode.DUPLICATE_MEMBER


class RecipientListInvalid(EnvelopeMalformed):
    """Recipient entries do not match the protected ``rkids`` list (order, duplicates, count)."""

    code = ErrorCode.RECIPIENT_LIST_INVALID


class DuplicateRecipient(RecipientListInvalid):
    """The same recipient key id appears twice (in ``rkids`` or in ``recipients``)."""

    code = ErrorCode.RECIPIENT_DUPLICATED


# -- limits ----------------------------------------------------------------------------------------
class LimitExceeded(E2EEError):
    """A documented size or count limit was exceeded."""

    code = ErrorCode.LIMIT_EXCEEDED
    status = 413


class EnvelopeTooLarge(LimitExceeded):
    """The serialized envelope (or its plaintext) is larger than the limit in bytes."""

    code = ErrorCode.ENVELOPE_TOO_LARGE


class TooManyRecipients(LimitExceeded):
    """More recipients than the limit."""

    code = ErrorCode.TOO_MANY_RECIPIENTS


class BodyTooLarge(LimitExceeded):
    """A request body is larger than the route's cap (checked from ``Content-Length`` before
    reading, and while reading a chunked body)."""

    code = ErrorCode.BODY_TOO_LARGE


# -- keys ------------------------------------------------------------------------------------------
class KeyInvalid(E2EEError):
    """A public or private key is of the wrong type, too small, or cannot be parsed."""

    code = ErrorCode.KEY_INVALID
    status = 422


class KeyRefused(KeyInvalid):
    """A key that parses but is refused by policy; ``owner`` names whose key it is."""

    code = ErrorCode.KEY_REFUSED

    def __init__(self, message: str, *, field: str | None = None, owner: str = "?") -> None:
        super().__init__(message, field=field)
        self.owner = owner


class KeyTypeRefused(KeyRefused):
    """A key of the wrong type: a wrap key that is not RSA, a signing key that is not Ed25519."""

    code = ErrorCode.KEY_TYPE_REFUSED


class KeySizeRefused(KeyRefused):
    """An RSA wrap key outside 2048..4096 bits."""

    code = ErrorCode.KEY_SIZE_REFUSED


class KeyExponentRefused(KeyRefused):
    """An RSA wrap key whose public exponent is not 65537."""

    code = ErrorCode.KEY_EXPONENT_REFUSED


# -- verification failures (the envelope was well-formed but is not authentic for me) ----------------
class VerificationFailed(E2EEError):
    """The envelope could not be verified. The UI shows all subclasses as "could not verify"."""

    code = ErrorCode.VERIFICATION_FAILED


class NotARecipient(VerificationFailed):
    """No recipient entry carries my key id."""

    code = ErrorCode.NOT_A_RECIPIENT


class UnwrapFailed(VerificationFailed):
    """RSA-OAEP-256 unwrap of my ``encrypted_key`` failed (wrong key, wrong padding, tampered)."""

    code = ErrorCode.UNWRAP_FAILED


class KeyCommitmentInvalid(VerificationFailed):
    """The unwrapped key does not match the header's ``kc`` (HMAC-SHA-256 key commitment): the
    sender committed to another key, e.g. to show different recipients different plaintexts."""

    code = ErrorCode.KEY_COMMITMENT_INVALID


class DecryptionFailed(VerificationFailed):
    """AES-256-GCM rejected the ciphertext, tag, nonce or AAD (protected header)."""

    code = ErrorCode.DECRYPTION_FAILED


class SignatureInvalid(VerificationFailed):
    """The sender's Ed25519 signature does not verify over the signing input."""

    code = ErrorCode.SIGNATURE_INVALID


class UnknownSenderKey(VerificationFailed):
    """The sender's signing key id is not the one pinned for that sender (or none is known); at
    the relay: not a signing key the sender ever published."""

    code = ErrorCode.UNKNOWN_SENDER_KEY


class RetiredSenderKey(VerificationFailed):
    """The envelope is signed by a signing key its sender replaced: a client never shows it as the
    sender's text when the relay stored it after the replacement was published, and an honest
    relay refuses to store it at all (a stolen or leaked old key)."""

    code = ErrorCode.RETIRED_SENDER_KEY


class KeyChangeUnreviewed(VerificationFailed):
    """Signed by a key that replaced the pinned one without the pinned key's signature and that
    the user has not accepted: held back until the user reviews the change."""

    code = ErrorCode.KEY_CHANGE_UNREVIEWED


class KeyAnswerMismatch(VerificationFailed):
    """A key answer (or key history) names another user than the one the client asked for;
    nothing from it is pinned (DESIGN §10: the client decides whom a key belongs to)."""

    code = ErrorCode.KEY_ANSWER_MISMATCH


class ConversationMismatch(VerificationFailed):
    """The protected header names another conversation than the one it was delivered in."""

    code = ErrorCode.CONVERSATION_MISMATCH


class SenderMismatch(VerificationFailed):
    """The protected header names another sender than the one it was delivered from."""

    code = ErrorCode.SENDER_MISMATCH


class AudienceMismatch(VerificationFailed):
    """The envelope's ``rkids`` (or its sender) are not exactly the members of the epoch ``ep`` it
    names: it was sealed to another audience than the membership log says."""

    code = ErrorCode.AUDIENCE_MISMATCH


class EpochMismatch(VerificationFailed):
    """The envelope's ``ep``/``mh`` contradict my verified membership log: another statement at
    that epoch (a fork), or an epoch the relay does not show me (a withheld change)."""

    code = ErrorCode.EPOCH_MISMATCH


class SessionMismatch(VerificationFailed):
    """An L3 envelope names another session (``kid``) than the one of this connection."""

    code = ErrorCode.SESSION_MISMATCH


class DirectionMismatch(VerificationFailed):
    """An L3 envelope carries the wrong direction (``dir``): a reflected or misrouted frame."""

    code = ErrorCode.DIRECTION_MISMATCH


class Replayed(VerificationFailed):
    """An L3 envelope's ``seq`` is not above the highest already accepted in its direction."""

    code = ErrorCode.REPLAYED


class RelayKeyMismatch(VerificationFailed):
    """An L3 handshake is wrapped to another relay key id than this relay's."""

    code = ErrorCode.RELAY_KEY_MISMATCH


class ChallengeMismatch(VerificationFailed):
    """An L3 handshake does not carry this connection's challenge (replayed or stale)."""

    code = ErrorCode.CHALLENGE_MISMATCH


class MembershipInvalid(VerificationFailed):
    """A membership statement does not follow from the verified log: never acted on."""

    code = ErrorCode.MEMBERSHIP_INVALID


class StatementSignatureInvalid(MembershipInvalid):
    """The statement's Ed25519 signature does not verify under its actor's key: forged or altered."""

    code = ErrorCode.STATEMENT_SIGNATURE_INVALID


class ActorNotMember(MembershipInvalid):
    """The statement's actor is not a member of the previous epoch (or of the one it creates)."""

    code = ErrorCode.ACTOR_NOT_MEMBER


class ActorKeyMismatch(MembershipInvalid):
    """The statement names (or was checked with) another signing key than the one its actor has
    in the previous epoch."""

    code = ErrorCode.ACTOR_KEY_MISMATCH


class EpochSkipped(MembershipInvalid):
    """The statement's epoch is not the previous epoch + 1 (or a creation is not epoch 0)."""

    code = ErrorCode.EPOCH_SKIPPED


class ChainBroken(MembershipInvalid):
    """The statement's ``prev`` is not the hash of the previous statement."""

    code = ErrorCode.CHAIN_BROKEN


class PolicyViolation(MembershipInvalid):
    """The statement's change is not allowed: its op does not match the change, or the actor is
    not an admin for it."""

    code = ErrorCode.POLICY_VIOLATION


class MembershipFork(MembershipInvalid):
    """Two different statements for one epoch, or a log older than one already verified."""

    code = ErrorCode.MEMBERSHIP_FORK


class MembershipWithheld(MembershipInvalid):
    """The relay says the conversation is at a newer epoch than any statement it shows."""

    code = ErrorCode.MEMBERSHIP_WITHHELD


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
