"""The L4 end-to-end envelope: JWE General JSON Serialization with a sender signature.

Form (docs/PROTOCOL.md §5 is the normative text): ``{"protected", "recipients": [{"header":
{"kid"}, "encrypted_key"}, ...], "iv", "ciphertext", "tag", "sig"}``, every binary as b64url.

* Content encryption: ``enc`` = ``A256GCM`` (RFC 7518 §5.3) under a fresh random 32-byte CEK per
  message and a random 96-bit nonce; AAD = ASCII of the ``protected`` member (RFC 7516 §5.1 step 14).
* Key wrap: ``alg`` = ``RSA-OAEP-256`` (RSA-OAEP, SHA-256, MGF1-SHA-256, empty label;
  RFC 7518 §4.3, RFC 8017 §7.1), one entry per recipient, in the order of the header's ``rkids``.
* Plaintext: a content document (``shared.content``: kind, ``ts``, ``ctr``, ``exp`` inside the
  ciphertext), canonical JSON padded with spaces to a size bucket; the header's ``cty`` names it
  and its ``xp`` carries the expiry rounded up to the hour, the one content fact the relay reads.
* Key commitment: the header's ``kc`` is HMAC-SHA-256(key = CEK, ``"e2ee-chat/v3/key-commitment"``),
  checked in constant time after the unwrap and before AES-GCM (GCM alone is not key-committing:
  one ciphertext can open under two keys to two plaintexts).
* Membership: the header's ``ep`` and ``mh`` name the epoch of the conversation's membership log
  the sender sealed to and that epoch's statement hash (``shared.membership``); recipients check
  that ``rkids`` are exactly that epoch's members' wrap keys.
* Signature: Ed25519 (RFC 8032) over the ASCII bytes
  ``"e2ee-chat/v3/sig." + protected + "." + ek_1 + "," + ... + ek_n + "." + iv + "." + ciphertext
  + "." + tag`` (each part the exact base64url text transmitted). ``sig`` is a member JOSE libraries
  ignore, so any JWE library still decrypts the envelope.

Opening verifies the signature *before* any private-key operation (encrypt-then-sign, verified
first): a forged or altered envelope costs the recipient one Ed25519 verification, never an RSA
decryption, and the RSA unwrap is never run on input the sender did not sign.

Use :func:`seal` and :func:`open`; the primitives are private to this package and no caller chooses
a CEK or a nonce.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence

import pybase64
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .. import content as _content
from ..b64 import b64u_decode
from ..content import DEFAULT_SCHEME, Content, Scheme
from ..errors import (
    ContentInvalid,
    ConversationMismatch,
    DecryptionFailed,
    DuplicateRecipient,
    EnvelopeMalformed,
    EnvelopeTooLarge,
    KeyCommitmentInvalid,
    NotARecipient,
    RecipientListInvalid,
    SenderMismatch,
    SignatureInvalid,
    TooManyRecipients,
    UnknownSenderKey,
    UnwrapFailed,
)
from ..keys import Identity, PublicIdentity, key_id
from ..strictjson import MAX_ID_CHARS, check_id, check_kid
from .format import (
    _OAEP,
    ALG,
    CEK_BYTES,
    CTY,
    DEFAULT_MAX_ENVELOPE_BYTES,
    DEFAULT_MAX_RECIPIENTS,
    ENC,
    EXPIRY_GRANULARITY_MS,
    KC_CONTEXT,
    MAX_SAFE_INTEGER,
    MESSAGE_ID_BYTES,
    NONCE_BYTES,
    REFUSED_VERSIONS,
    SIG_CONTEXT,
    SIGNATURE_BYTES,
    TAG_BYTES,
    TYP,
    VERSION,
    Header,
    Opened,
    ParsedEnvelope,
    _commitment,
    _compact,
    _encoder,
    _signing_bytes,
    _signing_input,
    check,
    expiry_hint,
    parse,
)

__all__ = [
    "ALG",
    "CEK_BYTES",
    "CTY",
    "KC_CONTEXT",
    "DEFAULT_MAX_ENVELOPE_BYTES",
    "DEFAULT_MAX_RECIPIENTS",
    "ENC",
    "EXPIRY_GRANULARITY_MS",
    "Header",
    "MAX_ID_CHARS",
    "MAX_SAFE_INTEGER",
    "MESSAGE_ID_BYTES",
    "NONCE_BYTES",
    "Opened",
    "ParsedEnvelope",
    "REFUSED_VERSIONS",
    "SIGNATURE_BYTES",
    "SIG_CONTEXT",
    "SenderKeyResolver",
    "TAG_BYTES",
    "TYP",
    "VERSION",
    "check",
    "expiry_hint",
    "open",
    "parse",
    "seal",
    "verify_signature",
]
"""The public API: seal, parse, open (and verify_signature), the relay's check, their result types and the
format's constants (the form, :func:`parse` and :func:`check` are defined in :mod:`shared.envelope.format`)."""


_b64 = functools.partial(pybase64.b64encode_as_string, altchars=b"-_")
"""``shared.b64.b64u_encode`` without its Python frame: ``_b64(data).rstrip("=")`` is the same
unpadded base64url text. A seal encodes eight members; the frames cost ~1 µs of its ~8 µs of
Python (the seal target: within 1.15 x its cryptography)."""


def _seal_with(
    doc: Content,
    sender: Identity,
    conversation: str,
    recipients: Sequence[PublicIdentity],
    *,
    epoch: int,
    head: str,
    cek: bytes,
    iv: bytes,
    message_id: bytes,
    scheme: Scheme,
    max_bytes: int,
    max_recipients: int,
) -> bytes:
    # Test-only seam (known-answer vectors inject cek, iv, message_id). Not public API.
    if len(cek) != CEK_BYTES or len(iv) != NONCE_BYTES or len(message_id) != MESSAGE_ID_BYTES:
        raise ValueError("cek, iv and message_id must be 32, 12 and 16 bytes")
    if not recipients:
        raise RecipientListInvalid("at least one recipient is required", field="recipients")
    if len(recipients) > max_recipients:
        raise TooManyRecipients(f"{len(recipients)} recipients; limit {max_recipients}", field="recipients")
    kids = [r.wrap_kid for r in recipients]
    if len(set(kids)) != len(kids):
        raise DuplicateRecipient("a recipient key appears twice", field="recipients")
    check_id(conversation, "cid")
    check_id(sender.username, "snd")
    plaintext = _content.encode(doc, scheme)  # checks the document (ContentInvalid, ContentTooLarge)
    if not 0 <= epoch <= MAX_SAFE_INTEGER:
        raise EnvelopeMalformed("epoch must be in 0..2**53-1", field="ep")
    check_kid(head, "mh")
    # Size check before any RSA work: ciphertext grows the text by 4/3, each wrapped key is fixed.
    estimate = (len(plaintext) * 4 + 2) // 3 + sum(r.wrap_bytes * 4 // 3 + 70 for r in recipients)
    if estimate > max_bytes:
        raise EnvelopeTooLarge(f"envelope would be ~{estimate} bytes; limit {max_bytes}", field="plaintext")
    header = Header(
        alg=ALG,
        enc=ENC,
        typ=TYP,
        cty=CTY,
        v=VERSION,
        mid=_b64(message_id).rstrip("="),
        cid=conversation,
        snd=sender.username,
        skid=sender.sign_kid,
        xp=expiry_hint(doc.exp),
        ep=epoch,
        mh=head,
        kc=_b64(_commitment(cek).finalize()).rstrip("="),
        rkids=kids,
    )
    protected = _b64(_encoder.encode(header)).rstrip("=")
    sealed = AESGCM(cek).encrypt(iv, plaintext, protected.encode("ascii"))
    keys = [_b64(r.wrap_key.encrypt(cek, _OAEP)).rstrip("=") for r in recipients]
    iv_text, tag = _b64(iv).rstrip("="), _b64(sealed[-TAG_BYTES:]).rstrip("=")
    ciphertext = _b64(sealed[:-TAG_BYTES]).rstrip("=")
    signature = sender.sign_private.sign(_signing_bytes(protected, ",".join(keys), iv_text, ciphertext, tag))
    sig = _b64(signature).rstrip("=")
    data = _compact(protected, kids, keys, iv_text, ciphertext, tag, sig)
    if len(data) > max_bytes:
        raise EnvelopeTooLarge(f"envelope is {len(data)} bytes; limit {max_bytes}", field="plaintext")
    return data


def seal(
    doc: Content,
    sender: Identity,
    conversation: str,
    recipients: Sequence[PublicIdentity],
    *,
    epoch: int,
    head: str,
    scheme: Scheme = DEFAULT_SCHEME,
    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
    max_recipients: int = DEFAULT_MAX_RECIPIENTS,
) -> bytes:
    """Encrypt the content document ``doc`` once and wrap its key for each recipient; sign as ``sender``.

    ``doc`` is padded to its bucket (``shared.content.encode``) and encrypted; its ``ts``, ``ctr``
    and kind stay inside the ciphertext, its ``exp`` rounded up to the hour becomes the header's
    ``xp``. Draws a fresh 32-byte CEK, a 12-byte nonce and a 16-byte message id (``os.urandom``),
    encrypts with AES-256-GCM (RFC 7518 §5.3) using the protected header as AAD, wraps the CEK
    with RSA-OAEP-256 (RFC 7518 §4.3) for every recipient (include the sender to read one's own
    messages on other devices) and signs with Ed25519 (RFC 8032). The header commits to the CEK
    (``kc``) and names the membership epoch sealed to. Costs one RSA public-key operation per
    recipient.

    Args:
        doc: the content document (``shared.content.Text(...)`` …) carrying ``ts`` (sent-at, ms)
            and ``ctr`` (this sender's counter in this conversation: 1, 2, ...).
        sender: the sender's private identity (its username: 1-64 of ``[A-Za-z0-9._-]``).
        conversation: conversation id (1-64 of ``[A-Za-z0-9._-]``).
        recipients: the recipients' public identities, in the order they appear in the envelope:
            the members of epoch ``epoch``, in the statement's member order.
        epoch: the membership epoch sealed to (the newest the sender verified), 0..2**53-1.
        head: the hash of that epoch's membership statement (``Statement.hash``, 43 chars).
        scheme: the padding scheme, ``"padme"`` (default) or ``"pow2"``.
        max_bytes: limit on the serialized envelope in bytes (the relay's ``max_envelope``).
        max_recipients: limit on the number of recipients.

    Returns:
        The serialized envelope, UTF-8 JSON bytes (RFC 7516 §7.2.1 General JSON plus ``sig``);
        about ``4/3 * bucket + 400 + n * (4/3 * modulus bytes + 70)`` bytes.

    Raises:
        ContentInvalid, ContentTooLarge (the document), EnvelopeTooLarge, TooManyRecipients,
        RecipientListInvalid, DuplicateRecipient, EnvelopeMalformed (bad conversation id, sender
        name, epoch or head).
    """
    # One draw from the OS CSPRNG for the CEK, the nonce and the message id (independent bytes
    # either way; one system call instead of three).
    fresh = os.urandom(CEK_BYTES + NONCE_BYTES + MESSAGE_ID_BYTES)
    return _seal_with(
        doc,
        sender,
        conversation,
        recipients,
        epoch=epoch,
        head=head,
        cek=fresh[:CEK_BYTES],
        iv=fresh[CEK_BYTES : CEK_BYTES + NONCE_BYTES],
        message_id=fresh[CEK_BYTES + NONCE_BYTES :],
        scheme=scheme,
        max_bytes=max_bytes,
        max_recipients=max_recipients,
    )


SenderKeyResolver = Callable[[str, str], ed25519.Ed25519PublicKey]
"""``resolve(sender_username, sender_sign_kid) -> Ed25519PublicKey``; raises UnknownSenderKey."""


def verify_signature(parsed: ParsedEnvelope, sign_key: ed25519.Ed25519PublicKey) -> Header:
    """Check only the sender's Ed25519 signature (§5.5, RFC 8032) of a parsed envelope: its
    protected header (``ep``, ``mh``, ``rkids`` ...) is then what the holder of ``sign_key``
    signed. Nothing is unwrapped or decrypted (:func:`open` runs this, then the rest).

    Args:
        parsed: a result of :func:`parse`.
        sign_key: the sender's Ed25519 public key (32 bytes).

    Returns:
        the header, now authenticated.

    Raises:
        UnknownSenderKey: the key's id is not the header's ``skid``.
        SignatureInvalid: the 64-byte signature does not verify.
    """
    if key_id(sign_key) != parsed.header.skid:
        raise UnknownSenderKey("the envelope's signing key id is not the one pinned for its sender", field="skid")
    try:
        sign_key.verify(parsed._bin.sig, _signing_input(parsed._env))
    except InvalidSignature:
        raise SignatureInvalid("sender signature does not verify", field="sig") from None
    return parsed.header


def open(  # the module's public verb, used as envelope.open(...)
    data: bytes | ParsedEnvelope,
    me: Identity,
    resolve_sender_key: SenderKeyResolver | ed25519.Ed25519PublicKey,
    *,
    conversation: str | None = None,
    sender: str | None = None,
    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
    max_recipients: int = DEFAULT_MAX_RECIPIENTS,
) -> Opened:
    """Verify and decrypt an envelope addressed to ``me``.

    Order (docs/PROTOCOL.md §5.7): shape and size checks (:func:`parse`); delivery context
    (``conversation``, ``sender``); my recipient entry; the sender's key id against the pinned
    key; the sender's Ed25519 signature; then, only for a signed envelope, RSA-OAEP-256 unwrap
    (one private-key operation), the key commitment ``kc`` (HMAC-SHA-256, constant time), and
    AES-256-GCM decryption with the protected header as AAD; last the content document is decoded
    (``shared.content.decode``: padding stripped, strict) and its ``exp`` checked against the
    header's ``xp``. The membership checks (``ep``/``mh``
    against the verified log, ``rkids`` against that epoch's members) are the caller's: they need
    the log (see ``client_tui.core.membership``).
    Each step raises its own error; the plaintext is returned only when all pass.

    Args:
        data: serialized envelope bytes (or a result of :func:`parse`).
        me: my private identity; my wrap key id selects my recipient entry.
        resolve_sender_key: the pinned Ed25519 key of the sender, or a resolver
            ``(username, sign_kid) -> key`` that raises :class:`UnknownSenderKey`.
        conversation: the conversation the relay delivered it in; checked against ``cid``.
        sender: the sender the relay delivered it from; checked against ``snd``.
        max_bytes, max_recipients: limits passed to :func:`parse`.

    Returns:
        :class:`Opened` with the content document, the verified header and the padded plaintext.

    Raises:
        the errors of :func:`parse`; ConversationMismatch; SenderMismatch; NotARecipient;
        UnknownSenderKey; SignatureInvalid; UnwrapFailed (RSA-OAEP-256 failed, or the key is not
        32 bytes); KeyCommitmentInvalid (``kc`` does not match the unwrapped key);
        DecryptionFailed (AES-GCM tag check failed); ContentInvalid (the decrypted document is not
        of shared.content's form, or its ``exp`` rounded up is not the header's ``xp``: field
        ``exp``); ContentTooLarge.
    """
    parsed = (
        data if isinstance(data, ParsedEnvelope) else parse(data, max_bytes=max_bytes, max_recipients=max_recipients)
    )
    h, env, bin_ = parsed.header, parsed._env, parsed._bin
    if conversation is not None and h.cid != conversation:
        raise ConversationMismatch(
            "envelope belongs to another conversation than the one it was delivered in", field="cid"
        )
    if sender is not None and h.snd != sender:
        raise SenderMismatch("envelope names another sender than the one that sent it", field="snd")
    try:
        index = h.rkids.index(me.wrap_kid)
    except ValueError:
        raise NotARecipient("no recipient entry for my key id", field="recipients") from None
    if isinstance(resolve_sender_key, ed25519.Ed25519PublicKey):
        verify_key = resolve_sender_key
    else:
        verify_key = resolve_sender_key(h.snd, h.skid)
    verify_signature(parsed, verify_key)
    wrapped = bin_.wrapped[index]
    if len(wrapped) != (me.wrap_private.key_size + 7) // 8:
        raise UnwrapFailed("encrypted_key has the wrong length for my key", field="encrypted_key")
    try:
        cek = me.wrap_private.decrypt(wrapped, _OAEP)
    except ValueError:
        raise UnwrapFailed("RSA-OAEP-256 unwrap failed", field="encrypted_key") from None
    if len(cek) != CEK_BYTES:
        raise UnwrapFailed(f"unwrapped key is {len(cek)} bytes; must be {CEK_BYTES}", field="encrypted_key")
    try:
        _commitment(cek).verify(b64u_decode(h.kc, "kc"))  # constant time
    except InvalidSignature:
        raise KeyCommitmentInvalid("the unwrapped key is not the one the header commits to", field="kc") from None
    try:
        plaintext = AESGCM(cek).decrypt(bin_.iv, bin_.ciphertext + bin_.tag, env.protected.encode("ascii"))
    except InvalidTag:
        raise DecryptionFailed("AES-GCM authentication failed", field="ciphertext") from None
    doc = _content.decode(plaintext)
    if expiry_hint(doc.exp) != h.xp:
        raise ContentInvalid("exp: the header's xp is not the content's exp rounded up to the hour", field="exp")
    return Opened(doc, h, plaintext)
