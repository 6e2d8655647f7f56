"""The L3 vectors (``l3.json``): session key, handshake, messages and negative vectors.

Part of ``make_vectors.py`` (run that); kept apart so each generator reads in one sitting.
"""

from __future__ import annotations

import json

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from vectorlib import NOTICE, TS, b64u, compact_json, det, identities, relay_private, unb64u

from shared import envelope, keys, l3


def l3_vectors() -> dict:
    relay = relay_private()
    key = det("l3/session-key", 32)
    challenge = det("l3/challenge", 16)
    session = l3.Session._from_key(key)
    hs = l3._handshake_with(relay.public_key(), challenge, key=key, iv=det("l3/hs-iv", 12))
    messages = []
    cases = [
        ("c2r_text", "c2r", 1, "conv-1", "alice", "hello relay ✉️".encode()),
        ("r2c_text", "r2c", 1, "conv-1", "alice", "hello relay ✉️".encode()),
        ("c2r_empty", "c2r", 2, "conv-1", "alice", b""),
    ]
    for name, direction, seq, cid, snd, pt in cases:
        mid = b64u(det(f"l3/{name}/mid", 16))
        token = l3._seal_with(
            session,
            pt,
            direction=direction,
            conversation=cid,
            sender=snd,
            seq=seq,
            message_id=mid,
            sent_at_ms=TS,
            iv=det(f"l3/{name}/iv", 12),
            max_bytes=envelope.DEFAULT_MAX_ENVELOPE_BYTES,
        )
        messages.append(
            {
                "name": name,
                "direction": direction,
                "seq": seq,
                "mid": mid,
                "cid": cid,
                "snd": snd,
                "ts": TS,
                "iv": b64u(det(f"l3/{name}/iv", 12)),
                "plaintext": b64u(pt),
                "plaintext_utf8": pt.decode(),
                "protected_header_json": unb64u(token.split(".")[0]).decode(),
                "token": token,
            }
        )
    good = messages[0]["token"]
    p = good.split(".")

    other_session = l3.Session._from_key(det("l3/other-key", 32))
    neg = []

    def add(name, tamper, token, error, code, field, direction="c2r", after_seq=None):
        neg.append(
            {
                "name": name,
                "tamper": tamper,
                "token": token,
                "direction": direction,
                "after_seq": after_seq,
                "error": error,
                "code": code,
                "field": field,
            }
        )

    def flip(text: str) -> str:
        raw = bytearray(unb64u(text))
        raw[-1] ^= 0x01
        return b64u(bytes(raw))

    add(
        "reflected",
        "a c2r message received where r2c is expected",
        good,
        "DirectionMismatch",
        "direction_mismatch",
        "dir",
        direction="r2c",
    )
    add("replayed", "seq 1 again after seq 1 was accepted", good, "Replayed", "replayed", "seq", after_seq=1)
    add(
        "other_session",
        "sealed under another session key",
        l3._seal_with(
            other_session,
            b"x",
            direction="c2r",
            conversation="conv-1",
            sender="alice",
            seq=1,
            message_id=messages[0]["mid"],
            sent_at_ms=TS,
            iv=det("l3/o/iv", 12),
            max_bytes=1 << 18,
        ),
        "SessionMismatch",
        "session_mismatch",
        "kid",
    )
    add(
        "ciphertext_bit_flipped",
        "one ciphertext bit flipped",
        ".".join(p[:3] + [flip(p[3]), p[4]]),
        "DecryptionFailed",
        "decryption_failed",
        "ciphertext",
    )
    h = json.loads(unb64u(p[0]))
    h["cid"] = "conv-2"
    add(
        "header_rewritten",
        "cid rewritten in the header",
        ".".join([b64u(compact_json(h))] + p[1:]),
        "DecryptionFailed",
        "decryption_failed",
        "ciphertext",
    )
    for n in (0, 4, 15):
        add(
            f"tag_cut_to_{n}",
            f"tag cut to {n} bytes",
            ".".join(p[:4] + [b64u(unb64u(p[4])[:n])]),
            "TagInvalid",
            "tag_invalid",
            "tag",
        )
    add(
        "iv_8_bytes",
        "nonce of 8 bytes",
        ".".join(p[:2] + [b64u(unb64u(p[2])[:8])] + p[3:]),
        "NonceInvalid",
        "nonce_invalid",
        "iv",
    )
    add(
        "encrypted_key_not_empty",
        "alg dir with a non-empty encrypted key part",
        ".".join([p[0], "AAAA"] + p[2:]),
        "EnvelopeMalformed",
        "envelope_malformed",
        "encrypted_key",
    )
    add("trailing_garbage", "a sixth part", good + ".AAAA", "TrailingData", "trailing_data", "envelope")
    add("base64_padding", "tag with '==' padding", good + "==", "Base64Invalid", "base64_invalid", "tag")
    add("four_parts", "the tag part missing", ".".join(p[:4]), "EnvelopeMalformed", "envelope_malformed", "envelope")

    hs_parts = hs.split(".")
    other_relay_kid = keys.key_id(identities()["alice"].public.wrap_key)
    hh = json.loads(unb64u(hs_parts[0]))
    hs_neg = [
        {
            "name": "other_challenge",
            "tamper": "a valid handshake answered to another connection's challenge",
            "token": hs,
            "challenge": b64u(det("l3/other-challenge", 16)),
            "error": "ChallengeMismatch",
            "code": "challenge_mismatch",
            "field": "challenge",
        },
        {
            "name": "other_relay_key",
            "tamper": "kid names another relay key",
            "token": ".".join([b64u(compact_json(hh | {"kid": other_relay_kid}))] + hs_parts[1:]),
            "challenge": b64u(challenge),
            "error": "RelayKeyMismatch",
            "code": "relay_key_mismatch",
            "field": "kid",
        },
        {
            "name": "encrypted_key_bit_flipped",
            "tamper": "one bit of the wrapped session key flipped",
            "token": ".".join([hs_parts[0], flip(hs_parts[1])] + hs_parts[2:]),
            "challenge": b64u(challenge),
            "error": "UnwrapFailed",
            "code": "unwrap_failed",
            "field": "encrypted_key",
        },
        {
            "name": "oaep_mgf1_sha1",
            "tamper": "session key wrapped with MGF1-SHA-1",
            "token": ".".join(
                [
                    hs_parts[0],
                    b64u(
                        relay.public_key().encrypt(
                            key, padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA256(), label=None)
                        )
                    ),
                ]
                + hs_parts[2:]
            ),
            "challenge": b64u(challenge),
            "error": "UnwrapFailed",
            "code": "unwrap_failed",
            "field": "encrypted_key",
        },
    ]
    return {
        "notice": NOTICE,
        "about": "L3: session key, handshake (its encrypted_key is random RSA-OAEP: check by unwrapping), "
        "messages (deterministic from the inputs) and negative vectors.",
        "relay": "relay",
        "session_key": b64u(key),
        "session_id": session.id,
        "challenge": b64u(challenge),
        "handshake": {
            "iv": b64u(det("l3/hs-iv", 12)),
            "protected_header_json": unb64u(hs_parts[0]).decode(),
            "token": hs,
        },
        "messages": messages,
        "negative": neg,
        "handshake_negative": hs_neg,
    }
