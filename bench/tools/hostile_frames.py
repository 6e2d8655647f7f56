"""The websocket-frame modes of the hostile relay (``e2ee-relay --hostile MODE --demo-level``).

:class:`FrameModes` holds one method per mode that rewrites, drops, replays or re-routes the ``msg``
frames the relay sends (``replay``, ``reorder``, ``drop``, ``duplicate``, ``move``, ``sender``,
``sender-header``, ``strip``, ``swap``, ``header``, ``tag``, ``crash``; the key modes and ``lose-ack``
pass frames unchanged). :class:`bench.tools.hostile.HostileRelay` inherits it and calls
``_<mode>`` for each ``msg`` frame; the modes, their arguments and what each does are described in
``bench/tools/hostile.py``. The envelope surgery below works on JSON and base64url only: the relay
has no key.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from typing import Any

import msgspec

from shared import frames
from shared.b64 import b64u_decode, b64u_encode

__all__ = [
    "DAY_MS",
    "FrameModes",
    "damage_tag",
    "header_of",
    "rewrite_header",
    "strip_recipient",
    "swap_wrapped_keys",
]

log = logging.getLogger("e2ee.relay.hostile")

DAY_MS = 86_400_000


# -- envelope surgery (JSON and base64url only: the relay has no key) ------------------------------
def _load(raw: bytes) -> tuple[dict, dict]:
    doc = json.loads(raw)
    return doc, json.loads(b64u_decode(doc["protected"], "protected"))


def _dump(doc: dict, header: dict | None = None) -> bytes:
    if header is not None:
        doc["protected"] = b64u_encode(json.dumps(header, separators=(",", ":")).encode())
    return json.dumps(doc, separators=(",", ":")).encode()


def header_of(raw: bytes) -> dict:
    """The protected header of an envelope as a dict (what any relay can read)."""
    return _load(raw)[1]


def strip_recipient(raw: bytes, kid: str) -> bytes:
    """Remove the entry and the ``rkids`` item of ``kid`` (the header is re-encoded)."""
    doc, header = _load(raw)
    doc["recipients"] = [r for r in doc["recipients"] if r["header"]["kid"] != kid]
    header["rkids"] = [k for k in header["rkids"] if k != kid]
    return _dump(doc, header)


def swap_wrapped_keys(raw: bytes) -> bytes:
    """Exchange the ``encrypted_key`` of the first two recipient entries (their kids stay)."""
    doc, _ = _load(raw)
    r = doc["recipients"]
    if len(r) >= 2:
        r[0]["encrypted_key"], r[1]["encrypted_key"] = r[1]["encrypted_key"], r[0]["encrypted_key"]
    return _dump(doc)


def rewrite_header(raw: bytes, **changes) -> bytes:
    """Set members of the protected header (re-encoded; ``sig`` and the GCM AAD no longer match)."""
    doc, header = _load(raw)
    header.update(changes)
    return _dump(doc, header)


def damage_tag(raw: bytes, how: str) -> bytes:
    """``cut4`` / ``cut0``: the GCM tag cut to 4 or 0 bytes; ``flip``: its lowest bit flipped."""
    doc, _ = _load(raw)
    tag = bytearray(b64u_decode(doc["tag"], "tag"))
    if how == "cut4":
        tag = tag[:4]
    elif how == "cut0":
        tag = bytearray()
    else:
        tag[-1] ^= 1
    doc["tag"] = b64u_encode(bytes(tag))
    return _dump(doc)


def _msg(seq: int, conversation: str, sender: str, raw: bytes) -> str:
    return frames.encode(frames.Message(seq, conversation, sender, msgspec.Raw(raw))).decode()


class FrameModes:
    """The per-frame attacks of :class:`bench.tools.hostile.HostileRelay` (a mixin: each method takes
    ``(wire, frame, raw, h, ctr, snd, text)`` and returns the frames to send instead of ``text``)."""

    mode: str
    arg: Any
    _seen: dict[tuple[str, str, int], tuple[int, str, bytes]]
    _dir: Any

    def _attack(self, what: str, *args) -> None:
        raise NotImplementedError

    def _replay(self, wire, frame, raw, h, ctr, snd, text):
        n = int(self.arg)
        if ctr == n:
            self._seen.setdefault((frame.conversation, snd, n), (frame.seq, frame.sender, raw))
        out = [text]
        for (cid, _snd, _n), (seq, sender, old) in self._seen.items():
            if cid == frame.conversation and old != raw:
                self._attack("replayed seq=%d to %s under seq=%d and seq=%d", seq, wire.user, seq, frame.seq)
                out += [_msg(seq, cid, sender, old), _msg(frame.seq, cid, sender, old)]
        return out

    def _reorder(self, wire, frame, raw, h, ctr, snd, text):
        key = (frame.conversation, snd)
        if ctr % 2 == 0:
            wire.held[key] = (ctr, text)
            self._attack("held back seq=%d (ctr %d) to %s", frame.seq, ctr, wire.user)
            return []
        held = wire.held.get(key)
        if held is not None and held[0] == ctr - 1:
            del wire.held[key]
            return [text, held[1]]
        return [text]

    def _drop(self, wire, frame, raw, h, ctr, snd, text):
        if ctr % int(self.arg) == 0:
            self._attack("dropped seq=%d (ctr %d) to %s", frame.seq, ctr, wire.user)
            return []
        return [text]

    def _duplicate(self, wire, frame, raw, h, ctr, snd, text):
        self._attack("sent seq=%d twice to %s", frame.seq, wire.user)
        return [text, text]

    def _move(self, wire, frame, raw, h, ctr, snd, text):
        other = [c for c in self._dir.conversations(wire.user) if c != frame.conversation]
        if not other:
            return [text]
        self._attack("moved seq=%d to %s into another conversation", frame.seq, wire.user)
        return [_msg(frame.seq, other[0], frame.sender, raw)]

    def _other_member(self, wire, frame) -> str | None:
        names = [u for u in self._dir.members(frame.conversation) if u not in (frame.sender, wire.user)]
        return names[0] if names else None

    def _sender(self, wire, frame, raw, h, ctr, snd, text):
        other = self._other_member(wire, frame)
        if other is None:
            return [text]
        self._attack("relabelled seq=%d to %s as sent by another member", frame.seq, wire.user)
        return [_msg(frame.seq, frame.conversation, other, raw)]

    def _sender_header(self, wire, frame, raw, h, ctr, snd, text):
        other = self._other_member(wire, frame)
        kids = self._dir.kids(other) if other else None
        if kids is None:
            return [text]
        self._attack("rewrote the sender of seq=%d to %s in the protected header", frame.seq, wire.user)
        return [_msg(frame.seq, frame.conversation, other, rewrite_header(raw, snd=other, skid=kids[1]))]

    def _strip(self, wire, frame, raw, h, ctr, snd, text):
        kids = self._dir.kids(wire.user)
        if (self.arg and wire.user != self.arg) or kids is None or kids[0] not in h["rkids"]:
            return [text]
        self._attack("stripped the wrapped key of %s from seq=%d", wire.user, frame.seq)
        return [_msg(frame.seq, frame.conversation, frame.sender, strip_recipient(raw, kids[0]))]

    def _swap(self, wire, frame, raw, h, ctr, snd, text):
        self._attack("swapped two wrapped keys in seq=%d to %s", frame.seq, wire.user)
        return [_msg(frame.seq, frame.conversation, frame.sender, swap_wrapped_keys(raw))]

    def _header(self, wire, frame, raw, h, ctr, snd, text):
        self._attack("moved the expiry hint of seq=%d to %s a day later", frame.seq, wire.user)
        return [_msg(frame.seq, frame.conversation, frame.sender, rewrite_header(raw, xp=h["xp"] + DAY_MS))]

    def _tag(self, wire, frame, raw, h, ctr, snd, text):
        how = {1: "cut4", 2: "cut0", 3: "flip"}.get(ctr)
        if how is None:
            return [text]
        self._attack("damaged the GCM tag of seq=%d to %s (%s)", frame.seq, wire.user, how)
        return [_msg(frame.seq, frame.conversation, frame.sender, damage_tag(raw, how))]

    def _key_first(self, wire, frame, raw, h, ctr, snd, text):
        return [text]

    _key_mid = _key_name = _key_swap = _key_retired = _key_first

    def _lose_ack(self, wire, frame, raw, h, ctr, snd, text):
        return [text]

    def _crash(self, wire, frame, raw, h, ctr, snd, text):
        if frame.seq >= int(self.arg):
            log.warning("hostile crash: SIGKILL before delivering seq=%d (stored, not yet fanned out)", frame.seq)
            for handler in logging.getLogger().handlers:
                with contextlib.suppress(Exception):
                    handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return [text]
