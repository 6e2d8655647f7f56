"""The client's side of the key transparency log (docs/PROTOCOL.md §14): the newest signed tree
head this client verified for its relay profile, the checks every key answer goes through, and the
monitor of the user's own keys.

Kept in ``kt-head.json`` in the profile folder (public data, written atomically and 0600 by
:func:`client_tui.core.private.write_private`)::

    {"format": "e2ee-chat-kt", "v": 1, "log_key": b64url SPKI (Ed25519), "head": <signed head>,
     "monitor": {"size": n, "edge": [b64url subtree roots], "mine": [[wrap_kid, sign_kid], ...],
                 "unanswered": n},
     "unproven": [{"head": <signed head>, "by": username, "tries": n}, ...],
     "evidence": [{"held": <signed head>, "shown": <signed head>, "by": username | "the relay"}, ...]}

- The relay's log key is pinned on first use; a head signed by another key is refused.
- A head newer than the one held is accepted only with a consistency proof from the held one
  (RFC 9162 §2.1.4); an older one must be proven a prefix of it; one of the same size must have
  the same root. Anything else is a :class:`~shared.errors.TransparencyFailed` raised loudly: an
  alert event, a warning in the log, and nothing from that answer is pinned.
- A head another user showed us (gossip) that the relay does not answer a consistency request
  for is kept (``unproven``) and asked for again at every refresh; left unanswered
  :data:`MAX_TRIES` times, it is a split view naming that user. A head not signed by the pinned
  log key names the user whose message carried it; each user raises each kind of alert once.
- Every failed consistency check keeps its two signed heads (``evidence``, the newest 8): the
  relay's own signatures on two views of its log that no proof joins.
- The monitor reads every leaf appended since its last visit up to the newest head held (not
  only the one the relay shows now: an older one would hide what was appended since), checks that
  they add up to that signed head (a compact range of the tree's right edge is kept, so a visit costs the new leaves
  only), and that every leaf under the user's name is a key this keystore published, and that
  every key it published (current and retired) is in the log. A relay that answers the log's
  routes with an error is alerted: the monitor cannot run. One that does not answer them at all,
  right after it answered the login, is alerted at the :data:`MAX_TRIES`-th start in a row (and
  the kept gossiped heads count that start as a try): a relay that is down is not alerted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import load_der_public_key

from shared import content, kt, merkle
from shared.b64 import b64u_decode, b64u_encode
from shared.errors import (
    ConsistencyProofInvalid,
    E2EEError,
    LogKeyMismatch,
    SplitView,
    TransparencyFailed,
    TreeHeadInvalid,
)
from shared.keys import PublicIdentity, key_id, spki_der

from .errors import NOT_ANSWERED, ClientError, LocalFileDamaged
from .events import TransparencyAlert
from .kt_checks import Evidence, Unproven, checked, foreign_head, never_answered, never_proven, refused
from .private import load_local_json, set_aside, write_private

if TYPE_CHECKING:
    from .client import ChatClient

log = logging.getLogger("e2ee.client.kt")

FILE_NAME = "kt-head.json"
FORMAT = "e2ee-chat-kt"
KTH_ROOM = 256  # bytes a document's kth takes at most (~212: a 16-digit size and timestamp)
MAX_TRIES = 3  # times the relay may leave a gossiped head unproven before it is a split view
MAX_UNPROVEN = 16  # gossiped heads kept for a later proof; more are checked when these are settled
MAX_EVIDENCE = 8  # pairs of signed heads that no proof joins, kept (the newest)


class Transparency:
    """The key transparency state of one account on one relay (``client.transparency``)."""

    def __init__(self, client: ChatClient) -> None:
        self.c = client
        self.log_key: ed25519.Ed25519PublicKey | None = None
        self.head: kt.TreeHead | None = None
        self.edge = merkle.CompactRange()
        self.mine: set[tuple[str, str]] = set()
        self.unproven: list[Unproven] = []  # gossiped heads the relay has not answered for yet
        self.evidence: list[Evidence] = []  # pairs of signed heads no proof joins, newest last
        self.unanswered = 0  # monitor runs in a row whose requests the relay left unanswered
        self.alerts: list[TransparencyFailed] = []
        self._told: set[tuple[str, str]] = set()  # (sender, code) of the gossip alerts raised
        self._lock = asyncio.Lock()
        self.load()

    @property
    def path(self) -> Path:
        """``kt-head.json`` in the profile folder."""
        return self.c.profile / FILE_NAME

    # -- the file -----------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the held state; a damaged file is set aside (the user is told) and started over."""
        if not self.path.exists():
            return
        try:
            doc = load_local_json(self.path.read_bytes(), FILE_NAME)
            if doc.get("format") != FORMAT or doc.get("v") != 1:
                raise ValueError("not a key transparency state file")
            key = load_der_public_key(b64u_decode(doc["log_key"], "log_key"))
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise ValueError("the log key is not Ed25519")
            head = kt.TreeHead.from_json(doc["head"])
            head.verify(key)
            mon = doc.get("monitor", {})
            if not isinstance(mon, dict) or not all(isinstance(mon.get(k, []), list) for k in ("edge", "mine")):
                raise LocalFileDamaged(f"{FILE_NAME}: its monitor state is not an object of lists")
            edge = merkle.CompactRange(mon.get("size", 0), [b64u_decode(h, "edge") for h in mon.get("edge", [])])
            mine = {(str(w), str(s)) for w, s in mon.get("mine", [])}
            unanswered = mon.get("unanswered", 0)
            if not isinstance(unanswered, int) or isinstance(unanswered, bool):
                raise TypeError("monitor.unanswered is a count")
            unproven = [Unproven.from_json(u) for u in doc.get("unproven", [])][:MAX_UNPROVEN]
            evidence = [Evidence.from_json(e) for e in doc.get("evidence", [])][-MAX_EVIDENCE:]
        except (OSError, ValueError, KeyError, TypeError, E2EEError) as exc:
            aside = set_aside(self.path, "damaged")
            text = (
                f"The key transparency heads this client verified ({FILE_NAME}) were damaged and set aside as "
                f"{aside.name}: the relay's log is trusted again from its next answer, as on first use."
            )
            log.warning("kt state damaged (%s): set aside", type(exc).__name__)
            self.c.local_warnings.append(text)
            return
        self.log_key, self.head, self.edge, self.mine = key, head, edge, mine
        self.unproven, self.evidence, self.unanswered = unproven, evidence, unanswered

    def save(self) -> None:
        """Write the held state (atomic, 0600)."""
        if self.log_key is None or self.head is None:
            return
        doc = {
            "format": FORMAT,
            "v": 1,
            "log_key": b64u_encode(spki_der(self.log_key)),
            "head": self.head.to_json(),
            "monitor": {
                "size": self.edge.size,
                "edge": [b64u_encode(h) for h in self.edge.hashes],
                "mine": sorted([list(k) for k in self.mine]),
                "unanswered": self.unanswered,
            },
            "unproven": [u.to_json() for u in self.unproven],
            "evidence": [e.to_json() for e in self.evidence],
        }
        self.c.profile.mkdir(parents=True, exist_ok=True)
        write_private(self.path, json.dumps(doc, sort_keys=True).encode())

    # -- alerts -------------------------------------------------------------------------------------
    async def _alert(self, exc: TransparencyFailed, seen_by: str | None = None) -> TransparencyFailed:
        if seen_by is not None:  # one alert per sender and kind: a member cannot flood the screen
            if (seen_by, str(exc.code)) in self._told:
                log.info("kt: another %s from %s, not alerted again", exc.code, seen_by)
                return exc
            self._told.add((seen_by, str(exc.code)))
        self.alerts.append(exc)
        log.warning("KEY TRANSPARENCY ALERT %s: %s", exc.code, exc.message)
        await self.c.events.put(TransparencyAlert(str(exc.code), exc.message, exc.field))
        return exc

    async def _get(self, path: str) -> Any:
        """The log's routes are public; the token goes along when there is one (it changes nothing)."""
        return await self.c.rest.request("GET", path, auth=self.c.token is not None)

    # -- heads --------------------------------------------------------------------------------------
    async def refresh(self) -> kt.TreeHead:
        """Fetch the relay's current head, pin its log key on first use, and accept the head.

        Then asks again for the proofs of the gossiped heads the relay left unanswered
        (:attr:`unproven`); one it leaves unanswered :data:`MAX_TRIES` times is a split view.

        Raises:
            TransparencyFailed (alerted): also when the relay answers the head request with an
                error (it refuses to show its log: nothing it answers can be checked).
            ClientError: the relay did not answer (``unreachable``, ``offline``).
        """
        try:
            doc = await self._get("/v1/kt/head")
        except ClientError as exc:
            if exc.code in NOT_ANSWERED:
                raise
            raise await self._alert(refused("its signed head", exc, "head")) from None
        try:
            if not isinstance(doc, dict) or not isinstance(doc.get("log_key"), str):
                raise TreeHeadInvalid("the relay's head answer has no log key", field="log_key")
            self._pin(doc["log_key"])
            head = kt.TreeHead.from_json(doc.get("head"))
        except TransparencyFailed as exc:
            raise await self._alert(exc) from None
        await self.accept(head)
        await self._retry_unproven()
        return head

    def _pin(self, spki_b64: str) -> None:
        try:
            key = load_der_public_key(b64u_decode(spki_b64, "log_key"))
        except (ValueError, E2EEError):
            raise TreeHeadInvalid("the relay's log key is not a public key", field="log_key") from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise TreeHeadInvalid("the relay's log key is not Ed25519", field="log_key")
        if self.log_key is None:
            self.log_key = key
            log.info("pinned the relay's key transparency log key %s…", key_id(key)[:8])
        elif spki_der(key) != spki_der(self.log_key):
            raise TreeHeadInvalid(
                "the relay now signs its key directory with another log key than the one pinned: "
                "its earlier heads cannot be compared with what it shows now",
                field="log_key",
            )

    async def accept(self, head: kt.TreeHead, seen_by: str | None = None) -> None:
        """Verify ``head`` (signature by the pinned log key, consistency with the held head) and
        keep it if newer. ``seen_by``: the user who showed us this head (gossip), for the alert.

        Raises:
            TreeHeadInvalid, ConsistencyProofInvalid, SplitView (each alerted first).
        """
        async with self._lock:
            try:
                await self._accept(head, seen_by)
            except TransparencyFailed as exc:
                raise await self._alert(exc, seen_by) from None

    async def _accept(self, head: kt.TreeHead, seen_by: str | None) -> None:
        if self.log_key is None:
            doc = await self._get("/v1/kt/head")
            self._pin(doc.get("log_key") if isinstance(doc, dict) else "")
        assert self.log_key is not None
        try:
            head.verify(self.log_key)
        except TreeHeadInvalid:
            if seen_by is None:
                raise
            raise foreign_head(seen_by, head.size) from None
        held = self.head
        if held is not None:
            lo, hi = (held, head) if held.size <= head.size else (head, held)
            try:
                if lo.size == hi.size:
                    merkle.verify_consistency(lo.size, hi.size, lo.root, hi.root, [])
                else:
                    answer = await self._consistency(lo.size, hi.size)
                    raw = answer.get("proof") if isinstance(answer, dict) else None
                    proof = kt.decode_proof(raw, ConsistencyProofInvalid)
                    merkle.verify_consistency(lo.size, hi.size, lo.root, hi.root, proof)
            except ConsistencyProofInvalid:
                self._keep_evidence(held, head, seen_by)
                who = f"you and {seen_by}" if seen_by else "you now and what it showed you before"
                raise (SplitView if seen_by else ConsistencyProofInvalid)(
                    f"the relay is showing {who} different key directories: its signed heads of "
                    f"{lo.size} and {hi.size} keys cannot both be true (nothing from this answer is used)",
                    field=seen_by or "head",
                ) from None
        if held is None or head.size > held.size:
            self.head = head
            self.save()

    def _keep_evidence(self, held: kt.TreeHead, shown: kt.TreeHead, seen_by: str | None) -> None:
        """Keep the two signed heads no proof joins (the relay's own signatures: its evidence)."""
        pair = Evidence(held, shown, seen_by or "the relay")
        if pair not in self.evidence:
            self.evidence = [*self.evidence, pair][-MAX_EVIDENCE:]
            self.save()

    async def _consistency(self, old: int, new: int) -> Any:
        """The relay's consistency answer between two sizes it signed heads for.

        Raises:
            ConsistencyProofInvalid: the relay answered with an error: it cannot prove them consistent.
            ClientError: it did not answer (``unreachable``, ``offline``): nothing is decided.
        """
        try:
            return await self._get(f"/v1/kt/consistency?from={old}&to={new}")
        except ClientError as exc:
            if exc.code in NOT_ANSWERED:
                raise
            raise ConsistencyProofInvalid(
                f"the relay cannot prove that its heads of {old} and {new} keys are one log ({exc.code})",
                field="proof",
            ) from None

    # -- gossip -------------------------------------------------------------------------------------
    def gossip_out(self) -> dict[str, Any] | None:
        """The newest head this client verified, as it travels inside a message's ciphertext
        (``TreeHead.to_json()``, about 150 bytes), or None before the first."""
        return self.head.to_json() if self.head is not None else None

    def stamp(self, doc: content.Content) -> content.Content:
        """``doc`` (a content document about to be sealed) carrying :meth:`gossip_out` as its
        ``kth``; unchanged before the first head, or when the head would not fit the document limit."""
        if self.head is None or len(content.canonical(doc)) + KTH_ROOM > content.MAX_CONTENT_BYTES:
            return doc
        return msgspec.structs.replace(doc, kth=content.KtHead.of(self.head))

    async def gossip_in(self, sender: str, raw: object) -> None:
        """A head ``sender`` verified, taken from a message whose signature verified: it must be
        signed by the same log key and be consistent with the held head (a larger one is then
        held). Never raises: a split view is alerted (``split_view``, naming ``sender``) and the
        message itself stays as it is; a relay that cannot be asked now is asked at the next one."""
        try:
            head = kt.TreeHead.from_json(raw)
        except TransparencyFailed as exc:
            log.warning("a key transparency head from %s does not parse: %s", sender, exc.code)
            return
        try:
            await self.accept(head, seen_by=sender)
        except TransparencyFailed:
            pass  # alerted by accept
        except E2EEError as exc:  # the relay did not answer: kept, asked again at every refresh
            log.info("gossiped head from %s not checked now: %s", sender, exc.code)
            await self._keep_unproven(head, sender)

    async def _keep_unproven(self, head: kt.TreeHead, sender: str) -> None:
        async with self._lock:
            if len(self.unproven) < MAX_UNPROVEN and all(u.head != head for u in self.unproven):
                self.unproven.append(Unproven(head, sender, 1))
                self.save()

    async def _retry_unproven(self) -> None:
        """Ask again for the proof of each kept gossiped head: proven, it is settled (and a newer
        one held); refuted, alerted; still unanswered, one try more: the :data:`MAX_TRIES`-th is
        alerted as a split view (the relay answers everything else, not this)."""
        for u in list(self.unproven):
            try:
                await self.accept(u.head, seen_by=u.by)
            except TransparencyFailed:
                pass  # alerted by accept
            except E2EEError as exc:
                if not await self._unproven_again(u, str(exc.code)):
                    continue
            self.unproven.remove(u)
        self.save()

    async def _unproven_again(self, u: Unproven, code: str) -> bool:
        """One more unanswered try for ``u``; the :data:`MAX_TRIES`-th is alerted (True: settled)."""
        u.tries += 1
        log.info("kt: the relay left %s's head of %d unproven again (%s)", u.by, u.head.size, code)
        if u.tries < MAX_TRIES:
            return False
        await self._alert(never_proven(u, self.head.size if self.head else 0), u.by)
        return True

    async def _left_unanswered(self, exc: ClientError, head_too: bool) -> None:
        """The monitor's request was not answered, right after the relay answered the login: one
        more start the log could not be checked (:attr:`unanswered`); the :data:`MAX_TRIES`-th in a
        row and every one after is alerted. ``head_too``: the kept gossiped heads were not asked
        again either: each counts one try."""
        self.unanswered += 1
        if head_too:
            for u in list(self.unproven):
                if await self._unproven_again(u, str(exc.code)):
                    self.unproven.remove(u)
        self.save()
        if self.unanswered >= MAX_TRIES:
            await self._alert(never_answered(self.unanswered))

    # -- key answers --------------------------------------------------------------------------------
    async def check_key_answer(self, ident: PublicIdentity, doc: dict[str, Any]) -> None:
        """Check a key answer's ``kt``: its leaf names exactly ``ident`` (the keys answered, their
        ids recomputed from the keys), the proof leads to a head signed by the log key, and that
        head is consistent with the one held. Call before anything of the answer is pinned.

        Raises:
            InclusionProofInvalid, TreeHeadInvalid, ConsistencyProofInvalid (each alerted).
        """
        try:
            inc = checked(ident.username, ident, doc.get("kt"))
        except TransparencyFailed as exc:
            raise await self._alert(exc) from None
        await self.accept(inc.head)

    async def check_history(self, username: str, doc: object) -> None:
        """:meth:`check_key_answer` for every key of a key history answer
        (``GET /v1/users/{username}/keys/history``); the heads they name are accepted once each.

        Raises:
            TransparencyFailed (alerted): one key is not proven to be ``username``'s in the log.
            E2EEError: a key that does not load (the caller's to handle, as without the log).
        """
        keys = doc.get("keys") if isinstance(doc, dict) else None
        heads: dict[tuple[int, bytes], kt.TreeHead] = {}
        try:
            for row in keys if isinstance(keys, list) else []:
                inc = checked(username, PublicIdentity.from_json(row), row.get("kt"))
                heads.setdefault((inc.head.size, inc.head.root), inc.head)
        except TransparencyFailed as exc:
            raise await self._alert(exc) from None
        for head in heads.values():
            await self.accept(head)

    # -- the monitor --------------------------------------------------------------------------------
    async def monitor(self, published: set[tuple[str, str]], required: set[tuple[str, str]]) -> int:
        """Read the leaves appended since the last visit and check the user's own: every leaf under
        this username must be one of ``published`` (key id pairs this keystore holds), and
        every pair of ``required`` (the current keys and the retired ones: published for sure) must
        be in the log. Returns the number of leaves read.

        Raises:
            LogKeyMismatch: a key planted under my name, or keys I published missing (alerted).
            ConsistencyProofInvalid: the leaves do not add up to the signed head (alerted).
            ClientError: relay errors.
        """
        try:
            await self.refresh()
        except ClientError as exc:
            if exc.code in NOT_ANSWERED:
                await self._left_unanswered(exc, head_too=True)
            raise
        head = self.head  # the newest held: a relay that shows an older one (a freeze) hides nothing
        assert head is not None
        me = self.c.username
        edge, mine, planted, read = merkle.CompactRange(self.edge.size, self.edge.hashes), set(self.mine), [], 0
        try:
            while edge.size < head.size:
                try:
                    answer = await self._get(f"/v1/kt/entries?start={edge.size}&end={head.size}")
                except ClientError as exc:
                    if exc.code in NOT_ANSWERED:
                        await self._left_unanswered(exc, head_too=False)
                        raise
                    raise refused("the keys it logged", exc, "entries") from None
                entries = answer.get("entries") if isinstance(answer, dict) else None
                if not isinstance(entries, list) or not entries:
                    raise ConsistencyProofInvalid(
                        f"the relay signed a log of {head.size} keys but shows only {edge.size}", field="entries"
                    )
                for e in entries[: head.size - edge.size]:
                    leaf = kt.KeyLeaf.from_json(e)
                    edge.append_hash(leaf.hash())
                    read += 1
                    if leaf.username == me and leaf.kids in published:
                        mine.add(leaf.kids)
                    elif leaf.username == me:
                        planted.append(leaf.kids)
            if edge.root() != head.root:
                raise ConsistencyProofInvalid(
                    f"the relay's log entries do not add up to the head it signed for {head.size} keys", field="entries"
                )
            if planted:
                raise LogKeyMismatch(
                    f"the relay's key directory holds {len(planted)} key(s) under your name that this keystore "
                    f"never published (wrap key {planted[0][0][:8]}…): anyone fetching your keys may be given them",
                    field="username",
                )
            missing = required - mine
            if missing:
                raise LogKeyMismatch(
                    f"{len(missing)} of the keys you published (wrap key {min(missing)[0][:8]}…) are not in the "
                    "relay's key directory: what it answers for you is not what you published",
                    field="username",
                )
        except TransparencyFailed as exc:
            raise await self._alert(exc) from None
        self.edge, self.mine, self.unanswered = edge, mine, 0
        self.save()
        return read
