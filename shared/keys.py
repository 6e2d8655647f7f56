"""Key generation, loading, key ids, fingerprints and safety numbers.

* Wrap keys: RSA (2048, 3072 default, or 4096 bits; e = 65537) for RSA-OAEP-256 (RFC 8017 §7.1,
  RFC 7518 §4.3).
* Signing keys: Ed25519 (RFC 8032).
* Key id: base64url (unpadded) of SHA-256 over the public key's SubjectPublicKeyInfo DER
  (RFC 5280 §4.1.2.7): 43 characters for 32 bytes. It does not depend on the encoding (PEM, DER,
  PKCS#1) the key arrived in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.exceptions import UnsupportedAlgorithm as _CryptoUnsupported
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from . import digests
from .b64 import b64u_decode, b64u_encode
from .errors import KeyExponentRefused, KeyInvalid, KeySizeRefused, KeyTypeRefused

__all__ = [
    "RSA_SIZES",
    "DEFAULT_RSA_BITS",
    "MIN_RSA_BITS",
    "MAX_RSA_BITS",
    "RSA_EXPONENT",
    "KEY_ID_LEN",
    "generate_wrap_key",
    "generate_signing_key",
    "spki_der",
    "key_id",
    "load_wrap_public_key",
    "check_wrap_public_key",
    "load_signing_public_key",
    "PublicIdentity",
    "Identity",
    "fingerprint",
    "safety_number",
]

RSA_SIZES = (2048, 3072, 4096)
DEFAULT_RSA_BITS = 3072
MIN_RSA_BITS = 2048
MAX_RSA_BITS = 4096
RSA_EXPONENT = 65537
KEY_ID_LEN = 43  # unpadded base64url of 32 bytes

_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def generate_wrap_key(bits: int = DEFAULT_RSA_BITS) -> rsa.RSAPrivateKey:
    """Generate an RSA private key of ``bits`` (2048, 3072 or 4096) with e = 65537.

    Takes 0.05-2 s (CPU-bound): call it from a thread in an event loop.

    Raises:
        KeyInvalid: ``bits`` is not one of :data:`RSA_SIZES`.
    """
    if bits not in RSA_SIZES:
        raise KeyInvalid(f"RSA key size must be one of {RSA_SIZES}, not {bits}", field="bits")
    return rsa.generate_private_key(public_exponent=RSA_EXPONENT, key_size=bits)


def generate_signing_key() -> ed25519.Ed25519PrivateKey:
    """Generate an Ed25519 private key (32-byte seed, RFC 8032)."""
    return ed25519.Ed25519PrivateKey.generate()


def spki_der(public_key: rsa.RSAPublicKey | ed25519.Ed25519PublicKey) -> bytes:
    """SubjectPublicKeyInfo DER of ``public_key`` (RSA-3072: 422 bytes; Ed25519: 44 bytes)."""
    return public_key.public_bytes(*_SPKI)


def key_id(public_key: rsa.RSAPublicKey | ed25519.Ed25519PublicKey) -> str:
    """Key id: unpadded base64url of SHA-256(SPKI DER), 43 characters."""
    return b64u_encode(digests.sha256(spki_der(public_key)))


def _load_public(data: bytes | str, owner: str) -> PublicKeyTypes:
    """Parse SPKI PEM, SPKI DER, PKCS#1 PEM or PKCS#1 DER (RFC 8017 A.1.1) into a key object."""
    if isinstance(data, str):
        data = data.encode("ascii", "replace")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise KeyInvalid(f"public key of {owner!r} must be PEM text or DER bytes", field="key")
    data = bytes(data)
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            # "PUBLIC KEY" (SPKI) or "RSA PUBLIC KEY" (PKCS#1); both are normalised to SPKI.
            return serialization.load_pem_public_key(data.strip())
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError, _CryptoUnsupported):
        raise KeyInvalid(f"public key of {owner!r} cannot be parsed", field="key") from None


def load_wrap_public_key(data: bytes | str, owner: str = "?") -> rsa.RSAPublicKey:
    """Load an RSA wrap public key from SPKI PEM, SPKI DER or PKCS#1 PEM/DER.

    The key id (:func:`key_id`) is computed over the re-encoded SPKI DER, so it is the same
    whichever encoding the key arrived in.

    Args:
        data: PEM text (``str`` or ``bytes``) or DER bytes.
        owner: whose key it is (a username, or ``"relay"``); named in every error.

    Raises:
        KeyInvalid: cannot be parsed.
        KeyTypeRefused: not an RSA key (e.g. EC, Ed25519).
        KeySizeRefused: fewer than 2048 or more than 4096 bits.
        KeyExponentRefused: public exponent other than 65537.
    """
    return check_wrap_public_key(_load_public(data, owner), owner)


def check_wrap_public_key(key: object, owner: str = "?") -> rsa.RSAPublicKey:
    """Check that ``key`` is an acceptable RSA wrap key (RSA-OAEP-256 recipient).

    Raises:
        KeyTypeRefused: not an RSA public key.
        KeySizeRefused: outside 2048..4096 bits.
        KeyExponentRefused: e != 65537.
        (All are :class:`KeyInvalid`; the message and the ``owner`` attribute name the user.)

    Returns:
        ``key``, now known to be an acceptable ``RSAPublicKey``.
    """
    if not isinstance(key, rsa.RSAPublicKey):
        kind = type(key).__name__.lstrip("_")
        raise KeyTypeRefused(f"wrap key of {owner!r} is not an RSA key ({kind})", field="wrap_key", owner=owner)
    if not MIN_RSA_BITS <= key.key_size <= MAX_RSA_BITS:
        raise KeySizeRefused(
            f"wrap key of {owner!r} has {key.key_size} bits; {MIN_RSA_BITS}-{MAX_RSA_BITS} required",
            field="wrap_key",
            owner=owner,
        )
    if key.public_numbers().e != RSA_EXPONENT:
        raise KeyExponentRefused(
            f"wrap key of {owner!r} uses e = {key.public_numbers().e}; e = 65537 required",
            field="wrap_key",
            owner=owner,
        )
    return key


def load_signing_public_key(data: bytes | str, owner: str = "?") -> ed25519.Ed25519PublicKey:
    """Load an Ed25519 public key from SPKI PEM or DER (RFC 8410; DER is 44 bytes).

    Raises:
        KeyInvalid: cannot be parsed (the message names ``owner``).
        KeyTypeRefused: not an Ed25519 key.
    """
    key = _load_public(data, owner)
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise KeyTypeRefused(f"signing key of {owner!r} is not an Ed25519 key", field="sign_key", owner=owner)
    return key


@dataclass(frozen=True)
class PublicIdentity:
    """A user's published keys as seen by others, with their key ids computed once.

    Attributes:
        username: canonical username.
        wrap_key: RSA public key used to wrap message keys to this user.
        sign_key: Ed25519 public key that verifies this user's envelopes.
        wrap_bytes: the wrap key's modulus in bytes (each key wrapped to it is this long).
    """

    username: str
    wrap_key: rsa.RSAPublicKey
    sign_key: ed25519.Ed25519PublicKey
    wrap_kid: str = field(init=False)
    sign_kid: str = field(init=False)
    wrap_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        check_wrap_public_key(self.wrap_key, self.username)
        object.__setattr__(self, "wrap_kid", key_id(self.wrap_key))
        object.__setattr__(self, "sign_kid", key_id(self.sign_key))
        object.__setattr__(self, "wrap_bytes", (self.wrap_key.key_size + 7) // 8)

    def to_json(self) -> dict[str, str]:
        """``{"username", "wrap_key", "sign_key", "wrap_kid", "sign_kid"}``; keys as b64url SPKI DER."""
        return {
            "username": self.username,
            "wrap_key": b64u_encode(spki_der(self.wrap_key)),
            "sign_key": b64u_encode(spki_der(self.sign_key)),
            "wrap_kid": self.wrap_kid,
            "sign_kid": self.sign_kid,
        }

    @classmethod
    def from_json(cls, data: dict[str, str]) -> PublicIdentity:
        """Inverse of :meth:`to_json`. Key ids in ``data`` are recomputed, never trusted.

        Raises:
            KeyInvalid: a key cannot be parsed or is unacceptable.
        """
        try:
            name = str(data["username"])
            wrap = load_wrap_public_key(b64u_decode(data["wrap_key"], "wrap_key"), name)
            sign = load_signing_public_key(b64u_decode(data["sign_key"], "sign_key"), name)
        except (KeyError, TypeError):
            raise KeyInvalid("public identity lacks username, wrap_key or sign_key") from None
        return cls(name, wrap, sign)


@dataclass(frozen=True)
class Identity:
    """A user's own key pairs (private). Public parts and key ids are derived once.

    Attributes:
        username: canonical username.
        wrap_private: RSA private key (2048-4096 bits) that unwraps message keys.
        sign_private: Ed25519 private key that signs this user's envelopes.
    """

    username: str
    wrap_private: rsa.RSAPrivateKey
    sign_private: ed25519.Ed25519PrivateKey
    public: PublicIdentity = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "public",
            PublicIdentity(self.username, self.wrap_private.public_key(), self.sign_private.public_key()),
        )

    @property
    def wrap_kid(self) -> str:
        return self.public.wrap_kid

    @property
    def sign_kid(self) -> str:
        return self.public.sign_kid

    @classmethod
    def generate(cls, username: str, bits: int = DEFAULT_RSA_BITS) -> Identity:
        """Generate a fresh identity (RSA-``bits`` wrap key + Ed25519 signing key). CPU-bound."""
        return cls(username, generate_wrap_key(bits), generate_signing_key())


def fingerprint(kid: str) -> str:
    """Human form of a key id: the SHA-256 digest as 16 groups of 4 hex digits."""
    digest = b64u_decode(kid, "kid").hex()
    return " ".join(digest[i : i + 4] for i in range(0, 64, 4))


def safety_number(a: PublicIdentity, b: PublicIdentity) -> str:
    """Safety number of the pair ``a``, ``b``: 60 decimal digits in 12 groups of 5.

    For each user, 30 digits come from SHA-512("e2ee-chat/v1/safety" || 0x00 || username UTF-8 ||
    0x00 || SHA-256 wrap SPKI || SHA-256 sign SPKI): the first 30 bytes, as six 5-byte big-endian
    integers, each mod 100000, zero-padded to 5 digits. The two halves are ordered by username
    (UTF-8 byte order) so both users see the same number.
    """

    def half(p: PublicIdentity) -> str:
        h = digests.sha512(
            b"e2ee-chat/v1/safety\x00", p.username.encode(), b"\x00", b64u_decode(p.wrap_kid), b64u_decode(p.sign_kid)
        )
        return "".join(f"{int.from_bytes(h[i : i + 5], 'big') % 100000:05d}" for i in range(0, 30, 5))

    first, second = sorted((a, b), key=lambda p: p.username.encode())
    digits = half(first) + half(second)
    return " ".join(digits[i : i + 5] for i in range(0, 60, 5))
