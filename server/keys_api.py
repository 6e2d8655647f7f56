"""REST: accounts and the key directory (register, a user's current keys and key history, key
rotation, the caller's envelopes still outstanding per wrap key) and, at level 3, the relay's own
key."""

from __future__ import annotations

import logging

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shared import frames, keys, kt, rotation
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import (
    AuthFailed,
    Conflict,
    E2EEError,
    InvalidRequest,
    KeyInvalid,
    NotFound,
)
from shared.names import canonical_username
from shared.strictjson import check_kid

from . import queries, store
from .models import UserKey
from .web import State
from .web import claims_of as _claims
from .web import client_address as _peer
from .web import json_response as _json
from .web import read_body as _body
from .web import state as _state

log = logging.getLogger("e2ee.relay.http")
MAX_OUTSTANDING_KIDS = 16
"""The most ``wrap_kid`` parameters one ``GET /v1/keys/outstanding`` may ask about."""


class RegisterBody(msgspec.Struct, forbid_unknown_fields=True):
    username: str
    password: str
    wrap_key: str  # b64url SPKI DER (RSA 2048-4096, e = 65537)
    sign_key: str  # b64url SPKI DER (Ed25519)


class RotateBody(msgspec.Struct, forbid_unknown_fields=True):
    wrap_key: str  # b64url SPKI DER
    sign_key: str  # b64url SPKI DER
    counter: int  # this rotation's place in the user's chain: 1 for the first (shared.rotation, v2)
    signature: str  # b64url Ed25519 by the current signing key over shared.rotation.Rotation(...).statement()


async def _load_keys(body: RegisterBody | RotateBody, username: str) -> keys.PublicIdentity:
    try:
        wrap = keys.load_wrap_public_key(b64u_decode(body.wrap_key, "wrap_key"), username)
        sign = keys.load_signing_public_key(b64u_decode(body.sign_key, "sign_key"), username)
    except KeyInvalid:
        raise  # its precise code (key_size_refused, key_exponent_refused, ...) reaches the client
    except E2EEError as exc:
        raise KeyInvalid(exc.message, field=exc.field) from None
    return keys.PublicIdentity(username, wrap, sign)


async def relay_key(request: Request) -> Response:
    """Level 3: the relay's RSA public key (SPKI DER, b64url) and its key id, for clients to pin."""
    levels = _state(request).relay.levels
    if levels.relay_key_b64 is None or levels.relay_private is None:
        raise NotFound(f"this relay runs level {_state(request).settings.level}: it has no L3 key")
    return _json({"relay_key": levels.relay_key_b64, "kid": keys.key_id(levels.relay_private.public_key())})


async def register(request: Request) -> Response:
    """Create an account with its first keys: ``{"username", "password", "wrap_key", "sign_key"}``
    (keys as b64url SPKI DER) -> 201 ``{"username", "wrap_kid", "sign_kid"}``."""
    st = _state(request)
    st.limits.registrations.check(_peer(request))
    body = await _body(request, RegisterBody)
    username = canonical_username(body.username)
    ident = await _load_keys(body, username)
    password_hash = await st.passwords.hash(body.password)
    await st.writer.run(
        store.add_user(
            username,
            password_hash,
            ident.wrap_kid,
            keys.spki_der(ident.wrap_key),
            ident.sign_kid,
            keys.spki_der(ident.sign_key),
        )
    )
    log.info("registered user=%s wrap_bits=%d", username, ident.wrap_key.key_size)
    return _json({"username": username, "wrap_kid": ident.wrap_kid, "sign_kid": ident.sign_kid}, 201)


def _key_json(username: str, row: UserKey) -> dict[str, object]:
    return {
        "username": username,
        "wrap_key": b64u_encode(row.wrap_key),
        "sign_key": b64u_encode(row.sign_key),
        "wrap_kid": row.wrap_kid,
        "sign_kid": row.sign_kid,
    }


def _key_fetch(request: Request) -> tuple[State, str]:
    """The relay's state and the canonical username a key fetch asks for, once the caller's
    key-fetch rate allows it (RateLimited otherwise; AuthFailed without a valid token)."""
    claims = _claims(request)
    st = _state(request)
    st.limits.key_fetches.check(claims.sub)
    return st, canonical_username(request.path_params["username"])


def _with_proof(doc: dict[str, object], row: UserKey, proofs: dict[int, kt.Inclusion]) -> dict[str, object]:
    """``doc`` with ``"kt"``: the key row's inclusion proof to a signed head (§14); a row the log
    does not hold yet goes without, and clients refuse it."""
    proof = proofs.get(row.id)
    if proof is None:
        log.warning("key row %d is not in the key transparency log", row.id)
        return doc
    return {**doc, "kt": proof.to_json()}


async def user_keys(request: Request) -> Response:
    """The user's current keys (``{"username", "wrap_key", "sign_key", "wrap_kid", "sign_kid",
    "kt"}``, ``kt`` the inclusion proof of their log leaf to a signed tree head, §14)."""
    st, username = _key_fetch(request)
    async with st.sessions() as session:
        row = await queries.current_keys(session, username)
    return _json(_with_proof(_key_json(username, row), row, await st.kt.inclusions([row.id])))


async def user_key_history(request: Request) -> Response:
    """Every key the user published, oldest first, each with the rotation signature (b64url or null)
    made by the signing key before it, the statement's version, its counter (the row's index),
    ``published_seq`` (the highest message seq stored when it was published; null for first keys)
    and ``kt`` (its log leaf's inclusion proof; one signed head for all keys of the answer)."""
    st, username = _key_fetch(request)
    async with st.sessions() as session:
        rows = await queries.key_history(session, username)
    if not rows:
        raise NotFound(f"no user {username!r}", field="username")
    proofs = await st.kt.inclusions([r.id for r in rows])
    return _json(
        {
            "username": username,
            "keys": [
                _with_proof(
                    {
                        **_key_json(username, r),
                        "current": r.current,
                        "created_at_ms": r.created_at_ms,
                        "rotation_sig": b64u_encode(r.rotation_sig) if r.rotation_sig else None,
                        "rotation_v": r.rotation_v if r.rotation_sig else None,
                        "counter": i,
                        "published_seq": r.published_seq,
                    },
                    r,
                    proofs,
                )
                for i, r in enumerate(rows)
            ],
        }
    )


async def rotate_keys(request: Request) -> Response:
    """Publish new keys under a v2 rotation statement (shared.rotation) signed by the current
    signing key, naming the user, the current key ids and the next counter; members are told by a
    key_changed event. Answers the ``published_seq`` recorded with the new keys."""
    claims = _claims(request)
    st = _state(request)
    body = await _body(request, RotateBody)
    new = await _load_keys(body, claims.sub)
    async with st.sessions() as session:
        history = await queries.key_history(session, claims.sub)
        user = await queries.get_user(session, claims.sub)
    old = next((r for r in history if r.current), None)
    if user is None or old is None:
        raise NotFound(f"{claims.sub} has no keys to rotate", field="wrap_key")
    if body.counter != len(history):
        raise Conflict(f"rotation counter {body.counter}: the next one is {len(history)}", field="counter")
    statement = rotation.Rotation(claims.sub, (old.wrap_kid, old.sign_kid), (new.wrap_kid, new.sign_kid), body.counter)
    sig = b64u_decode(body.signature, "signature")
    rotation.verify(keys.load_signing_public_key(old.sign_key, claims.sub), statement, sig)
    st.relay.forget_members()
    published = await st.writer.run(
        store.rotate_keys(
            user.id,
            new.wrap_kid,
            keys.spki_der(new.wrap_key),
            new.sign_kid,
            keys.spki_der(new.sign_key),
            sig,
            old_wrap_kid=old.wrap_kid,
            counter=body.counter,
        )
    )
    async with st.sessions() as session:
        peers = await queries.peers_of(session, user.id)
    st.relay.forget_members()
    st.relay.notify(peers, frames.Event("key_changed", user=claims.sub))
    log.info(
        "keys rotated user=%s counter=%d published_seq=%d peers=%d", claims.sub, body.counter, published, len(peers)
    )
    return _json(
        {"wrap_kid": new.wrap_kid, "sign_kid": new.sign_kid, "counter": body.counter, "published_seq": published}
    )


def _outstanding_kids(request: Request) -> list[str]:
    """The ``wrap_kid`` query parameters: 1 to :data:`MAX_OUTSTANDING_KIDS` key ids, each 43
    canonical b64url characters (repeats allowed, answered once).

    Raises:
        InvalidRequest: none, too many, or one that is not a key id (``field`` "wrap_kid"; the
            message names its position, never echoes it).
    """
    kids = request.query_params.getlist("wrap_kid")
    if not 1 <= len(kids) <= MAX_OUTSTANDING_KIDS:
        raise InvalidRequest(f"wrap_kid: 1 to {MAX_OUTSTANDING_KIDS} key ids, {len(kids)} given", field="wrap_kid")
    for i, kid in enumerate(kids):
        try:
            check_kid(kid, "wrap_kid")
        except E2EEError:
            raise InvalidRequest(
                f"wrap_kid #{i + 1}: a key id is 43 base64url characters (unpadded SHA-256)", field="wrap_kid"
            ) from None
    return kids


async def outstanding(request: Request) -> Response:
    """``GET /v1/keys/outstanding?wrap_kid=KID[&wrap_kid=KID2…]`` (level 4, Bearer) ->
    ``{"username", "outstanding": {KID: n}}``: for each key id asked, how many envelopes the relay
    still stores for the caller, not acknowledged by the caller, wrapped to that key, a delivery
    stored before migration 0011 counted for every key (:func:`server.queries.outstanding`). A
    client deletes a retired private key only once its count is 0 (forward secrecy).

    Raises:
        InvalidRequest: the relay is not at level 4 (``field`` "level"), or a bad ``wrap_kid`` list.
        AuthFailed / SessionEnded: no valid token, or its session is over; its subject is unknown.
        RateLimited: more than the key-fetch rate.
    """
    st = _state(request)
    if st.settings.level != 4:
        raise InvalidRequest(
            f"this relay runs level {st.settings.level}: outstanding envelopes per wrap key are a level-4 question",
            field="level",
        )
    claims = _claims(request)
    st.limits.key_fetches.check(claims.sub)
    kids = _outstanding_kids(request)
    async with st.sessions() as session:
        user = await queries.get_user(session, claims.sub)
        if user is None:
            raise AuthFailed("token subject is unknown", field="sub")
        counts = await queries.outstanding(session, user.id, kids)
    log.debug("outstanding user=%s kids=%d counts=%s", claims.sub, len(counts), sorted(counts.values()))
    return _json({"username": claims.sub, "outstanding": counts})
