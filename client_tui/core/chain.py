"""Checking a contact's key chain: is a changed key the newest of rotations the pinned key signed?

The relay keeps every key a user published, oldest first, each with the rotation statement
(:mod:`shared.rotation`) signed by the key before it and the relay sequence at which it was
published. The relay stores and forwards; the client decides (DESIGN §10):

* a changed key counts as *signed by the old one* only if every link from the pinned keys to it
  verifies (v2 statements name the user, the replaced key ids and the counter, which must be the
  row's index; legacy v1 links are checked as they were made) and it is the newest key;
* a key that is one the client already replaced, or older in the chain than a key it has seen,
  is a **rollback**: refused, nothing pinned;
* for each verified link, the replaced signing key is *retired after* the link's
  ``published_seq``: messages the relay stored later and signed by it are refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from shared import rotation
from shared.b64 import b64u_decode
from shared.errors import E2EEError, InvalidRequest
from shared.keys import PublicIdentity

from .trust import Contact

log = logging.getLogger("e2ee.client")


@dataclass(frozen=True)
class Verdict:
    """What the key history says about a served key.

    Attributes:
        signed: True (a verified chain from the pinned keys to it, and it is the newest), False
            (no such chain: a substitution is possible), None (the relay gave no usable history).
        rollback: the served key is older than keys already seen for this contact.
        retired_after: sign key id -> published_seq of its verified successor.
        counter: the served key's place in the chain (None if not found).
    """

    signed: bool | None
    rollback: bool = False
    retired_after: dict[str, int | None] = field(default_factory=dict)
    counter: int | None = None


@dataclass(frozen=True)
class _Row:
    ident: PublicIdentity
    sig: bytes | None
    version: int | None
    published_seq: int | None


def _rows(doc: dict, username: str) -> list[_Row]:
    if not isinstance(doc, dict) or doc.get("username") != username:
        raise InvalidRequest("key history for another user", field="username")
    out = []
    for k in doc["keys"]:
        if k.get("username") != username:
            raise InvalidRequest("key history row for another user", field="username")
        sig = b64u_decode(k["rotation_sig"], "rotation_sig") if k.get("rotation_sig") else None
        seq = k.get("published_seq")
        out.append(
            _Row(
                PublicIdentity.from_json(k),
                sig,
                k.get("rotation_v"),
                seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
            )
        )
    return out


def link_ok(rows: list[_Row], i: int, username: str) -> bool:
    """Does row ``i``'s statement verify under row ``i - 1``'s signing key?"""
    prev, row = rows[i - 1].ident, rows[i]
    if row.sig is None:
        return False
    try:
        if row.version == 2:
            rotation.verify(
                prev.sign_key,
                rotation.Rotation(
                    username, (prev.wrap_kid, prev.sign_kid), (row.ident.wrap_kid, row.ident.sign_kid), i
                ),
                row.sig,
            )
        elif row.version in (1, None):
            rotation.verify_v1(prev.sign_key, row.ident.wrap_kid, row.ident.sign_kid, row.sig)
        else:
            return False
    except E2EEError:
        return False
    return True


def _index(rows: list[_Row], kids: tuple[str, str]) -> int | None:
    for i, r in enumerate(rows):
        if (r.ident.wrap_kid, r.ident.sign_kid) == kids:
            return i
    return None


async def judge(client, contact: Contact, served: PublicIdentity) -> Verdict:
    """Judge ``served`` (keys the relay now answers for ``contact``) against the key history.

    Records on ``contact`` what the verified part of the chain proves (retired keys, the newest
    counter) - facts about keys, whatever the user decides.
    """
    name, kids = served.username, (served.wrap_kid, served.sign_kid)
    if any((p.wrap_kid, p.sign_kid) == kids for p in contact.previous):
        return Verdict(False, rollback=True)
    try:
        doc = await client.rest.request("GET", f"/v1/users/{name}/keys/history")
        await client.transparency.check_history(name, doc)  # every key of the chain is in the log
        rows = _rows(doc, name)
    except (E2EEError, KeyError, TypeError, AttributeError) as exc:
        log.info("no usable key history for %s: %s", name, getattr(exc, "code", type(exc).__name__))
        return Verdict(None)
    start, end = _index(rows, contact.kids), _index(rows, kids)
    if end is not None and contact.newest_rotation is not None and end < contact.newest_rotation:
        return Verdict(False, rollback=True, counter=end)
    if start is not None and end is not None and end < start:
        return Verdict(False, rollback=True, counter=end)
    if start is None or end is None or end != len(rows) - 1:
        return Verdict(False, counter=end)
    retired: dict[str, int | None] = {}
    for i in range(start + 1, end + 1):
        if not link_ok(rows, i, name):
            log.warning("key chain of %s: link %d does not verify", name, i)
            return Verdict(False, counter=end)
        retired[rows[i - 1].ident.sign_kid] = rows[i].published_seq
    contact.retired_after.update(retired)
    contact.newest_rotation = max(end, contact.newest_rotation or 0)
    return Verdict(True, retired_after=retired, counter=end)
