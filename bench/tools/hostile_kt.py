"""What a hostile relay must do about its key transparency log (docs/PROTOCOL.md §14) so that a key
it substitutes passes the clients' proof checks, and the ``split-view`` mode.

A relay that serves mallory's keys as bob's can no longer hand over mallory's own log proof (its
leaf names mallory, and the client refuses it). It has two ways left, and each is caught:

- **plant** (the key modes and ``plant-key``): append a leaf "bob: mallory's key ids" to the real
  log and serve its inclusion proof. Every client accepts it; bob's monitor finds a key under his
  name that his keystore never published, at his next start (``log_key_mismatch``).
- **fork** (``split-view``): show one victim a log that no one else sees: the real leaves plus the
  planted one, under a head signed with the relay's log key, and answer the victim's head and
  consistency requests from that fork. It holds only while the real log does not grow: the next
  real head the victim sees has no consistency proof from the forked one
  (``consistency_proof_invalid``); a head gossiped by another user raises ``split_view``.
- **freeze** (``kt-freeze``): plant, and show the owner of the name, as the log's current head, the
  head from before the plant (signed now, older, consistent with everything: no proof fails). The
  owner's monitor is caught up only as far as it is shown, unless it holds a newer head from a
  key answer or a message: it reads the leaves up to the newest head it holds, and finds the plant.

Used by :class:`bench.tools.hostile.HostileRelay`; reaches the relay's state through the ASGI
scope (``scope["app"].state.e2ee`` after a call went through the app).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from server import kt_store
from shared import kt, merkle
from shared.b64 import b64u_encode

log = logging.getLogger("e2ee.relay.hostile")


@dataclass
class Fork:
    """The log one victim is shown: the real leaves ``[0, base)`` and one planted leaf."""

    victim: str
    base: int
    tree: merkle.Tree
    leaf: kt.KeyLeaf
    head: kt.TreeHead


class LogForger:
    """Plants leaves in the relay's log, or forks it for one victim.

    Args:
        settings: the relay's settings (the log key, for the forked heads).
    """

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._planted: dict[tuple[str, tuple[str, str]], int] = {}
        self.fork: Fork | None = None
        self.frozen: dict[str, int] = {}  # kt-freeze: victim -> the log's size before the first plant
        self._st: Any = None

    @staticmethod
    def _state(scope: dict) -> Any:
        return scope["app"].state.e2ee  # set by Starlette on the scope of a call that went through it

    async def plant(self, scope: dict, username: str, doc: dict) -> dict:
        """``doc`` (someone else's keys answered under ``username``) with the inclusion proof of a
        leaf "``username``: these key ids", appended to the real log once per (user, keys)."""
        st = self._state(scope)
        kids = (doc["wrap_kid"], doc["sign_kid"])
        idx = self._planted.get((username, kids))
        if idx is None:
            size = await st.kt.sync()
            entries = await st.kt.entries(0, size)
            leaf = kt.KeyLeaf(username, sum(1 for e in entries if e["user"] == username), *kids)
            fake_row = -int.from_bytes(os.urandom(4), "big") - 1  # no key row: the relay's directory is unchanged
            idx = await st.writer.run(lambda s: kt_store.append_leaf(s, fake_row, leaf))
            self._planted[(username, kids)] = idx
            self.frozen.setdefault(username, idx)
            self._st = st
            log.warning("hostile: planted key %s… under %s's name in the log (leaf %d)", kids[0][:8], username, idx)
        await st.kt.sync()
        leaf = kt.KeyLeaf.from_json((await st.kt.entries(idx, idx + 1))[0])
        return {**doc, "kt": st.kt.inclusion(idx, leaf, st.kt.head()).to_json()}

    # -- split-view ---------------------------------------------------------------------------------
    def forks(self, requester: str, username: str) -> bool:
        """Whether this fetch is the split view's: the first (requester, user) pair, and only it."""
        return self.fork is None or (self.fork.victim, self.fork.leaf.username) == (requester, username)

    async def forked_answer(self, scope: dict, victim: str, username: str, doc: dict) -> dict:
        """``doc`` (a substitute's keys under ``username``) with a proof into the victim's fork."""
        st = self._state(scope)
        kids = (doc["wrap_kid"], doc["sign_kid"])
        if self.fork is None or self.fork.victim != victim or self.fork.leaf.kids != kids:
            base = await st.kt.sync()
            entries = await st.kt.entries(0, base)
            tree = merkle.Tree(kt.KeyLeaf.from_json(e).hash() for e in entries)
            leaf = kt.KeyLeaf(username, sum(1 for e in entries if e["user"] == username), *kids)
            tree.append_hash(leaf.hash())
            head = kt.sign_head(self._settings.resolve_kt_key(), tree.size, tree.root(), st.kt.head().timestamp_ms)
            self.fork = Fork(victim, base, tree, leaf, head)
            log.warning("hostile split-view: forked the log for %s at %d", victim, base)
        f = self.fork
        return {**doc, "kt": kt.Inclusion(f.base, f.leaf, f.tree.inclusion_proof(f.base), f.head).to_json()}

    def forked_kt(self, requester: str, path: str, query: bytes) -> dict | None:
        """The victim's ``/v1/kt/head`` or ``/v1/kt/consistency`` answer from the fork (None: the
        real answer), while the fork is what the victim holds."""
        f = self.fork
        if f is None or requester != f.victim:
            return None
        if path == "/v1/kt/head":
            return {"head": f.head.to_json(), "log_key": b64u_encode(_spki(self._settings))}
        if path == "/v1/kt/consistency":
            q = {k: v[0] for k, v in parse_qs(query.decode()).items()}
            old, new = int(q.get("from", "0")), int(q.get("to", str(f.tree.size)))
            if new == f.tree.size and old <= new:
                return {"from": old, "to": new, "proof": kt.encode_proof(f.tree.consistency_proof(old, new))}
        return None

    def frozen_kt(self, requester: str, path: str) -> dict | None:
        """kt-freeze: the victim's ``/v1/kt/head`` answer, the log's head from before the plant under
        their name, signed now (None: the real answer)."""
        size = self.frozen.get(requester)
        if size is None or path != "/v1/kt/head" or self._st is None:
            return None
        return {"head": self._st.kt.head(size).to_json(), "log_key": b64u_encode(_spki(self._settings))}


def _spki(settings: Any) -> bytes:
    from shared.keys import spki_der

    return spki_der(settings.resolve_kt_key().public_key())
