"""The user's own membership changes, as signed statements (docs/PROTOCOL.md §12), and the
conversation list, decided by the verified logs.

Every change is built on the newest verified head, signed with the user's key, posted, and
verified again like anyone else's; if another member changed the log first (``membership_conflict``)
the log is fetched, verified, and the change is made again on the new head.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from shared import membership
from shared.b64 import b64u_encode
from shared.errors import ErrorCode, InvalidRequest, MembershipFork, MembershipWithheld
from shared.membership import Statement, member_of
from shared.names import canonical_username

from . import membership_lines as lines
from .errors import NOT_ANSWERED, ClientError
from .events import ConversationsChanged

if TYPE_CHECKING:
    from .membership import Membership

log = logging.getLogger("e2ee.client.membership")
POST_ATTEMPTS = 3


async def _post(ms: Membership, cid: str, build: Callable[[Statement], Statement | None]) -> Statement | None:
    """Build a statement on the verified head, post it; on a concurrent change, again on the new
    head. ``build`` returns None when there is nothing left to change."""
    for attempt in range(POST_ATTEMPTS):
        chain = await ms.sync(cid)
        if chain.head is None:
            raise ClientError("this conversation's membership log does not verify", code=ErrorCode.MEMBERSHIP_INVALID)
        st = build(chain.head)
        if st is None:
            return None
        try:
            path = f"/v1/conversations/{membership.check_conversation_id(cid)}/log"
            await ms.client.rest.request("POST", path, {"statement": st.signed})
        except ClientError as exc:
            if exc.code == ErrorCode.MEMBERSHIP_CONFLICT and attempt < POST_ATTEMPTS - 1:
                continue
            raise
        await ms.apply_own(st)  # my verified head now, whatever the relay shows next
        await ms.sync(cid)
        return st
    return None


def _me(ms: Membership):
    assert ms.client.identity is not None
    return ms.client.identity


async def _members_for(ms: Membership, users: Sequence[str]) -> list[membership.Member]:
    """Entries for ``users``, with the keys this user pinned for them (fetched and pinned on first
    use; MemberWithoutKey for one who has none)."""
    out = []
    for user in dict.fromkeys(users):
        contact = ms.client.contacts.get(user)
        ident = contact.identity if contact is not None else await ms.client._fetch_for_send(user)
        out.append(member_of(ident))
    return out


async def create(ms: Membership, title: str, users: Sequence[str], admins: Sequence[str] | None = None) -> str:
    """Create a conversation with ``users`` (I am added): a creation statement with a fresh
    random id; returns the id.

    Raises:
        MemberWithoutKey, ClientError (``not_found`` for unknown users), StatementMalformed (a bad
        title: 1-200 characters, no control characters), InvalidRequest (not a valid username).
    """
    c = ms.client
    users = [canonical_username(u) for u in users]
    others = await _members_for(ms, [u for u in users if u != c.username])
    cid = b64u_encode(os.urandom(16))
    st = membership.create(_me(ms), cid, title.strip(), [member_of(_me(ms).public), *others], admins=admins)
    await c.rest.request("POST", "/v1/conversations", {"statement": st.signed})
    await ms.apply_own(st)
    await ms.sync(cid)
    if c.history is not None:
        await c.history.save_conversations([(cid, st.title, list(st.usernames))])
    await c.events.put(ConversationsChanged(cid))
    return cid


async def change_members(ms: Membership, cid: str, add: Sequence[str] = (), remove: Sequence[str] = ()) -> list[str]:
    """Add and/or remove members (one statement each); returns the members after.

    Raises:
        MemberWithoutKey, ClientError (``not_found``, ``forbidden``, ``policy_violation`` when I am
        not an admin, ...).
    """
    c = ms.client
    add, remove = [canonical_username(u) for u in add], [canonical_username(u) for u in remove]
    await ms.sync(cid)
    before = set(c.members.get(cid, []))
    entries = await _members_for(ms, [u for u in add if u not in before])
    if entries:
        await _post(
            ms,
            cid,
            lambda h: (
                membership.change(h, _me(ms), "add", add=[e for e in entries if h.member(e.username) is None])
                if any(h.member(e.username) is None for e in entries)
                else None
            ),
        )
    gone = [u for u in remove if u in before or u == c.username]
    if gone:
        await _post(
            ms,
            cid,
            lambda h: (
                membership.change(h, _me(ms), "remove", remove=[u for u in gone if h.member(u)])
                if any(h.member(u) for u in gone)
                else None
            ),
        )
    after = c.members.get(cid, [])
    if c.history is not None:
        await c.history.save_conversations([(cid, c.titles.get(cid, cid), after)])
    await c.events.put(
        ConversationsChanged(cid, tuple(sorted(set(after) - before)), tuple(sorted(before - set(after))))
    )
    return after


async def rename(ms: Membership, cid: str, title: str) -> None:
    """Change the conversation's title (a ``title`` statement)."""
    title = title.strip()
    await _post(ms, cid, lambda h: membership.change(h, _me(ms), "title", title=title) if h.title != title else None)


async def set_admins(ms: Membership, cid: str, admins: Sequence[str] | None) -> None:
    """Allow only ``admins`` (or, with None, every member) to add, remove and rename."""
    want = tuple(sorted(admins, key=str.encode)) if admins is not None else None
    await _post(ms, cid, lambda h: membership.change(h, _me(ms), "admins", admins=admins) if h.admins != want else None)


async def update_keys(ms: Membership, cid: str | None = None) -> int:
    """After a key rotation: in each conversation (or ``cid``) whose verified head binds other
    keys for me, an ``update`` statement, signed with the key the log binds, moves my new keys
    in. Returns how many were posted."""
    from shared.keys import Identity

    c = ms.client
    n = 0
    for conv in [cid] if cid else list(ms.chains):
        head = ms.head(conv)
        mine = head.member(c.username) if head is not None else None
        if mine is None or c.identity is None or mine == member_of(c.identity.public):
            continue
        signer = next((i for i in (c.identity, *c.retired) if i.sign_kid == mine.sign_kid), None)
        if signer is None:
            log.warning("no key of mine signs for epoch %d of %s: cannot move my new keys in", head.ep, conv)
            continue
        as_old = Identity(c.username, signer.wrap_private, signer.sign_private)
        try:
            if await _post(
                ms,
                conv,
                lambda h, o=as_old: (
                    membership.change(h, o, "update", keys=member_of(c.identity.public))
                    if h.member(c.username) not in (None, member_of(c.identity.public))
                    else None
                ),
            ):
                n += 1
        except ClientError as exc:
            log.warning("key update in %s not posted: %s", conv, exc.code)
    return n


async def after_rotation(ms: Membership) -> int:
    """Right after my keys changed: verify every conversation's log and post my ``update``
    statements (a failure is logged; the next sync of that log tries again)."""
    try:
        await refresh(ms)
        return await update_keys(ms)
    except ClientError as exc:
        log.warning("new keys not moved into the membership logs yet: %s", exc.code)
        return 0


def _listing(conv: object) -> bool:
    """``conv`` has the form of one entry of ``GET /v1/conversations`` (what :func:`refresh` reads)."""
    return (
        isinstance(conv, dict)
        and isinstance(conv.get("id"), str)
        and isinstance(conv.get("title"), str)
        and isinstance(conv.get("members"), list)
    )


async def refresh(ms: Membership) -> dict[str, list[str]]:
    """Reload my conversations: the relay lists them with its head of each log; each log that
    moved is fetched and verified, and what this client shows and seals to is the verified head
    (the relay's member list is only a hint, used for nothing but a legacy conversation's name).
    Returns ``{id: [members]}``.

    Raises:
        ClientError: the relay did not answer, or (``protocol``) its list is not of the documented
            form (an entry without a string ``id`` and ``title`` and a ``members`` list)."""
    c = ms.client
    data = await c.rest.request("GET", "/v1/conversations")
    convs = data.get("conversations") if isinstance(data, dict) else None
    if not isinstance(convs, list) or not all(_listing(conv) for conv in convs):
        raise ClientError("the relay's list of conversations is malformed", code=ErrorCode.PROTOCOL)
    listed = {conv["id"]: conv for conv in convs}
    before = {cid: (list(c.members.get(cid, [])), c.titles.get(cid)) for cid in listed}
    for cid, conv in listed.items():
        ms.claimed[cid] = (conv.get("epoch"), conv.get("head"))
        if conv.get("epoch") is None and ms.verified_before(cid):  # a log was verified here: not legacy
            await ms._warn(
                cid,
                "downgrade",
                "relay",
                lines.downgrade(),
                MembershipFork(
                    "the relay lists this conversation without a membership log; its log was verified here", field="ep"
                ),
            )
            continue  # the verified members and title stay; nothing is sealed (Membership.audience)
        if conv.get("epoch") is None:  # legacy: no log; shown read-only
            c.members[cid], c.titles[cid] = conv["members"], conv["title"]
            if "legacy" not in ms._warned.get(cid, []):
                await ms._warn(cid, "legacy", "relay", lines.legacy(), InvalidRequest("no membership log"))
            continue
        head = ms.head(cid) or getattr(await ms._restore(cid), "head", None)  # the log kept here, if it links
        if head is None or (head.ep, head.hash) != ms.claimed[cid]:
            try:
                await ms.sync(cid)
            except ClientError as exc:
                if exc.code in NOT_ANSWERED:
                    raise
                log.warning("log of %s not verified: %s", cid, exc.code)
        head = ms.head(cid)
        if head is None or head.member(c.username) is not None:
            c.inactive.discard(cid)
        if head is None:
            c.members.setdefault(cid, [])
            c.titles.setdefault(cid, conv["title"])
    gone = set(c.members) - set(listed) - c.inactive
    kept = []
    for cid in gone:  # I left or was removed: see by whom
        if cid in ms.chains or await ms._restore(cid) is not None:
            try:
                await ms.sync(cid)
            except ClientError as exc:
                log.info("log of %s (no longer listed) not fetched: %s", cid, exc.code)
        head = ms.head(cid)
        if head is not None and head.member(c.username) is not None:  # the log decides, not the listing
            kept.append(cid)
            await ms._warn(
                cid,
                "unlisted",
                "relay",
                lines.unlisted(),
                MembershipWithheld(
                    "the relay no longer lists this conversation; its verified log has you as a member", field="ep"
                ),
            )
            continue
        c.inactive.add(cid)
    changed = bool(gone) or any(before[cid] != (c.members.get(cid, []), c.titles.get(cid)) for cid in listed)
    if c.history is not None:
        await c.history.save_conversations(
            [(cid, c.titles.get(cid, cid), c.members.get(cid, [])) for cid in [*listed, *kept]], complete=True
        )
    if changed:
        await c.events.put(ConversationsChanged())
    return {cid: c.members.get(cid, []) for cid in listed}
