"""Every error code of :mod:`shared.errors`, in the order of its tree."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ErrorCode"]


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
