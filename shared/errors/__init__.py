"""Typed errors of the e2ee-chat protocol, rooted in :class:`E2EEError`, and every error code.

Every error carries a stable machine ``code`` (an :class:`ErrorCode`, sent in relay error frames
and JSON error bodies, written to logs), the offending ``field`` where it applies, and for some a
``detail`` object built from its constructor's fields (``RateLimited(retry_after=…)``). Messages
never contain key material, tokens or plaintext. A client that meets a code it does not know
treats it as its parent's (docs/PROTOCOL.md §9). ``status`` is the HTTP status of a REST answer.

The tree, in the order of ``__all__`` (code, [HTTP status] where it is not its parent's); each
branch is defined, in this order, in one module of this package: :mod:`.codes` (the codes),
:mod:`.base` (the root), :mod:`.input` (malformed input, limits, keys), :mod:`.verification`
(verification failures, membership), :mod:`.answers` (the relay's answers, the session)::

    E2EEError                     e2ee_error [400]
    ├── MalformedInput            malformed
    │   ├── FrameInvalid          frame_invalid
    │   ├── InvalidRequest        invalid_request
    │   ├── UnsupportedMediaType  unsupported_media_type [415]
    │   ├── StatementMalformed    statement_malformed
    │   ├── EnvelopeMalformed     envelope_malformed
    │   │   ├── Base64Invalid     base64_invalid
    │   │   ├── NonceInvalid      nonce_invalid
    │   │   ├── TagInvalid        tag_invalid
    │   │   ├── UnsupportedAlgorithm  unsupported_algorithm
    │   │   ├── TrailingData      trailing_data
    │   │   ├── DuplicateMember   duplicate_member
    │   │   └── RecipientListInvalid  recipient_list_invalid
    │   │       └── DuplicateRecipient  recipient_duplicated
    │   ├── AttachmentMalformed   attachment_malformed
    │   └── ContentInvalid        content_invalid
    ├── LimitExceeded             limit_exceeded [413]
    │   ├── EnvelopeTooLarge      envelope_too_large
    │   ├── TooManyRecipients     too_many_recipients
    │   ├── BodyTooLarge          body_too_large
    │   │   └── BlobTooLarge      blob_too_large
    │   ├── QuotaExceeded         quota_exceeded
    │   └── ContentTooLarge       content_too_large
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
    │   ├── MembershipInvalid     membership_invalid
    │   │   ├── StatementSignatureInvalid  statement_signature_invalid
    │   │   ├── ActorNotMember    actor_not_member
    │   │   ├── ActorKeyMismatch  actor_key_mismatch
    │   │   ├── EpochSkipped      epoch_skipped
    │   │   ├── ChainBroken       chain_broken
    │   │   ├── PolicyViolation   policy_violation
    │   │   ├── MembershipFork    membership_fork
    │   │   └── MembershipWithheld  membership_withheld
    │   ├── AttachmentInvalid     attachment_invalid
    │   │   ├── AttachmentKeyMismatch  attachment_key_mismatch
    │   │   ├── AttachmentHashMismatch  attachment_hash_mismatch
    │   │   ├── AttachmentTruncated  attachment_truncated
    │   │   ├── AttachmentSizeMismatch  attachment_size_mismatch
    │   │   ├── ChunkTampered     chunk_tampered
    │   │   └── ChunkOutOfOrder   chunk_out_of_order
    │   └── TransparencyFailed    transparency_failed
    │       ├── InclusionProofInvalid  inclusion_proof_invalid
    │       ├── ConsistencyProofInvalid  consistency_proof_invalid
    │       ├── TreeHeadInvalid   tree_head_invalid
    │       ├── SplitView         split_view
    │       └── LogKeyMismatch    log_key_mismatch
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

from .answers import (
    AuthFailed,
    Busy,
    Conflict,
    DowngradeRefused,
    EpochStale,
    Forbidden,
    LegacyConversation,
    LevelMismatch,
    MembershipConflict,
    NotFound,
    ProtocolViolation,
    RateLimited,
    RecipientsMismatch,
    SessionEnded,
    SessionStateError,
)
from .base import (
    E2EEError,
)
from .codes import ErrorCode
from .input import (
    AttachmentMalformed,
    Base64Invalid,
    BlobTooLarge,
    BodyTooLarge,
    ContentInvalid,
    ContentTooLarge,
    DuplicateMember,
    DuplicateRecipient,
    EnvelopeMalformed,
    EnvelopeTooLarge,
    FrameInvalid,
    InvalidRequest,
    KeyExponentRefused,
    KeyInvalid,
    KeyRefused,
    KeySizeRefused,
    KeyTypeRefused,
    LimitExceeded,
    MalformedInput,
    NonceInvalid,
    QuotaExceeded,
    RecipientListInvalid,
    StatementMalformed,
    TagInvalid,
    TooManyRecipients,
    TrailingData,
    UnsupportedAlgorithm,
    UnsupportedMediaType,
)
from .verification import (
    ActorKeyMismatch,
    ActorNotMember,
    AttachmentHashMismatch,
    AttachmentInvalid,
    AttachmentKeyMismatch,
    AttachmentSizeMismatch,
    AttachmentTruncated,
    AudienceMismatch,
    ChainBroken,
    ChallengeMismatch,
    ChunkOutOfOrder,
    ChunkTampered,
    ConsistencyProofInvalid,
    ConversationMismatch,
    DecryptionFailed,
    DirectionMismatch,
    EpochMismatch,
    EpochSkipped,
    InclusionProofInvalid,
    KeyAnswerMismatch,
    KeyChangeUnreviewed,
    KeyCommitmentInvalid,
    LogKeyMismatch,
    MembershipFork,
    MembershipInvalid,
    MembershipWithheld,
    NotARecipient,
    PolicyViolation,
    RelayKeyMismatch,
    Replayed,
    RetiredSenderKey,
    SenderMismatch,
    SessionMismatch,
    SignatureInvalid,
    SplitView,
    StatementSignatureInvalid,
    TransparencyFailed,
    TreeHeadInvalid,
    UnknownSenderKey,
    UnwrapFailed,
    VerificationFailed,
)

__all__ = [
    "ErrorCode",
    "E2EEError",
    "MalformedInput",
    "FrameInvalid",
    "InvalidRequest",
    "UnsupportedMediaType",
    "StatementMalformed",
    "EnvelopeMalformed",
    "Base64Invalid",
    "NonceInvalid",
    "TagInvalid",
    "UnsupportedAlgorithm",
    "TrailingData",
    "DuplicateMember",
    "RecipientListInvalid",
    "DuplicateRecipient",
    "AttachmentMalformed",
    "ContentInvalid",
    "LimitExceeded",
    "EnvelopeTooLarge",
    "TooManyRecipients",
    "BodyTooLarge",
    "BlobTooLarge",
    "QuotaExceeded",
    "ContentTooLarge",
    "KeyInvalid",
    "KeyRefused",
    "KeyTypeRefused",
    "KeySizeRefused",
    "KeyExponentRefused",
    "VerificationFailed",
    "NotARecipient",
    "UnwrapFailed",
    "KeyCommitmentInvalid",
    "DecryptionFailed",
    "SignatureInvalid",
    "UnknownSenderKey",
    "RetiredSenderKey",
    "KeyChangeUnreviewed",
    "KeyAnswerMismatch",
    "ConversationMismatch",
    "SenderMismatch",
    "AudienceMismatch",
    "EpochMismatch",
    "SessionMismatch",
    "DirectionMismatch",
    "Replayed",
    "RelayKeyMismatch",
    "ChallengeMismatch",
    "MembershipInvalid",
    "StatementSignatureInvalid",
    "ActorNotMember",
    "ActorKeyMismatch",
    "EpochSkipped",
    "ChainBroken",
    "PolicyViolation",
    "MembershipFork",
    "MembershipWithheld",
    "AttachmentInvalid",
    "AttachmentKeyMismatch",
    "AttachmentHashMismatch",
    "AttachmentTruncated",
    "AttachmentSizeMismatch",
    "ChunkTampered",
    "ChunkOutOfOrder",
    "TransparencyFailed",
    "InclusionProofInvalid",
    "ConsistencyProofInvalid",
    "TreeHeadInvalid",
    "SplitView",
    "LogKeyMismatch",
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
"""ErrorCode, then every error class in the order of the tree drawn above."""
