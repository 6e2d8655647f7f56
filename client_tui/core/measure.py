"""Per-primitive timings of one seal or open, measured on the real call.

``shared.envelope.seal``/``open`` run each primitive once, inside one call. To show a message's
own costs in the inspector (encrypt, wrap x N, sign / verify, unwrap, decrypt) without copying the
envelope code, the key objects handed to those calls are wrapped in thin timers: every RSA and
Ed25519 operation is the real ``cryptography`` call, only timed. What is left of the total (AES-GCM,
JSON and base64) is reported as ``encrypt`` (seal) or ``decrypt`` (open), named as such.

Stopgap until ``shared.envelope`` reports its own timings (see the client's notes); the wrappers
are only ever used on copies, never on the keys kept by the client.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

from shared import envelope
from shared.content import Content
from shared.keys import Identity, PublicIdentity

_now = time.perf_counter


class _Timed:
    """Forward every attribute to ``inner``; time the method ``name`` into ``sink``."""

    def __init__(self, inner, name: str, sink: list[float]) -> None:
        self._inner = inner
        self._name = name
        self._sink = sink

    def __getattr__(self, attr: str):
        value = getattr(self._inner, attr)
        if attr != self._name:
            return value

        def timed(*args, **kwargs):
            t0 = _now()
            try:
                return value(*args, **kwargs)
            finally:
                self._sink.append((_now() - t0) * 1000)

        return timed


def _with(obj, **attrs):
    """A shallow copy of a frozen dataclass with some attributes replaced (no re-validation)."""
    c = copy.copy(obj)
    for k, v in attrs.items():
        object.__setattr__(c, k, v)
    return c


def seal(
    doc: Content,
    sender: Identity,
    conversation: str,
    recipients: Sequence[PublicIdentity],
    *,
    epoch: int,
    head: str,
    max_bytes: int,
    max_recipients: int = envelope.DEFAULT_MAX_RECIPIENTS,
) -> tuple[bytes, dict[str, float | list[float]]]:
    """``envelope.seal`` and its timings: ``{"total", "encrypt", "wrap": [per recipient], "sign"}`` (ms)."""
    wraps: list[float] = []
    signs: list[float] = []
    timed_recipients = [_with(r, wrap_key=_Timed(r.wrap_key, "encrypt", wraps)) for r in recipients]
    timed_sender = _with(sender, sign_private=_Timed(sender.sign_private, "sign", signs))
    t0 = _now()
    data = envelope.seal(
        doc,
        timed_sender,
        conversation,
        timed_recipients,
        epoch=epoch,
        head=head,
        max_bytes=max_bytes,
        max_recipients=max_recipients,
    )
    total = (_now() - t0) * 1000
    sign = sum(signs)
    return data, {"total": total, "encrypt": max(0.0, total - sum(wraps) - sign), "wrap": wraps, "sign": sign}


def open_(
    parsed: envelope.ParsedEnvelope, me: Identity, sign_key, *, conversation: str, sender: str
) -> tuple[envelope.Opened, dict[str, float]]:
    """``envelope.open`` and its timings: ``{"total", "verify", "unwrap", "decrypt"}`` (ms)."""
    unwraps: list[float] = []
    verifies: list[float] = []
    timed_me = _with(me, wrap_private=_Timed(me.wrap_private, "decrypt", unwraps))
    timed_key = _Timed(sign_key, "verify", verifies)
    t0 = _now()
    opened = envelope.open(
        parsed,
        timed_me,
        lambda _user, _kid: timed_key,
        conversation=conversation,
        sender=sender,
        max_bytes=len(parsed.raw),
    )
    total = (_now() - t0) * 1000
    unwrap, verify = sum(unwraps), sum(verifies)
    return opened, {"total": total, "verify": verify, "unwrap": unwrap, "decrypt": max(0.0, total - unwrap - verify)}
