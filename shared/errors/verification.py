"""Verification failures: well-formed input that is not authentic for the receiver (the UI's
"could not verify"), membership statements included."""

from __future__ import annotations

from .base import E2EEError
from .codes import ErrorCode

__all__ = [
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
]


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


# -- attachments (shared.attachment: a blob that does not open as the signed reference says) ------
class AttachmentInvalid(VerificationFailed):
    """An attachment blob does not verify against its reference (the file key, size and SHA-256
    the signed message carries); nothing of it is shown or kept."""

    code = ErrorCode.ATTACHMENT_INVALID


class AttachmentKeyMismatch(AttachmentInvalid):
    """The file key is not the one the blob's header commits to (its 32-byte key check): a wrong
    key, or a blob sealed under another key. Raised before any chunk is decrypted."""

    code = ErrorCode.ATTACHMENT_KEY_MISMATCH


class AttachmentHashMismatch(AttachmentInvalid):
    """The SHA-256 over the whole blob is not the reference's ``sha256``."""

    code = ErrorCode.ATTACHMENT_HASH_MISMATCH


class AttachmentTruncated(AttachmentInvalid):
    """The blob ends early: its final chunk is not sealed as the last one (STREAM's last-chunk
    flag), or fewer bytes arrived than the reference's size needs. ``detail`` =
    ``{"expected", "received"}``: blob bytes."""

    code = ErrorCode.ATTACHMENT_TRUNCATED

    def __init__(self, message: str, *, expected: int, received: int) -> None:
        super().__init__(message, field="blob")
        self.expected, self.received = expected, received
        self.detail = {"expected": expected, "received": received}


class AttachmentSizeMismatch(AttachmentInvalid):
    """The blob holds more than the reference says: bytes after the chunk sealed as the last one,
    or a plaintext length other than the reference's ``size``."""

    code = ErrorCode.ATTACHMENT_SIZE_MISMATCH


class ChunkTampered(AttachmentInvalid):
    """AES-256-GCM rejected chunk ``index`` (0-based) under every position of the file: its
    ciphertext, tag or the header it binds was changed. ``detail`` = ``{"index"}``."""

    code = ErrorCode.CHUNK_TAMPERED

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message, field="chunk")
        self.index = index
        self.detail = {"index": index}


class ChunkOutOfOrder(AttachmentInvalid):
    """Chunk ``index`` is an authentic chunk of this file sealed for position ``sealed_at``:
    chunks were swapped, reordered or repeated. ``detail`` = ``{"index", "sealed_at"}``."""

    code = ErrorCode.CHUNK_OUT_OF_ORDER

    def __init__(self, message: str, *, index: int, sealed_at: int) -> None:
        super().__init__(message, field="chunk")
        self.index, self.sealed_at = index, sealed_at
        self.detail = {"index": index, "sealed_at": sealed_at}


# -- the key transparency log (docs/PROTOCOL.md §14; shared.merkle, shared.kt) -----------------------
class TransparencyFailed(VerificationFailed):
    """What the relay showed of its key transparency log does not verify: no key from that answer
    is pinned or used."""

    code = ErrorCode.TRANSPARENCY_FAILED


class InclusionProofInvalid(TransparencyFailed):
    """An inclusion proof (RFC 9162 §2.1.3) does not lead from the leaf to the signed head's root:
    the key answered is not in the log the relay signed."""

    code = ErrorCode.INCLUSION_PROOF_INVALID


class ConsistencyProofInvalid(TransparencyFailed):
    """A consistency proof (RFC 9162 §2.1.4) between two signed heads does not verify: the newer
    head is not an append-only extension of the older one (history was rewritten or forked)."""

    code = ErrorCode.CONSISTENCY_PROOF_INVALID


class TreeHeadInvalid(TransparencyFailed):
    """A signed tree head is malformed, not signed by the relay's pinned log key, or smaller than a
    head already verified (a log cannot shrink)."""

    code = ErrorCode.TREE_HEAD_INVALID


class SplitView(TransparencyFailed):
    """Two heads signed by the relay for the same tree size have different roots, or cannot be
    proven consistent: the relay is showing two users (``field``: the other one) different key
    directories. Both signed heads are the evidence."""

    code = ErrorCode.SPLIT_VIEW


class LogKeyMismatch(TransparencyFailed):
    """The monitor: the log holds a key under my name that I did not publish, or lacks one I did."""

    code = ErrorCode.LOG_KEY_MISMATCH
