"""The seed article's per-message tables, measured through the project's own functions.

Every row calls what the relay and the client call (``shared.plain``, ``shared.l3``,
``shared.envelope``, ``server.auth.Tokens``), next to the bare primitives those functions use, with
exactly the parameters they use (RSA-OAEP with SHA-256/MGF1-SHA-256, AES-256-GCM with a 96-bit
nonce and the protected header as AAD, Ed25519 over the envelope's signing input). So the ratio
``seal / (N x wrap + encrypt + sign)`` shows what the envelope itself adds (JSON, base64, checks).

Row definitions (one message of ``P`` bytes of text):

* ``L1`` — JSON only: ``plain.encode`` of the plain envelope + ``plain.parse`` (strict decode and
  checks), i.e. one serialization and one parse.
* ``L2`` — L1 + a plain PyJWT HS256 decode with the relay's options (what a per-request API pays).
* ``L2_rest`` — L1 + ``Tokens.verify`` of a token verified before (the REST path, with whatever
  caching ``server.auth`` does).
* ``L3`` — ``l3.seal`` (sender) + ``l3.open`` (relay): one hop under the session key.
* ``L4`` — ``envelope.seal`` to 2 recipients (sender + peer) + ``envelope.open``.
"""

from __future__ import annotations

import inspect
import os
import secrets

import jwt
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from client_tui.core.record import now_ms
from server.auth import Tokens
from shared import content, envelope, l3, plain
from shared.b64 import b64u_encode
from shared.content import Text
from shared.envelope import _OAEP  # the padding object the envelope uses
from shared.keys import Identity

from . import article
from .timing import Stats, measure, measure_paired

ISSUER, AUDIENCE = "e2ee-chat-relay", "e2ee-chat"
SEAL_EXTRA: dict = (
    {"epoch": 1, "head": b64u_encode(bytes(32))} if "epoch" in inspect.signature(envelope.seal).parameters else {}
)
"""The membership epoch and head that a v2 ``envelope.seal`` takes (no relay checks them in a
micro-benchmark); empty for v1."""
_KC = getattr(envelope, "KC_CONTEXT", None)
"""v2 commits to the CEK in the header: HMAC-SHA-256(CEK, KC_CONTEXT) at seal and at open."""
_FRESH = envelope.CEK_BYTES + envelope.NONCE_BYTES + envelope.MESSAGE_ID_BYTES
_PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)


def text_of(size: int) -> str:
    """A printable ASCII chat text of exactly ``size`` bytes (deterministic)."""
    base = "The quick brown fox jumps over the lazy dog; 0123456789. "
    return (base * (size // len(base) + 1))[:size]


def make_tokens(algorithm: str = "HS256") -> Tokens:
    """A ``Tokens`` configured like the relay's defaults (15 min tokens, 2 s leeway)."""
    if algorithm == "HS256":
        key = secrets.token_bytes(32)
    else:
        from cryptography.hazmat.primitives.asymmetric import ed25519

        key = ed25519.Ed25519PrivateKey.generate()
    return Tokens(algorithm, key, ISSUER, AUDIENCE, 900, 2)


def pyjwt_decode(tokens: Tokens, token: str) -> dict:
    """A plain PyJWT decode with the same key, algorithm list and claim checks as the relay."""
    return jwt.decode(
        token,
        tokens._verify_key,
        algorithms=[tokens.algorithm],
        audience=AUDIENCE,
        issuer=ISSUER,
        leeway=2,
        options={"require": ["exp", "iat", "sub", "iss", "aud", "jti"], "strict_aud": True},
    )


def jwt_costs(n: int) -> dict:
    """JWT costs in ms: sign (HS256, EdDSA), plain PyJWT decode, ``Tokens.verify`` first time
    (cache miss) and again (the REST path's repeated token); and whether a cache was found."""
    tokens = make_tokens("HS256")
    token, _ = tokens.issue("alice", "bench-session")
    cache = getattr(tokens, "_verified", None)

    def verify_cold():
        if cache is not None:
            cache.clear()
        tokens.verify(token)

    ed = make_tokens("EdDSA")
    ed_token, _ = ed.issue("alice", "bench-session")
    tokens.verify(token)
    return {
        "cache_detected": cache is not None,
        "rows": {
            "jwt_sign_hs256": measure(lambda: tokens.issue("alice", "bench-session"), n),
            "jwt_sign_eddsa": measure(lambda: ed.issue("alice", "bench-session"), n),
            "pyjwt_decode_hs256": measure(lambda: pyjwt_decode(tokens, token), n),
            "pyjwt_decode_eddsa": measure(lambda: pyjwt_decode(ed, ed_token), n),
            "tokens_verify_first": measure(verify_cold, n),
            "tokens_verify_repeat": measure(lambda: tokens.verify(token), n),
        },
    }


def _l3_pair(bits: int = 3072) -> tuple[l3.Session, l3.Session]:
    relay_key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    challenge = os.urandom(l3.CHALLENGE_BYTES)
    client, token = l3.start_handshake(relay_key.public_key(), challenge)
    return client, l3.accept_handshake(token, relay_key, challenge)


def per_request(n: int, people: list[Identity], tokens: Tokens, token: str) -> dict[str, dict[str, Stats]]:
    """The article's §02 table plus L2 REST and L4: ``{payload: {row: Stats}}`` (ms)."""
    client, relay = _l3_pair(2048)
    sender, reader = people[0], people[1]
    pubs = [sender.public, reader.public]
    sign_pub = sender.public.sign_key
    tokens.verify(token)
    out: dict[str, dict[str, Stats]] = {}
    for label, size in article.PAYLOADS.items():
        text = text_of(size)
        seq = [0]

        def l1(text=text):
            data = plain.encode(plain.make(text, "c1", "alice"))
            plain.parse(data)

        def l2():
            l1()
            pyjwt_decode(tokens, token)

        def l2_rest():
            l1()
            tokens.verify(token)

        def l3_hop(text=text, seq=seq):
            seq[0] += 1
            tok = l3.seal(client, text, direction=l3.C2R, conversation="c1", sender="alice", seq=seq[0])
            l3.open(relay, tok, direction=l3.C2R)

        def l4(text=text):
            env = envelope.seal(Text(text, ts=now_ms(), ctr=1), sender, "c1", pubs, **SEAL_EXTRA)
            envelope.open(env, reader, sign_pub)

        out[label] = {
            "L1": measure(l1, n),
            "L2": measure(l2, n),
            "L2_rest": measure(l2_rest, n),
            "L3": measure(l3_hop, n),
            "L4": measure(l4, max(20, n // 4)),
        }
    return out


def one_time(n: int, keygen_n: int, sizes: tuple[int, ...] = (2048, 3072, 4096)) -> dict[str, Stats]:
    """§03: the L3 RSA handshake (client start + relay accept) per relay key size, and key
    generation per RSA size (an account's one-time cost at L4), in ms."""
    rows: dict[str, Stats] = {}
    for bits in sizes:
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        pub = key.public_key()
        challenge = os.urandom(l3.CHALLENGE_BYTES)

        def handshake(pub=pub, key=key, challenge=challenge):
            _, token = l3.start_handshake(pub, challenge)
            l3.accept_handshake(token, key, challenge)

        rows[f"l3_handshake_{bits}"] = measure(handshake, max(10, n // 4), warmup=2)
    for bits in sizes:
        rows[f"keygen_{bits}"] = measure(lambda bits=bits: Identity.generate("u", bits), keygen_n, warmup=0)
    return rows


def enc_dec_1kb(n: int, people: list[Identity]) -> dict[str, Stats]:
    """§04 at 1 KB, in ms: bare AES-256-GCM, L3 seal/open, L4 seal/open."""
    text = text_of(1024)
    data = text.encode()
    key, iv, aad = os.urandom(32), os.urandom(12), os.urandom(300)
    sealed = AESGCM(key).encrypt(iv, data, aad)
    client, relay = _l3_pair(2048)
    tok = l3.seal(client, text, direction=l3.C2R, conversation="c1", sender="alice", seq=1)
    seq = [1]

    def l3_seal():
        seq[0] += 1
        l3.seal(client, text, direction=l3.C2R, conversation="c1", sender="alice", seq=seq[0])

    sender, reader = people[0], people[1]
    pubs = [sender.public, reader.public]
    env = envelope.seal(Text(text, ts=now_ms(), ctr=1), sender, "c1", pubs, **SEAL_EXTRA)
    return {
        "aes_gcm_encrypt": measure(lambda: AESGCM(key).encrypt(iv, data, aad), n),
        "aes_gcm_decrypt": measure(lambda: AESGCM(key).decrypt(iv, sealed, aad), n),
        "aes_gcm_encrypt_decrypt": measure(lambda: AESGCM(key).decrypt(iv, AESGCM(key).encrypt(iv, data, aad), aad), n),
        "l3_seal": measure(l3_seal, n),
        "l3_open": measure(lambda: l3.open(relay, tok, direction=l3.C2R), n),
        "l4_seal": measure(lambda: envelope.seal(Text(text, ts=now_ms(), ctr=1), sender, "c1", pubs, **SEAL_EXTRA), n),
        "l4_open": measure(lambda: envelope.open(env, reader, sender.public.sign_key), n),
    }


def key_commitment(cek: bytes) -> bytes:
    """HMAC-SHA-256(``cek``, the v2 key-commitment context), 32 bytes (v2 only)."""
    mac = hmac.HMAC(cek, hashes.SHA256())
    mac.update(_KC)
    return mac.finalize()


def seal_primitives(
    pubs: list, signer: Identity, cek: bytes, iv: bytes, text: bytes, aad: bytes, signing_input: bytes
) -> None:
    """The cryptography ``envelope.seal`` runs and nothing else (the seal target's floor): the
    fresh CEK, nonce and message id from the OS CSPRNG (one 60-byte draw), the v2 key commitment
    (an HMAC-SHA-256), one RSA-OAEP-256 wrap of the 32-byte ``cek`` per recipient, AES-256-GCM
    over ``text`` with ``aad``, one Ed25519 signature over ``signing_input``."""
    os.urandom(_FRESH)
    if _KC is not None:
        key_commitment(cek)
    for p in pubs:
        p.wrap_key.encrypt(cek, _OAEP)
    AESGCM(cek).encrypt(iv, text, aad)
    signer.sign_private.sign(signing_input)


def l4_parts(n: int, people: list[Identity], size: int, recipients: int) -> dict:
    """L4 seal/open next to their primitives (same sizes, same parameters), and the ratios.

    Returns ``{"rows": {name: Stats}, "floors": {...}, "ratios": {...}}``; times in ms.
    """
    sender, reader = people[0], people[1]
    pubs = [p.public for p in people[:recipients]]
    bits = reader.wrap_private.key_size
    doc = Text(text_of(size), ts=now_ms(), ctr=1)
    text = content.encode(doc)  # the padded document: what seal encrypts
    env_bytes = envelope.seal(doc, sender, "c1", pubs, **SEAL_EXTRA)
    parsed = envelope.parse(env_bytes)
    signing_input = envelope._signing_input(parsed._env)
    aad = parsed._env.protected.encode("ascii")
    cek, iv = os.urandom(32), os.urandom(12)
    sealed = AESGCM(cek).encrypt(iv, text, aad)
    wrapped = reader.public.wrap_key.encrypt(cek, _OAEP)
    sig = sender.sign_private.sign(signing_input)
    pss_sig = reader.wrap_private.sign(signing_input, _PSS, hashes.SHA256())
    sign_pub = sender.public.sign_key
    frame = b'{"type":"send","conversation":"c1","envelope":' + env_bytes + b"}"
    from shared import frames

    rows: dict[str, Stats] = {
        "rsa_oaep_wrap": measure(lambda: reader.public.wrap_key.encrypt(cek, _OAEP), n),
        "rsa_oaep_unwrap": measure(lambda: reader.wrap_private.decrypt(wrapped, _OAEP), n),
        "aes_gcm_encrypt": measure(lambda: AESGCM(cek).encrypt(iv, text, aad), n),
        "aes_gcm_decrypt": measure(lambda: AESGCM(cek).decrypt(iv, sealed, aad), n),
        "ed25519_sign": measure(lambda: sender.sign_private.sign(signing_input), n),
        "ed25519_verify": measure(lambda: sign_pub.verify(sig, signing_input), n),
        "rsa_pss_sign": measure(
            lambda: reader.wrap_private.sign(signing_input, _PSS, hashes.SHA256()), max(20, n // 4)
        ),
        "rsa_pss_verify": measure(
            lambda: reader.public.wrap_key.verify(pss_sig, signing_input, _PSS, hashes.SHA256()), n
        ),
        "relay_parse": measure(lambda: envelope.parse(env_bytes), n),
        "relay_frame_decode": measure(lambda: frames.decode_client_frame(frame), n),
        "b64url_encode_ciphertext": measure(lambda: b64u_encode(sealed), n),
    }

    def seal_floor() -> None:
        seal_primitives(pubs, sender, cek, iv, text, aad, signing_input)

    def open_floor() -> None:
        reader.wrap_private.decrypt(wrapped, _OAEP)
        if _KC is not None:
            key_commitment(cek)  # compared in constant time with the header's kc
        AESGCM(cek).decrypt(iv, sealed, aad)
        sign_pub.verify(sig, signing_input)

    # Each ratio's two sides timed in turns (measure_paired): separate loops minutes apart
    # put the machine's load drift into the ratio.
    rows.update(
        measure_paired(
            {
                "l4_seal": lambda: envelope.seal(doc, sender, "c1", pubs, **SEAL_EXTRA),
                "l4_seal_floor": seal_floor,
                "l4_open": lambda: envelope.open(env_bytes, reader, sign_pub),
                "l4_open_floor": open_floor,
            },
            n,
        )
    )
    m = {k: v.median for k, v in rows.items()}
    seal_floor_ms, open_floor_ms = m["l4_seal_floor"], m["l4_open_floor"]
    return {
        "params": {"size": size, "recipients": recipients, "bits": bits, "envelope_bytes": len(env_bytes)},
        "rows": rows,
        "floors": {"seal_floor_ms": seal_floor_ms, "open_floor_ms": open_floor_ms},
        "ratios": {"seal_over_floor": m["l4_seal"] / seal_floor_ms, "open_over_floor": m["l4_open"] / open_floor_ms},
    }


def run(
    n: int = 1000,
    bits: int = 3072,
    recipients: int = 2,
    keygen_n: int = 6,
    sizes: tuple[int, ...] = (2048, 3072, 4096),
    progress=None,
) -> dict:
    """The whole primitives suite. ``progress(label)`` is called before each part.

    Returns a JSON-ready dict; every time is in ms (``{"n", "median_ms", "p95_ms", "p99_ms"}``).
    """
    step = progress or (lambda _label: None)
    step(f"generating RSA-{bits} identities")
    people = [Identity.generate(f"user{i}", bits) for i in range(max(2, recipients))]
    tokens = make_tokens()
    token, _ = tokens.issue("alice", "bench-session")
    step("JWT")
    jwt_part = jwt_costs(n)
    step("per-request table (100 B, 1 KB, 10 KB)")
    per_req = per_request(n, people, tokens, token)
    step("encrypt-only / decrypt-only at 1 KB")
    encdec = enc_dec_1kb(n, people)
    step(f"L4 seal/open vs primitives (RSA-{bits})")
    parts = l4_parts(n, people, 1024, recipients)
    step("one-time costs (handshakes, key generation)")
    once = one_time(n, keygen_n, sizes)

    def dump(rows: dict[str, Stats]) -> dict:
        return {k: v.as_dict() for k, v in rows.items()}

    return {
        "params": {"n": n, "bits": bits, "recipients": recipients, "keygen_n": keygen_n},
        "per_request": {p: dump(r) for p, r in per_req.items()},
        "jwt": {"cache_detected": jwt_part["cache_detected"], "rows": dump(jwt_part["rows"])},
        "enc_dec_1kb": dump(encdec),
        "l4": {**parts, "rows": dump(parts["rows"])},
        "one_time": dump(once),
    }
