"""A hostile relay: ``e2ee-relay --hostile MODE --demo-level`` rewrites, drops, replays and
re-routes what it forwards, to show (and test) that a lying relay can deny service and nothing more.

It is an ASGI wrapper around the real relay app (installed by ``server.cli``; the relay's own code
is unchanged): every websocket frame the relay sends and every answer to a key fetch
(``GET /v1/users/{name}/keys``) passes through it, exactly as through a man in the middle that
holds the relay's database. It never sees a message key or a plaintext: it can only move bytes.

Modes (``MODE`` or ``MODE:ARG``; each attack is logged as a warning naming seq, user and mode):

============== ==========================================================================================
``replay[:N]``  after a sender's envelope #N (default 1) of a conversation, every later
                ``msg`` of that conversation is followed by #N again, under its own seq and under the new one
``reorder``     each even-numbered envelope of a sender is held back until the same sender's next one went out
``drop[:N]``    every envelope whose number is a multiple of N (default 3) is never delivered (live or sync)
``duplicate``   every ``msg`` frame is sent twice
``move``        each envelope is delivered as if it belonged to another conversation of the recipient
``sender``      the ``msg`` frame names another member of the conversation as the sender
``sender-header`` as ``sender``, and the protected header's ``snd`` and ``skid`` are rewritten to that member
``strip[:USER]`` each recipient (or only USER) gets the envelope without its own wrapped key
                (its entry and its ``rkids`` item removed)
``swap``        the wrapped keys of the first two recipient entries are exchanged
``header``      the protected header is altered: its expiry hint ``xp`` one day later (a message kept longer)
``tag``         case K04: envelopes #1, #2 and #3 of each sender get their GCM tag cut to 4 bytes, cut to
                0 bytes, and one bit flipped; later ones pass unchanged
``key-first[:USER]`` every key fetch for another user answers USER's keys (default ``mallory``) under the
                asked name, from the very first fetch
``key-mid[:USER]``   the first fetch of each (requester, user) pair answers the real keys, later ones USER's
``key-name[:USER]``  every key fetch for another user answers USER's keys under USER's own name (the answer
                names someone other than the user asked for)
``key-swap[:A,B]``   substitution at the moment of verifying: the first fetch of each (requester, user) pair
                answers the real keys, the second A's, every later one B's (default ``mallory,carol``)
``key-retired``  once a user has rotated, the first fetch of their current keys by each requester answers
                them, every later one the user's oldest (retired) keys, with their real log proof: a rollback
``plant-key[:USER]`` as ``key-first``: every key fetch for another user answers USER's keys under the asked name
``kt-freeze[:USER]`` as ``plant-key``, and the user a key was planted for is shown, as the log's current head,
                the head from before the plant (older, consistent: a freeze of that user's view)
``split-view[:USER]`` the first user to fetch someone else's keys is shown a forked key transparency log in
                which USER's keys are that someone's; everyone else sees the real log
``lose-ack``    the first ``stored`` answer to each user is withheld and its connection closed (1012),
                as if the ack was lost in transit; the client's retry gets the original seq
``crash[:SEQ]``  the relay SIGKILLs itself when about to deliver message SEQ (default 1): after the commit,
                before any fan-out or ack
============== ==========================================================================================

The key modes other than ``key-name`` and ``split-view`` plant the substituted key in the relay's key
transparency log under the asked name, so that it passes the clients' inclusion checks (the victim's own
monitor is what catches it); ``split-view`` forks the log instead (``bench/tools/hostile_kt.py``).

The membership modes (``member-insert``, ``drop-removal``, ``fork``, ``replay-statement``) are in
``bench/tools/hostile_membership.py``: they lie in the log and the conversation list the relay serves,
and hand messages to someone who is not a member.

The websocket-frame modes (``replay`` ... ``tag``, ``crash``) and the envelope surgery they do are in
``bench/tools/hostile_frames.py`` (:class:`HostileRelay` inherits them); this module parses the modes, wraps
the relay, dispatches each frame, and carries out ``lose-ack`` and the key modes.

The modes that need membership or key ids (``move``, ``sender``, ``sender-header``, ``strip``) read
the relay's SQLite file; with another database they refuse to start.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from shared import frames
from shared.b64 import b64u_encode
from shared.errors import E2EEError

from .hostile_frames import (
    DAY_MS,
    FrameModes,
    damage_tag,
    header_of,
    rewrite_header,
    strip_recipient,
    swap_wrapped_keys,
)
from .hostile_kt import LogForger
from .hostile_membership import MODES as MEMBERSHIP_MODES
from .hostile_membership import MembershipAttacks

__all__ = [
    "CLOSE_LOST",
    "DAY_MS",
    "DB_MODES",
    "KEY_MODES",
    "MODES",
    "HostileRelay",
    "check",
    "damage_tag",
    "header_of",
    "parse_mode",
    "rewrite_header",
    "strip_recipient",
    "swap_wrapped_keys",
]
"""The public API (the envelope surgery is re-exported from ``hostile_frames``)."""

log = logging.getLogger("e2ee.relay.hostile")

MODES = {
    "replay": "1",
    "reorder": None,
    "drop": "3",
    "duplicate": None,
    "move": None,
    "sender": None,
    "sender-header": None,
    "strip": "",
    "swap": None,
    "header": None,
    "tag": None,
    "key-first": "mallory",
    "key-mid": "mallory",
    "key-name": "mallory",
    "key-swap": "mallory,carol",
    "key-retired": None,
    "plant-key": "mallory",
    "kt-freeze": "mallory",
    "split-view": "mallory",
    "lose-ack": None,
    "crash": "1",
}
MODES.update(MEMBERSHIP_MODES)
"""Every mode and its default argument (None: takes no argument)."""

KEY_MODES = ("key-first", "key-mid", "key-name", "key-swap", "key-retired", "plant-key", "kt-freeze", "split-view")
DB_MODES = ("move", "sender", "sender-header", "strip", "key-retired", *MEMBERSHIP_MODES)
CLOSE_LOST = 1012
_KEYS_PATH = re.compile(r"^/v1/users/([^/]+)/keys$")
_KT_PATHS = ("/v1/kt/head", "/v1/kt/consistency")


def check(hostile: str, db_url: str) -> None:
    """Validate ``--hostile`` for the settings (mode, argument, database).

    Raises:
        ValueError: see :func:`parse_mode`; or a mode that reads the SQLite file on another database.
    """
    mode, _ = parse_mode(hostile)
    if mode in DB_MODES and not db_url.startswith("sqlite+aiosqlite:///"):
        raise ValueError(f"hostile mode {mode!r} reads the relay's SQLite file; this relay uses {db_url.split(':')[0]}")


def parse_mode(text: str) -> tuple[str, str | None]:
    """``"drop:5"`` -> ``("drop", "5")``; a missing argument takes the mode's default.

    Raises:
        ValueError: unknown mode, an argument for a mode that takes none, or a bad number.
    """
    name, _, arg = text.strip().partition(":")
    if name not in MODES:
        raise ValueError(f"unknown hostile mode {name!r}; modes: {', '.join(MODES)}")
    default = MODES[name]
    if default is None:
        if arg:
            raise ValueError(f"hostile mode {name!r} takes no argument")
        return name, None
    arg = arg or default
    if name in ("replay", "drop", "crash") and (not arg.isdigit() or int(arg) < 1):
        raise ValueError(f"hostile mode {name!r} takes a positive number")
    return name, arg


# -- the relay's database, read-only, for the modes that need members or key ids -------------------
class _Directory:
    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False)

    def _rows(self, sql: str, *args) -> list[tuple]:
        return self._db.execute(sql, args).fetchall()

    def members(self, conversation: str) -> list[str]:
        return [
            r[0]
            for r in self._rows(
                "SELECT u.username FROM members m JOIN users u ON u.id = m.user_id WHERE m.conversation_id = ? "
                "ORDER BY u.username",
                conversation,
            )
        ]

    def conversations(self, user: str) -> list[str]:
        """The user's conversations, the most recently created first."""
        return [
            r[0]
            for r in self._rows(
                "SELECT c.id FROM conversations c JOIN members m ON m.conversation_id = c.id "
                "JOIN users u ON u.id = m.user_id WHERE u.username = ? ORDER BY c.created_at_ms DESC, c.id",
                user,
            )
        ]

    def oldest_keys(self, user: str) -> tuple[str, bytes, bytes, str, str] | None:
        """``(current wrap_kid, oldest wrap SPKI, oldest sign SPKI, oldest wrap_kid, oldest sign_kid)`` of a
        user who has rotated at least once, else None."""
        rows = self._rows(
            "SELECT k.wrap_kid, k.wrap_key, k.sign_key, k.sign_kid, k.current FROM user_keys k "
            "JOIN users u ON u.id = k.user_id WHERE u.username = ? ORDER BY k.id",
            user,
        )
        current = [r[0] for r in rows if r[4]]
        if len(rows) < 2 or not current:
            return None
        return current[0], rows[0][1], rows[0][2], rows[0][0], rows[0][3]

    def kids(self, user: str) -> tuple[str, str] | None:
        """``(wrap_kid, sign_kid)`` of the user's current keys."""
        rows = self._rows(
            "SELECT k.wrap_kid, k.sign_kid FROM user_keys k JOIN users u ON u.id = k.user_id "
            "WHERE u.username = ? AND k.current = 1",
            user,
        )
        return rows[0] if rows else None


@dataclass(eq=False)
class _Wire:
    """One websocket as the hostile relay sees it."""

    user: str = "?"
    held: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    cut: bool = False  # the hostile relay closed it: later frames go nowhere
    send: Callable | None = None  # its ASGI send (the membership modes hand others' frames to it)


class HostileRelay(FrameModes):
    """ASGI wrapper that attacks the relay's clients in one :data:`MODES` mode.

    Args:
        settings: the relay settings (``hostile`` = the mode; ``db_url`` for the modes that read it).
        app: the relay's ASGI app.

    Raises:
        ValueError: see :func:`check`.
    """

    def __init__(self, settings, app) -> None:
        self.mode, self.arg = parse_mode(settings.hostile)
        self.app = app
        self.attacks = 0
        self._seen: dict[tuple[str, str, int], tuple[int, str, bytes]] = {}  # (cid, snd, number) -> frame
        # An envelope's number: the sender's ctr is inside the ciphertext since v3, so the relay counts
        # each sender's envelopes per conversation in the order it first forwards them (mid -> number).
        self._numbers: dict[str, int] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._fetched: dict[tuple[str, str], int] = {}
        self._acks_lost: set[str] = set()
        self._dir: _Directory | None = None
        self._members: MembershipAttacks | None = None
        self._forger = LogForger(settings)
        if self.mode in DB_MODES:
            check(settings.hostile, settings.db_url)
            self._dir = _Directory(settings.db_url.removeprefix("sqlite+aiosqlite:///"))
        if self.mode in MEMBERSHIP_MODES:
            self._members = MembershipAttacks(
                self, self.mode, self.arg, settings.db_url.removeprefix("sqlite+aiosqlite:///")
            )
        for line in (
            "=" * 78,
            f"HOSTILE RELAY, mode {settings.hostile!r}: this relay ATTACKS ITS OWN CLIENTS.",
            "It exists to test and demonstrate that clients detect a lying relay. Never run it for users.",
            "=" * 78,
        ):
            log.warning(line)

    # -- ASGI --------------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            wire = _Wire(send=send)

            async def hostile_send(message) -> None:
                if wire.cut:
                    return
                if message["type"] == "websocket.send" and message.get("text") is not None:
                    for text in self.outgoing(wire, message["text"]):
                        if text is None:  # close the connection here (lose-ack)
                            wire.cut = True
                            await send({"type": "websocket.close", "code": CLOSE_LOST, "reason": "connection lost"})
                            return
                        await send({"type": "websocket.send", "text": text})
                        if self._members is not None:
                            await self._members.after_send(wire, text)
                    return
                await send(message)

            return await self.app(scope, receive, hostile_send)
        if (
            scope["type"] == "http"
            and self._members is not None
            and scope["method"] == "GET"
            and await self._members.http(scope, receive, send, _token_subject(scope))
        ):
            return None
        if scope["type"] == "http" and self.mode in KEY_MODES and scope["method"] == "GET":
            m = _KEYS_PATH.match(scope["path"])
            if m:
                return await self._keys(scope, receive, send, m.group(1))
            if self.mode in ("split-view", "kt-freeze") and scope["path"] in _KT_PATHS:
                forged = (
                    self._forger.forked_kt(_token_subject(scope), scope["path"], scope.get("query_string", b""))
                    if self.mode == "split-view"
                    else self._forger.frozen_kt(_token_subject(scope), scope["path"])
                )
                if forged is not None:
                    self._attack("answered %s from a forged log view to %s", scope["path"], _token_subject(scope))
                    json_type = [(b"content-type", b"application/json")]
                    return await _answer(send, 200, json_type, json.dumps(forged).encode())
        return await self.app(scope, receive, send)

    def _attack(self, what: str, *args) -> None:
        self.attacks += 1
        log.warning("hostile %s: " + what, self.mode, *args)

    # -- websocket frames --------------------------------------------------------------------------
    def outgoing(self, wire: _Wire, text: str) -> list[str | None]:
        """The frames to send instead of ``text`` (None: close the connection)."""
        try:
            frame = frames.decode_relay_frame(text)
        except E2EEError:
            return [text]
        if isinstance(frame, frames.Ready):
            wire.user = frame.user
            return [text]
        if isinstance(frame, frames.Stored) and self.mode == "lose-ack" and wire.user not in self._acks_lost:
            self._acks_lost.add(wire.user)
            self._attack("withheld the ack of seq=%d to %s and cut the connection", frame.seq, wire.user)
            return [None]
        if (
            not isinstance(frame, frames.Message)
            or self._members is not None
            or self.mode in ("plant-key", "kt-freeze", "split-view")
        ):
            return [text]  # the key transparency modes lie in key answers, not in frames
        raw = bytes(frame.envelope)
        try:
            h = header_of(raw)
            snd, mid = str(h["snd"]), str(h["mid"])
            ctr = self._numbers.get(mid) or self._number(str(h["cid"]), snd, mid)
        except (ValueError, KeyError, TypeError, E2EEError):
            return [text]  # not an L4 envelope: nothing this relay knows how to attack
        return getattr(self, "_" + self.mode.replace("-", "_"))(wire, frame, raw, h, ctr, snd, text)

    def _number(self, cid: str, snd: str, mid: str) -> int:
        n = self._counts[(cid, snd)] = self._counts.get((cid, snd), 0) + 1
        self._numbers[mid] = n
        return n

    # -- key fetches -------------------------------------------------------------------------------
    async def _keys(self, scope, receive, send, username: str) -> None:
        """Answer a key fetch, possibly with the substitute's keys under the asked name."""
        status, headers, body = await self._call(scope, receive)
        requester = _token_subject(scope)
        answer = body
        if status != 200 or username == requester:
            pass
        elif self.mode == "key-retired":
            answer = await self._retired(scope, requester, username, body)
        elif self.mode == "split-view" and not self._forger.forks(requester, username):
            pass
        elif username not in self.arg.split(","):
            pair = (requester, username)
            n = self._fetched[pair] = self._fetched.get(pair, 0) + 1
            substitute = self.arg.split(",")[0 if n == 2 else -1]
            if self.mode in ("key-first", "key-name", "plant-key", "kt-freeze", "split-view") or n > 1:
                path = f"/v1/users/{substitute}/keys"
                sub_scope = {**scope, "path": path, "raw_path": path.encode()}
                s_status, _, s_body = await self._call(sub_scope, _empty_receive)
                if s_status == 200:
                    doc = json.loads(s_body)
                    if self.mode != "key-name":  # key-name: the answer keeps the substitute's own name
                        doc["username"] = json.loads(body)["username"]
                    if self.mode == "split-view":
                        doc = await self._forger.forked_answer(scope, requester, username, doc)
                    elif self.mode != "key-name":
                        doc = await self._forger.plant(scope, username, doc)
                    answer = json.dumps(doc).encode()
                    self._attack("served %s's keys as %s's to %s", substitute, username, requester)
        await _answer(send, status, headers, answer)

    async def _retired(self, scope, requester: str, username: str, body: bytes) -> bytes:
        oldest = self._dir.oldest_keys(username)
        if oldest is None:
            return body
        seen = (requester, username, oldest[0])
        if seen not in self._fetched:
            self._fetched[seen] = 1
            return body
        doc = json.loads(body)
        doc.update(
            wrap_key=b64u_encode(oldest[1]), sign_key=b64u_encode(oldest[2]), wrap_kid=oldest[3], sign_kid=oldest[4]
        )
        path = f"/v1/users/{username}/keys/history"  # the retired keys' own log proof: they are in the log
        _, _, history = await self._call({**scope, "path": path, "raw_path": path.encode()}, _empty_receive)
        doc["kt"] = json.loads(history)["keys"][0].get("kt")
        self._attack("served %s's retired keys to %s", username, requester)
        return json.dumps(doc).encode()

    async def _call(self, scope, receive) -> tuple[int, list, bytes]:
        out: dict = {"status": 500, "headers": [], "body": b""}

        async def capture(message) -> None:
            if message["type"] == "http.response.start":
                out["status"], out["headers"] = message["status"], list(message.get("headers", []))
            elif message["type"] == "http.response.body":
                out["body"] += message.get("body", b"")

        await self.app(scope, receive, capture)
        return out["status"], out["headers"], out["body"]


async def _answer(send, status: int, headers: list, body: bytes) -> None:
    headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _empty_receive():
    return {"type": "http.request", "body": b"", "more_body": False}


def _token_subject(scope) -> str:
    """The ``sub`` of the request's bearer token, read without checking it (bookkeeping only)."""
    for k, v in scope.get("headers", []):
        if k.lower() == b"authorization" and v[:7].lower() == b"bearer ":
            try:
                payload = v[7:].split(b".")[1]
                return str(json.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))["sub"])
            except (IndexError, ValueError, KeyError, TypeError):
                return "?"
    return "?"
