"""The key schedule: epoch forward secrecy for one account (docs/PROTOCOL.md §4.4).

An RSA wrap key that lives for ever lets whoever steals the keystore one day open every message
ever sealed to it and kept by the relay (or captured on the way). The schedule bounds that:

1. **Rotate**: when the current key pair is older than ``key_lifetime_days`` (default 7; 0:
   never on a schedule), :meth:`~client_tui.core.rotate.Rotation.rotate_keys` replaces it (the
   two-phase signed rotation; it also moves the new keys into each membership log). The old pair
   is *retired*: kept, because messages sealed to it may still be on their way.
2. **Erase**: a retired pair whose ``retired_ms`` is at least ``retired_grace_hours`` (default 48)
   in the past is erased once the relay says no envelope it stores for me, sealed to that key, is
   still unacknowledged (``GET /v1/keys/outstanding``) *and* no verified membership head still
   binds that pair for me (else the ``update`` statement that moves my new keys in, which the old
   signing key signs, comes first). Erasing saves the keystore without the private halves and
   with the public ones under ``erased`` (atomic 0600 save, :func:`keystore.save_bundle`).

:meth:`KeySchedule.tick` runs after each login (after a pending rotation was finished and the key
transparency monitor ran) and then hourly on a loop timer while the client is open. A relay that
does not answer, or answers something malformed, erases nothing: the next tick asks again. A
relay that lies "0" makes the client erase early: messages it still holds for that key become
unreadable (lost, never exposed). A message sealed only to an erased key is
:class:`~client_tui.core.errors.WrapKeyErased`, in words of its own.

The decisions are a pure function of the keystore's times and an injected wall clock
(:func:`plan`), so the schedule is tested without waiting a week.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from shared.errors import E2EEError, ErrorCode

from . import keystore, membership_ops
from .errors import ClientError, WrapKeyErased
from .keybundle import KeyBundle

if TYPE_CHECKING:
    from .client import ChatClient

__all__ = ["MAX_LIFETIME_DAYS", "KeySchedule", "Plan", "TickResult", "lifetime_ms", "plan", "schedule_words"]

log = logging.getLogger("e2ee.client.epochs")

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
MAX_LIFETIME_DAYS = 3650.0
"""The longest key lifetime (days): :class:`KeySchedule` refuses more (as ``--key-lifetime`` does)."""
TICK_S = 3600.0
"""Seconds between two ticks while the client is open."""
MAX_ASKED = 16
"""Key ids per ``/v1/keys/outstanding`` request (the relay refuses more); the rest wait a tick."""


@dataclass(frozen=True)
class Plan:
    """What the schedule would do now.

    Attributes:
        rotate: the current pair is older than the lifetime.
        due: wrap key ids of retired pairs whose grace passed (oldest retired first): the relay is
            asked about them.
        next_rotation_ms: when the current pair reaches the lifetime (ms since the Unix epoch), or
            None (no schedule).
    """

    rotate: bool
    due: tuple[str, ...]
    next_rotation_ms: int | None


@dataclass
class TickResult:
    """What one :meth:`KeySchedule.tick` did: ``rotated``; ``erased`` (wrap key ids); ``kept``
    (wrap key id -> why a due key was not erased, in words)."""

    rotated: bool = False
    erased: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)


def _elapsed(at: int, now: int, window: int) -> bool:
    """``window`` ms passed since ``at``; or ``at`` lies more than ``window`` after ``now``: a time
    the wall clock cannot have written (it jumped ahead and came back, or it is behind now), which
    would otherwise hold a rotation or an erase back for as long as it lies ahead."""
    return at + window <= now or at > now + window


def plan(bundle: KeyBundle, now: int, lifetime_ms: int, grace_ms: int) -> Plan:
    """The schedule's decisions for ``bundle`` at ``now`` (ms since the Unix epoch), with the
    current pair's lifetime ``lifetime_ms`` (0: no scheduled rotation) and the retired pairs'
    grace ``grace_ms``. A pair without a time counts as made (or retired) ``now``; one made or
    retired more than the lifetime (the grace) after ``now`` counts as due, once: the rotation or
    the erase that follows dates its keys from ``now``. Pure."""
    created = bundle.created_ms.get(bundle.identity.wrap_kid, now)
    rotate = lifetime_ms > 0 and _elapsed(created, now, lifetime_ms)
    next_rotation = (now if rotate else created + lifetime_ms) if lifetime_ms > 0 else None
    retired = sorted(bundle.retired, key=lambda r: bundle.retired_ms.get(r.wrap_kid, now))
    due = tuple(r.wrap_kid for r in retired if _elapsed(bundle.retired_ms.get(r.wrap_kid, now), now, grace_ms))
    return Plan(rotate, due, next_rotation)


def lifetime_ms(days: float) -> int:
    """``days`` (a key lifetime, 0 to :data:`MAX_LIFETIME_DAYS`) in ms; at least 1 ms when ``days``
    is above 0, so a tiny lifetime rotates at each check instead of never."""
    return max(1, round(days * DAY_MS)) if days > 0 else 0


def _day(ms: int) -> str:
    """The local date of ``ms`` (since the Unix epoch), or words for one no calendar holds."""
    try:
        return time.strftime("%Y-%m-%d", time.localtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return "not in this millennium"


def _days(days: float) -> str:
    return f"{days:g} day" + ("" if days == 1 else "s")


def schedule_words(bundle: KeyBundle | None, lifetime_days: float, now: int) -> list[str]:
    """The schedule in words for the Keys dialog and ``e2ee-chat keys show``: how often keys are
    replaced and when next (local date), how many earlier keys are kept until their messages are
    delivered, how many were deleted for forward secrecy."""
    if bundle is None:
        return []
    if lifetime_days > 0:
        due = plan(bundle, now, lifetime_ms(lifetime_days), 0)
        when = "at the next check" if due.rotate or due.next_rotation_ms is None else _day(due.next_rotation_ms)
        lines = [f"keys replaced every {_days(lifetime_days)} (next: {when})"]
    else:
        lines = ["keys replaced only when you rotate them (no schedule: key lifetime 0)"]
    n, m = len(bundle.retired), len(bundle.erased)
    lines.append(f"{n} earlier key{'' if n == 1 else 's'} kept until their messages are delivered")
    lines.append(f"{m} deleted (forward secrecy)")
    return lines


class KeySchedule:
    """The key schedule of one :class:`~client_tui.core.ChatClient` (see the module docstring).

    Args:
        client: the account's client (its keystore bundle, clock, REST, membership).
        lifetime_days: the current pair is replaced when older than this; 0: never on a schedule.
        grace_hours: a retired pair is kept at least this long after its retirement.

    Raises:
        ValueError: a lifetime not from 0 to :data:`MAX_LIFETIME_DAYS` days, or a grace negative
            or not finite (NaN included).
    """

    def __init__(self, client: ChatClient, lifetime_days: float, grace_hours: float) -> None:
        if not (0 <= lifetime_days <= MAX_LIFETIME_DAYS and 0 <= grace_hours < float("inf")):
            raise ValueError(
                f"the key lifetime must be 0 to {MAX_LIFETIME_DAYS:g} days, the grace finite and not negative"
            )
        self.c = client
        self.lifetime_days = lifetime_days
        self.lifetime_ms = lifetime_ms(lifetime_days)
        self.grace_ms = round(grace_hours * HOUR_MS)
        self._lock = asyncio.Lock()
        self._handle: asyncio.TimerHandle | None = None
        self._running = False
        self.enabled = True
        """False for a command that only looks (``keys show``, ``audit``, ``search``): it never
        rotates nor erases as a side effect; the app, ``send`` and ``tail`` run the schedule."""

    # -- the decisions --------------------------------------------------------------------------
    def plan(self) -> Plan | None:
        """:func:`plan` for the open keystore at the client's wall clock (None: none open)."""
        bundle = self.c._bundle
        return None if bundle is None else plan(bundle, self.c.wall_clock(), self.lifetime_ms, self.grace_ms)

    def words(self) -> list[str]:
        """:func:`schedule_words` for this account now."""
        return schedule_words(self.c._bundle, self.lifetime_days, self.c.wall_clock())

    def erased_for(self, rkids: list[str] | tuple[str, ...]) -> WrapKeyErased | None:
        """The error for an envelope whose recipient key ids ``rkids`` name an erased key of mine
        (and, the caller found, none it still holds), or None."""
        bundle = self.c._bundle
        for e in bundle.erased if bundle is not None else ():
            if e.public.wrap_kid in rkids:
                return WrapKeyErased(e.public.wrap_kid, e.erased_ms)
        return None

    # -- one tick -------------------------------------------------------------------------------
    async def tick(self) -> TickResult:
        """Rotate if the current pair is too old, then erase each due retired pair the relay
        reports nothing outstanding for and no verified membership head binds. Never raises for
        the relay's or the disk's failures: they are logged and the next tick tries again."""
        result = TickResult()
        c = self.c
        async with self._lock:
            now_plan = self.plan()
            if now_plan is None or c.identity is None:
                return result
            if now_plan.rotate:
                try:
                    new = await c.rotate_keys()
                    result.rotated = True
                    log.info("scheduled key rotation: now %s…", new.wrap_kid[:8])
                except E2EEError as exc:
                    log.warning("scheduled key rotation not done: %s", exc.code)
                now_plan = self.plan() or now_plan
            if now_plan.due:
                await self._sweep(now_plan.due[:MAX_ASKED], result)
        return result

    async def outstanding(self, kids: list[str] | tuple[str, ...]) -> dict[str, int]:
        """The relay's count of envelopes it stores for me, sealed to each wrap key id of ``kids``
        (at most 16), not acknowledged yet (``GET /v1/keys/outstanding``).

        Raises:
            ClientError: the relay refused or did not answer; ``protocol``: an answer not of the
                documented form (another user's, a count that is not a whole number ≥ 0, a key
                id missing).
        """
        doc = await self.c.rest.request("GET", "/v1/keys/outstanding?" + urlencode([("wrap_kid", k) for k in kids]))
        counts = doc.get("outstanding") if isinstance(doc, dict) and doc.get("username") == self.c.username else None
        if not isinstance(counts, dict) or not all(
            isinstance(counts.get(k), int) and not isinstance(counts.get(k), bool) and counts[k] >= 0 for k in kids
        ):
            raise ClientError("the relay's count of outstanding envelopes is malformed", code=ErrorCode.PROTOCOL)
        return {k: counts[k] for k in kids}

    async def _sweep(self, due: tuple[str, ...], result: TickResult) -> None:
        try:
            counts = await self.outstanding(due)
        except E2EEError as exc:
            log.warning("%d retired key(s) kept: the relay did not say what is outstanding (%s)", len(due), exc.code)
            result.kept.update({k: f"the relay did not answer ({exc.code})" for k in due})
            return
        for k, n in counts.items():
            if n:
                result.kept[k] = f"{n} envelope(s) sealed to it not delivered yet"
        zero = [k for k, n in counts.items() if n == 0]
        named = await self._bound_in_logs(zero) if zero else {}
        for k, cid in named.items():
            result.kept[k] = f"the membership log of {cid} still binds it"
        if [k for k in zero if k not in named]:
            await self._erase([k for k in zero if k not in named], result)

    async def _bound_in_logs(self, kids: list[str]) -> dict[str, str]:
        """Which of ``kids`` a verified membership head still binds for me (kid -> a conversation),
        after each log was verified anew and an ``update`` posted where one is missing. All of
        them when the logs could not be verified (the relay did not answer)."""
        ms = self.c.membership
        try:
            await membership_ops.refresh(ms)
        except ClientError as exc:
            log.warning("retired keys kept: the membership logs could not be verified (%s)", exc.code)
            return {k: "(not verified)" for k in kids}

        def bound() -> dict[str, str]:
            found: dict[str, str] = {}
            for cid, chain in list(ms.chains.items()):
                mine = chain.head.member(self.c.username) if chain.head is not None else None
                if mine is not None and mine.wrap_kid in kids:
                    found.setdefault(mine.wrap_kid, cid)
            return found

        for cid in set(bound().values()):
            await membership_ops.update_keys(ms, cid)  # signed by the old key: before it is erased
        return bound()

    async def _erase(self, kids: list[str], result: TickResult) -> None:
        c = self.c
        async with c._keys_lock:
            if c._bundle is not None and c._passphrase:
                try:
                    await c._with_disk_erasures(c._passphrase)  # erased elsewhere meanwhile: never written back
                except E2EEError as exc:
                    log.warning("retired keys kept: %s", exc.message)
                    result.kept.update({k: "another session changed the keystore" for k in kids})
                    return
            bundle, passphrase = c._bundle, c._passphrase
            behind = bundle is None or c.identity is None or bundle.identity.wrap_kid != c.identity.wrap_kid
            if behind or bundle is None or not passphrase:
                log.warning("retired keys kept: the keystore on disk is behind this session")
                return
            now = c.wall_clock()
            held = {r.wrap_kid for r in bundle.retired}
            gone = [k for k in kids if k in held]
            if not gone:  # erased by another process on this keystore meanwhile
                return
            for k in gone:
                bundle = bundle.erase(k, now)
            try:
                await asyncio.to_thread(keystore.save_bundle, c.keystore_path, bundle, passphrase, c.kdf)
                c._note_keystore()
            except (OSError, E2EEError) as exc:
                log.warning("retired keys kept: the keystore could not be saved (%s)", exc)
                result.kept.update({k: "the keystore could not be saved" for k in gone})
                return
            c._bundle, c.retired = bundle, bundle.retired
        for k in gone:
            log.info("retired key %s… erased (forward secrecy): nothing sealed to it is outstanding", k[:8])
        result.erased.extend(gone)

    # -- the loop timer -------------------------------------------------------------------------
    async def after_login(self) -> TickResult:
        """One tick now, then one every hour while the client is open (:meth:`start`); nothing
        when the schedule is not :attr:`enabled`."""
        if not self.enabled:
            return TickResult()
        result = await self.tick()
        self.start()
        return result

    def start(self) -> None:
        """Arm the hourly loop timer (again), if the schedule is :attr:`enabled`."""
        if not self.enabled:
            return
        self._running = True
        if self._handle is not None:
            self._handle.cancel()
        self._handle = asyncio.get_running_loop().call_later(TICK_S, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self.c._spawn(self._tick_and_rearm())

    async def _tick_and_rearm(self) -> None:
        try:
            await self.tick()
        finally:
            if self._running:
                self.start()

    def stop(self) -> None:
        """Cancel the loop timer (the client closes)."""
        self._running = False
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
