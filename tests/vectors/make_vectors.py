"""Regenerate the known-answer vectors in this folder. Run by hand; tests only READ the files.

    .venv/bin/python tests/vectors/make_vectors.py            # vectors from the committed keys
    .venv/bin/python tests/vectors/make_vectors.py --new-keys # also draw new test keys (rarely)

Keys (``keys.json``, ``key_pool.json``) are drawn once and then kept: every other value is derived
from them and from fixed inputs (CEK, nonce, message id, time are SHA-256 of a label), so
regenerating changes only what is random by design: RSA-OAEP ciphertexts (``encrypted_key``,
the L3 handshake) and therefore the L4 signatures over them. The tests check each vector by the
document's rules (open it, unwrap it, verify it, recompute the deterministic parts), so a
regenerated set passes as long as the code still follows docs/PROTOCOL.md.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from l3_vectors import l3_vectors
from membership_vectors import membership_vectors
from vectorlib import (
    NOTICE,
    TS,
    VECTORS_DIR,
    b64u,
    build,
    compact_json,
    det,
    header_for,
    identities,
    key_commitment,
    load,
    relay_private,
    resign,
    unb64u,
)

from shared import content, envelope, keys
from shared.keys import Identity

S = serialization


def write(name: str, data: dict) -> None:
    path = VECTORS_DIR / name
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {path.relative_to(VECTORS_DIR.parent.parent)}")


# -- keys --------------------------------------------------------------------------------------
def pem(key, fmt=S.PublicFormat.SubjectPublicKeyInfo) -> str:
    return key.public_bytes(S.Encoding.PEM, fmt).decode()


def der(key, fmt=S.PublicFormat.SubjectPublicKeyInfo) -> str:
    return b64u(key.public_bytes(S.Encoding.DER, fmt))


def wrap_entry(priv: rsa.RSAPrivateKey) -> dict:
    pub = priv.public_key()
    kid = keys.key_id(pub)
    return {
        "wrap_bits": priv.key_size,
        "wrap_private_pkcs8_pem": priv.private_bytes(S.Encoding.PEM, S.PrivateFormat.PKCS8, S.NoEncryption()).decode(),
        "wrap_private_pkcs8_der": b64u(priv.private_bytes(S.Encoding.DER, S.PrivateFormat.PKCS8, S.NoEncryption())),
        "wrap_public_spki_der": der(pub),
        "wrap_public_spki_pem": pem(pub),
        "wrap_public_pkcs1_pem": pem(pub, S.PublicFormat.PKCS1),
        "wrap_public_pkcs1_der": der(pub, S.PublicFormat.PKCS1),
        "wrap_kid": kid,
        "wrap_fingerprint": keys.fingerprint(kid),
    }


def sign_entry(priv: ed25519.Ed25519PrivateKey) -> dict:
    pub = priv.public_key()
    kid = keys.key_id(pub)
    return {
        "sign_private_seed": b64u(priv.private_bytes(S.Encoding.Raw, S.PrivateFormat.Raw, S.NoEncryption())),
        "sign_private_pkcs8_der": b64u(priv.private_bytes(S.Encoding.DER, S.PrivateFormat.PKCS8, S.NoEncryption())),
        "sign_public_raw": b64u(pub.public_bytes(S.Encoding.Raw, S.PublicFormat.Raw)),
        "sign_public_spki_der": der(pub),
        "sign_public_spki_pem": pem(pub),
        "sign_kid": kid,
        "sign_fingerprint": keys.fingerprint(kid),
    }


def user_entry(ident: Identity) -> dict:
    return {"username": ident.username, **wrap_entry(ident.wrap_private), **sign_entry(ident.sign_private)}


def refused_keys() -> list[dict]:
    """Public keys a user may not publish as a wrap key, each with the error that names the user."""
    small = rsa.generate_private_key(65537, 1024).public_key()
    e3 = rsa.generate_private_key(3, 2048).public_key()
    p256 = ec.generate_private_key(ec.SECP256R1()).public_key()
    edk = ed25519.Ed25519PrivateKey.generate().public_key()
    return [
        {
            "name": "rsa_1024",
            "owner": "mallory",
            "spki_pem": pem(small),
            "error": "KeySizeRefused",
            "code": "key_size_refused",
        },
        {
            "name": "rsa_e_3",
            "owner": "mallory",
            "spki_pem": pem(e3),
            "error": "KeyExponentRefused",
            "code": "key_exponent_refused",
        },
        {
            "name": "ec_p256",
            "owner": "mallory",
            "spki_pem": pem(p256),
            "error": "KeyTypeRefused",
            "code": "key_type_refused",
        },
        {
            "name": "ed25519_as_wrap_key",
            "owner": "mallory",
            "spki_pem": pem(edk),
            "error": "KeyTypeRefused",
            "code": "key_type_refused",
        },
        {
            "name": "not_a_key",
            "owner": "mallory",
            "spki_pem": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
            "error": "KeyInvalid",
            "code": "key_invalid",
        },
    ]


def new_keys() -> None:
    users = {
        "alice": Identity.generate("alice", 2048),
        "bob": Identity.generate("bob", 3072),
        "carol": Identity.generate("carol", 2048),
        "mallory": Identity.generate("mallory", 2048),
    }
    relay = keys.generate_wrap_key(2048)
    write(
        "keys.json",
        {
            "notice": NOTICE,
            "users": {n: user_entry(i) for n, i in users.items()},
            "relay": {"username": "relay", **wrap_entry(relay)},
            "refused_wrap_keys": refused_keys(),
        },
    )
    pool = []
    for i in range(64):
        ident = Identity.generate(f"user{i:02d}", 2048)
        pool.append(
            {
                "username": ident.username,
                "wrap_private_pkcs8_der": b64u(
                    ident.wrap_private.private_bytes(S.Encoding.DER, S.PrivateFormat.PKCS8, S.NoEncryption())
                ),
                "sign_private_seed": b64u(
                    ident.sign_private.private_bytes(S.Encoding.Raw, S.PrivateFormat.Raw, S.NoEncryption())
                ),
            }
        )
    write("key_pool.json", {"notice": NOTICE, "identities": pool})


# -- safety numbers ----------------------------------------------------------------------------
def safety_vectors(ids: dict[str, Identity]) -> dict:
    out = []
    for a, b in (("alice", "bob"), ("bob", "alice"), ("alice", "carol"), ("carol", "mallory")):
        pa, pb = ids[a].public, ids[b].public
        halves = {}
        for p in (pa, pb):
            data = b"e2ee-chat/v1/safety\x00" + p.username.encode() + b"\x00" + unb64u(p.wrap_kid) + unb64u(p.sign_kid)
            halves[p.username] = {"hash_input_hex": data.hex(), "sha512_hex": hashlib.sha512(data).hexdigest()}
        out.append({"a": a, "b": b, "per_user": halves, "safety_number": keys.safety_number(pa, pb)})
    return {"notice": NOTICE, "vectors": out}


# -- L4 ----------------------------------------------------------------------------------------
REF = b64u(det("ref/mid", 16))
ATT = content.AttachmentRef(
    id="blob-" + b64u(det("att/id", 16)),
    key=b64u(det("att/key", 32)),
    name="Lisbon 🌅.jpg",
    type="image/jpeg",
    size=10_485_760,
    sha256=b64u(det("att/sha256", 32)),
    chunk=65_536,
)
L4_CASES: list[tuple[str, str, list[str], str, int, content.Content, content.Scheme]] = [
    # name, sender, recipients, conversation, epoch, content document, padding scheme
    (
        "two_recipients_text",
        "alice",
        ["alice", "bob"],
        "conv-1",
        0,
        content.Text("hello, bob ✉️", ts=TS, ctr=1),
        "padme",
    ),
    ("reaction", "alice", ["bob"], "conv-1", 3, content.React(REF, "👍🏽", True, ts=TS, ctr=2), "padme"),
    (
        "three_recipients_mixed_key_sizes_reply",
        "carol",
        ["alice", "bob", "carol"],
        "Zm9vYmFyYmF6cXV4cXV1eA",
        12,
        content.Reply("Grüße, 你好, مرحبا, 👋🏽 — ok", REF, ts=TS, ctr=7),
        "padme",
    ),
    (
        "attachment_expiring_pow2",
        "bob",
        ["alice", "bob"],
        "conv-2",
        5,
        content.Attachment(ATT, "the view", ts=TS, ctr=8, exp=TS + 90 * 60_000),
        "pow2",
    ),
    (
        "one_kib",
        "bob",
        ["alice", "bob"],
        "conv-2",
        9_007_199_254_740_991,
        content.Text("0123456789abcdef" * 64, ts=TS, ctr=42),
        "padme",
    ),
]


def l4_vectors(ids: dict[str, Identity]) -> dict:
    out = []
    for name, snd, rcpts, cid, ep, doc_in, scheme in L4_CASES:
        cek, iv, mid = det(f"{name}/cek", 32), det(f"{name}/iv", 12), det(f"{name}/mid", 16)
        mh = b64u(det(f"{name}/mh", 32))
        plaintext = content.encode(doc_in, scheme)
        data = envelope._seal_with(
            doc_in,
            ids[snd],
            cid,
            [ids[r].public for r in rcpts],
            epoch=ep,
            head=mh,
            cek=cek,
            iv=iv,
            message_id=mid,
            scheme=scheme,
            max_bytes=envelope.DEFAULT_MAX_ENVELOPE_BYTES,
            max_recipients=envelope.DEFAULT_MAX_RECIPIENTS,
        )
        doc = json.loads(data)
        header_json = unb64u(doc["protected"]).decode()
        out.append(
            {
                "name": name,
                "sender": snd,
                "recipients": rcpts,
                "conversation": cid,
                "epoch": ep,
                "mh": mh,
                "kc": key_commitment(cek),
                "xp": envelope.expiry_hint(doc_in.exp),
                "content": json.loads(content.canonical(doc_in)),
                "content_json": content.canonical(doc_in).decode(),
                "scheme": scheme,
                "plaintext_bytes": len(plaintext),
                "plaintext": b64u(plaintext),
                "cek": b64u(cek),
                "iv": b64u(iv),
                "mid": b64u(mid),
                "protected_header_json": header_json,
                "protected": doc["protected"],
                "ciphertext": doc["ciphertext"],
                "tag": doc["tag"],
                "signing_input_sha256": hashlib.sha256(envelope._signing_input(envelope.parse(data)._env)).hexdigest(),
                "envelope": data.decode(),
            }
        )
    return {
        "notice": NOTICE,
        "about": "Positive L4 vectors. protected, iv, ciphertext and tag are deterministic from the "
        "inputs; encrypted_key (RSA-OAEP) is random, so check it by unwrapping to cek; sig "
        "(Ed25519) is deterministic over the envelope's signing input; kc = HMAC-SHA-256(cek, "
        "key_commitment_context). ep and mh are opaque here (membership.json checks them). The "
        "plaintext is content_json padded with spaces to plaintext_bytes (the scheme's bucket); "
        "xp is content.exp rounded up to the hour (0 when none).",
        "signing_context": "e2ee-chat/v3/sig",
        "key_commitment_context": "e2ee-chat/v3/key-commitment",
        "vectors": out,
    }


def l4_negative(ids: dict[str, Identity]) -> dict:
    alice, bob, carol, mallory = (ids[n] for n in ("alice", "bob", "carol", "mallory"))
    pt = content.encode(content.Text("meet at noon", ts=TS, ctr=1))
    cek, iv, mid = det("neg/cek", 32), det("neg/iv", 12), det("neg/mid", 16)
    rcpts = [alice, bob]
    base_kw = {"cek": cek, "iv": iv, "mid": mid, "conversation": "conv-1"}

    def base() -> dict:
        return build(alice, rcpts, pt, **base_kw)

    good = base()
    ctx = {"me": "bob", "pinned": "alice", "conversation": "conv-1", "sender": "alice"}
    vectors: list[dict] = []

    def add(
        name: str, tamper: str, env: dict | bytes | str, error: str, code: str, field: str | None, **ctx_over
    ) -> None:
        if isinstance(env, dict):
            env = compact_json(env)
        if isinstance(env, bytes):
            env = env.decode("utf-8", "surrogateescape")
        vectors.append(
            {
                "name": name,
                "tamper": tamper,
                "envelope": env,
                "context": {**ctx, **ctx_over},
                "error": error,
                "code": code,
                "field": field,
            }
        )

    def edit(fn, doc: dict | None = None) -> dict:
        d = copy.deepcopy(doc or good)
        fn(d)
        return d

    def set_(key, value):
        return lambda d: d.__setitem__(key, value)

    def header_edit(fn) -> dict:
        """A new envelope, sealed and signed by alice, whose header ``fn`` changed."""
        h = json.loads(unb64u(good["protected"]))
        fn(h)
        return build(alice, rcpts, pt, header=h, **base_kw)

    def protected_swap(fn) -> dict:
        """``good`` with only its ``protected`` member rewritten by ``fn`` (everything else kept)."""
        h = json.loads(unb64u(good["protected"]))
        fn(h)
        return edit(set_("protected", b64u(compact_json(h))))

    def flip(text: str, index: int = -3) -> str:
        raw = bytearray(unb64u(text))
        raw[index] ^= 0x01
        return b64u(bytes(raw))

    tag = unb64u(good["tag"])
    sha1_mgf1 = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA256(), label=None)
    sha1_all = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    labelled = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=b"e2ee-chat")

    # -- wrapping (signed by the real sender: the signature passes, the unwrap must not)
    add(
        "oaep_mgf1_sha1",
        "my key wrapped with RSA-OAEP, SHA-256 but MGF1-SHA-1; sender-signed",
        build(alice, rcpts, pt, oaep={"bob": sha1_mgf1}, **base_kw),
        "UnwrapFailed",
        "unwrap_failed",
        "encrypted_key",
    )
    add(
        "oaep_sha1",
        "my key wrapped with RSA-OAEP (SHA-1, MGF1-SHA-1, i.e. JOSE 'RSA-OAEP'); sender-signed",
        build(alice, rcpts, pt, oaep={"bob": sha1_all}, **base_kw),
        "UnwrapFailed",
        "unwrap_failed",
        "encrypted_key",
    )
    add(
        "oaep_label",
        "my key wrapped with RSA-OAEP-256 and a non-empty label; sender-signed",
        build(alice, rcpts, pt, oaep={"bob": labelled}, **base_kw),
        "UnwrapFailed",
        "unwrap_failed",
        "encrypted_key",
    )
    add(
        "wrapped_key_16_bytes",
        "a 16-byte key wrapped instead of 32 bytes; sender-signed",
        build(alice, rcpts, pt, wrap_keys={"bob": cek[:16]}, **base_kw),
        "UnwrapFailed",
        "unwrap_failed",
        "encrypted_key",
    )
    add(
        "encrypted_key_truncated_signed",
        "my encrypted_key one byte short; sender-signed",
        resign(
            edit(
                lambda d: d["recipients"][1].__setitem__(
                    "encrypted_key", b64u(unb64u(d["recipients"][1]["encrypted_key"])[:-1])
                )
            ),
            alice.sign_private,
        ),
        "UnwrapFailed",
        "unwrap_failed",
        "encrypted_key",
    )
    # -- tag and nonce lengths (caught before any crypto)
    for n in (0, 4, 15):
        add(
            f"tag_cut_to_{n}",
            f"tag cut to {n} bytes",
            edit(set_("tag", b64u(tag[:n]))),
            "TagInvalid",
            "tag_invalid",
            "tag",
        )
    add("iv_8_bytes", "nonce of 8 bytes", edit(set_("iv", b64u(iv[:8]))), "NonceInvalid", "nonce_invalid", "iv")
    add(
        "iv_16_bytes",
        "nonce of 16 bytes",
        edit(set_("iv", b64u(iv + b"\0\0\0\0"))),
        "NonceInvalid",
        "nonce_invalid",
        "iv",
    )
    # -- delivery context
    add(
        "moved_to_other_conversation",
        "delivered in conversation conv-2, header says conv-1",
        good,
        "ConversationMismatch",
        "conversation_mismatch",
        "cid",
        conversation="conv-2",
    )
    add(
        "cid_rewritten",
        "header cid rewritten to conv-2 (not re-signed), delivered in conv-2",
        protected_swap(lambda h: h.__setitem__("cid", "conv-2")),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
        conversation="conv-2",
    )
    add(
        "sender_rewritten_in_delivery",
        "delivered as from carol, header says alice",
        good,
        "SenderMismatch",
        "sender_mismatch",
        "snd",
        sender="carol",
    )
    add(
        "snd_rewritten",
        "header snd rewritten to carol (skid still alice's); opened as carol's message",
        protected_swap(lambda h: h.__setitem__("snd", "carol")),
        "UnknownSenderKey",
        "unknown_sender_key",
        "skid",
        sender="carol",
        pinned="carol",
    )
    add(
        "snd_and_skid_rewritten",
        "header snd and skid rewritten to carol's (not re-signed)",
        protected_swap(lambda h: h.update(snd="carol", skid=carol.sign_kid)),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
        sender="carol",
        pinned="carol",
    )
    # -- recipient list
    add(
        "recipient_kids_swapped",
        "the two entries' header.kid values exchanged",
        edit(
            lambda d: (
                d["recipients"][0]["header"].__setitem__("kid", bob.wrap_kid),
                d["recipients"][1]["header"].__setitem__("kid", alice.wrap_kid),
            )
        ),
        "RecipientListInvalid",
        "recipient_list_invalid",
        "recipients",
    )
    add(
        "recipient_entries_reordered",
        "the two recipient entries exchanged (rkids unchanged)",
        edit(lambda d: d["recipients"].reverse()),
        "RecipientListInvalid",
        "recipient_list_invalid",
        "recipients",
    )
    add(
        "rkids_and_entries_reordered",
        "rkids and entries both reordered consistently (not re-signed)",
        protected_swap(lambda h: h["rkids"].reverse()) | {"recipients": list(reversed(good["recipients"]))},
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "recipient_kid_duplicated",
        "second entry's kid set to the first entry's",
        edit(lambda d: d["recipients"][1]["header"].__setitem__("kid", alice.wrap_kid)),
        "DuplicateRecipient",
        "recipient_duplicated",
        "recipients",
    )
    add(
        "recipient_entry_duplicated_signed",
        "rkids and entries both list bob twice; sender-signed",
        build(alice, [bob, bob], pt, **base_kw),
        "DuplicateRecipient",
        "recipient_duplicated",
        "recipients",
    )
    add(
        "recipient_entry_removed",
        "bob's entry removed, rkids unchanged",
        edit(lambda d: d["recipients"].pop()),
        "RecipientListInvalid",
        "recipient_list_invalid",
        "recipients",
    )
    add(
        "no_entry_for_me",
        "opened by carol, who is not a recipient",
        good,
        "NotARecipient",
        "not_a_recipient",
        "recipients",
        me="carol",
    )
    # -- signature
    add(
        "signature_bit_flipped",
        "one bit of sig flipped",
        edit(set_("sig", flip(good["sig"]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "signature_zero",
        "sig replaced by 64 zero bytes",
        edit(set_("sig", b64u(bytes(64)))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "signature_63_bytes",
        "sig one byte short",
        edit(set_("sig", b64u(unb64u(good["sig"])[:63]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "signed_by_other_key_same_skid",
        "re-signed by mallory's key, skid still alice's",
        resign(copy.deepcopy(good), mallory.sign_private),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "signed_by_other_key_own_skid",
        "skid set to mallory's and re-signed by mallory (alice pinned)",
        resign(protected_swap(lambda h: h.__setitem__("skid", mallory.sign_kid)), mallory.sign_private),
        "UnknownSenderKey",
        "unknown_sender_key",
        "skid",
    )
    add(
        "ciphertext_bit_flipped",
        "one ciphertext bit flipped (not re-signed)",
        edit(set_("ciphertext", flip(good["ciphertext"]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "tag_bit_flipped",
        "one tag bit flipped (not re-signed)",
        edit(set_("tag", flip(good["tag"]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "iv_bit_flipped",
        "one nonce bit flipped (not re-signed)",
        edit(set_("iv", flip(good["iv"]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "other_encrypted_key_bit_flipped",
        "one bit of alice's encrypted_key flipped; bob opens",
        edit(lambda d: d["recipients"][0].__setitem__("encrypted_key", flip(d["recipients"][0]["encrypted_key"]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "my_encrypted_key_bit_flipped",
        "one bit of bob's encrypted_key flipped; bob opens",
        edit(lambda d: d["recipients"][1].__setitem__("encrypted_key", flip(d["recipients"][1]["encrypted_key"]))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    # -- content (signed by the real sender: only GCM can tell)
    add(
        "ciphertext_bit_flipped_signed",
        "one ciphertext bit flipped, then sender-signed",
        resign(edit(set_("ciphertext", flip(good["ciphertext"]))), alice.sign_private),
        "DecryptionFailed",
        "decryption_failed",
        "ciphertext",
    )
    add(
        "aad_not_protected_signed",
        "GCM AAD was not the protected member; sender-signed",
        build(alice, rcpts, pt, aad=b"", **base_kw),
        "DecryptionFailed",
        "decryption_failed",
        "ciphertext",
    )
    # -- base64url
    add(
        "base64_padding",
        "tag written with '==' padding",
        edit(set_("tag", good["tag"] + "==")),
        "Base64Invalid",
        "base64_invalid",
        "tag",
    )
    std = next(k for k in ("sig", "ciphertext", "tag", "iv") if "-" in good[k] or "_" in good[k])
    add(
        "base64_standard_alphabet",
        f"{std} written in the standard alphabet ('+', '/')",
        edit(set_(std, good[std].replace("-", "+").replace("_", "/"))),
        "Base64Invalid",
        "base64_invalid",
        std,
    )
    last = good["tag"][-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    add(
        "base64_non_canonical",
        "tag's last character has its unused bits set",
        edit(set_("tag", good["tag"][:-1] + alphabet[alphabet.index(last) | 1])),
        "Base64Invalid",
        "base64_invalid",
        "tag",
    )
    add(
        "base64_whitespace",
        "a line break inside ciphertext",
        edit(set_("ciphertext", good["ciphertext"][:8] + "\n" + good["ciphertext"][8:])),
        "Base64Invalid",
        "base64_invalid",
        "ciphertext",
    )
    # -- JSON
    add(
        "trailing_garbage",
        "bytes after the envelope's JSON object",
        compact_json(good) + b"garbage",
        "TrailingData",
        "trailing_data",
        "envelope",
    )
    hb = compact_json(header_for(alice, "conv-1", rcpts, mid=mid, cek=cek))
    add(
        "trailing_garbage_in_header",
        "bytes after the protected header's JSON; sender-signed",
        build(alice, rcpts, pt, header_bytes=hb + b"x", **base_kw),
        "TrailingData",
        "trailing_data",
        "protected",
    )
    other = build(alice, rcpts, content.encode(content.Text("meet at midnight", ts=TS, ctr=1)), **base_kw)
    dup = compact_json(good)[:-1] + b',"ciphertext":"' + other["ciphertext"].encode() + b'"}'
    add("duplicate_member", "a second 'ciphertext' member", dup, "DuplicateMember", "duplicate_member", "envelope")
    hdup = hb[:-1] + b',"cid":"conv-2"}'
    add(
        "duplicate_member_in_header",
        "the protected header repeats 'cid'; sender-signed",
        build(alice, rcpts, pt, header_bytes=hdup, **base_kw),
        "DuplicateMember",
        "duplicate_member",
        "protected",
    )
    add(
        "unknown_member",
        "an extra top-level 'aad' member",
        good | {"aad": "AAAA"},
        "EnvelopeMalformed",
        "envelope_malformed",
        "envelope",
    )
    add(
        "alg_rsa1_5",
        "alg RSA1_5 in the header; sender-signed",
        header_edit(lambda h: h.__setitem__("alg", "RSA1_5")),
        "UnsupportedAlgorithm",
        "unsupported_algorithm",
        "alg",
    )
    add(
        "version_1",
        "v 1 in the header (the format before membership epochs); sender-signed",
        header_edit(lambda h: h.__setitem__("v", 1)),
        "UnsupportedAlgorithm",
        "unsupported_algorithm",
        "v",
    )
    v3 = json.loads(unb64u(good["protected"]))
    v1 = {k: v for k, v in v3.items() if k not in ("ep", "mh", "kc", "xp")} | {"ts": TS, "ctr": 1}
    add(
        "version_1_header",
        "a whole v1 header (ts, ctr; no ep, mh, kc; v 1); sender-signed",
        build(alice, rcpts, b"meet at noon", header=v1 | {"v": 1, "cty": "text/plain;charset=utf-8"}, **base_kw),
        "UnsupportedAlgorithm",
        "unsupported_algorithm",
        "v",
    )
    v2 = {k: v for k, v in v3.items() if k != "xp"} | {"ts": TS, "ctr": 1, "v": 2, "cty": "text/plain;charset=utf-8"}
    add(
        "version_2_header",
        "a whole v2 header (ts and ctr readable, cty text/plain, v 2; text plaintext); sender-signed",
        build(alice, rcpts, b"meet at noon", header=v2, **base_kw),
        "UnsupportedAlgorithm",
        "unsupported_algorithm",
        "v",
    )
    add(
        "version_2_in_v3_header",
        "v 2 in an otherwise v3 header; sender-signed",
        header_edit(lambda h: h.__setitem__("v", 2)),
        "UnsupportedAlgorithm",
        "unsupported_algorithm",
        "v",
    )
    add(
        "cty_text_plain",
        "cty text/plain;charset=utf-8 (v2's) in a v3 header; sender-signed",
        header_edit(lambda h: h.__setitem__("cty", "text/plain;charset=utf-8")),
        "UnsupportedAlgorithm",
        "unsupported_algorithm",
        "cty",
    )
    add(
        "ts_in_header",
        "a readable ts in the v3 header (an unknown member); sender-signed",
        header_edit(lambda h: h.__setitem__("ts", TS)),
        "EnvelopeMalformed",
        "envelope_malformed",
        "protected",
    )
    add(
        "xp_not_an_hour",
        "xp not a whole hour in ms; sender-signed",
        header_edit(lambda h: h.__setitem__("xp", 3_600_001)),
        "EnvelopeMalformed",
        "envelope_malformed",
        "xp",
    )
    add(
        "xp_negative",
        "xp -3600000; sender-signed",
        header_edit(lambda h: h.__setitem__("xp", -3_600_000)),
        "EnvelopeMalformed",
        "envelope_malformed",
        "xp",
    )

    # -- the content document (decrypts, then refused: docs/PROTOCOL.md §13)
    def content_case(name: str, about: str, plaintext: bytes, field: str, xp: int = 0) -> None:
        h = json.loads(unb64u(good["protected"])) | {"xp": xp}
        add(
            name,
            about + "; sender-signed",
            build(alice, rcpts, plaintext, header=h, **base_kw),
            "ContentInvalid",
            "content_invalid",
            field,
        )

    padded = content.encode(content.Text("meet at noon", ts=TS, ctr=1))
    canon = padded.rstrip(b" ")
    content_case("content_text_plain", "the plaintext is bare text (a v2 plaintext)", b"meet at noon", "content")
    content_case("content_nul_padding", "the document padded with NUL bytes", canon + b"\0" * 40, "content")
    content_case("content_newline_padding", "a newline before the padding spaces", canon + b"\n" + b" " * 39, "content")
    content_case("content_unknown_kind", "t is poll", canon.replace(b'"text"', b'"poll"'), "t")
    content_case("content_unknown_member", "an extra member html", canon[:-1] + b',"html":"<b>"}', "html")
    content_case("content_repeated_member", "body appears twice", canon[:-1] + b',"body":"at midnight"}', "body")
    content_case("content_no_ctr", "the document has no ctr", canon.replace(b'"ctr":1,', b""), "ctr")
    content_case("content_ctr_zero", "ctr 0", canon.replace(b'"ctr":1', b'"ctr":0'), "ctr")
    content_case("content_ts_string", "ts a string", canon.replace(b'"ts":%d' % TS, b'"ts":"%d"' % TS), "ts")
    content_case(
        "content_ref_short",
        "a reply whose ref is 21 characters",
        b'{"body":"yes","ctr":1,"ref":"' + REF[:-1].encode() + b'","t":"reply","ts":1}',
        "ref",
    )
    content_case(
        "content_att_key_short",
        "an attachment whose key is 16 bytes",
        content.canonical(content.Attachment(ATT, "", ts=TS, ctr=1)).replace(ATT.key.encode(), REF.encode()),
        "att.key",
    )
    expiring = content.encode(content.Text("gone soon", ts=TS, ctr=1, exp=TS + 60_000))
    content_case("content_exp_without_xp", "the document expires but the header's xp is 0", expiring, "exp")
    content_case(
        "content_xp_without_exp",
        "xp set in the header, no exp in the document",
        padded,
        "exp",
        xp=envelope.expiry_hint(TS + 60_000),
    )
    # -- v2 members: epoch, membership hash, key commitment
    add(
        "ep_negative",
        "ep -1; sender-signed",
        header_edit(lambda h: h.__setitem__("ep", -1)),
        "EnvelopeMalformed",
        "envelope_malformed",
        "ep",
    )
    add(
        "ep_too_large",
        "ep 2**53; sender-signed",
        header_edit(lambda h: h.__setitem__("ep", 2**53)),
        "EnvelopeMalformed",
        "envelope_malformed",
        "ep",
    )
    add(
        "mh_short",
        "mh of 42 characters; sender-signed",
        header_edit(lambda h: h.__setitem__("mh", "M" * 42)),
        "EnvelopeMalformed",
        "envelope_malformed",
        "mh",
    )
    add(
        "kc_padded",
        "kc with '=' padding; sender-signed",
        header_edit(lambda h: h.__setitem__("kc", h["kc"][:-1] + "=")),
        "Base64Invalid",
        "base64_invalid",
        "kc",
    )
    add(
        "kc_for_another_key_signed",
        "kc commits to another key than the one wrapped; sender-signed",
        header_edit(lambda h: h.__setitem__("kc", key_commitment(det("neg/other-cek", 32)))),
        "KeyCommitmentInvalid",
        "key_commitment_invalid",
        "kc",
    )
    add(
        "other_key_wrapped_for_me_signed",
        "bob's entry wraps another 32-byte key than the committed one (an equivocating sender); sender-signed",
        build(alice, rcpts, pt, wrap_keys={"bob": det("neg/k2", 32)}, **base_kw),
        "KeyCommitmentInvalid",
        "key_commitment_invalid",
        "kc",
    )
    add(
        "kc_rewritten",
        "kc rewritten (not re-signed)",
        protected_swap(lambda h: h.__setitem__("kc", key_commitment(det("neg/other-cek", 32)))),
        "SignatureInvalid",
        "signature_invalid",
        "sig",
    )
    add(
        "too_large",
        "an envelope over the receiver's limit (max_bytes 1024)",
        good,
        "EnvelopeTooLarge",
        "envelope_too_large",
        "envelope",
        max_bytes=1024,
    )
    return {
        "notice": NOTICE,
        "about": "One tampered envelope per kind. Open with context.me's key, context.pinned's "
        "signing key, delivered in context.conversation from context.sender (and "
        "context.max_bytes when given); the result must be the named error.",
        "base": compact_json(good).decode(),
        "base_plaintext": b64u(pt),
        "vectors": vectors,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-keys", action="store_true", help="draw new test keys (keys.json, key_pool.json)")
    args = ap.parse_args()
    if args.new_keys or not (VECTORS_DIR / "keys.json").exists():
        new_keys()
        identities.cache_clear()
        relay_private.cache_clear()
    else:  # refresh derived public forms (kids, fingerprints) from the committed private keys
        data = load("keys.json")
        ids = identities()
        data["users"] = {n: user_entry(ids[n]) for n in data["users"]}
        data["relay"] = {"username": "relay", **wrap_entry(relay_private())}
        write("keys.json", data)
    ids = identities()
    write("safety.json", safety_vectors(ids))
    write("l4.json", l4_vectors(ids))
    write("l4_negative.json", l4_negative(ids))
    write("l3.json", l3_vectors())
    write("membership.json", membership_vectors(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
