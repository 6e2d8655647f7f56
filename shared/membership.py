"""The membership log: who is in a conversation, decided by statements its members sign.

docs/PROTOCOL.md §12 is the normative text. In short:

* A **statement** is a JSON object in canonical form (RFC 8785 JCS for the values used here:
  members sorted by name, no whitespace, UTF-8) naming the conversation ``cid``, its epoch ``ep``
  (0 for the creation, then +1 per change), the ``op``, the ``actor`` and its signing key id
  ``akid``, the resulting state (``members`` with each member's wrap and signing key ids,
  ``title``, ``admins``) and ``prev``, the hash of the previous statement.
* Its **signed form** is ASCII ``b64url(body) "." b64url(sig)``, where ``sig`` is Ed25519
  (RFC 8032) by the actor over ``"e2ee-chat/v1/membership." + b64url(body)``. Its **hash** is
  ``b64url(SHA-256(signed form))`` (43 characters): the next statement's ``prev``, and the ``mh``
  an envelope sealed to that epoch carries.
* A statement follows its predecessor if: same ``cid``; ``ep`` = previous + 1; ``prev`` = the
  previous hash; the actor is a member of the previous epoch with signing key id ``akid`` there;
  the signature verifies under that key; and the change is the one ``op`` names, by an actor the
  policy allows (``shared.membership_chain.verify_next``).

Members' key ids are bound in each statement (as MLS binds leaf keys): the relay cannot choose a
newcomer's key for the others, and an envelope's recipients are checked against exact key ids.
A member who rotates keys moves them into each conversation with an ``update`` statement signed
by the key it replaces.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from . import digests
from .b64 import b64u_decode, b64u_encode
from .errors import E2EEError, InvalidRequest, StatementMalformed
from .keys import Identity, PublicIdentity
from .strictjson import MAX_SAFE_INTEGER

__all__ = [
    "MAX_MEMBERS",
    "MAX_STATEMENT_BYTES",
    "MAX_TITLE_CHARS",
    "Member",
    "OPS",
    "SIG_CONTEXT",
    "Statement",
    "TYP",
    "VERSION",
    "CID_PATTERN",
    "change",
    "check_conversation_id",
    "create",
    "member_of",
    "parse",
    "signing_input",
    "statement_hash",
]

VERSION = 1
TYP = "e2ee-chat/membership"
SIG_CONTEXT = b"e2ee-chat/v1/membership"
OPS = ("create", "add", "remove", "title", "admins", "update")
MAX_MEMBERS = 256
MAX_TITLE_CHARS = 200
MAX_STATEMENT_BYTES = 64 * 1024
"""Largest signed form, in bytes (256 members with their key ids take about 45 KiB)."""

CID_PATTERN = r"(?!\.\.?\Z)[A-Za-z0-9._-]{1,64}"
"""A conversation id: 1-64 of ASCII letters, digits, ``.``, ``_``, ``-``, but not ``.`` or ``..``
(it goes into URL paths, where those two are path steps)."""
_CID_RE = re.compile(CID_PATTERN)
_USER_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{2,31}")
_KID_RE = re.compile(r"[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]")
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")


class Member(NamedTuple):
    """One member of an epoch: canonical username, wrap key id, signing key id (43 chars each)."""

    username: str
    wrap_kid: str
    sign_kid: str


def member_of(identity: PublicIdentity) -> Member:
    """The :class:`Member` entry binding ``identity``'s current key ids."""
    return Member(identity.username, identity.wrap_kid, identity.sign_kid)


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    sk: str
    u: str
    wk: str


class _Body(msgspec.Struct, forbid_unknown_fields=True):
    actor: str
    admins: list[str] | None
    akid: str
    cid: str
    ep: int
    members: list[_Entry]
    op: str
    prev: str | None
    title: str
    ts: int
    typ: str
    v: int


_decoder = msgspec.json.Decoder(_Body)


@dataclass(frozen=True)
class Statement:
    """A parsed (well-formed, not yet verified) membership statement.

    Attributes:
        cid, ep, op, actor, akid, title, ts, prev: as in the body (``prev`` None for a creation).
        members: the resulting members, sorted by username.
        admins: None (every member may change membership) or the sorted usernames allowed to.
        signed: the signed form (ASCII); ``hash``: b64url SHA-256 of it (43 chars).
        body_b64, sig: the two parts (``sig``: 64 bytes).
    """

    cid: str
    ep: int
    op: str
    actor: str
    akid: str
    members: tuple[Member, ...]
    admins: tuple[str, ...] | None
    title: str
    prev: str | None
    ts: int
    signed: str
    hash: str
    body_b64: str
    sig: bytes

    @property
    def usernames(self) -> tuple[str, ...]:
        return tuple(m.username for m in self.members)

    @property
    def wrap_kids(self) -> list[str]:
        """The members' wrap key ids in member order: an envelope sealed to this epoch has exactly
        these ``rkids``, in this order."""
        return [m.wrap_kid for m in self.members]

    def member(self, username: str) -> Member | None:
        return next((m for m in self.members if m.username == username), None)


def _canonical(body: dict[str, object]) -> bytes:
    """RFC 8785 (JCS) for these values: sorted keys, no whitespace, UTF-8, integers < 2**53."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def signing_input(body_b64: str) -> bytes:
    """The bytes the actor signs: ASCII ``"e2ee-chat/v1/membership." + body_b64``."""
    return SIG_CONTEXT + b"." + body_b64.encode("ascii")


def statement_hash(signed: str) -> str:
    """b64url(SHA-256(ASCII of the signed form)), 43 characters."""
    return b64u_encode(digests.sha256(signed.encode("ascii")))


def _bad(message: str, field: str) -> StatementMalformed:
    return StatementMalformed(message, field=field)


def _check_kid(value: str, field: str) -> None:
    if not _KID_RE.fullmatch(value):
        raise _bad(f"{field}: a key id is 43 canonical base64url characters", field)


def _check_user(value: str, field: str) -> None:
    if not _USER_RE.fullmatch(value):
        raise _bad(f"{field}: not a canonical username (3-32 of a-z 0-9 _ . -)", field)


def _check_body(b: _Body) -> None:
    if b.v != VERSION or b.typ != TYP:
        raise _bad(f"v/typ must be {VERSION}/{TYP}", "v")
    if b.op not in OPS:
        raise _bad(f"op must be one of {', '.join(OPS)}", "op")
    if not _CID_RE.fullmatch(b.cid):
        raise _bad("cid: 1-64 characters from A-Z a-z 0-9 . _ -", "cid")
    if not 0 <= b.ep <= MAX_SAFE_INTEGER or not 0 <= b.ts <= MAX_SAFE_INTEGER:
        raise _bad("ep and ts must be in 0..2**53-1", "ep")
    _check_user(b.actor, "actor")
    _check_kid(b.akid, "akid")
    if b.prev is not None:
        _check_kid(b.prev, "prev")
    if not 1 <= len(b.members) <= MAX_MEMBERS:
        raise _bad(f"members: 1-{MAX_MEMBERS} entries", "members")
    names = [m.u for m in b.members]
    for m in b.members:
        _check_user(m.u, "members")
        _check_kid(m.wk, "members")
        _check_kid(m.sk, "members")
    if any(x.encode() >= y.encode() for x, y in zip(names, names[1:], strict=False)):
        raise _bad("members must be sorted by username, each once", "members")
    if len({m.wk for m in b.members}) != len(b.members):
        raise _bad("a wrap key id belongs to two members", "members")
    if b.admins is not None:
        if any(x.encode() >= y.encode() for x, y in zip(b.admins, b.admins[1:], strict=False)):
            raise _bad("admins must be sorted, each once", "admins")
        if not set(b.admins) <= set(names):
            raise _bad("admins must be members", "admins")
    if not 1 <= len(b.title) <= MAX_TITLE_CHARS or _CONTROL_RE.search(b.title):
        raise _bad(f"title: 1-{MAX_TITLE_CHARS} characters, no control characters", "title")


def parse(signed: str | bytes) -> Statement:
    """Check a statement's form (no signature, no chain): encoding, canonical JSON, field rules.

    Args:
        signed: the signed form, ``b64url(body) "." b64url(sig)`` (ASCII; at most 64 KiB).

    Returns:
        The :class:`Statement`, with its hash.

    Raises:
        StatementMalformed: too large, not two parts, bad base64url, a signature not 64 bytes,
            not the strict shape, not in canonical form, or a field out of its rules (the
            ``field`` names it).
    """
    if isinstance(signed, bytes | bytearray):
        try:
            signed = bytes(signed).decode("ascii")
        except UnicodeDecodeError:
            raise _bad("statement must be ASCII", "statement") from None
    if not isinstance(signed, str):
        raise _bad("statement must be a string", "statement")
    if len(signed) > MAX_STATEMENT_BYTES:
        raise _bad(f"statement is over {MAX_STATEMENT_BYTES} bytes", "statement")
    parts = signed.split(".")
    if len(parts) != 2:
        raise _bad("statement must be body.signature", "statement")
    body_b64, sig_b64 = parts
    try:
        body_bytes = b64u_decode(body_b64, "body")
        sig = b64u_decode(sig_b64, "sig")
    except E2EEError as exc:
        raise _bad(exc.message, exc.field or "statement") from None
    if len(sig) != 64:
        raise _bad("sig must be 64 bytes (Ed25519)", "sig")
    try:
        body = _decoder.decode(body_bytes)
        canonical = _canonical(msgspec.to_builtins(body))
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError) as exc:
        raise _bad(f"body is not a statement: {exc}", "body") from None
    if canonical != body_bytes:
        raise _bad("body is not in canonical form (sorted members, no whitespace, UTF-8)", "body")
    _check_body(body)
    return Statement(
        cid=body.cid,
        ep=body.ep,
        op=body.op,
        actor=body.actor,
        akid=body.akid,
        members=tuple(Member(m.u, m.wk, m.sk) for m in body.members),
        admins=tuple(body.admins) if body.admins is not None else None,
        title=body.title,
        prev=body.prev,
        ts=body.ts,
        signed=signed,
        hash=statement_hash(signed),
        body_b64=body_b64,
        sig=sig,
    )


def _sign(
    actor: Identity,
    *,
    cid: str,
    ep: int,
    op: str,
    members: Iterable[Member],
    title: str,
    admins: Iterable[str] | None,
    prev: str | None,
    ts: int | None,
) -> Statement:
    ordered = sorted(set(members), key=lambda m: m.username.encode())
    body = {
        "v": VERSION,
        "typ": TYP,
        "cid": cid,
        "ep": ep,
        "op": op,
        "actor": actor.username,
        "akid": actor.sign_kid,
        "members": [{"u": m.username, "wk": m.wrap_kid, "sk": m.sign_kid} for m in ordered],
        "admins": sorted(set(admins), key=str.encode) if admins is not None else None,
        "title": title,
        "prev": prev,
        "ts": int(time.time() * 1000) if ts is None else ts,
    }
    body_b64 = b64u_encode(_canonical(body))
    sig = actor.sign_private.sign(signing_input(body_b64))
    return parse(f"{body_b64}.{b64u_encode(sig)}")


def create(
    actor: Identity,
    cid: str,
    title: str,
    members: Sequence[Member],
    *,
    admins: Sequence[str] | None = None,
    ts: int | None = None,
) -> Statement:
    """The creation statement (epoch 0) of ``cid``, signed by ``actor`` (who must be in ``members``).

    Raises:
        StatementMalformed: a field breaks its rules (ids, title, more than 256 members, ...).
    """
    return _sign(actor, cid=cid, ep=0, op="create", members=members, title=title, admins=admins, prev=None, ts=ts)


_KEEP = object()


def change(
    prev: Statement,
    actor: Identity,
    op: str,
    *,
    add: Sequence[Member] = (),
    remove: Sequence[str] = (),
    title: str | None = None,
    admins: Sequence[str] | None | object = _KEEP,
    keys: Member | None = None,
    ts: int | None = None,
) -> Statement:
    """The statement after ``prev`` that makes one change, signed by ``actor``.

    Args:
        op: ``add`` (the ``add`` entries), ``remove`` (the ``remove`` usernames; admins lose them
            too), ``title`` (``title``), ``admins`` (``admins``: a list, or None for "every
            member"), or ``update`` (``keys``: the actor's new key ids).

    Raises:
        StatementMalformed: the result breaks a field rule. (The policy is checked by
        ``membership_chain.verify_next``, which the relay and every member run.)
    """
    members = {m.username: m for m in prev.members}
    new_admins = prev.admins
    if op == "add":
        members.update({m.username: m for m in add})
    elif op == "remove":
        for name in remove:
            members.pop(name, None)
        new_admins = None if prev.admins is None else tuple(a for a in prev.admins if a in members)
    elif op == "admins":
        new_admins = admins if admins is not _KEEP else prev.admins  # type: ignore[assignment]
    elif op == "update" and keys is not None:
        members[actor.username] = keys
    elif op not in ("title", "update"):
        raise ValueError(f"unknown op {op!r}")
    return _sign(
        actor,
        cid=prev.cid,
        ep=prev.ep + 1,
        op=op,
        members=members.values(),
        title=title if op == "title" and title is not None else prev.title,
        admins=new_admins,
        prev=prev.hash,
        ts=ts,
    )


def check_conversation_id(cid: object) -> str:
    """``cid`` if it is a conversation id (:data:`CID_PATTERN`: 1-64 ASCII letters, digits, ``.``,
    ``_``, ``-``), whoever gave it (the user, a relay's answer) — it goes into URL paths.

    Raises:
        InvalidRequest (``field`` ``conversation``): anything else (shown cut and escaped, never as is).
    """
    if isinstance(cid, str) and _CID_RE.fullmatch(cid):
        return cid
    shown = repr(cid)[:40]
    raise InvalidRequest(
        f"{shown} is not a conversation id (1-64 letters, digits, '.', '_', '-')", field="conversation"
    )
