"""Two key-distribution strategies to set beside the product's per-message RSA-OAEP wrap.

Bench-only code (never used by the relay or the client), built from the same ``cryptography``
primitives and the same envelope style (JSON with base64url members, the header as AES-GCM AAD,
an Ed25519 signature over the transmitted text), so the comparison is of strategies, not of
serialization:

* :class:`X25519Wrap` — per message, one ephemeral X25519 key; for every recipient an ECDH with
  the recipient's static X25519 key, HKDF-SHA-256 to a key-encryption key, and AES-256-GCM of the
  32-byte content key (ECIES-style, as in HPKE's base mode).
* :class:`HybridWrap` — per message, one ephemeral X25519 key; for every recipient an ECDH with
  the recipient's static X25519 key AND an ML-KEM-768 encapsulation (FIPS 203) to the recipient's
  static ML-KEM key, both shared secrets through HKDF-SHA-256 into one key-encryption key (the
  X-Wing combiner's inputs: ML-KEM secret, X25519 secret, ephemeral and recipient X25519 keys,
  with HKDF in place of SHA3), then AES-256-GCM of the content key: post-quantum confidentiality
  that still holds if either half does. Each entry carries the 1,088-byte ML-KEM ciphertext.
* :class:`GroupKey` — one conversation key shared by the members, wrapped once per member with
  RSA-OAEP-256 when it is created and again on every membership change (rotation); a message is
  then one AES-256-GCM encryption and a signature, whatever the number of members (the way group
  messengers' "sender keys" amortize the per-recipient work).
"""

from __future__ import annotations

import os

import msgspec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, mlkem, rsa, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shared.b64 import b64u_decode, b64u_encode
from shared.envelope import _OAEP

_ZERO_NONCE = bytes(12)
_enc = msgspec.json.Encoder()


class _Entry(msgspec.Struct):
    kid: str
    ek: str
    kem: str = ""  # HybridWrap: the recipient's ML-KEM-768 ciphertext


class _Env(msgspec.Struct):
    protected: str
    recipients: list[_Entry]
    iv: str
    ciphertext: str
    sig: str
    epk: str = ""


_dec = msgspec.json.Decoder(_Env)


def _signing_input(env: _Env) -> bytes:
    keys = ",".join(e.ek + e.kem for e in env.recipients)
    return ".".join(("bench/sig", env.protected, env.epk, keys, env.iv, env.ciphertext)).encode()


def _header(kind: str, kids: list[str]) -> str:
    return b64u_encode(
        _enc.encode(
            {
                "alg": kind,
                "enc": "A256GCM",
                "cid": "c1",
                "snd": "alice",
                "xp": 0,
                "mid": b64u_encode(os.urandom(16)),
                "rkids": kids,
            }
        )
    )


def _kek(shared: bytes, epk: bytes, rpk: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=None, info=b"e2ee-bench/x25519-wrap" + epk + rpk).derive(shared)


class X25519Recipient:
    """A recipient's static X25519 key pair and its id (bench-only)."""

    def __init__(self) -> None:
        self.private = x25519.X25519PrivateKey.generate()
        self.public_bytes = self.private.public_key().public_bytes_raw()
        self.kid = b64u_encode(os.urandom(32))


def _ephemeral_seal(text: bytes, signer: ed25519.Ed25519PrivateKey, recipients: list, alg: str, kek_for) -> bytes:
    """The envelope of the two ephemeral-key strategies: one X25519 key per message; per recipient
    ``kek_for(r, eph, epk) -> (kek, kem_ciphertext)``, then AES-256-GCM of the 32-byte CEK under it."""
    cek, iv = os.urandom(32), os.urandom(12)
    eph = x25519.X25519PrivateKey.generate()
    epk = eph.public_key().public_bytes_raw()
    protected = _header(alg, [r.kid for r in recipients])
    sealed = AESGCM(cek).encrypt(iv, text, protected.encode())
    entries = []
    for r in recipients:
        kek, kem_ct = kek_for(r, eph, epk)
        entries.append(_Entry(r.kid, b64u_encode(AESGCM(kek).encrypt(_ZERO_NONCE, cek, None)), kem_ct))
    env = _Env(protected, entries, b64u_encode(iv), b64u_encode(sealed), "", b64u_encode(epk))
    env.sig = b64u_encode(signer.sign(_signing_input(env)))
    return _enc.encode(env)


def _ephemeral_open(data: bytes, me, verify_key: ed25519.Ed25519PublicKey, kek_for) -> bytes:
    """Verify, find my entry, ``kek_for(entry, epk) -> kek``, unwrap the CEK, decrypt."""
    env = _dec.decode(data)
    verify_key.verify(b64u_decode(env.sig), _signing_input(env))
    entry = next(e for e in env.recipients if e.kid == me.kid)
    cek = AESGCM(kek_for(entry, b64u_decode(env.epk))).decrypt(_ZERO_NONCE, b64u_decode(entry.ek), None)
    return AESGCM(cek).decrypt(b64u_decode(env.iv), b64u_decode(env.ciphertext), env.protected.encode())


def _ecdh(private: x25519.X25519PrivateKey, public_bytes: bytes) -> bytes:
    return private.exchange(x25519.X25519PublicKey.from_public_bytes(public_bytes))


class X25519Wrap:
    """Per-message content key wrapped to each recipient with X25519 + HKDF-SHA-256 + AES-GCM."""

    @staticmethod
    def seal(text: bytes, signer: ed25519.Ed25519PrivateKey, recipients: list[X25519Recipient]) -> bytes:
        """Envelope bytes; costs 1 X25519 key generation + N x (ECDH + HKDF + AES-GCM of 32 B)."""
        return _ephemeral_seal(
            text,
            signer,
            recipients,
            "X25519-HKDF-A256GCMKW",
            lambda r, eph, epk: (_kek(_ecdh(eph, r.public_bytes), epk, r.public_bytes), ""),
        )

    @staticmethod
    def open(data: bytes, me: X25519Recipient, verify_key: ed25519.Ed25519PublicKey) -> bytes:
        """Verify, derive my key-encryption key (1 ECDH + HKDF), unwrap, decrypt."""
        return _ephemeral_open(
            data, me, verify_key, lambda _entry, epk: _kek(_ecdh(me.private, epk), epk, me.public_bytes)
        )


class HybridRecipient(X25519Recipient):
    """A recipient's static X25519 and ML-KEM-768 key pairs and its id (bench-only)."""

    def __init__(self) -> None:
        super().__init__()
        self.kem_private = mlkem.MLKEM768PrivateKey.generate()
        self.kem_public = self.kem_private.public_key()


_HYBRID_INFO = b"e2ee-bench/x25519-mlkem768"


def _hybrid_kek(ss_kem: bytes, ss_x: bytes, epk: bytes, rpk: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=None, info=_HYBRID_INFO + epk + rpk).derive(ss_kem + ss_x)


class HybridWrap:
    """Per-message content key wrapped to each recipient under X25519 + ML-KEM-768 (HKDF-SHA-256)."""

    @staticmethod
    def seal(text: bytes, signer: ed25519.Ed25519PrivateKey, recipients: list[HybridRecipient]) -> bytes:
        """Envelope bytes; costs 1 X25519 key generation + N x (ECDH + ML-KEM encapsulation +
        HKDF + AES-GCM of 32 B); each entry is ~1.5 KB (the ML-KEM ciphertext, base64url)."""

        def kek_for(r: HybridRecipient, eph, epk: bytes) -> tuple[bytes, str]:
            ss_kem, kem_ct = r.kem_public.encapsulate()
            return _hybrid_kek(ss_kem, _ecdh(eph, r.public_bytes), epk, r.public_bytes), b64u_encode(kem_ct)

        return _ephemeral_seal(text, signer, recipients, "X25519MLKEM768-HKDF-A256GCMKW", kek_for)

    @staticmethod
    def open(data: bytes, me: HybridRecipient, verify_key: ed25519.Ed25519PublicKey) -> bytes:
        """Verify, decapsulate and derive my key-encryption key (ML-KEM + ECDH + HKDF), unwrap, decrypt."""
        return _ephemeral_open(
            data,
            me,
            verify_key,
            lambda entry, epk: _hybrid_kek(
                me.kem_private.decapsulate(b64u_decode(entry.kem)), _ecdh(me.private, epk), epk, me.public_bytes
            ),
        )


class GroupKey:
    """One AES-256 conversation key, distributed by RSA-OAEP-256 to every member on rotation."""

    def __init__(self) -> None:
        self.key = AESGCM.generate_key(bit_length=256)
        self.aead = AESGCM(self.key)
        self.kid = b64u_encode(os.urandom(16))

    @staticmethod
    def rotate(signer: ed25519.Ed25519PrivateKey, members: list[rsa.RSAPublicKey]) -> tuple[GroupKey, bytes]:
        """A new key wrapped for each member (N x RSA-OAEP-256) and signed: the cost of one
        membership change. Returns the key and the distribution message (bytes)."""
        g = GroupKey()
        entries = [_Entry(str(i), b64u_encode(m.encrypt(g.key, _OAEP))) for i, m in enumerate(members)]
        env = _Env(_header("RSA-OAEP-256-group", [g.kid]), entries, "", "", "")
        env.sig = b64u_encode(signer.sign(_signing_input(env)))
        return g, _enc.encode(env)

    def seal(self, text: bytes, signer: ed25519.Ed25519PrivateKey) -> bytes:
        """One message under the conversation key: AES-256-GCM + Ed25519, no per-recipient work."""
        iv = os.urandom(12)
        protected = _header("group", [self.kid])
        env = _Env(protected, [], b64u_encode(iv), b64u_encode(self.aead.encrypt(iv, text, protected.encode())), "")
        env.sig = b64u_encode(signer.sign(_signing_input(env)))
        return _enc.encode(env)

    def open(self, data: bytes, verify_key: ed25519.Ed25519PublicKey) -> bytes:
        """Verify and decrypt one message under the conversation key."""
        env = _dec.decode(data)
        verify_key.verify(b64u_decode(env.sig), _signing_input(env))
        return self.aead.decrypt(b64u_decode(env.iv), b64u_decode(env.ciphertext), env.protected.encode())
