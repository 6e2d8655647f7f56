"""Passwords (argon2id, argon2-cffi) and tokens (JWT HS256, PyJWT; RFC 7519).

The JWT key is loaded once when the relay starts; the algorithm list is fixed to HS256, and
``exp``, ``iat``, ``sub``, ``iss``, ``aud``, ``jti`` and ``sid`` (the login session it belongs to,
:mod:`server.sessions`) are required. A websocket verifies its token once, at connect, and again
at each in-band renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import jwt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.hazmat.primitives.asymmetric import ed25519

from shared.errors import AuthFailed, Busy, InvalidRequest
from shared.names import canonical_username, normalise_secret, secret_candidates

T = TypeVar("T")
JwtKey = bytes | ed25519.Ed25519PrivateKey
"""An HS256 secret (>= 32 bytes) or an EdDSA (Ed25519) private key."""

log = logging.getLogger("e2ee.relay.auth")

__all__ = ["Claims", "Passwords", "Tokens", "bearer_token", "canonical_username"]

MAX_PASSWORD_CHARS = 1024


class Passwords:
    """argon2id hashing with the relay's cost settings; work runs in a thread.

    At most ``max_concurrent`` hashes run at once (each takes ``memory_kib`` of memory and a
    core), and at most ``max_queue`` more wait for a slot; past that the relay answers ``busy``
    (503) at once instead of queueing without bound.
    """

    def __init__(
        self, time_cost: int, memory_kib: int, parallelism: int, max_concurrent: int = 2, max_queue: int = 64
    ) -> None:
        self._ph = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)
        self._dummy = self._ph.hash(secrets.token_hex(16))
        self._slots = asyncio.Semaphore(max_concurrent)
        self._limit = max_concurrent + max_queue
        self.pending = 0  # hashes running or waiting for a slot
        self.refused = 0  # refused with busy

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a thread once a hash slot is free.

        Raises:
            Busy: ``max_concurrent + max_queue`` hashes are already running or waiting.
        """
        if self.pending >= self._limit:
            self.refused += 1
            raise Busy(f"{self.pending} password checks in progress; retry later", field="password", retry_after=1.0)
        self.pending += 1
        try:
            async with self._slots:
                return await asyncio.to_thread(fn, *args)
        finally:
            self.pending -= 1

    async def hash(self, password: str) -> str:
        """Return the PHC-format argon2id hash of ``password`` prepared with PRECIS OpaqueString
        (RFC 8265 §4.2, :func:`shared.names.normalise_secret`): composed and decomposed forms of
        the same text hash alike.

        Raises:
            InvalidRequest: empty, longer than 1024 characters, or holding a disallowed character.
            Busy: too many hashes running and waiting.
        """
        if not isinstance(password, str) or not 0 < len(password) <= MAX_PASSWORD_CHARS:
            raise InvalidRequest(f"password must have 1-{MAX_PASSWORD_CHARS} characters", field="password")
        return await self._run(self._ph.hash, normalise_secret(password))

    async def verify(self, stored_hash: str | None, password: str) -> bool:
        """True if ``password`` matches; a missing user still costs one hash (no timing oracle)."""
        return (await self.verify_and_upgrade(stored_hash, password))[0]

    async def verify_and_upgrade(self, stored_hash: str | None, password: str) -> tuple[bool, str | None]:
        """Check ``password`` against ``stored_hash``: its normalised form first, then - for a hash
        made before passwords were normalised - the raw form once.

        Returns:
            ``(ok, new_hash)``: ``new_hash`` is a hash of the normalised form to store in place of
            the old one when the raw form matched (or the hash's parameters are outdated), else None.

        Raises:
            Busy: too many hashes running and waiting.
        """
        candidates = secret_candidates(password) if isinstance(password, str) else []

        def check() -> tuple[bool, str | None]:
            if stored_hash is None or not candidates:
                with contextlib.suppress(VerificationError, InvalidHashError):
                    self._ph.verify(self._dummy, candidates[0] if candidates else "-")
                return False, None
            for i, candidate in enumerate(candidates):
                try:
                    self._ph.verify(stored_hash, candidate)
                except (VerificationError, InvalidHashError):
                    continue
                if i > 0 or self._ph.check_needs_rehash(stored_hash):
                    try:
                        return True, self._ph.hash(normalise_secret(password))
                    except InvalidRequest:  # a legacy password that cannot be normalised stays as it is
                        return True, None
                return True, None
            return False, None

        return await self._run(check)


@dataclass(frozen=True)
class Claims:
    """Verified token claims. ``exp`` in seconds since the epoch; ``sid`` the login session."""

    sub: str
    exp: int
    jti: str
    sid: str


class Tokens:
    """Issue and verify JWTs with one fixed algorithm (HS256 or EdDSA/Ed25519, RFC 8037).

    Keys are given once as bytes (HS256 secret, >= 32 bytes) or key objects (EdDSA); nothing
    is parsed per call. Only the configured algorithm is accepted, so ``alg: none`` and
    HS/asymmetric key confusion are refused.
    """

    def __init__(self, algorithm: str, key: JwtKey, issuer: str, audience: str, ttl_s: int, leeway_s: int) -> None:
        self._sign_key: JwtKey
        self._verify_key: bytes | ed25519.Ed25519PublicKey
        if algorithm == "HS256":
            if not isinstance(key, bytes) or len(key) < 32:
                raise ValueError("HS256 secret must be at least 32 bytes")
            self._sign_key, self._verify_key = key, key
        elif algorithm == "EdDSA":
            if not isinstance(key, ed25519.Ed25519PrivateKey):
                raise ValueError("EdDSA needs an Ed25519 private key")
            self._sign_key, self._verify_key = key, key.public_key()
        else:
            raise ValueError("JWT algorithm must be HS256 or EdDSA")
        self.algorithm = algorithm
        self._verified: OrderedDict[str, Claims] = OrderedDict()
        self.cache_size = 10_000
        self.verifications = 0  # full signature + claim checks (the bench reads them in /v1/metrics)
        self.cache_hits = 0
        self.issuer = issuer
        self.audience = audience
        self.ttl_s = ttl_s
        self.leeway_s = leeway_s

    def issue(self, subject: str, sid: str, not_after: int | None = None) -> tuple[str, int]:
        """Return ``(token, exp)`` for ``subject`` in login session ``sid``; ``exp`` = now + ttl
        (seconds since the epoch), never later than ``not_after`` (the session's absolute end)."""
        now = int(time.time())
        exp = now + self.ttl_s if not_after is None else min(now + self.ttl_s, not_after)
        claims = {
            "sub": subject,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": now,
            "nbf": now,
            "exp": exp,
            "jti": secrets.token_urlsafe(12),
            "sid": sid,
        }
        return jwt.encode(claims, self._sign_key, algorithm=self.algorithm), exp

    def verify(self, token: str) -> Claims:
        """Verify ``token`` and return its claims.

        A token verified once is remembered (exact string, at most ``cache_size`` tokens, least
        recently used dropped) until its ``exp``: the REST path then costs a dictionary look-up
        instead of a signature check and claim parsing. Only successful verifications are cached.

        Raises:
            AuthFailed: with the reason (expired, wrong audience/issuer, bad signature, missing
                claim, disallowed algorithm); the token itself is never logged or echoed.
        """
        if not isinstance(token, str) or not token or len(token) > 4096:
            raise AuthFailed("token missing or too long", field="token")
        cached = self._verified.get(token)
        if cached is not None:
            if time.time() < cached.exp:
                self._verified.move_to_end(token)
                self.cache_hits += 1
                return cached
            del self._verified[token]
        self.verifications += 1
        try:
            claims = jwt.decode(
                token,
                self._verify_key,
                algorithms=[self.algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iat", "sub", "iss", "aud", "jti", "sid"], "strict_aud": True},
            )
        except jwt.ExpiredSignatureError:
            raise AuthFailed("token expired", field="exp") from None
        except jwt.ImmatureSignatureError:
            raise AuthFailed("token not yet valid", field="nbf") from None
        except jwt.InvalidAudienceError:
            raise AuthFailed("token audience is wrong", field="aud") from None
        except jwt.InvalidIssuerError:
            raise AuthFailed("token issuer is wrong", field="iss") from None
        except jwt.MissingRequiredClaimError as exc:
            raise AuthFailed(f"token lacks the {exc.claim!r} claim", field=exc.claim) from None
        except jwt.InvalidAlgorithmError:
            raise AuthFailed("token algorithm not allowed", field="alg") from None
        except jwt.InvalidSignatureError:
            raise AuthFailed("token signature invalid", field="signature") from None
        except jwt.PyJWTError as exc:
            raise AuthFailed(f"token invalid ({type(exc).__name__})", field="token") from None
        if not isinstance(claims.get("sub"), str):
            raise AuthFailed("token subject is not a string", field="sub")
        if not isinstance(claims.get("sid"), str) or not 0 < len(claims["sid"]) <= 64:
            raise AuthFailed("token session is not a string", field="sid")
        result = Claims(claims["sub"], int(claims["exp"]), str(claims["jti"]), claims["sid"])
        self._verified[token] = result
        if len(self._verified) > self.cache_size:
            self._verified.popitem(last=False)
        return result


def bearer_token(authorization: str | None) -> str | None:
    """The token in an ``Authorization: Bearer <token>`` header value, or None."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
