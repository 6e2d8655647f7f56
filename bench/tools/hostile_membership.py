"""Hostile-relay modes against the membership log (``e2ee-relay --hostile MODE --demo-level``).

The relay's own store stays honest (it checks and stores what members sign); these modes lie in
what the relay *serves*: the log (``GET /v1/conversations/{cid}/log``), the conversation list
(``GET /v1/conversations``), and the websocket, where every message of an attacked conversation
is also handed to the "ghost" the relay wants to let in. The relay holds no member's key, so a
statement it makes up cannot verify; the clients' job is to notice and never seal to the ghost.

============================ ======================================================================
``member-insert[:USER]``     appends to every log a forged statement in which a real member "adds"
                             USER (default ``mallory``; signature: 64 bytes of noise), lists USER as
                             a member, and fans every message out to USER too
``drop-removal``             hides every ``remove`` statement (and what follows it) from the logs
                             and lists it serves, reports the epoch before it as the head, and keeps
                             fanning out to the removed members
``fork[:USER]``              shows USER (default ``bob``) the real log once; afterwards each epoch
                             USER has seen is served as a variant that also lists ``mallory`` (the
                             real signature kept), and the head USER is told is that variant's
``replay-statement``         appends to each log a valid statement of another conversation that
                             lists a user who is not in this one, and fans messages out to them
============================ ======================================================================

Each attack is logged as a warning (``hostile MODE: ...``), like the other modes.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from urllib.parse import parse_qs

from shared import digests, frames, membership
from shared.b64 import b64u_encode
from shared.errors import E2EEError
from shared.membership import Statement

MODES = {"member-insert": "mallory", "drop-removal": None, "fork": "bob", "replay-statement": None}
"""The membership modes and their default arguments (merged into ``bench.tools.hostile.MODES``)."""
GHOST = "mallory"  # whom ``fork`` shows as a member
_LOG_PATH = re.compile(r"^/v1/conversations/([^/]+)/log$")


class _Log:
    """The relay's SQLite file, read-only: the stored logs and keys."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False)

    def statements(self, cid: str) -> list[Statement]:
        rows = self._db.execute(
            "SELECT statement FROM membership_log WHERE conversation_id = ? ORDER BY epoch", (cid,)
        ).fetchall()
        return [membership.parse(r[0]) for r in rows]

    def others(self, cid: str) -> list[Statement]:
        """The newest statement of every other conversation."""
        rows = self._db.execute(
            "SELECT l.statement FROM membership_log l JOIN conversations c ON c.id = l.conversation_id "
            "WHERE l.conversation_id != ? AND l.epoch = c.epoch",
            (cid,),
        ).fetchall()
        return [membership.parse(r[0]) for r in rows]

    def kids(self, user: str) -> tuple[str, str] | None:
        rows = self._db.execute(
            "SELECT k.wrap_kid, k.sign_kid FROM user_keys k JOIN users u ON u.id = k.user_id "
            "WHERE u.username = ? AND k.current = 1",
            (user,),
        ).fetchall()
        return rows[0] if rows else None


def _forge(base: Statement, **over) -> Statement:
    """A statement like ``base`` with fields changed, canonical, with a signature that cannot
    verify (the relay has no member's key): noise, or ``base``'s own signature (``keep_sig``)."""
    keep_sig = over.pop("keep_sig", False)
    body = {
        "v": membership.VERSION,
        "typ": membership.TYP,
        "cid": base.cid,
        "ep": base.ep,
        "op": base.op,
        "actor": base.actor,
        "akid": base.akid,
        "title": base.title,
        "prev": base.prev,
        "ts": base.ts,
        "admins": list(base.admins) if base.admins is not None else None,
        "members": [{"u": m.username, "wk": m.wrap_kid, "sk": m.sign_kid} for m in base.members],
    } | over
    body["members"] = sorted(body["members"], key=lambda m: m["u"].encode())
    body_b64 = b64u_encode(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    sig = base.sig if keep_sig else digests.sha512(body_b64.encode())
    return membership.parse(f"{body_b64}.{b64u_encode(sig)}")


class MembershipAttacks:
    """The membership modes of :class:`bench.tools.hostile.HostileRelay` (it calls :meth:`http` for
    GET requests and :meth:`after_send` for every websocket frame it passes on)."""

    def __init__(self, relay, mode: str, arg: str | None, db_path: str) -> None:
        self.relay = relay  # the HostileRelay: its _attack() logs, its _call() runs the real app
        self.mode, self.arg = mode, arg
        self.log = _Log(db_path)
        self._wires: dict[str, list] = {}  # user -> open wires (with their ASGI send)
        self._injected: set[tuple[int, int]] = set()  # (id(wire), seq)
        self._seen: set[tuple[str, str, int]] = set()  # fork: (user, cid, ep) shown for real once
        self._forged: dict[str, Statement] = {}

    # -- what each view of a conversation looks like -------------------------------------------------
    def view(self, cid: str, viewer: str, served: bool = False) -> tuple[list[Statement], set[str]]:
        """The statements the relay shows ``viewer`` for ``cid``, and the ghosts it lets in
        (``served``: this view is the log itself, sent now: ``fork`` counts what USER has seen)."""
        real = self.log.statements(cid)
        if not real:
            return real, set()
        head = real[-1]
        if self.mode == "member-insert":
            ghost = self.arg or GHOST
            kids = self.log.kids(ghost)
            if head.member(ghost) is not None or kids is None:
                return real, set()
            forged = self._forged.get(head.hash)
            if forged is None:
                actor = head.members[0]
                forged = self._forged[head.hash] = _forge(
                    head,
                    op="add",
                    ep=head.ep + 1,
                    prev=head.hash,
                    actor=actor.username,
                    akid=actor.sign_kid,
                    ts=int(time.time() * 1000),
                    members=[{"u": m.username, "wk": m.wrap_kid, "sk": m.sign_kid} for m in head.members]
                    + [{"u": ghost, "wk": kids[0], "sk": kids[1]}],
                )
            return [*real, forged], {ghost}
        if self.mode == "drop-removal":
            cut = next((i for i, st in enumerate(real) if st.op == "remove"), None)
            if cut is None:
                return real, set()
            ghosts = set(real[cut - 1].usernames) - set(head.usernames)
            return real[:cut], ghosts
        if self.mode == "fork":
            if viewer != (self.arg or "bob"):
                return real, set()
            kids = self.log.kids(GHOST)
            out = []
            for st in real:
                key = (viewer, cid, st.ep)
                if key in self._seen and kids is not None and st.member(GHOST) is None:
                    out.append(
                        _forge(
                            st,
                            keep_sig=True,
                            members=[{"u": m.username, "wk": m.wrap_kid, "sk": m.sign_kid} for m in st.members]
                            + [{"u": GHOST, "wk": kids[0], "sk": kids[1]}],
                        )
                    )
                else:
                    out.append(st)
                if served:
                    self._seen.add(key)
            return out, {GHOST} if out != real else set()
        if self.mode == "replay-statement":
            for other in self.log.others(cid):
                ghosts = set(other.usernames) - set(head.usernames)
                if ghosts:
                    return [*real, other], ghosts
        return real, set()

    # -- HTTP ------------------------------------------------------------------------------------------
    async def http(self, scope, receive, send, viewer: str) -> bool:
        """Answer a log or list request with the hostile view; False if this is another request."""
        path = scope["path"]
        m = _LOG_PATH.match(path)
        if path != "/v1/conversations" and m is None:
            return False
        status, headers, body = await self.relay._call(scope, receive)
        if status == 200:
            doc = json.loads(body)
            if m is not None:
                doc = self._log_doc(m.group(1), viewer, doc, scope.get("query_string", b""))
            else:
                doc["conversations"] = [self._listed(c, viewer) for c in doc["conversations"]]
            body = json.dumps(doc).encode()
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return True

    def _log_doc(self, cid: str, viewer: str, doc: dict, query: bytes) -> dict:
        after = int(parse_qs(query.decode()).get("after", ["-1"])[0])
        shown, ghosts = self.view(cid, viewer, served=True)
        if not shown:
            return doc
        real = {st.hash for st in self.log.statements(cid)}
        served = [st for st in shown if st.ep > after or (st.cid != cid and st.hash not in real)]
        if [st.signed for st in served] != doc["statements"] or ghosts:
            self.relay._attack(
                "served %s a %s log of %s (ghosts: %s)", viewer, self.mode, cid, ", ".join(sorted(ghosts)) or "none"
            )
        head = shown[-1]
        epoch = head.ep if head.cid == cid else shown[-2].ep + 1
        return {**doc, "statements": [st.signed for st in served], "epoch": epoch, "head": head.hash}

    def _listed(self, conv: dict, viewer: str) -> dict:
        shown, _ = self.view(conv["id"], viewer)
        if not shown:
            return conv
        head = shown[-1]
        epoch = head.ep if head.cid == conv["id"] else shown[-2].ep + 1
        return {
            **conv,
            "members": sorted(set(conv["members"]) | set(head.usernames) if head.cid != conv["id"] else head.usernames),
            "epoch": epoch,
            "head": head.hash,
        }

    # -- the websocket ---------------------------------------------------------------------------------
    async def after_send(self, wire, text: str) -> None:
        """Keep track of who is connected; hand every message of an attacked conversation to its
        ghosts' connections too (once per connection)."""
        try:
            frame = frames.decode_relay_frame(text)
        except E2EEError:
            return
        if isinstance(frame, frames.Ready):
            self._wires.setdefault(frame.user, []).append(wire)
            return
        if not isinstance(frame, frames.Message):
            return
        _, ghosts = self.view(frame.conversation, wire.user)
        for ghost in sorted(ghosts - {wire.user}):
            for other in list(self._wires.get(ghost, ())):
                key = (id(other), frame.seq)
                if other.cut or other.send is None or key in self._injected:
                    continue
                self._injected.add(key)
                self.relay._attack(
                    "handed seq=%d of %s to %s, who is not a member", frame.seq, frame.conversation, ghost
                )
                try:
                    await other.send({"type": "websocket.send", "text": text})
                except Exception:  # that connection is gone
                    other.cut = True
