"""Two key-distribution strategies to set beside the product's per-message RSA-OAEP wrap.

Bench-only code (never used by the relay or the client), built from the same ``cryptography``
primitives and the same envelope style (JSON with base64url members, the header as AES-GCM AAD,
an Ed25519 signature over the transmitted text), so the comparison is of strategies, not of
serialization:

* :class:`X25519Wrap` — per message, one ephemeral X25519 key; for every recipient an ECDH with
  the recipient's static X25519 key, HKDF-SHA-256 to a key-encryption key, and AES-256-GCM of the
  32-byte content key (ECIES-style, as in HPKE's base mode).
* :class:`GroupKey` — one conversation key shared by the members, wrapped once per member with
  RSA-OAEP-256 when it is created and again on every membership change (rotation); a message is
  then one AES-256-GCM encryption and a signature, whatever the number of members (the way group
  messengers' "sender keys" amortize the per-recipient work).
"""

from __future__ import annotations

import os

import msgspec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shared.b64 import b64u_decode, b64u_encode
from shared.envelope import _OAEP

_ZERO_NONCE = bytes(12)
_enc = msgspec.json.Encoder()


class _Entry(msgspec.Struct):
    kid: str
    ek: str


class _Env(msgspec.Struct):
    protected: str
    recipients: list[_Entry]
    iv: str
    ciphertext: str
    sig: str
    epk: str = ""


_dec = msgspec.json.Decoder(_Env)


def _signing_input(env: _Env) -> bytes:
    keys = ",".join(e.ek for e in env.recipients)
    return ".".join(("bench/sig", env.protected, env.epk, keys, env.iv, env.ciphertext)).encode()


def _header(kind: str, kids: list[str]) -> str:
    return b64u_encode(_enc.encode({"alg": kind, "enc": "A256GCM", "cid": "c1", "snd": "alice", "ctr": 1,
                                    "mid": b64u_encode(os.urandom(16)), "rkids": kids}))


def _kek(shared: bytes, epk: bytes, rpk: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=None, info=b"e2ee-bench/x25519-wrap" + epk + rpk).derive(shared)


class X25519Recipient:
    """A recipient's static X25519 key pair and its id (bench-only)."""

    def __init__(self) -> None:
        self.private = x25519.X25519PrivateKey.generate()
        self.public_bytes = self.private.public_key().public_bytes_raw()
        self.kid = b64u_encode(os.urandom(32))


class X25519Wrap:
    """Per-message content key wrapped to each recipient with X25519 + HKDF-SHA-256 + AES-GCM."""

    @staticmethod
    def seal(text: bytes, signer: ed25519.Ed25519PrivateKey, recipients: list[X25519Recipient]) -> bytes:
        """Envelope bytes; costs 1 X25519 key generation + N x (ECDH + HKDF + AES-GCM of 32 B)."""
        cek, iv = os.urandom(32), os.urandom(12)
        eph = x25519.X25519PrivateKey.generate()
        epk = eph.public_key().public_bytes_raw()
        protected = _header("X25519-HKDF-A256GCMKW", [r.kid for r in recipients])
        sealed = AESGCM(cek).encrypt(iv, text, protected.encode())
        entries = []
        for r in recipients:
            kek = _kek(eph.exchange(x25519.X25519PublicKey.from_public_bytes(r.public_bytes)), epk, r.public_bytes)
            entries.append(_Entry(r.kid, b64u_encode(AESGCM(kek).encrypt(_ZERO_NONCE, cek, None))))
        env = _Env(protected, entries, b64u_encode(iv), b64u_encode(sealed), "", b64u_encode(epk))
        env.sig = b64u_encode(signer.sign(_signing_input(env)))
        return _enc.encode(env)

    @staticmethod
    def open(data: bytes, me: X25519Recipient, verify_key: ed25519.Ed25519PublicKey) -> bytes:
        """Verify, derive my key-encryption key (1 ECDH + HKDF), unwrap, decrypt."""
        env = _dec.decode(data)
        verify_key.verify(b64u_decode(env.sig), _signing_input(env))
        entry = next(e for e in env.recipients if e.kid == me.kid)
        epk = b64u_decode(env.epk)
        kek = _kek(me.private.exchange(x25519.X25519PublicKey.from_public_bytes(epk)), epk, me.public_bytes)
        cek = AESGCM(kek).decrypt(_ZERO_NONCE, b64u_decode(entry.ek), None)
        return AESGCM(cek).decrypt(b64u_decode(env.iv), b64u_decode(env.ciphertext), env.protected.encode())


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
