"""Typed errors of the e2ee-chat protocol, rooted in :class:`E2EEError`.

Every error carries a stable machine ``code`` (sent in relay error frames and written to logs)
and, where it applies, the offending ``field``. Messages never contain key material, tokens or
plaintext.
"""

from __future__ import annotations


class E2EEError(Exception):
    """Root of every error this project raises on purpose.

    Attributes:
        code: stable snake_case identifier (see docs/PROTOCOL.md, "Error codes").
        field: name of the offending field, or ``None``.
    """

    code = "e2ee_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, object]:
        """Return ``{"code", "message", "field"}`` for an error frame or a JSON body."""
        return {"code": self.code, "message": self.message, "field": self.field}


# -- malformed input (caught before any crypto runs) -------------------------------------------
class MalformedInput(E2EEError):
    """Input does not have the documented shape (JSON, fields, types, lengths)."""

    code = "malformed"


class FrameInvalid(MalformedInput):
    """A websocket or REST frame is not valid JSON of a known frame type."""

    code = "frame_invalid"


class EnvelopeMalformed(MalformedInput):
    """An envelope is not a valid e2ee-chat JWE (General JSON Serialization)."""

    code = "envelope_malformed"


class Base64Invalid(EnvelopeMalformed):
    """A field is not canonical unpadded base64url (RFC 4648 §5, RFC 7515 §2)."""

    code = "base64_invalid"


class NonceInvalid(EnvelopeMalformed):
    """The AES-GCM nonce (``iv``) is not exactly 12 bytes."""

    code = "nonce_invalid"


class TagInvalid(EnvelopeMalformed):
    """The AES-GCM authentication tag is not exactly 16 bytes."""

    code = "tag_invalid"


class UnsupportedAlgorithm(EnvelopeMalformed):
    """``alg``/``enc``/``typ``/``v`` name something this version does not implement."""

    code = "unsupported_algorithm"


class RecipientListInvalid(EnvelopeMalformed):
    """Recipient entries do not match the protected ``rkids`` list (order, duplicates, count)."""

    code = "recipient_list_invalid"


class LimitExceeded(E2EEError):
    """A documented size or count limit was exceeded."""

    code = "limit_exceeded"


class EnvelopeTooLarge(LimitExceeded):
    """The serialized envelope (or its plaintext) is larger than the limit in bytes."""

    code = "envelope_too_large"


class TooManyRecipients(LimitExceeded):
    """More recipients than the limit."""

    code = "too_many_recipients"


# -- keys --------------------------------------------------------------------------------------
class KeyInvalid(E2EEError):
    """A public or private key is of the wrong type, too small, or cannot be parsed."""

    code = "key_invalid"


# -- verification failures (the envelope was well-formed but is not authentic for me) ----------
class VerificationFailed(E2EEError):
    """The envelope could not be verified. The UI shows all subclasses as "could not verify"."""

    code = "verification_failed"


class NotARecipient(VerificationFailed):
    """No recipient entry carries my key id."""

    code = "not_a_recipient"


class UnwrapFailed(VerificationFailed):
    """RSA-OAEP-256 unwrap of my ``encrypted_key`` failed (wrong key, wrong padding, tampered)."""

    code = "unwrap_failed"


class DecryptionFailed(VerificationFailed):
    """AES-256-GCM rejected the ciphertext, tag, nonce or AAD (protected header)."""

    code = "decryption_failed"


class SignatureInvalid(VerificationFailed):
    """The sender's Ed25519 signature does not verify over the signing input."""

    code = "signature_invalid"


class UnknownSenderKey(VerificationFailed):
    """The sender's signing key id is not the one pinned for that sender (or none is known)."""

    code = "unknown_sender_key"


class ConversationMismatch(VerificationFailed):
    """The protected header names another conversation than the one it was delivered in."""

    code = "conversation_mismatch"


class SenderMismatch(VerificationFailed):
    """The protected header names another sender than the one it was delivered from."""

    code = "sender_mismatch"


class KeyAnswerMismatch(VerificationFailed):
    """A key answer (or key history) names another user than the one the client asked for;
    nothing from it is pinned (DESIGN §10: the client decides whom a key belongs to)."""

    code = "key_answer_mismatch"


class RetiredSenderKey(VerificationFailed):
    """The envelope is signed by a signing key its sender replaced, and the relay stored it after
    the replacement was published: a stolen or leaked old key, never shown as the sender's text."""

    code = "retired_sender_key"


class KeyChangeUnreviewed(VerificationFailed):
    """Signed by a key that replaced the pinned one without the pinned key's signature and that
    the user has not accepted: held back until the user reviews the change."""

    code = "key_change_unreviewed"


# -- relay answers (sent as error frames or JSON error bodies) ----------------------------------
class AuthFailed(E2EEError):
    """Missing, malformed, expired or otherwise unacceptable credentials or token."""

    code = "auth_failed"


class Forbidden(E2EEError):
    """Authenticated, but not allowed (e.g. not a member of the conversation)."""

    code = "forbidden"


class NotFound(E2EEError):
    """No such user or conversation."""

    code = "not_found"


class Conflict(E2EEError):
    """The resource exists already (e.g. a username taken, ignoring case)."""

    code = "conflict"


class InvalidRequest(MalformedInput):
    """A request is well-formed JSON but a value is not acceptable (e.g. a username)."""

    code = "invalid_request"


class RecipientsMismatch(E2EEError):
    """The envelope's recipients are not exactly the current members' current wrap keys.

    ``detail`` = ``{"missing": [usernames without an entry], "extra": [key ids not expected]}``;
    the client fetches keys again and re-seals (like a "mismatched devices" reply).
    """

    code = "recipients_mismatch"

    def __init__(self, missing: list[str], extra: list[str]) -> None:
        super().__init__(
            f"recipients do not match the members' keys: missing {missing}, extra {len(extra)} key ids",
            field="recipients",
        )
        self.detail = {"missing": missing, "extra": extra}

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "detail": self.detail}


class RateLimited(E2EEError):
    """Too many requests; retry after ``retry_after`` seconds."""

    code = "rate_limited"


# -- added for the documented protocol (docs/PROTOCOL.md §9) -------------------------------------
class TrailingData(EnvelopeMalformed):
    """Bytes other than JSON whitespace follow the envelope's (or the header's) JSON value."""

    code = "trailing_data"


class DuplicateMember(EnvelopeMalformed):
    """A JSON object repeats a member name (RFC 7515 §5.2: parsers disagree on which one wins)."""

    code = "duplicate_member"


class DuplicateRecipient(RecipientListInvalid):
    """The same recipient key id appears twice (in ``rkids`` or in ``recipients``)."""

    code = "recipient_duplicated"


class KeyRefused(KeyInvalid):
    """A key that parses but is refused by policy; ``owner`` names whose key it is."""

    code = "key_refused"

    def __init__(self, message: str, *, field: str | None = None, owner: str = "?") -> None:
        super().__init__(message, field=field)
        self.owner = owner


class KeyTypeRefused(KeyRefused):
    """A key of the wrong type: a wrap key that is not RSA, a signing key that is not Ed25519."""

    code = "key_type_refused"


class KeySizeRefused(KeyRefused):
    """An RSA wrap key outside 2048..4096 bits."""

    code = "key_size_refused"


class KeyExponentRefused(KeyRefused):
    """An RSA wrap key whose public exponent is not 65537."""

    code = "key_exponent_refused"


class SessionMismatch(VerificationFailed):
    """An L3 envelope names another session (``kid``) than the one of this connection."""

    code = "session_mismatch"


class DirectionMismatch(VerificationFailed):
    """An L3 envelope carries the wrong direction (``dir``): a reflected or misrouted frame."""

    code = "direction_mismatch"


class RelayKeyMismatch(VerificationFailed):
    """An L3 handshake is wrapped to another relay key id than this relay's."""

    code = "relay_key_mismatch"


class ChallengeMismatch(VerificationFailed):
    """An L3 handshake does not carry this connection's challenge (replayed or stale)."""

    code = "challenge_mismatch"


class Replayed(VerificationFailed):
    """An L3 envelope's ``seq`` is not above the highest already accepted in its direction."""

    code = "replayed"


# -- relay limits and sessions (issue 13) ---------------------------------------------------------
class BodyTooLarge(LimitExceeded):
    """A request body is larger than the route's cap (checked from ``Content-Length`` before
    reading, and while reading a chunked body)."""

    code = "body_too_large"


class UnsupportedMediaType(MalformedInput):
    """A JSON route was sent a body whose ``Content-Type`` is not ``application/json``."""

    code = "unsupported_media_type"


class Busy(E2EEError):
    """The relay is at a capacity limit (pre-auth connections, password hashing); retry later."""

    code = "busy"


class SessionEnded(AuthFailed):
    """The login session is over (logged out, revoked, expired, idle, or its refresh credential was
    reused): refreshing cannot help, log in again. ``detail`` = ``{"reason": ...}``."""

    code = "session_ended"

    def __init__(self, message: str, *, reason: str, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.detail = {"reason": reason}

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "detail": self.detail}


# -- envelope v2: key commitment and the membership epoch it was sealed to (PROTOCOL.md §5, §12) ---
class KeyCommitmentInvalid(VerificationFailed):
    """The unwrapped key does not match the header's ``kc`` (HMAC-SHA-256 key commitment): the
    sender committed to another key, e.g. to show different recipients different plaintexts."""

    code = "key_commitment_invalid"


class AudienceMismatch(VerificationFailed):
    """The envelope's ``rkids`` (or its sender) are not exactly the members of the epoch ``ep`` it
    names: it was sealed to another audience than the membership log says."""

    code = "audience_mismatch"


class EpochMismatch(VerificationFailed):
    """The envelope's ``ep``/``mh`` contradict my verified membership log: another statement at
    that epoch (a fork), or an epoch the relay does not show me (a withheld change)."""

    code = "epoch_mismatch"


# -- membership statements and their chain (PROTOCOL.md §12) ------------------------------------
class StatementMalformed(MalformedInput):
    """A membership statement is not of the documented form (encoding, canonical JSON, fields)."""

    code = "statement_malformed"


class MembershipInvalid(VerificationFailed):
    """A membership statement does not follow from the verified log: never acted on."""

    code = "membership_invalid"


class StatementSignatureInvalid(MembershipInvalid):
    """The statement's Ed25519 signature does not verify under its actor's key: forged or altered."""

    code = "statement_signature_invalid"


class ActorNotMember(MembershipInvalid):
    """The statement's actor is not a member of the previous epoch (or of the one it creates)."""

    code = "actor_not_member"


class ActorKeyMismatch(MembershipInvalid):
    """The statement names (or was checked with) another signing key than the one its actor has
    in the previous epoch."""

    code = "actor_key_mismatch"


class EpochSkipped(MembershipInvalid):
    """The statement's epoch is not the previous epoch + 1 (or a creation is not epoch 0)."""

    code = "epoch_skipped"


class ChainBroken(MembershipInvalid):
    """The statement's ``prev`` is not the hash of the previous statement."""

    code = "chain_broken"


class PolicyViolation(MembershipInvalid):
    """The statement's change is not allowed: its op does not match the change, or the actor is
    not an admin for it."""

    code = "policy_violation"


class MembershipFork(MembershipInvalid):
    """Two different statements for one epoch, or a log older than one already verified."""

    code = "membership_fork"


class MembershipWithheld(MembershipInvalid):
    """The relay says the conversation is at a newer epoch than any statement it shows."""

    code = "membership_withheld"


class _NamesHead:
    """A relay answer whose ``detail`` = ``{"epoch": head epoch, "head": head hash}`` names the
    membership log's head: fetch the log, verify it, try again."""

    def __init__(self, message: str, *, epoch: int | None, head: str | None) -> None:
        super().__init__(message, field="ep")  # the E2EEError after this mixin in the MRO
        self.detail = {"epoch": epoch, "head": head}

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "detail": self.detail}


class EpochStale(_NamesHead, E2EEError):
    """The envelope was sealed to another epoch than the conversation's head (relay answer)."""

    code = "epoch_stale"


class MembershipConflict(_NamesHead, Conflict):
    """Another statement took that epoch first (relay answer)."""

    code = "membership_conflict"


class LegacyConversation(E2EEError):
    """A conversation made before signed membership (it has no log): read-only; start a new one."""

    code = "legacy_conversation"


# -- the websocket session (shared.session, PROTOCOL.md §4.2) -------------------------------------
class ProtocolViolation(E2EEError):
    """The peer's frames break the session's order (e.g. the relay did not start with ``hello``)."""

    code = "protocol"


class SessionStateError(E2EEError):
    """A session call its state does not allow (sending before ``ready``, after the close); the
    message names the state."""

    code = "invalid_state"


class LevelMismatch(E2EEError):
    """The relay runs another level than the one this client was asked to speak."""

    code = "level_mismatch"


class DowngradeRefused(LevelMismatch):
    """The relay announced a lower security level than the client requires (no silent downgrade)."""

    code = "downgrade_refused"
