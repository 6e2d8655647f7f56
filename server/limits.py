"""Limits kept in memory: token buckets for rate limits (sends, logins, registrations, key fetches,
conversations, member changes), the login lockout, and the count of websockets not yet
authenticated.

In-process and O(1) per check. With several relays each enforces its own share; that is a
documented limitation of the scale-out mode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.errors import Busy, RateLimited


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """A token bucket per key: ``rate`` tokens per second, at most ``burst`` stored.

    ``rate <= 0`` disables the limit. Idle buckets are dropped once more than ``max_keys`` exist.
    """

    def __init__(self, name: str, rate: float, burst: float, max_keys: int = 100_000) -> None:
        self.name = name
        self.rate = rate
        self.burst = max(1.0, burst)
        self.max_keys = max_keys
        self._buckets: dict[str, _Bucket] = {}

    def check(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens from ``key``'s bucket.

        Raises:
            RateLimited: not enough tokens; ``retry_after`` (seconds) says when there will be.
        """
        retry = self.wait(key, cost)
        if retry:
            raise RateLimited(f"too many {self.name}; retry after {retry:.1f} s", field=self.name, retry_after=retry)
        self.take(key, cost)

    def wait(self, key: str, cost: float = 1.0) -> float:
        """Seconds until ``key`` has ``cost`` tokens (0: it has them now); takes nothing."""
        if self.rate <= 0:
            return 0.0
        b = self._refill(key)
        return 0.0 if b.tokens >= cost else (cost - b.tokens) / self.rate

    def take(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens from ``key``'s bucket, going below zero if need be (a failure that
        already happened is counted whatever the bucket holds)."""
        if self.rate > 0:
            self._refill(key).tokens -= cost

    def forget(self, key: str) -> None:
        """Drop ``key``'s bucket (it starts full again)."""
        self._buckets.pop(key, None)

    def _refill(self, key: str) -> _Bucket:
        now = time.monotonic()
        b = self._buckets.get(key)
        if b is None:
            if len(self._buckets) >= self.max_keys:
                self._evict(now)
            b = self._buckets[key] = _Bucket(self.burst, now)
        b.tokens = min(self.burst, b.tokens + (now - b.stamp) * self.rate)
        b.stamp = now
        return b

    def _evict(self, now: float) -> None:
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.stamp) * self.rate >= self.burst]
        for k in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[k]


class Lockout:
    """Wrong-password lockout that strangers cannot use against an account's owner.

    Failures are counted per (username, address): past ``failures`` within ``window_s`` that pair
    waits (one more try every ``window_s / failures`` s). A per-username ceiling (``user_failures``
    per window, counted from addresses that never logged in to that account) stops a guesser who
    rotates addresses; once it is reached, only addresses the account logged in from before (the
    last ``KNOWN`` per user, kept in memory) may still try, so the owner gets in while a botnet
    cannot.
    """

    KNOWN = 8

    def __init__(self, failures: int, window_s: float, user_failures: int) -> None:
        self.pairs = RateLimiter("failed logins", failures / window_s, failures)
        self.users = RateLimiter("failed logins", user_failures / window_s, user_failures)
        self._known: dict[str, dict[str, None]] = {}

    def check(self, username: str, address: str) -> None:
        """Before a password is checked.

        Raises:
            RateLimited: this pair, or this username from an unknown address, must wait.
        """
        retry = self.pairs.wait(f"{username}\x00{address}")
        if retry:
            raise RateLimited(
                f"too many wrong passwords for {username} from this address; retry after {retry:.0f} s",
                field="password",
                retry_after=retry,
            )
        if address not in self._known.get(username, ()):
            retry = self.users.wait(username)
            if retry:
                raise RateLimited(
                    f"too many wrong passwords for {username}; retry after {retry:.0f} s, "
                    "or from an address that logged in before",
                    field="password",
                    retry_after=retry,
                )

    def failed(self, username: str, address: str) -> None:
        """Count a wrong password for ``username`` from ``address`` (per user only from an address
        that never logged in as that user)."""
        self.pairs.take(f"{username}\x00{address}")
        if address not in self._known.get(username, ()):
            self.users.take(username)

    def succeeded(self, username: str, address: str) -> None:
        """A login of ``username`` from ``address``: its pair count is cleared and the address is
        remembered as one the user logs in from."""
        self.pairs.forget(f"{username}\x00{address}")
        known = self._known.setdefault(username, {})
        known.pop(address, None)
        known[address] = None
        while len(known) > self.KNOWN:
            del known[next(iter(known))]
        if len(self._known) > 100_000:
            self._known.pop(next(iter(self._known)))


class Gate:
    """Counts what is in progress (e.g. websockets not yet authenticated), in total and per key.

    ``enter`` refuses past ``total`` or ``per_key``; ``leave`` must follow every successful enter.
    """

    def __init__(self, name: str, total: int, per_key: int) -> None:
        self.name = name
        self.total = total
        self.per_key = per_key
        self.count = 0
        self._by_key: dict[str, int] = {}

    def enter(self, key: str) -> None:
        """Raises:
        Busy: ``total`` in progress, or ``per_key`` for ``key``.
        """
        n = self._by_key.get(key, 0)
        if self.count >= self.total:
            raise Busy(f"too many {self.name} ({self.total}); retry later", field=self.name)
        if n >= self.per_key:
            raise Busy(f"too many {self.name} from this address ({self.per_key}); retry later", field=self.name)
        self.count += 1
        self._by_key[key] = n + 1

    def leave(self, key: str) -> None:
        """One that entered under ``key`` is done."""
        self.count -= 1
        n = self._by_key.get(key, 0) - 1
        if n > 0:
            self._by_key[key] = n
        else:
            self._by_key.pop(key, None)
